# CUDA and NCCL for ppstage, after find_package(Torch) (cmake/ppstage_libtorch.cmake).
#
# PPSTAGE_CUDA_ENABLED: LibTorch was built with CUDA (its torch_cuda target exists).
# PPSTAGE_NCCL_ENABLED: the NCCL communicator is built. With PPSTAGE_WITH_NCCL=AUTO it is
# where LibTorch has CUDA and NCCL is found; ON makes either missing an error.
#
# NCCL comes from one place, header and library together: $NCCL_ROOT, else the nvidia-nccl
# wheel beside a pip-installed torch (the libnccl.so.2 LibTorch itself loads), else the CUDA
# toolkit. Both NCCLs have the SONAME libnccl.so.2, so a process loads one of them; taking
# LibTorch's keeps the header's version equal to the library's.
#
# Prints what ppstage is built against: LibTorch, CUDA, cuDNN and NCCL versions, and how many
# CUDA devices this machine shows.

set(PPSTAGE_CUDA_ENABLED OFF)
if(TARGET torch_cuda)
  set(PPSTAGE_CUDA_ENABLED ON)
endif()

# The CUDA LibTorch was built for: "13.0" from a wheel's torch/version.py or a LibTorch
# folder's build-version ("2.11.0+cu130"); "" when neither says.
function(ppstage_torch_cuda_version out)
  set(version "")
  if(EXISTS ${TORCH_INSTALL_PREFIX}/version.py)
    file(STRINGS ${TORCH_INSTALL_PREFIX}/version.py line REGEX "^cuda[:=]")
    string(REGEX MATCH "'([0-9]+\\.[0-9]+)'" _ "${line}")
    set(version ${CMAKE_MATCH_1})
  elseif(EXISTS ${TORCH_INSTALL_PREFIX}/build-version)
    file(READ ${TORCH_INSTALL_PREFIX}/build-version line)
    if(line MATCHES "\\+cu([0-9]+)([0-9])")
      set(version ${CMAKE_MATCH_1}.${CMAKE_MATCH_2})
    endif()
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

# "MAJOR.MINOR.PATCH" from `header`'s #defines of the three names; "" if it has none.
function(ppstage_header_version header major minor patch out)
  set(version "")
  if(EXISTS ${header})
    file(STRINGS ${header} lines REGEX "#define (${major}|${minor}|${patch}) +[0-9]+")
    foreach(name ${major} ${minor} ${patch})
      string(REGEX MATCH "#define ${name} +([0-9]+)" _ "${lines}")
      list(APPEND version ${CMAKE_MATCH_1})
    endforeach()
    list(JOIN version "." version)
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

set(PPSTAGE_NCCL_ENABLED OFF)
set(ppstage_nccl_note "LibTorch has no CUDA")
if(PPSTAGE_CUDA_ENABLED AND NOT PPSTAGE_WITH_NCCL STREQUAL "OFF")
  set(ppstage_nccl_note "no NCCL found")
  foreach(root $ENV{NCCL_ROOT} ${TORCH_INSTALL_PREFIX}/../nvidia/nccl ${CUDAToolkit_LIBRARY_ROOT}
               /usr/local/cuda)
    unset(ppstage_nccl_library CACHE)  # searched again in each root, never kept from before
    find_library(ppstage_nccl_library NAMES libnccl.so.2 nccl NAMES_PER_DIR
                 PATHS ${root} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
    if(EXISTS ${root}/include/nccl.h AND ppstage_nccl_library)
      get_filename_component(ppstage_nccl_include ${root}/include ABSOLUTE)
      set(NCCL_INCLUDE_DIR ${ppstage_nccl_include} CACHE PATH "nccl.h's folder" FORCE)
      set(NCCL_LIBRARY ${ppstage_nccl_library} CACHE FILEPATH "libnccl of the same NCCL" FORCE)
      break()
    endif()
  endforeach()
  unset(ppstage_nccl_library CACHE)
  if(ppstage_nccl_include)
    set(PPSTAGE_NCCL_ENABLED ON)
  endif()
elseif(PPSTAGE_WITH_NCCL STREQUAL "OFF")
  set(ppstage_nccl_note "PPSTAGE_WITH_NCCL=OFF")
endif()
if(PPSTAGE_WITH_NCCL STREQUAL "ON" AND NOT PPSTAGE_NCCL_ENABLED)
  message(FATAL_ERROR "ppstage: PPSTAGE_WITH_NCCL=ON, but ${ppstage_nccl_note} "
                      "(LibTorch ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX})")
endif()

# What is built against, for the configure output.
message(STATUS "ppstage: LibTorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}), C++${CMAKE_CXX_STANDARD}")
if(PPSTAGE_CUDA_ENABLED)
  ppstage_header_version("${TORCH_INSTALL_PREFIX}/../nvidia/cudnn/include/cudnn_version.h"
                         CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL ppstage_cudnn_version)
  if(NOT ppstage_cudnn_version)
    ppstage_header_version("${CUDAToolkit_BIN_DIR}/../include/cudnn_version.h"
                           CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL ppstage_cudnn_version)
  endif()
  if(NOT ppstage_cudnn_version)
    set(ppstage_cudnn_version "not found")
  endif()
  # ppstage links the toolkit's CUDA runtime, LibTorch its own: one libcudart.so.<major>
  # serves both only when the majors agree.
  ppstage_torch_cuda_version(ppstage_torch_cuda)
  if(ppstage_torch_cuda)
    string(REGEX MATCH "^[0-9]+" ppstage_torch_cuda_major ${ppstage_torch_cuda})
    if(NOT ppstage_torch_cuda_major EQUAL CUDAToolkit_VERSION_MAJOR)
      message(FATAL_ERROR "ppstage: LibTorch ${Torch_VERSION} was built for CUDA "
                          "${ppstage_torch_cuda}, the toolkit in ${CUDAToolkit_BIN_DIR} is CUDA "
                          "${CUDAToolkit_VERSION}: install the toolkit of the same major version")
    endif()
  endif()
  message(STATUS "ppstage: CUDA toolkit ${CUDAToolkit_VERSION} (${CUDAToolkit_BIN_DIR}), "
                 "LibTorch built for CUDA ${ppstage_torch_cuda}, cuDNN ${ppstage_cudnn_version}")
  # How many devices this machine shows, from the CUDA runtime itself.
  try_run(ppstage_devices_run ppstage_devices_compiled ${CMAKE_BINARY_DIR}/cuda_device_count
          ${PROJECT_SOURCE_DIR}/cmake/cuda_device_count.cpp LINK_LIBRARIES CUDA::cudart
          RUN_OUTPUT_VARIABLE ppstage_devices)
  if(NOT ppstage_devices_compiled)
    set(ppstage_devices "unknown (cmake/cuda_device_count.cpp did not build)")
  endif()
  message(STATUS "ppstage: CUDA devices visible: ${ppstage_devices}")
else()
  message(STATUS "ppstage: CUDA no (LibTorch built without it)")
endif()
if(PPSTAGE_NCCL_ENABLED)
  ppstage_header_version("${NCCL_INCLUDE_DIR}/nccl.h" NCCL_MAJOR NCCL_MINOR NCCL_PATCH
                         ppstage_nccl_version)
  message(STATUS "ppstage: NCCL communicator ON: NCCL ${ppstage_nccl_version} (${NCCL_LIBRARY})")
else()
  message(STATUS "ppstage: NCCL communicator OFF: ${ppstage_nccl_note}")
endif()
