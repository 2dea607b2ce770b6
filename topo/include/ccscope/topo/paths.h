#pragma once
// Paths between GPUs, NICs and nodes, in `nvidia-smi topo -m`'s vocabulary,
// and the bandwidth each should carry (from nominal_rates.h). Pure functions
// of a HostTopology and NCCL's environment.
#include <string>
#include <vector>

#include "ccscope/topo/nccl_env.h"
#include "ccscope/topo/topology.h"

namespace ccscope::topo {

// nvidia-smi topo -m's connection types, nearest first.
enum class PathLevel { kSelf, kNvLink, kPix, kPxb, kPhb, kNode, kSys, kUnknown };
// "X", "NV<links>", "PIX", "PXB", "PHB", "NODE", "SYS", "?"; parse_path_level reads
// them back (NV4 -> kNvLink with links 4); kUnknown for anything else.
std::string path_token(PathLevel level, int nvlinks = 0);
PathLevel parse_path_level(const std::string& token, int* nvlinks = nullptr);
// The legend nvidia-smi prints under its matrix (same meanings, same order).
std::string path_legend();

// How two PCI devices of one node are connected through PCI alone: PIX when
// their common bridge is at most one switch away from each (a switch shows as an
// upstream bridge over downstream bridges), PXB through several switches, PHB
// through the host bridge, NODE between host bridges of one NUMA node, SYS
// across NUMA nodes; kUnknown when a placement is missing.
PathLevel pci_path_level(const PciPlacement& a, const PciPlacement& b);

struct GpuPairPath {
  int gpu_a = -1;
  int gpu_b = -1;
  PathLevel level = PathLevel::kUnknown;
  int nvlinks = 0;  // for kNvLink: links (to the peer or to NVSwitches)
  bool through_nvswitch = false;
  bool p2p = true;           // NCCL would use its P2P transport (else SHM)
  double expected_GBps = 0;  // per direction; 0 unknown
  std::string basis;         // "6 x NVLink2 (25 GB/s each)", "PCIe gen5 x16"
  std::string token() const { return path_token(level, nvlinks); }
};
// The path of one GPU pair: NVLink when they share active links (directly or
// through NVSwitches), else the PCI path, else NVML's common-ancestor level.
GpuPairPath gpu_pair_path(const HostTopology& host, const Gpu& a, const Gpu& b,
                          const NcclEnvironment& env);
// Every unordered pair (a < b).
std::vector<GpuPairPath> gpu_pair_paths(const HostTopology& host, const NcclEnvironment& env);

// The NICs of the GPU/NIC matrix: those with a PCI placement, in order.
std::vector<const Nic*> matrix_nics(const HostTopology& host);
// nvidia-smi topo -m's matrix: GPUs and NICs, the legend, the NIC legend.
std::string render_path_matrix(const HostTopology& host, const NcclEnvironment& env);

// The path between ranks on two different nodes.
struct NodePairPath {
  std::string host_a, host_b;
  NetworkChoice::Transport transport = NetworkChoice::Transport::kNone;
  std::string device_a, device_b;  // "mlx5_0:1", "eth0"
  double expected_GBps = 0;        // the lower of the two ends' effective rates
  std::string basis;               // "socket over eth0: 1 Gbit/s (tc shaper; line 10 Gbit/s)"
};
// As NCCL would connect them (choose_network on each end; sockets when the two
// ends disagree or one has no RDMA port). `sockets_only`: the backend speaks
// TCP whatever the NICs (MPI over TCP).
NodePairPath node_pair_path(const HostTopology& a, const HostTopology& b,
                            const NcclEnvironment& env, bool sockets_only);

// The path the traffic of a set of ranks is bounded by: the slowest (lowest
// known expected figure) among the pairs they use. `rank_hosts[r]` indexes
// `hosts`; `rank_gpus[r]` is the GPU index a rank uses (-1 for host memory).
struct RankSetPath {
  double expected_GBps = 0;  // 0 unknown
  std::string description;   // "socket over eth0 between node0 and node1: 0.125 GB/s"
};
RankSetPath slowest_rank_path(const std::vector<HostTopology>& hosts,
                              const std::vector<size_t>& rank_hosts,
                              const std::vector<int>& rank_gpus, const NcclEnvironment& env,
                              bool sockets_only);

}  // namespace ccscope::topo
