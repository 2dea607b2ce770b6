# Required dependencies come from Debian packages (see ci/install-deps).
find_package(MPI REQUIRED COMPONENTS C)
# ccscope uses MPI's C API from C++. Without these, Open MPI's and MPICH's mpi.h
# pull in their deprecated C++ bindings, which MPI::MPI_C does not link
# (undefined MPI::Comm::Comm() with Open MPI 4.1).
target_compile_definitions(MPI::MPI_C INTERFACE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()
find_package(Threads REQUIRED)

# Optional: CUDA runtime + NCCL. AUTO enables them when nvcc and nccl.h are found.
set(CCSCOPE_HAVE_NCCL OFF)
if(NOT CCSCOPE_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # A100, H100/H200, B200; override with -DCMAKE_CUDA_ARCHITECTURES=...
      set(CMAKE_CUDA_ARCHITECTURES "80;90;100")
    endif()
    enable_language(CUDA)
    add_library(ccscope_nccl INTERFACE IMPORTED)
    target_include_directories(ccscope_nccl INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(ccscope_nccl INTERFACE ${NCCL_LIBRARY})
    set(CCSCOPE_HAVE_NCCL ON)
    message(STATUS "ccscope: NCCL backend ON (${NCCL_LIBRARY}, CUDA ${CUDAToolkit_VERSION})")
  elseif(CCSCOPE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "CCSCOPE_CUDA=ON but CUDA (nvcc, runtime) or NCCL (nccl.h, libnccl) was not found. "
                        "Install the CUDA toolkit and NCCL, or configure with -DCCSCOPE_CUDA=OFF.")
  else()
    message(STATUS "ccscope: NCCL backend OFF (CUDA or NCCL not found)")
  endif()
endif()

# Optional: gloo (PyTorch's CPU collectives) for --backend gloo; Debian's libgloo-dev
# (CMake package Gloo, target gloo). AUTO enables it when found.
set(CCSCOPE_GLOO AUTO CACHE STRING "The gloo backend: AUTO, ON or OFF")
set(CCSCOPE_HAVE_GLOO OFF)
if(NOT CCSCOPE_GLOO STREQUAL "OFF")
  find_package(Gloo CONFIG QUIET)
  if(Gloo_FOUND AND TARGET gloo)
    set(CCSCOPE_HAVE_GLOO ON)
    message(STATUS "ccscope: gloo backend ON (gloo ${GLOO_VERSION})")
  elseif(CCSCOPE_GLOO STREQUAL "ON")
    message(FATAL_ERROR "CCSCOPE_GLOO=ON but gloo (CMake package Gloo) was not found. "
                        "Install libgloo-dev, or configure with -DCCSCOPE_GLOO=OFF.")
  else()
    message(STATUS "ccscope: gloo backend OFF (gloo not found)")
  endif()
endif()

# Optional: hwloc for the topology probe's live PCI tree (the GPU machine has
# none: the probe then says so and reads NVML and sysfs alone).
set(CCSCOPE_HAVE_HWLOC OFF)
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc>=2.0)
  if(HWLOC_FOUND)
    set(CCSCOPE_HAVE_HWLOC ON)
    message(STATUS "ccscope: hwloc ${HWLOC_VERSION} for the topology probe")
  endif()
endif()
if(NOT CCSCOPE_HAVE_HWLOC)
  message(STATUS "ccscope: hwloc not found; the topology probe reads NVML and sysfs only")
endif()

# OpenBLAS: the training probe's GEMMs on the CPU (openblas_set_num_threads
# gives every rank the thread count it asks for). Debian's libopenblas-dev.
find_library(OPENBLAS_LIBRARY NAMES openblas REQUIRED)
find_path(OPENBLAS_INCLUDE_DIR cblas.h
          PATHS /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas
          NO_DEFAULT_PATH)
if(NOT OPENBLAS_INCLUDE_DIR)
  find_path(OPENBLAS_INCLUDE_DIR openblas_config.h REQUIRED)
endif()
add_library(ccscope_openblas INTERFACE IMPORTED)
target_include_directories(ccscope_openblas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(ccscope_openblas INTERFACE ${OPENBLAS_LIBRARY})
message(STATUS "ccscope: OpenBLAS ${OPENBLAS_LIBRARY} (${OPENBLAS_INCLUDE_DIR})")
