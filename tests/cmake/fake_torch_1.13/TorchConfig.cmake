# A stand-in for LibTorch 1.13's TorchConfig.cmake (Debian's, CPU only), for
# tests/integration/bad_setup.sh. Nothing is built against it.
set(TORCH_INSTALL_PREFIX ${CMAKE_CURRENT_LIST_DIR})
add_library(torch INTERFACE IMPORTED)
set_target_properties(torch PROPERTIES CXX_STANDARD 17)
set(TORCH_LIBRARIES torch)
