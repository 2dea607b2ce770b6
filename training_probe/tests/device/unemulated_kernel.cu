// A kernel the stand-in has no emulation of (kernels_emulation.cpp does not
// name it): its launch must fail there, and run on a GPU.
#include <cuda_runtime_api.h>
#include <stddef.h>

extern "C" __global__ void ccscope_test_unemulated_kernel(float* values, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    values[i] += 1.0f;
}

extern "C" cudaError_t ccscope_test_launch_unemulated(float* values, size_t n,
                                                      cudaStream_t stream) {
  ccscope_test_unemulated_kernel<<<1, 64, 0, stream>>>(values, n);
  return cudaGetLastError();
}
