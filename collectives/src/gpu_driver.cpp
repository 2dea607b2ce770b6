// The NVIDIA driver version, read through NVML loaded with dlopen at run time
// (as NCCL itself loads NVML), so that this works in builds without CUDA and
// on machines without a GPU, where it returns "".
#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <string>

#include "ccscope/collectives/backends.h"

namespace ccscope {
namespace {

// NVML's C ABI, as declared in nvml.h: nvmlReturn_t is an int, 0 = NVML_SUCCESS.
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlSystemGetDriverVersion = int (*)(char* version, unsigned int length);
constexpr unsigned int kNvmlDriverVersionBufferSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

struct LibraryCloser {
  void operator()(void* handle) const { dlclose(handle); }
};

}  // namespace

std::string gpu_driver_version_string() {
  std::unique_ptr<void, LibraryCloser> nvml(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!nvml) return "";
  auto init = reinterpret_cast<NvmlInit>(dlsym(nvml.get(), "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<NvmlShutdown>(dlsym(nvml.get(), "nvmlShutdown"));
  auto get_version =
      reinterpret_cast<NvmlSystemGetDriverVersion>(dlsym(nvml.get(), "nvmlSystemGetDriverVersion"));
  if (!init || !shutdown || !get_version) return "";
  if (init() != 0) return "";  // no driver loaded, no device: unknown, not an error
  std::string version(kNvmlDriverVersionBufferSize, '\0');
  const bool ok = get_version(version.data(), kNvmlDriverVersionBufferSize) == 0;
  shutdown();
  if (!ok) return "";
  version.resize(std::min(version.find('\0'), version.size()));
  return version;
}

}  // namespace ccscope
