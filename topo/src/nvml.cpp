// GPUs through NVML, loaded with dlopen at run time so that ccscope neither
// links against nor needs the NVIDIA driver: a machine without it reads as
// "nvml: not read (libnvidia-ml.so.1 not found)".
#include "ccscope/topo/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace ccscope::topo {
namespace {

// ---------------------------------------------------------------------------
// The part of NVML's C ABI read here, declared by hand (no nvml.h at build
// time). Every constant, layout and signature is checked against NVIDIA's
// public nvml.h of NVML 13.3.29 (cuda_nvml_dev-linux-x86_64-13.3.29 redist
// archive, as kept unmodified in github.com/NVIDIA/go-nvml gen/nvml/nvml.h).
// NVML's enums (nvmlReturn_t, nvmlEnableState_t, nvmlGpuTopologyLevel_t,
// nvmlIntNvLinkDeviceType_t) are C enums, passed and stored as int.

using NvmlReturn = int;                         // nvmlReturn_t
using NvmlDevice = struct nvmlDevice_st*;       // nvmlDevice_t: an opaque handle
constexpr NvmlReturn kNvmlSuccess = 0;          // NVML_SUCCESS
constexpr NvmlReturn kNvmlInvalidArgument = 2;  // NVML_ERROR_INVALID_ARGUMENT
constexpr NvmlReturn kNvmlNotSupported = 3;     // NVML_ERROR_NOT_SUPPORTED

// Buffer sizes (nvmlConstants): NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80,
// NVML_DEVICE_NAME_V2_BUFFER_SIZE 96, NVML_DEVICE_UUID_V2_BUFFER_SIZE 96.
constexpr unsigned kDriverVersionBufferSize = 80;
constexpr unsigned kDeviceNameBufferSize = 96;
constexpr unsigned kDeviceUuidBufferSize = 96;

// NVML_NVLINK_MAX_LINKS: 36 in NVML 13.x (18 in 12.x). Drivers answer
// NVML_ERROR_INVALID_ARGUMENT past their own count, which ends the walk.
constexpr unsigned kNvmlNvLinkMaxLinks = 36;

// nvmlPciInfo_t (nvmlPciInfo_st), as filled by nvmlDeviceGetPciInfo_v3 and
// nvmlDeviceGetNvLinkRemotePciInfo_v2.
struct NvmlPciInfo {
  char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
};
static_assert(sizeof(NvmlPciInfo) == 68, "nvmlPciInfo_t is 16 + 5 * 4 + 32 bytes");

constexpr int kNvmlFeatureEnabled = 1;  // nvmlEnableState_t NVML_FEATURE_ENABLED

// nvmlIntNvLinkDeviceType_t
constexpr int kNvLinkDeviceTypeGpu = 0x00;     // NVML_NVLINK_DEVICE_TYPE_GPU
constexpr int kNvLinkDeviceTypeIbmNpu = 0x01;  // NVML_NVLINK_DEVICE_TYPE_IBMNPU
constexpr int kNvLinkDeviceTypeSwitch = 0x02;  // NVML_NVLINK_DEVICE_TYPE_SWITCH

// Functions, by their nvml.h signatures.
using InitFn = NvmlReturn();                                   // nvmlInit_v2
using ShutdownFn = NvmlReturn();                               // nvmlShutdown
using ErrorStringFn = const char*(NvmlReturn);                 // nvmlErrorString
using SystemTextFn = NvmlReturn(char*, unsigned);              // nvmlSystemGetDriverVersion
using SystemIntFn = NvmlReturn(int*);                          // nvmlSystemGetCudaDriverVersion
using CountFn = NvmlReturn(unsigned*);                         // nvmlDeviceGetCount_v2
using HandleFn = NvmlReturn(unsigned, NvmlDevice*);            // nvmlDeviceGetHandleByIndex_v2
using DeviceTextFn = NvmlReturn(NvmlDevice, char*, unsigned);  // nvmlDeviceGetName, GetUUID
using DevicePciFn = NvmlReturn(NvmlDevice, NvmlPciInfo*);      // nvmlDeviceGetPciInfo_v3
using DeviceUnsignedFn = NvmlReturn(NvmlDevice, unsigned*);    // nvmlDevice{Curr,Max}PcieLink*
// nvmlDeviceGetCudaComputeCapability
using ComputeCapabilityFn = NvmlReturn(NvmlDevice, int*, int*);
// nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkRemoteDeviceType
using LinkIntFn = NvmlReturn(NvmlDevice, unsigned, int*);
using LinkUnsignedFn = NvmlReturn(NvmlDevice, unsigned, unsigned*);  // nvmlDeviceGetNvLinkVersion
using LinkPciFn = NvmlReturn(NvmlDevice, unsigned, NvmlPciInfo*);    // GetNvLinkRemotePciInfo_v2
using AncestorFn = NvmlReturn(NvmlDevice, NvmlDevice, int*);         // GetTopologyCommonAncestor

// The entry points read_nvml uses; nullptr where the library lacks one.
struct NvmlApi {
  InitFn* init = nullptr;
  ShutdownFn* shutdown = nullptr;
  ErrorStringFn* error_string = nullptr;
  SystemTextFn* driver_version = nullptr;
  SystemIntFn* cuda_driver_version = nullptr;
  CountFn* device_count = nullptr;
  HandleFn* handle_by_index = nullptr;
  DeviceTextFn* name = nullptr;
  DeviceTextFn* uuid = nullptr;
  DevicePciFn* pci_info = nullptr;
  DeviceUnsignedFn* current_link_generation = nullptr;
  DeviceUnsignedFn* max_link_generation = nullptr;
  DeviceUnsignedFn* current_link_width = nullptr;
  DeviceUnsignedFn* max_link_width = nullptr;
  ComputeCapabilityFn* compute_capability = nullptr;
  LinkIntFn* nvlink_state = nullptr;
  LinkUnsignedFn* nvlink_version = nullptr;
  LinkPciFn* nvlink_remote_pci_info = nullptr;
  LinkIntFn* nvlink_remote_device_type = nullptr;  // absent in old drivers
  AncestorFn* common_ancestor = nullptr;
};

// The loaded library, initialised or not. Shuts NVML down (when nvmlInit
// succeeded) and unloads it when it goes out of scope.
class NvmlLibrary {
 public:
  explicit NvmlLibrary(const std::string& path) {
    dlerror();  // clear a stale message so that the one below is about this load
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* why = dlerror();
      load_error_ = why ? why : "dlopen failed";
    }
  }
  ~NvmlLibrary() {
    if (initialized_ && api_.shutdown) api_.shutdown();
    if (handle_) dlclose(handle_);
  }
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  const std::string& load_error() const { return load_error_; }
  const NvmlApi& api() const { return api_; }

  // Resolves every entry point; returns the first required one missing, "" when all are there.
  std::string resolve() {
    resolve_one(api_.init, "nvmlInit_v2");
    resolve_one(api_.shutdown, "nvmlShutdown");
    resolve_one(api_.error_string, "nvmlErrorString");
    resolve_one(api_.driver_version, "nvmlSystemGetDriverVersion");
    resolve_one(api_.cuda_driver_version, "nvmlSystemGetCudaDriverVersion");
    resolve_one(api_.device_count, "nvmlDeviceGetCount_v2");
    resolve_one(api_.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
    resolve_one(api_.name, "nvmlDeviceGetName");
    resolve_one(api_.uuid, "nvmlDeviceGetUUID");
    resolve_one(api_.pci_info, "nvmlDeviceGetPciInfo_v3");
    resolve_one(api_.current_link_generation, "nvmlDeviceGetCurrPcieLinkGeneration");
    resolve_one(api_.max_link_generation, "nvmlDeviceGetMaxPcieLinkGeneration");
    resolve_one(api_.current_link_width, "nvmlDeviceGetCurrPcieLinkWidth");
    resolve_one(api_.max_link_width, "nvmlDeviceGetMaxPcieLinkWidth");
    resolve_one(api_.compute_capability, "nvmlDeviceGetCudaComputeCapability");
    resolve_one(api_.nvlink_state, "nvmlDeviceGetNvLinkState");
    resolve_one(api_.nvlink_version, "nvmlDeviceGetNvLinkVersion");
    resolve_one(api_.nvlink_remote_pci_info, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    resolve_one(api_.nvlink_remote_device_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
    resolve_one(api_.common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
    if (!api_.init) return "nvmlInit_v2";
    if (!api_.device_count) return "nvmlDeviceGetCount_v2";
    if (!api_.handle_by_index) return "nvmlDeviceGetHandleByIndex_v2";
    return "";
  }

  NvmlReturn init() {
    const NvmlReturn status = api_.init();
    initialized_ = status == kNvmlSuccess;
    return status;
  }

  // NVML's own words for an error code.
  std::string message(NvmlReturn status) const {
    const char* text = api_.error_string ? api_.error_string(status) : nullptr;
    if (text && *text) return text;
    return "NVML error " + std::to_string(status);
  }

 private:
  template <typename Function>
  void resolve_one(Function*& entry, const char* symbol) {
    // POSIX guarantees that a dlsym address converts to a function pointer.
    entry = reinterpret_cast<Function*>(dlsym(handle_, symbol));
  }

  void* handle_ = nullptr;
  std::string load_error_;
  NvmlApi api_;
  bool initialized_ = false;
};

// A NUL-terminated text NVML wrote into `buffer`, "" if it wrote none.
std::string text_of(const char* buffer, size_t size) {
  return std::string(buffer, std::find(buffer, buffer + size, '\0'));
}

std::string read_device_text(DeviceTextFn* function, NvmlDevice device, unsigned buffer_size) {
  if (!function) return "";
  std::vector<char> buffer(buffer_size, '\0');
  if (function(device, buffer.data(), buffer_size) != kNvmlSuccess) return "";
  return text_of(buffer.data(), buffer.size());
}

// A positive figure NVML read, 0 when it has none.
int read_device_figure(DeviceUnsignedFn* function, NvmlDevice device) {
  unsigned value = 0;
  if (!function || function(device, &value) != kNvmlSuccess) return 0;
  return value <= 1024 ? static_cast<int>(value) : 0;  // beyond any PCIe figure: not a reading
}

// "0000:34:00.0" from NVML's PCI info: busId ("00000000:34:00.0"), else the
// legacy form. "" when neither is a bus id.
std::string bus_id_of(const NvmlPciInfo& info) {
  std::string bus_id = normalize_bus_id(text_of(info.busId, sizeof info.busId));
  if (bus_id.empty()) bus_id = normalize_bus_id(text_of(info.busIdLegacy, sizeof info.busIdLegacy));
  return bus_id;
}

// NVLink generation from nvmlDeviceGetNvLinkVersion, which returns an
// nvmlNvlinkVersion_t, not the generation: 1 = 1.0, 2 = 2.0, 3 = 2.2,
// 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0, 8 = 6.0 (NVML_NVLINK_VERSION_*; an A100
// answers 5). 0 (NVML_NVLINK_VERSION_INVALID) and unknown values: 0.
int nvlink_generation(unsigned nvml_version) {
  static constexpr int kGeneration[] = {0, 1, 2, 2, 3, 3, 4, 5, 6};
  return nvml_version < std::size(kGeneration) ? kGeneration[nvml_version] : 0;
}

// nvidia-smi's name of an nvmlGpuTopologyLevel_t, "" for a value nvml.h does not define.
std::string ancestor_level_name(int level) {
  switch (level) {
    case 0:   // NVML_TOPOLOGY_INTERNAL: two GPUs of one board (K80), behind its own switch
    case 10:  // NVML_TOPOLOGY_SINGLE: at most one PCIe switch between them
      return "PIX";
    case 20:  // NVML_TOPOLOGY_MULTIPLE: several switches, no host bridge
      return "PXB";
    case 30:  // NVML_TOPOLOGY_HOSTBRIDGE: through one host bridge
      return "PHB";
    case 40:  // NVML_TOPOLOGY_NODE (= NVML_TOPOLOGY_CPU): host bridges of one NUMA node
      return "NODE";
    case 50:  // NVML_TOPOLOGY_SYSTEM: across NUMA nodes
      return "SYS";
    default:
      return "";
  }
}

// One GPU as NVML describes it, with what the second pass needs.
struct NvmlGpu {
  NvmlDevice handle = nullptr;
  Gpu gpu;
  // nvlinks whose far end NVML did not classify (no nvmlDeviceGetNvLinkRemoteDeviceType).
  std::vector<size_t> links_of_unknown_remote;
};

void read_nvlinks(const NvmlApi& api, NvmlGpu& into) {
  if (!api.nvlink_state) return;
  for (unsigned link = 0; link < kNvmlNvLinkMaxLinks; ++link) {
    int state = 0;
    const NvmlReturn status = api.nvlink_state(into.handle, link, &state);
    // Past the GPU's last link, or no NVLink at all.
    if (status == kNvmlInvalidArgument || status == kNvmlNotSupported) break;
    if (status != kNvmlSuccess) continue;  // this link unreadable; the next may be fine

    NvLink nvlink;
    nvlink.link = static_cast<int>(link);
    nvlink.active = state == kNvmlFeatureEnabled;
    NvmlPciInfo remote{};
    if (api.nvlink_remote_pci_info &&
        api.nvlink_remote_pci_info(into.handle, link, &remote) == kNvmlSuccess)
      nvlink.remote_bus_id = bus_id_of(remote);
    // A link that is down and leads nowhere NVML can name is only a port.
    if (!nvlink.active && nvlink.remote_bus_id.empty()) continue;
    unsigned version = 0;
    if (api.nvlink_version && api.nvlink_version(into.handle, link, &version) == kNvmlSuccess)
      nvlink.version = nvlink_generation(version);

    int remote_type = -1;
    if (api.nvlink_remote_device_type &&
        api.nvlink_remote_device_type(into.handle, link, &remote_type) == kNvmlSuccess &&
        (remote_type == kNvLinkDeviceTypeGpu || remote_type == kNvLinkDeviceTypeIbmNpu ||
         remote_type == kNvLinkDeviceTypeSwitch)) {
      nvlink.remote_is_switch = remote_type == kNvLinkDeviceTypeSwitch;
    } else {
      into.links_of_unknown_remote.push_back(into.gpu.nvlinks.size());
    }
    into.gpu.nvlinks.push_back(std::move(nvlink));
  }
}

NvmlGpu read_gpu(const NvmlApi& api, NvmlDevice handle, unsigned index) {
  NvmlGpu read;
  read.handle = handle;
  Gpu& gpu = read.gpu;
  gpu.index = static_cast<int>(index);
  gpu.name = read_device_text(api.name, handle, kDeviceNameBufferSize);
  gpu.uuid = read_device_text(api.uuid, handle, kDeviceUuidBufferSize);
  NvmlPciInfo pci{};
  if (api.pci_info && api.pci_info(handle, &pci) == kNvmlSuccess) gpu.pci.bus_id = bus_id_of(pci);
  gpu.pcie_current.generation = read_device_figure(api.current_link_generation, handle);
  gpu.pcie_current.width = read_device_figure(api.current_link_width, handle);
  gpu.pcie_max.generation = read_device_figure(api.max_link_generation, handle);
  gpu.pcie_max.width = read_device_figure(api.max_link_width, handle);
  gpu.pci.link = gpu.pcie_current;
  int major = 0, minor = 0;
  if (api.compute_capability && api.compute_capability(handle, &major, &minor) == kNvmlSuccess &&
      major > 0 && major < 100 && minor >= 0 && minor < 10)
    gpu.cuda_compute_capability = major * 10 + minor;
  read_nvlinks(api, read);
  return read;
}

// Without NVML's remote type, a far end that is none of the node's GPUs is an
// NVSwitch (NVLink joins GPUs to GPUs, switches, or an IBM NPU on POWER). The
// node's GPUs: NVML's, and those another source (hwloc's PCI tree) found, which
// include a GPU NVML lists but cannot open (lost, not permitted): a link to it
// is a link to a GPU, not to a switch.
void classify_unknown_remotes(std::vector<NvmlGpu>& gpus, const std::vector<Gpu>& others) {
  std::vector<std::string> gpu_bus_ids;
  for (const NvmlGpu& read : gpus)
    if (!read.gpu.pci.bus_id.empty()) gpu_bus_ids.push_back(read.gpu.pci.bus_id);
  for (const Gpu& other : others)
    if (std::string bus_id = normalize_bus_id(other.pci.bus_id); !bus_id.empty())
      gpu_bus_ids.push_back(std::move(bus_id));
  for (NvmlGpu& read : gpus) {
    for (size_t at : read.links_of_unknown_remote) {
      NvLink& nvlink = read.gpu.nvlinks[at];
      nvlink.remote_is_switch =
          !nvlink.remote_bus_id.empty() && std::find(gpu_bus_ids.begin(), gpu_bus_ids.end(),
                                                     nvlink.remote_bus_id) == gpu_bus_ids.end();
    }
  }
}

// Fills `known` (from another source) with what NVML read: NVML's figures win
// where it has one, the other source's stay where NVML has none.
void complete_gpu(Gpu& known, Gpu&& nvml) {
  known.index = nvml.index;
  if (!nvml.name.empty()) known.name = std::move(nvml.name);
  if (!nvml.uuid.empty()) known.uuid = std::move(nvml.uuid);
  if (known.pci.bus_id.empty()) known.pci.bus_id = nvml.pci.bus_id;
  if (!known.pci.link.known() && nvml.pci.link.known()) known.pci.link = nvml.pci.link;
  auto take = [](int& field, int value) {
    if (value > 0) field = value;
  };
  take(known.pcie_current.generation, nvml.pcie_current.generation);
  take(known.pcie_current.width, nvml.pcie_current.width);
  take(known.pcie_max.generation, nvml.pcie_max.generation);
  take(known.pcie_max.width, nvml.pcie_max.width);
  take(known.cuda_compute_capability, nvml.cuda_compute_capability);
  // NVML lists each link with its index and state; a source's per-pair view gives way to it.
  if (!nvml.nvlinks.empty()) known.nvlinks = std::move(nvml.nvlinks);
}

void merge_gpus(HostTopology& into, std::vector<NvmlGpu>& read) {
  for (NvmlGpu& one : read) {
    Gpu* known = nullptr;
    if (!one.gpu.pci.bus_id.empty())
      for (Gpu& gpu : into.gpus)
        if (normalize_bus_id(gpu.pci.bus_id) == one.gpu.pci.bus_id) known = &gpu;
    if (known)
      complete_gpu(*known, std::move(one.gpu));
    else
      into.gpus.push_back(std::move(one.gpu));
  }
  // NVML's order; GPUs no index was given to (another source's, not NVML's) last.
  std::stable_sort(into.gpus.begin(), into.gpus.end(), [](const Gpu& a, const Gpu& b) {
    if ((a.index < 0) != (b.index < 0)) return b.index < 0;
    return a.index < b.index;
  });
}

void read_ancestors(const NvmlApi& api, const std::vector<NvmlGpu>& gpus, HostTopology& into) {
  if (!api.common_ancestor) return;
  for (size_t a = 0; a < gpus.size(); ++a) {
    for (size_t b = a + 1; b < gpus.size(); ++b) {
      int level = -1;
      if (api.common_ancestor(gpus[a].handle, gpus[b].handle, &level) != kNvmlSuccess) continue;
      const int gpu_a = gpus[a].gpu.index, gpu_b = gpus[b].gpu.index;
      const std::string name = ancestor_level_name(level);
      if (name.empty()) {
        into.notes.push_back("NVML: GPUs " + std::to_string(gpu_a) + " and " +
                             std::to_string(gpu_b) + ": unknown common-ancestor level " +
                             std::to_string(level));
        continue;
      }
      auto same_pair = [&](const HostTopology::GpuAncestor& known) {
        return (known.gpu_a == gpu_a && known.gpu_b == gpu_b) ||
               (known.gpu_a == gpu_b && known.gpu_b == gpu_a);
      };
      auto known = std::find_if(into.gpu_ancestors.begin(), into.gpu_ancestors.end(), same_pair);
      if (known != into.gpu_ancestors.end())
        known->level = name;
      else
        into.gpu_ancestors.push_back({gpu_a, gpu_b, name});
    }
  }
}

// "13.0" from 13000 (NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR: v / 1000, v % 1000 / 10).
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

SourceStatus read_with(NvmlLibrary& library, const std::string& library_name, HostTopology& into) {
  SourceStatus status{"nvml", false, ""};
  if (!library.loaded()) {
    status.detail = library_name + " not found (" + library.load_error() + ")";
    return status;
  }
  if (const std::string missing = library.resolve(); !missing.empty()) {
    status.detail = library_name + " has no " + missing;
    return status;
  }
  if (const NvmlReturn init = library.init(); init != kNvmlSuccess) {
    status.detail = "nvmlInit failed: " + library.message(init);
    return status;
  }
  const NvmlApi& api = library.api();

  std::string driver;
  if (api.driver_version) {
    std::vector<char> buffer(kDriverVersionBufferSize, '\0');
    if (api.driver_version(buffer.data(), kDriverVersionBufferSize) == kNvmlSuccess)
      driver = text_of(buffer.data(), buffer.size());
  }
  if (!driver.empty()) into.driver_version = driver;
  int cuda = 0;
  if (api.cuda_driver_version && api.cuda_driver_version(&cuda) == kNvmlSuccess && cuda > 0)
    into.cuda_version = cuda_version_text(cuda);

  unsigned count = 0;
  if (const NvmlReturn counted = api.device_count(&count); counted != kNvmlSuccess) {
    status.detail = "nvmlDeviceGetCount failed: " + library.message(counted);
    return status;
  }
  std::vector<NvmlGpu> gpus;
  for (unsigned index = 0; index < count; ++index) {
    NvmlDevice handle = nullptr;
    if (const NvmlReturn got = api.handle_by_index(index, &handle); got != kNvmlSuccess) {
      // A GPU NVML cannot open (no permission, fallen off the bus): the others still count.
      into.notes.push_back("NVML: GPU " + std::to_string(index) + ": " + library.message(got));
      continue;
    }
    gpus.push_back(read_gpu(api, handle, index));
  }
  classify_unknown_remotes(gpus, into.gpus);
  read_ancestors(api, gpus, into);  // before merging: it needs the handles
  const size_t read_count = gpus.size();
  merge_gpus(into, gpus);

  status.detail = "NVML";
  if (!driver.empty()) status.detail += ", driver " + driver;
  if (read_count == 0) {
    status.detail += ": no GPU";
    return status;
  }
  status.read = true;
  status.detail += ", " + std::to_string(read_count) + (read_count == 1 ? " GPU" : " GPUs");
  return status;
}

}  // namespace

std::string nvml_library_name() {
  const char* chosen = std::getenv("CCSCOPE_NVML_LIBRARY");
  return chosen && *chosen ? chosen : "libnvidia-ml.so.1";
}

SourceStatus read_nvml(HostTopology& into, const std::string& library) {
  SourceStatus status;
  {
    NvmlLibrary nvml(library);  // shut down and unloaded at the end of this block
    status = read_with(nvml, library, into);
  }
  // One "nvml" entry however often NVML is read.
  if (SourceStatus* known = into.source("nvml"))
    *known = status;
  else
    into.sources.push_back(status);
  return status;
}

}  // namespace ccscope::topo
