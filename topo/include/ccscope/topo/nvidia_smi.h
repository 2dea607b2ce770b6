#pragma once
// What users paste into bug reports: the text of `nvidia-smi topo -m` (the
// device matrix, tab- or space-aligned, with or without NIC rows, the NIC
// Legend, CPU/NUMA affinity and GPU NUMA ID columns, old and new legend words)
// and of `nvidia-smi nvlink -s` (each GPU's links and their speed), found
// anywhere in a longer text (a markdown fence, collect_env output, a log).
// Read into the same HostTopology as the other readers, and judged: a PCIe-only
// box, GPUs split across sockets, NICs far from their GPUs, uneven NVLinks.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/topo/findings.h"
#include "ccscope/topo/topology.h"

namespace ccscope::topo {

struct NvidiaSmiMatrix {
  std::vector<std::string> devices;                 // "GPU0", "NIC0" (or "mlx5_0" in old output)
  std::vector<std::vector<std::string>> cells;      // [row][column], "X", "NV18", "PIX", "SYS", ...
  std::map<std::string, std::string> cpu_affinity;  // "GPU0" -> "0-47,96-143"
  std::map<std::string, std::string> numa_affinity;  // "GPU0" -> "0"
  std::map<std::string, std::string> nic_names;      // "NIC0" -> "mlx5_0" (NIC Legend)
  bool is_gpu(size_t i) const { return devices[i].rfind("GPU", 0) == 0; }
};

// One GPU's links from `nvidia-smi nvlink -s`.
struct NvidiaSmiNvlinkStatus {
  int gpu = -1;
  std::string name;               // "NVIDIA H100 80GB HBM3"
  std::vector<double> link_GBps;  // per link; 0 for "<inactive>"
};

// The first `nvidia-smi topo -m` matrix in `text`, if there is one.
std::optional<NvidiaSmiMatrix> find_nvidia_smi_topo(std::string_view text);
// Every GPU block of `nvidia-smi nvlink -s` in `text` (none: empty).
std::vector<NvidiaSmiNvlinkStatus> find_nvidia_smi_nvlink_status(std::string_view text);

// A link's speed as nvlink -s states it (the signalling rate per direction:
// 26.562 GB/s on an H100's NVLink4) as the per-direction data rate the paths use:
// at most the nominal rate of the model's NVLink generation (model_version,
// 0 unknown: the generation whose nominal rate is nearest at or below `stated`),
// less for a link trained slower. 0 for an inactive link.
double nvlink_effective_GBps(double stated_GBps, int model_version);

// Into the topology model: GPUs (no bus ids in this output: each GPU gets
// "ffff:NN:00.0", a note says so), NVLinks per pair, NICs by legend name, the
// PCIe levels as gpu_ancestors. `nvlinks` adds GPU names and link speeds: each of
// a GPU's NVLinks gets the mean effective speed of its active links (nvlink -s
// does not say which link reaches which peer), so a link trained slower lowers
// the expected bandwidth of that GPU's paths.
HostTopology topology_from_nvidia_smi(const NvidiaSmiMatrix& matrix,
                                      const std::vector<NvidiaSmiNvlinkStatus>& nvlinks = {});

// Findings ("nvidia_smi.*"): pcie_only (GPUs with no NVLink between them),
// gpus_across_sockets (GPU pairs at SYS), nic_far_from_gpu (a GPU whose
// nearest NIC is past a PCIe host bridge: GPUDirect RDMA off by default, or
// across the sockets: PXN needed), uneven_nvlinks (GPUs with fewer NVLinks
// than the others, in the matrix or by active links), nvlink_inactive,
// nvlink_slow (active links below 90% of the median active link's speed).
std::vector<Finding> check_nvidia_smi(const NvidiaSmiMatrix& matrix,
                                      const std::vector<NvidiaSmiNvlinkStatus>& nvlinks = {});

}  // namespace ccscope::topo
