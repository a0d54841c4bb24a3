# LibTorch for ppstage: where it comes from, and whether it fits this build.
#
# Where from, in this order:
#  1. a LibTorch the user names: -DTorch_DIR=<dir with TorchConfig.cmake> (or the
#     environment's Torch_DIR), or a CMAKE_PREFIX_PATH (variable or environment) holding one;
#  2. the Python environment scripts/install-deps.sh makes (PPSTAGE_VENV, default
#     ~/.cache/ppstage/torch-<version> as scripts/torch-env.sh says): its torch wheel's
#     torch.utils.cmake_prefix_path.
# Never one that merely sits in a system folder (Debian's libtorch-dev 1.13, say).
# Sets Torch_VERSION, TORCH_INSTALL_PREFIX, TORCH_LIBRARIES and PPSTAGE_PYTHON (the Python
# the tests check with: the one beside LibTorch when it came from a Python environment).

# The pin and the environment's default, read from the one place that declares them.
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/../scripts/torch-env.sh ppstage_pin
     REGEX "^PPSTAGE_TORCH_VERSION=")
string(REGEX REPLACE "^PPSTAGE_TORCH_VERSION=" "" PPSTAGE_TORCH_VERSION "${ppstage_pin}")
if(DEFINED ENV{PPSTAGE_VENV})
  set(ppstage_default_venv $ENV{PPSTAGE_VENV})
else()
  set(ppstage_default_venv $ENV{HOME}/.cache/ppstage/torch-${PPSTAGE_TORCH_VERSION})
endif()
set(PPSTAGE_VENV ${ppstage_default_venv} CACHE PATH
    "Python environment whose torch wheel provides LibTorch (made by scripts/install-deps.sh)")

if(NOT Torch_DIR AND DEFINED ENV{Torch_DIR})
  set(Torch_DIR $ENV{Torch_DIR})
endif()
# A Torch_DIR an earlier configure took from another environment is found again.
if(Torch_DIR AND PPSTAGE_TORCH_FROM_VENV AND NOT PPSTAGE_TORCH_FROM_VENV STREQUAL PPSTAGE_VENV)
  unset(Torch_DIR CACHE)
  unset(Torch_DIR)
endif()

# The environment's LibTorch comes after every one the user names: the user's
# CMAKE_PREFIX_PATH variable, then the environment variable, then the environment's torch.
set(ppstage_venv_note "")
if(NOT Torch_DIR)
  list(APPEND CMAKE_PREFIX_PATH $ENV{CMAKE_PREFIX_PATH})
  if(EXISTS ${PPSTAGE_VENV}/bin/python)
    execute_process(
      COMMAND ${PPSTAGE_VENV}/bin/python -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE ppstage_venv_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
      ERROR_QUIET RESULT_VARIABLE ppstage_venv_result)
    if(ppstage_venv_result EQUAL 0)
      list(APPEND CMAKE_PREFIX_PATH ${ppstage_venv_prefix})
    else()
      set(ppstage_venv_note "${PPSTAGE_VENV}/bin/python cannot import torch; ")
    endif()
  else()
    set(ppstage_venv_note "${PPSTAGE_VENV} does not exist; ")
  endif()
endif()

# The root (with lib/ and share/) of the LibTorch find_package will take: Torch_DIR's, else
# the first CMAKE_PREFIX_PATH entry holding a TorchConfig.cmake (a LibTorch folder, or a
# wheel's torch/share/cmake); "" when there is none.
function(ppstage_first_libtorch_root out)
  set(roots "")
  if(Torch_DIR)
    list(APPEND roots ${Torch_DIR}/../../..)
  endif()
  foreach(prefix ${CMAKE_PREFIX_PATH})
    if(EXISTS ${prefix}/share/cmake/Torch/TorchConfig.cmake)
      list(APPEND roots ${prefix})
    elseif(EXISTS ${prefix}/Torch/TorchConfig.cmake)
      list(APPEND roots ${prefix}/../..)
    endif()
  endforeach()
  set(root "")
  if(roots)
    list(GET roots 0 root)
  endif()
  set(${out} "${root}" PARENT_SCOPE)
endfunction()

# A CUDA LibTorch's CMake files need the CUDA toolkit's nvcc (on PATH, in CUDA_HOME or
# /usr/local/cuda) and stop with a page of errors without it: say so in one line first.
ppstage_first_libtorch_root(ppstage_torch_root)
if(ppstage_torch_root AND EXISTS ${ppstage_torch_root}/lib/libtorch_cuda.so)
  find_program(PPSTAGE_NVCC nvcc HINTS ENV CUDA_HOME PATH_SUFFIXES bin PATHS /usr/local/cuda/bin)
  if(NOT PPSTAGE_NVCC)
    get_filename_component(ppstage_torch_root ${ppstage_torch_root} ABSOLUTE)
    message(FATAL_ERROR "ppstage: the LibTorch in ${ppstage_torch_root} is a CUDA build, whose "
                        "CMake files need the CUDA toolkit's nvcc: install the toolkit "
                        "(/usr/local/cuda, or set CUDA_HOME), or name a CPU LibTorch")
  endif()
endif()

# TorchConfig.cmake finds libtorch, libc10 and libc10_cuda with find_library, whose PATHS come
# after the system folders: with Debian's libtorch-dev installed it took Debian's libc10 beside
# the wheel's libtorch_cpu, two c10s in one process (a crash at load). Each is looked up in
# the LibTorch's own lib/ first, and checked after.
if(ppstage_torch_root)
  foreach(entry "TORCH_LIBRARY;torch" "c10_LIBRARY;c10" "C10_CUDA_LIBRARY;c10_cuda")
    list(GET entry 0 variable)
    list(GET entry 1 name)
    unset(${variable} CACHE)
    find_library(${variable} ${name} PATHS ${ppstage_torch_root}/lib NO_DEFAULT_PATH)
  endforeach()
endif()

# LibTorch's CUDA build looks for every CUDA architecture on a machine without a GPU and then
# warns; ppstage compiles no CUDA kernels of its own, so name the GPUs it is run on.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND "$ENV{TORCH_CUDA_ARCH_LIST}" STREQUAL "")
  set(TORCH_CUDA_ARCH_LIST "9.0")  # Hopper (H100, H200)
endif()
cmake_policy(SET CMP0104 OLD)  # leave CMAKE_CUDA_ARCHITECTURES unset: LibTorch warns when it is set

if(Torch_DIR OR CMAKE_PREFIX_PATH)
  find_package(Torch QUIET NO_CMAKE_SYSTEM_PATH)
endif()
if(NOT Torch_FOUND)
  message(FATAL_ERROR "ppstage: no LibTorch found: ${ppstage_venv_note}run "
                      "scripts/install-deps.sh, or name one with -DCMAKE_PREFIX_PATH or "
                      "-DTorch_DIR (docs/build.md)")
endif()
get_filename_component(ppstage_torch_lib ${TORCH_INSTALL_PREFIX}/lib REALPATH)
foreach(library ${TORCH_LIBRARY} ${c10_LIBRARY})
  if(NOT EXISTS ${library})
    continue()
  endif()
  get_filename_component(ppstage_library_dir ${library} DIRECTORY)
  get_filename_component(ppstage_library_dir ${ppstage_library_dir} REALPATH)
  if(NOT ppstage_library_dir STREQUAL ppstage_torch_lib)
    message(FATAL_ERROR "ppstage: LibTorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}) found "
                        "${library}, another LibTorch's: set -DTorch_DIR to its share/cmake/Torch")
  endif()
endforeach()
if(Torch_VERSION VERSION_LESS PPSTAGE_TORCH_VERSION)
  message(FATAL_ERROR "ppstage: LibTorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}) is older "
                      "than ${PPSTAGE_TORCH_VERSION}, the oldest ppstage builds with: run "
                      "scripts/install-deps.sh, or name a newer one (docs/build.md)")
endif()
if(DEFINED ppstage_venv_result)  # this configure searched: remember where Torch_DIR came from
  set(ppstage_from "")
  if(ppstage_venv_prefix AND Torch_DIR MATCHES "^${ppstage_venv_prefix}")
    set(ppstage_from ${PPSTAGE_VENV})
  endif()
  set(PPSTAGE_TORCH_FROM_VENV "${ppstage_from}" CACHE INTERNAL "the environment Torch_DIR is from")
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
# model): the one of the environment LibTorch came from (site-packages/torch is
# <env>/lib/pythonX.Y/site-packages/torch), else the default environment's, else python3.
# Tests that need torch skip without it.
get_filename_component(ppstage_env_of_torch ${TORCH_INSTALL_PREFIX}/../../../.. ABSOLUTE)
set(ppstage_python "")
foreach(candidate ${ppstage_env_of_torch}/bin/python ${PPSTAGE_VENV}/bin/python)
  if(EXISTS ${candidate})
    set(ppstage_python ${candidate})
    break()
  endif()
endforeach()
if(NOT ppstage_python)
  find_program(ppstage_python python3)
endif()
set(PPSTAGE_PYTHON ${ppstage_python} CACHE FILEPATH "Python for the tests' checks" FORCE)
