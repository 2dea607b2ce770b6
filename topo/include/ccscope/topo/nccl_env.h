#pragma once
// What NCCL would pick, given a node's NICs and NCCL's environment variables.
// Pure functions: the environment is passed in (tests build it), never read here.
#include <map>
#include <string>
#include <vector>

#include "ccscope/topo/topology.h"

namespace ccscope::topo {

// The NCCL_* variables that change which path NCCL takes.
using NcclEnvironment = std::map<std::string, std::string>;
// The NCCL_* variables of this process's environment.
NcclEnvironment nccl_environment_from_process();

// NCCL's interface-list syntax (NCCL_SOCKET_IFNAME, NCCL_IB_HCA): comma-separated
// prefixes; a leading '^' excludes the listed ones; a leading '=' makes them
// exact names; "NAME:PORT" restricts an HCA to one port.
struct InterfaceFilter {
  bool exclude = false;
  bool exact = false;
  struct Entry {
    std::string name;
    int port = -1;  // -1 any
  };
  std::vector<Entry> entries;
  bool empty() const { return entries.empty(); }
  // Whether `name` (and `port`, -1 for a network interface) passes the filter.
  bool matches(const std::string& name, int port = -1) const;
};
InterfaceFilter parse_interface_filter(const std::string& text);

// The network interfaces NCCL's socket transport would use, in NCCL's order:
// NCCL_SOCKET_IFNAME when set; otherwise "ib" interfaces first, then any
// interface except docker*, lo and virtual bridges, then docker*, then lo.
// Only interfaces that are up.
std::vector<std::string> nccl_socket_interfaces(const std::vector<Nic>& nics,
                                                const NcclEnvironment& env);

// The transport NCCL would use between nodes and why.
struct NetworkChoice {
  enum class Transport { kInfiniband, kRoce, kSocket, kNone };
  Transport transport = Transport::kNone;
  std::vector<std::string> devices;  // "mlx5_0:1", or interface names for sockets
  std::string reason;                // "NCCL_IB_DISABLE=1", "no active RDMA port", ...
};
const char* transport_name(NetworkChoice::Transport transport);  // "IB", "RoCE", "socket", "none"
// IB/RoCE when an active RDMA port passes NCCL_IB_HCA and neither NCCL_IB_DISABLE=1
// nor NCCL_NET=Socket says otherwise; sockets over nccl_socket_interfaces otherwise.
NetworkChoice choose_network(const std::vector<Nic>& nics, const NcclEnvironment& env);

// Whether NCCL would use its P2P transport between two GPUs of a node whose
// path (nvidia-smi topo -m token: "NV4", "PIX", "PXB", "PHB", "NODE", "SYS")
// is `path`: NCCL_P2P_DISABLE=1 forbids it; NCCL_P2P_LEVEL (LOC, NVL, PIX,
// PXB, PHB, SYS, or 0-5) sets the farthest path it may take; NCCL's default
// otherwise. False means the pair goes through shared memory (SHM).
bool nccl_uses_p2p(const std::string& path, const NcclEnvironment& env);

}  // namespace ccscope::topo
