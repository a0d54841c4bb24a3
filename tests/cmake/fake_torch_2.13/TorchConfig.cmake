# A stand-in for LibTorch 2.13's TorchConfig.cmake, for tests/integration/bad_setup.sh:
# a CPU LibTorch whose headers need C++20, as 2.13's do. Nothing is built against it.
set(TORCH_INSTALL_PREFIX ${CMAKE_CURRENT_LIST_DIR})
add_library(torch INTERFACE IMPORTED)
set_target_properties(torch PROPERTIES CXX_STANDARD 20)
set(TORCH_LIBRARIES torch)
