# LibTorch for ppstage: where it comes from, and whether its C++ standard fits ours.
#
# Where from, in this order:
#  1. a LibTorch the user names: -DTorch_DIR=<dir with TorchConfig.cmake>, or a
#     -DCMAKE_PREFIX_PATH (or the environment's CMAKE_PREFIX_PATH) that holds one;
#  2. the Python environment scripts/install-deps.sh makes (PPSTAGE_VENV, default
#     ~/.cache/ppstage/torch-2.11.0): its torch wheel's torch.utils.cmake_prefix_path.
# Sets Torch_VERSION and the targets of find_package(Torch).

set(PPSTAGE_TORCH_VERSION 2.11.0)  # what scripts/install-deps.sh installs and CI tests
if(DEFINED ENV{PPSTAGE_VENV})
  set(ppstage_default_venv $ENV{PPSTAGE_VENV})
else()
  set(ppstage_default_venv $ENV{HOME}/.cache/ppstage/torch-${PPSTAGE_TORCH_VERSION})
endif()
set(PPSTAGE_VENV ${ppstage_default_venv} CACHE PATH
    "Python environment whose torch wheel provides LibTorch (made by scripts/install-deps.sh)")

# The environment's LibTorch comes after any the user names, before the system's.
set(ppstage_venv_note "")
if(NOT Torch_DIR)
  if(EXISTS ${PPSTAGE_VENV}/bin/python)
    execute_process(
      COMMAND ${PPSTAGE_VENV}/bin/python -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE ppstage_venv_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
      ERROR_QUIET RESULT_VARIABLE ppstage_venv_result)
    if(ppstage_venv_result EQUAL 0)
      list(APPEND CMAKE_PREFIX_PATH ${ppstage_venv_prefix})
      set(ppstage_venv_python ${PPSTAGE_VENV}/bin/python)
    else()
      set(ppstage_venv_note "${PPSTAGE_VENV}/bin/python cannot import torch; ")
    endif()
  else()
    set(ppstage_venv_note "${PPSTAGE_VENV} does not exist; ")
  endif()
endif()

# LibTorch's CUDA build looks for every CUDA architecture on a machine without a GPU and then
# warns; ppstage compiles no CUDA kernels of its own, so name the GPUs it is run on.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND "$ENV{TORCH_CUDA_ARCH_LIST}" STREQUAL "")
  set(TORCH_CUDA_ARCH_LIST "9.0")  # Hopper (H100, H200)
endif()

cmake_policy(SET CMP0104 OLD)  # leave CMAKE_CUDA_ARCHITECTURES unset: LibTorch warns when it is set
# Without a LibTorch the user names, only the environment's: not one that happens to be on the
# system (Debian's libtorch-dev 1.13, say).
if(Torch_DIR OR CMAKE_PREFIX_PATH OR NOT "$ENV{CMAKE_PREFIX_PATH}" STREQUAL "")
  find_package(Torch QUIET)
endif()
if(NOT Torch_FOUND)
  message(FATAL_ERROR "ppstage: no LibTorch found: ${ppstage_venv_note}run "
                      "scripts/install-deps.sh, or name one with -DCMAKE_PREFIX_PATH or "
                      "-DTorch_DIR (docs/build.md)")
endif()

# PyPI's torch builds with a newer GCC than the system's and its libtorch.so exports the
# libstdc++ functions it linked in statically, std::filesystem's among them (pytorch#133437).
# Called from our code, those copies crash (remove_all jumped to address 0). The loader binds
# a symbol to the first library that has it in the binary's NEEDED order, so libstdc++ goes
# before LibTorch on every link line.
set(TORCH_LIBRARIES stdc++ ${TORCH_LIBRARIES})

# The C++ standard LibTorch's headers need: its TorchConfig.cmake names it on the torch
# target (17 for 2.0-2.12, 20 from 2.13 on). A LibTorch that needs more than this build
# uses would fail in its headers, one error per translation unit: stop here instead.
get_target_property(ppstage_torch_std torch CXX_STANDARD)
if(NOT ppstage_torch_std)
  set(ppstage_torch_std 17)
  if(Torch_VERSION VERSION_GREATER_EQUAL 2.13)
    set(ppstage_torch_std 20)
  endif()
endif()
if(ppstage_torch_std GREATER CMAKE_CXX_STANDARD)
  message(FATAL_ERROR "ppstage: LibTorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}) needs "
                      "C++${ppstage_torch_std}, but ppstage builds with C++${CMAKE_CXX_STANDARD}: "
                      "use LibTorch ${PPSTAGE_TORCH_VERSION} (scripts/install-deps.sh), or "
                      "-DCMAKE_CXX_STANDARD=${ppstage_torch_std}")
endif()

# The Python the tests run their checks with (json, NumPy, and torch to judge an exported
# model): the environment's where it has torch. Tests that need torch skip without it.
if(NOT ppstage_venv_python)
  find_program(ppstage_venv_python python3)
endif()
set(PPSTAGE_PYTHON ${ppstage_venv_python} CACHE FILEPATH "Python for the tests' checks")
