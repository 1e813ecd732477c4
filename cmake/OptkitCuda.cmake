# CUDA is optional: cuda/ is compiled when nvcc is found (or forced with OPTKIT_CUDA=ON). The CUDA
# runtime is linked statically; it loads the driver (libcuda.so) at run time, so the binary still
# starts on machines without one.
set(OPTKIT_HAVE_CUDA OFF)
if(NOT OPTKIT_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Ampere and Hopper as machine code, plus Hopper PTX that newer GPUs JIT-compile.
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
    endif()
    enable_language(CUDA)
    # Debian 12's CMake (3.25.1) FindCUDAToolkit marks CUDA::nvToolsExt deprecated, for projects
    # that require 3.25, without checking the target exists; CUDA 12.9 and later ship no
    # nvToolsExt library, so configuring fails ("set_property could not find TARGET
    # CUDA::nvToolsExt"). The lookup runs under 3.24's rules, which skip that mark (optkit uses
    # neither NVTX target).
    set(optkit_minimum_required ${CMAKE_MINIMUM_REQUIRED_VERSION})
    set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_MINIMUM_REQUIRED_VERSION ${optkit_minimum_required})
    set(OPTKIT_HAVE_CUDA ON)
    message(STATUS "optkit: CUDA ${CUDAToolkit_VERSION} found, compiling cuda/ for ${CMAKE_CUDA_ARCHITECTURES}")
  elseif(OPTKIT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "OPTKIT_CUDA=ON but no CUDA compiler found; install the CUDA Toolkit or use -DOPTKIT_CUDA=AUTO")
  else()
    message(STATUS "optkit: no CUDA compiler found, building without cuda/")
  endif()
endif()
