// Kernel registration and launch in the CUDA runtime stand-in (part of
// libcudart's stand-in; kernel_emulation.h says how a kernel runs on the host).
// The entry points are the ones nvcc's generated host code calls (CUDA 13:
// __cudaRegisterFatBinary/End, __cudaRegisterFunction, __cudaGetKernel,
// __cudaPush/PopCallConfiguration, __cudaLaunchKernel) and the public
// cudaLaunchKernel. The fat binary itself is never read: nothing here runs
// device code.
#include <dlfcn.h>
#include <glob.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernel_emulation.h"

namespace ccscope::standin {
namespace {

struct Kernels {
  std::mutex mutex;
  std::map<const void*, std::string> device_names;    // host stub -> device name
  std::map<std::string, KernelEmulation> emulations;  // device name -> emulation
};

Kernels& kernels() {
  static Kernels* k = new Kernels();  // never destroyed: launches may come from exit handlers
  return *k;
}

// The launch configurations pushed by `kernel<<<...>>>` and popped by its stub.
struct Configuration {
  dim3 grid, block;
  size_t shared_memory = 0;
  cudaStream_t stream = nullptr;
};
thread_local std::vector<Configuration> tls_configurations;

// Loads every lib*_emulation.so beside this library (once). Their static
// initialisers call register_kernel_emulation.
void load_emulation_libraries() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&load_emulation_libraries), &self) == 0 ||
      self.dli_fname == nullptr)
    return;
  std::string directory(self.dli_fname);
  directory = directory.substr(0, directory.find_last_of('/') + 1);
  glob_t found{};
  if (glob((directory + "lib*_emulation.so").c_str(), 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; ++i) {
      if (dlopen(found.gl_pathv[i], RTLD_NOW | RTLD_GLOBAL) == nullptr)
        std::fprintf(stderr, "ccscope CUDA stand-in: cannot load %s: %s\n", found.gl_pathv[i],
                     dlerror());
    }
  }
  globfree(&found);
}

cudaError_t launch(const void* function, dim3 grid, dim3 block, void** args, size_t shared_memory,
                   cudaStream_t stream) {
  (void)shared_memory;  // emulated kernels use none (no __shared__ under emulation)
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 ||
      static_cast<unsigned long long>(block.x) * block.y * block.z > 1024)
    return record_error(cudaErrorInvalidConfiguration);
  Kernels& k = kernels();
  std::string name;
  {
    std::lock_guard<std::mutex> lock(k.mutex);
    auto it = k.device_names.find(function);
    if (it == k.device_names.end()) {
      std::fprintf(stderr,
                   "ccscope CUDA stand-in: launch of a function that no module registered\n");
      return record_error(cudaErrorInvalidDeviceFunction);
    }
    name = it->second;
  }
  // Not under k.mutex: the libraries' initialisers take it.
  static std::once_flag loaded;
  std::call_once(loaded, load_emulation_libraries);
  KernelEmulation emulation = nullptr;
  {
    std::lock_guard<std::mutex> lock(k.mutex);
    auto e = k.emulations.find(name);
    if (e != k.emulations.end()) emulation = e->second;
  }
  if (emulation == nullptr) {
    std::fprintf(
        stderr,
        "ccscope CUDA stand-in: kernel '%s' has no host emulation (no lib*_emulation.so in the "
        "stand-in's lib directory registers it): the launch fails instead of doing nothing\n",
        name.c_str());
    return record_error(cudaErrorInvalidDeviceFunction);
  }
  Work work;
  std::string message;
  const cudaError_t prepared = emulation(args, LaunchShape{grid, block}, work, message);
  if (prepared != cudaSuccess) {
    std::fprintf(stderr, "ccscope CUDA stand-in: kernel '%s': %s\n", name.c_str(), message.c_str());
    return record_error(prepared);
  }
  return record_error(enqueue(stream, std::move(work)));
}

}  // namespace

void register_kernel_emulation(const char* device_name, KernelEmulation emulation) {
  Kernels& k = kernels();
  std::lock_guard<std::mutex> lock(k.mutex);
  k.emulations[device_name] = emulation;
}

}  // namespace ccscope::standin

using namespace ccscope::standin;

extern "C" {

void** __cudaRegisterFatBinary(void* fatCubin) {
  // The handle only has to be unique and live until unregistered.
  return new void*(fatCubin);
}

void __cudaRegisterFatBinaryEnd(void** fatCubinHandle) { (void)fatCubinHandle; }

void __cudaUnregisterFatBinary(void** fatCubinHandle) {
  // The stubs of an unloaded module can no longer be launched; their names stay
  // (a few bytes) as the module's code may be mapped again at the same address.
  delete fatCubinHandle;
}

char __cudaInitModule(void** fatCubinHandle) {
  (void)fatCubinHandle;
  return 1;
}

void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                            const char* deviceName, int thread_limit, uint3* tid, uint3* bid,
                            dim3* bDim, dim3* gDim, int* wSize) {
  (void)fatCubinHandle, (void)deviceName, (void)thread_limit, (void)tid, (void)bid, (void)bDim,
      (void)gDim, (void)wSize;
  Kernels& k = kernels();
  std::lock_guard<std::mutex> lock(k.mutex);
  k.device_names[hostFun] = deviceFun;
}

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     cudaStream_t stream) {
  tls_configurations.push_back({gridDim, blockDim, sharedMem, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem,
                                       void* stream) {
  if (tls_configurations.empty()) return record_error(cudaErrorMissingConfiguration);
  const Configuration c = tls_configurations.back();
  tls_configurations.pop_back();
  *gridDim = c.grid;
  *blockDim = c.block;
  *sharedMem = c.shared_memory;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

// cudaKernel_t is, in the stand-in, the host stub's address.
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* function) {
  if (kernel == nullptr) return record_error(cudaErrorInvalidValue);
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(function));
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args,
                               size_t sharedMem, cudaStream_t stream) {
  return launch(reinterpret_cast<const void*>(kernel), gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args,
                                    size_t sharedMem, cudaStream_t stream) {
  return launch(reinterpret_cast<const void*>(kernel), gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                             size_t sharedMem, cudaStream_t stream) {
  return launch(func, gridDim, blockDim, args, sharedMem, stream);
}

}  // extern "C"
