#pragma once
// Kernel launches under the CUDA runtime stand-in (docs/standin.md, "Kernels").
// nvcc's host code registers every kernel of a .cu file by its device name
// (__cudaRegisterFunction) and launches it through __cudaLaunchKernel with an
// array of pointers to the arguments. The stand-in has no GPU to run the
// device code on: a test-only "emulation library" (lib*_emulation.so in the
// stand-in's lib directory, built from the same kernel source by the host
// compiler with standin/emulation/ccscope_kernel_emulation.h) registers, by the
// same device name, a function that turns one launch's arguments into work for
// the stream's worker. A kernel without one fails its launch loudly.
#include <cuda_runtime_api.h>

#include <string>

#include "runtime.h"

namespace ccscope::standin {

struct LaunchShape {
  dim3 grid;
  dim3 block;
};

// Reads the launch's arguments now (`args[i]` points at argument i, as
// cudaLaunchKernel's array), checks and translates every pointer into the
// stand-in's writable mapping, and sets `work` to run the kernel's every block
// and thread on the worker. Returns cudaSuccess, or an error with `message`.
using KernelEmulation = cudaError_t (*)(void** args, LaunchShape shape, Work& work,
                                        std::string& message);

// Called by an emulation library's static initialisers.
void register_kernel_emulation(const char* device_name, KernelEmulation emulation);

}  // namespace ccscope::standin
