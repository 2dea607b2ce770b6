#pragma once
// What the topology probe knows about one node: its GPUs, NICs, the PCI tree
// above them, and which sources (hwloc, NVML, sysfs, NCCL's dump) said so.
// Every figure is optional: 0 / -1 / "" means "no source told us".
//
// Producers: the hwloc XML reader (live hwloc exports its topology as XML and
// goes the same way), the NCCL topology-dump reader, NVML (dlopen) and sysfs.
// merge_* functions in probe.h join them; paths.h classifies and rates paths.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace ccscope::topo {

// A PCIe link: generation (1-6) and lane count. 0 = unknown.
struct PcieLink {
  int generation = 0;
  int width = 0;
  bool known() const { return generation > 0 && width > 0; }
};

// One upstream step of a device's PCI path, nearest the device first.
struct PciHop {
  enum class Kind {
    kBridge,      // a PCI-to-PCI bridge (a switch port, a root port)
    kHostBridge,  // the PCIe host bridge (root complex) the tree hangs from
  };
  Kind kind = Kind::kBridge;
  std::string id;  // bridge: its bus id; host bridge: a name unique in the node
};

// Where a PCI device sits: bus id, its chain of bridges up to the host
// bridge, and the NUMA node / package of that host bridge (-1 unknown).
struct PciPlacement {
  std::string bus_id;        // "0000:34:00.0", lower case, 4-digit domain
  std::vector<PciHop> path;  // nearest first; ends with the host bridge when known
  int numa_node = -1;
  int package = -1;
  PcieLink link;  // the device's link as the source read it
};

// An NVLink of a GPU. The remote end is another GPU or an NVSwitch.
struct NvLink {
  int link = -1;  // NVML link index; -1 when the source has no index
  bool active = true;
  int version = 0;            // NVLink generation (1-5), 0 unknown
  std::string remote_bus_id;  // the far end's PCI bus id
  bool remote_is_switch = false;
  double bandwidth_GBps = 0;  // per direction, when the source states it (hwloc)
};

struct Gpu {
  int index = -1;    // CUDA/NVML order within the node
  std::string name;  // "NVIDIA H200", "Tesla V100-SXM3-32GB-H"
  std::string uuid;  // "GPU-..."
  PciPlacement pci;
  PcieLink pcie_current;  // NVML current (or the only figure a source has)
  PcieLink pcie_max;      // NVML maximum
  std::vector<NvLink> nvlinks;
  int cuda_compute_capability = 0;  // 90 for sm_90; 0 unknown
};

enum class NicKind { kEthernet, kInfiniband, kRoce, kOther };
const char* nic_kind_name(NicKind kind);  // "ethernet", "infiniband", "roce", "other"

struct Nic {
  std::string name;  // "eth0"; an RDMA port: "mlx5_0:1"
  NicKind kind = NicKind::kOther;
  double rate_Gbps = 0;    // line rate in Gbit/s (sysfs speed, IB port rate); 0 unknown
  double shaped_Gbps = 0;  // an egress traffic shaper's rate cap (tc tbf), 0 none
  std::string state;       // "up", "down", "unknown" (IB: "active", "down", ...)
  int mtu = 0;
  std::string driver;       // "mlx5_core", "veth", "virtio_net"
  std::string netdev;       // an RDMA port's network interface (RoCE, IPoIB), "" none
  std::string rdma_device;  // a network interface's RDMA device, "" none
  bool has_gid = false;     // an RDMA port with a non-zero GID (usable for RoCE)
  bool is_virtual = false;  // no PCI device behind it (lo, veth, bridge, docker0)
  PciPlacement pci;         // bus_id "" when virtual or unknown
  // Gbit/s the port can carry: the lower of line rate and shaper, 0 unknown.
  double effective_Gbps() const;
};

// What one source contributed, for the report ("sources" in the JSON).
struct SourceStatus {
  std::string name;  // "hwloc", "nvml", "sysfs", "nccl", "cuda"
  bool read = false;
  std::string detail;  // version or why not: "not built with hwloc", "libnvidia-ml.so.1 not found"
};

struct HostTopology {
  std::string hostname;
  int numa_nodes = 0;
  int packages = 0;
  int cores = 0;
  int pus = 0;
  std::string cpu_model;
  std::string driver_version;  // NVIDIA driver
  std::string cuda_version;    // CUDA driver API version "13.0"
  std::string nccl_version;    // of the NCCL ccscope runs, "" none
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  // NVML's common-ancestor level of GPU pairs ("PIX", "PXB", "PHB", "NODE",
  // "SYS"; nvmlDeviceGetTopologyCommonAncestor), used where the PCI tree is unknown.
  struct GpuAncestor {
    int gpu_a = -1;
    int gpu_b = -1;
    std::string level;
  };
  std::vector<GpuAncestor> gpu_ancestors;
  std::vector<SourceStatus> sources;
  // Things a reader saw but could not use (a truncated value, an unknown object).
  std::vector<std::string> notes;

  const Gpu* find_gpu_by_bus_id(const std::string& bus_id) const;
  const Nic* find_nic(const std::string& name) const;
  SourceStatus* source(const std::string& name);
};

// GPUs a source gave no number (index -1) take the lowest free numbers, in
// order of appearance; then the list is ordered by index. Readers end with it.
void number_unindexed_gpus(HostTopology& host);

// "0000:34:00.0" from "00000000:34:00.0", "34:00.0", upper case, ...; "" if not a bus id.
std::string normalize_bus_id(const std::string& text);

// A topology file was malformed or unreadable: one line saying what and where.
class TopologyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ccscope::topo
