# ccscope_training_device: included from training_probe/CMakeLists.txt where
# nvcc, the CUDA toolkit and cuBLAS were found.
add_library(ccscope_training_device STATIC src/device/device_ops.cu src/device/device_ops.cpp
            src/device/cublas_library.cpp
            src/device/device_transformer.cpp)
# What every target with .cu sources here needs (the device tests' too).
function(ccscope_cuda_target target)
  set_target_properties(${target} PROPERTIES
    # libcudart.so.N, not cudart_static: the stand-in replaces the shared one.
    CUDA_RUNTIME_LIBRARY Shared
    # SASS for the H200 (sm_90) and PTX that any GPU from sm_80 on compiles at load.
    CUDA_ARCHITECTURES "90-real;80-virtual"
    CUDA_STANDARD 17
    POSITION_INDEPENDENT_CODE ON)
  # The project's -Wall -Wextra are host-compiler flags: nvcc takes them through -Xcompiler.
  get_target_property(options ${target} COMPILE_OPTIONS)
  set_property(TARGET ${target} PROPERTY COMPILE_OPTIONS "")
  foreach(option IN LISTS options)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:${option}> $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${option}>)
  endforeach()
  # No fused multiply-adds: the kernels then round as model.cpp and optimizer.cpp do.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false>)
endfunction()
ccscope_cuda_target(ccscope_training_device)
target_include_directories(ccscope_training_device PUBLIC src/device include)
# cuBLAS is dlopen'ed (cublas_library.h): its headers only, no link.
target_link_libraries(ccscope_training_device PUBLIC CUDA::cudart ${CMAKE_DL_LIBS})
target_include_directories(ccscope_training_device PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
