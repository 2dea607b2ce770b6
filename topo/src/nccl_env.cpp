// What NCCL would pick, re-derived from NCCL's own rules. They were read in
// NCCL 2.30.7 (github.com/NVIDIA/nccl, June 2026); the files are named where
// each rule is used. This is our own code written to those rules, not NCCL's.
#include "ccscope/topo/nccl_env.h"

#include <unistd.h>  // environ

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "ccscope/common/text.h"

namespace ccscope::topo {
namespace {

const std::string* find_variable(const NcclEnvironment& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// An integer parameter as NCCL_PARAM reads it (src/misc/param.cc,
// ncclLoadParam): unset or empty -> the default; else strtoll base 0, so "1",
// "0x1" and "1abc" are 1 and "yes" is 0; out of range -> the default.
long long integer_parameter(const NcclEnvironment& env, const std::string& name,
                            long long default_value) {
  const std::string* text = find_variable(env, name);
  if (text == nullptr || text->empty()) return default_value;
  errno = 0;
  const long long value = std::strtoll(text->c_str(), nullptr, 0);
  return errno != 0 ? default_value : value;
}

// An RDMA port is named "DEVICE:PORT"; network interface names cannot hold ':'.
bool is_rdma_port(const Nic& nic) { return nic.name.find(':') != std::string::npos; }

struct RdmaPortName {
  std::string device;
  int port = -1;
};
RdmaPortName split_rdma_port(const std::string& name) {
  const size_t colon = name.rfind(':');
  RdmaPortName split{name.substr(0, colon), -1};
  const std::string port = name.substr(colon + 1);
  if (!port.empty() && std::all_of(port.begin(), port.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      }))
    split.port = std::atoi(port.c_str());
  return split;
}

// NCCL takes interfaces whose IFF_RUNNING flag is set (src/os/linux.cc,
// ncclOsFindInterfaces), i.e. operstate "up" or "unknown" (lo, tun). A NIC no
// source gave a state for is kept: nothing says it is down. NCCL also needs an
// IPv4/IPv6 address on it, which the topology does not record.
bool is_running(const Nic& nic) {
  const std::string state = ascii_lower(nic.state);
  return state.empty() || state == "up" || state == "unknown";
}

// The active states of an RDMA port: sysfs' "active", hwloc's PortNState "4".
bool is_active_port(const Nic& nic) {
  const std::string state = ascii_lower(nic.state);
  return state == "active" || state == "4" || state == "4: active";
}

// The running interfaces that pass `filter_text`, in the NICs' order, at most
// NCCL's MAX_IFS (16, src/include/socket.h).
std::vector<std::string> running_interfaces_matching(const std::vector<Nic>& nics,
                                                     const std::string& filter_text) {
  constexpr size_t kNcclMaxInterfaces = 16;
  const InterfaceFilter filter = parse_interface_filter(filter_text);
  std::vector<std::string> names;
  for (const Nic& nic : nics) {
    if (names.size() == kNcclMaxInterfaces) break;
    if (is_rdma_port(nic) || !is_running(nic) || !filter.matches(nic.name)) continue;
    if (std::find(names.begin(), names.end(), nic.name) == names.end()) names.push_back(nic.name);
  }
  return names;
}

// NCCL's path types in order (src/include/graph.h PATH_*, src/graph/topo.cc
// topoPathTypeStr, 2.30.7): a path is "no farther than" a level when its index
// is not above the level's.
constexpr std::string_view kPathTypeNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX",
                                               "PXB", "P2C", "PXN", "PHB", "SYS"};
constexpr int kPathLoc = 0;
constexpr int kPathNvl = 1;
constexpr int kPathPxb = 5;
constexpr int kPathPhb = 8;
constexpr int kPathSys = 9;

int path_type_named(std::string_view name) {
  for (size_t i = 0; i < std::size(kPathTypeNames); ++i)
    if (kPathTypeNames[i] == name) return static_cast<int>(i);
  return -1;
}

// NCCL's path type of an nvidia-smi topo -m token; -1 when it is none.
// nvidia-smi's NODE (host bridges of one NUMA node) and PHB (one host bridge)
// are both PATH_PHB in NCCL, whose graph has no node between PCI and the CPU.
int path_type_of_token(const std::string& token) {
  if (token == "X") return kPathLoc;
  if (token.size() > 2 && token.compare(0, 2, "NV") == 0 &&
      std::all_of(token.begin() + 2, token.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }))
    return kPathNvl;
  if (token == "NODE") return kPathPhb;
  return path_type_named(token);  // PIX, PXB, PHB, SYS, and NCCL's own names
}

// The farthest path type P2P may take (src/graph/paths.cc, ncclGetLevel and
// ncclTopoCheckP2p, 2.30.7):
//  - NCCL_P2P_DISABLE whose strtol value is exactly 1 -> LOC (no P2P between
//    two GPUs, NVLink included); NCCL_P2P_LEVEL is then not read.
//  - NCCL_P2P_LEVEL: a path type name, compared case-sensitively; else, when
//    it starts with a digit, the old numbering 0-5 = LOC, PIX, PXB, PHB, SYS,
//    SYS (above 5 counts as 5); anything else is ignored.
//  - default PATH_PXB: "don't use P2P across CPU host bridges". NCCL raises it
//    to PATH_SYS on AMD x86 CPUs when the node has at most 2 GPUs, which the
//    path token alone cannot tell, and may still veto a pair whose NVML P2P
//    status is not OK.
int p2p_level(const NcclEnvironment& env) {
  if (const std::string* disable = find_variable(env, "NCCL_P2P_DISABLE"))
    if (std::strtol(disable->c_str(), nullptr, 0) == 1) return kPathLoc;
  if (const std::string* level = find_variable(env, "NCCL_P2P_LEVEL")) {
    const int named = path_type_named(*level);
    if (named >= 0) return named;
    if (!level->empty() && std::isdigit(static_cast<unsigned char>(level->front()))) {
      constexpr int kOldLevels[] = {kPathLoc, 4 /*PIX*/, kPathPxb, kPathPhb, kPathSys, kPathSys};
      const long old_level = std::min(std::strtol(level->c_str(), nullptr, 0), 5L);
      return kOldLevels[old_level];
    }
  }
  return kPathPxb;
}

}  // namespace

NcclEnvironment nccl_environment_from_process() {
  NcclEnvironment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const size_t equals = text.find('=');
    if (equals == std::string_view::npos || text.compare(0, 5, "NCCL_") != 0) continue;
    env.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return env;
}

// src/misc/utils.cc (parseStringList) and the callers in src/os/linux.cc and
// src/transport/net_ib/init.cc: '^' is looked for first, then '='; entries are
// split on ',' (empty ones skipped), then on ':' into name, port (and rail,
// plane, which we do not model); an entry with an empty name is dropped; a
// port is atoi'd, an empty one is "any".
InterfaceFilter parse_interface_filter(const std::string& text) {
  InterfaceFilter filter;
  size_t at = 0;
  if (at < text.size() && text[at] == '^') {
    filter.exclude = true;
    ++at;
  }
  if (at < text.size() && text[at] == '=') {
    filter.exact = true;
    ++at;
  }
  for (const std::string& entry : split(std::string_view(text).substr(at), ',')) {
    const std::vector<std::string> fields = split(entry, ':');  // name, port, rail, plane
    InterfaceFilter::Entry parsed;
    parsed.name = fields[0];
    if (parsed.name.empty()) continue;
    if (fields.size() > 1 && !fields[1].empty()) parsed.port = std::atoi(fields[1].c_str());
    filter.entries.push_back(std::move(parsed));
  }
  return filter;
}

// src/misc/utils.cc (matchIfList): a name matches an entry by prefix, or
// whole when '='; ports match when either side is "any". An empty list matches
// everything, so a lone "^" excludes everything, as in NCCL.
bool InterfaceFilter::matches(const std::string& name, int port) const {
  bool listed = entries.empty();
  for (const Entry& entry : entries) {
    const bool name_matches =
        exact ? name == entry.name : name.compare(0, entry.name.size(), entry.name) == 0;
    const bool port_matches = port == -1 || entry.port == -1 || port == entry.port;
    if (name_matches && port_matches) {
      listed = true;
      break;
    }
  }
  return listed != exclude;
}

// src/misc/socket.cc (ncclFindInterfaces): NCCL_SOCKET_IFNAME when it is longer
// than one character (find or fail: no fallback); otherwise the first of these
// lists that is not empty: "ib", (interfaces in NCCL_COMM_ID's subnet: not
// modelled, we know no addresses), "^docker,lo,virbr", "docker", "lo", "virbr".
// virbr joined the exclusions and got its own last try in NCCL 2.28.3; before
// that the second list was "^docker,lo".
std::vector<std::string> nccl_socket_interfaces(const std::vector<Nic>& nics,
                                                const NcclEnvironment& env) {
  const std::string* user_list = find_variable(env, "NCCL_SOCKET_IFNAME");
  if (user_list != nullptr && user_list->size() > 1)
    return running_interfaces_matching(nics, *user_list);
  for (const char* list : {"ib", "^docker,lo,virbr", "docker", "lo", "virbr"}) {
    std::vector<std::string> found = running_interfaces_matching(nics, list);
    if (!found.empty()) return found;
  }
  return {};
}

const char* transport_name(NetworkChoice::Transport transport) {
  switch (transport) {
    case NetworkChoice::Transport::kInfiniband:
      return "IB";
    case NetworkChoice::Transport::kRoce:
      return "RoCE";
    case NetworkChoice::Transport::kSocket:
      return "socket";
    case NetworkChoice::Transport::kNone:
      break;
  }
  return "none";
}

// NCCL tries its net plugins in order, external ones first, then IB, then
// Socket, and keeps the first that initializes with at least one device
// (src/plugin/net.cc, ncclNetInit/ncclNetPluginInit). NCCL_NET restricts that
// to the plugin of that name, compared case-insensitively ("IB", "Socket"),
// with no fallback (src/init.cc). IB initializes unless NCCL_IB_DISABLE is
// non-zero, and needs one socket interface for its out-of-band connection; its
// devices are the ACTIVE ports of link layer InfiniBand or Ethernet (RoCE) that
// pass NCCL_IB_HCA (src/transport/net_ib/init.cc, ncclIbInitDevices).
NetworkChoice choose_network(const std::vector<Nic>& nics, const NcclEnvironment& env) {
  NetworkChoice choice;
  const std::string* net_name = find_variable(env, "NCCL_NET");
  bool ib_allowed = true;
  bool socket_allowed = true;
  if (net_name != nullptr) {
    if (equals_ignoring_case(*net_name, "IB")) {
      socket_allowed = false;
    } else if (equals_ignoring_case(*net_name, "Socket")) {
      ib_allowed = false;
    } else {
      choice.reason = "NCCL_NET=" + *net_name +
                      " names neither IB nor Socket (an external net plugin, not modelled)";
      return choice;
    }
  }
  const std::vector<std::string> sockets = nccl_socket_interfaces(nics, env);

  std::string why_not_ib;
  if (!ib_allowed) {
    why_not_ib = "NCCL_NET=" + *net_name;
  } else if (integer_parameter(env, "NCCL_IB_DISABLE", 0) != 0) {
    why_not_ib = "NCCL_IB_DISABLE=" + *find_variable(env, "NCCL_IB_DISABLE");
  } else {
    const std::string* hca_list = find_variable(env, "NCCL_IB_HCA");
    const InterfaceFilter hca_filter = parse_interface_filter(hca_list ? *hca_list : "");
    bool any_active = false;
    std::vector<const Nic*> ports;
    for (const Nic& nic : nics) {
      if (!is_rdma_port(nic) || !is_active_port(nic)) continue;
      if (nic.kind != NicKind::kInfiniband && nic.kind != NicKind::kRoce) continue;
      any_active = true;
      const RdmaPortName split = split_rdma_port(nic.name);
      if (hca_filter.matches(split.device, split.port)) ports.push_back(&nic);
    }
    if (!any_active) {
      why_not_ib = "no active RDMA port";
    } else if (ports.empty()) {
      why_not_ib = "NCCL_IB_HCA=" + *hca_list + " leaves no active RDMA port";
    } else if (sockets.empty()) {
      why_not_ib = "no network interface for IB's out-of-band connection";
    } else {
      const NicKind link_layer = ports.front()->kind;
      choice.transport = link_layer == NicKind::kInfiniband ? NetworkChoice::Transport::kInfiniband
                                                            : NetworkChoice::Transport::kRoce;
      for (const Nic* port : ports) choice.devices.push_back(port->name);
      choice.reason = std::string("active ") + transport_name(choice.transport) + " port" +
                      (ports.size() > 1 ? "s" : "");
      if (hca_list != nullptr) choice.reason += " passing NCCL_IB_HCA=" + *hca_list;
      if (std::any_of(ports.begin(), ports.end(),
                      [&](const Nic* port) { return port->kind != link_layer; }))
        choice.reason += " (mixed link layers: NCCL joins only ports of one)";
      return choice;
    }
  }

  if (!socket_allowed) {
    choice.reason = why_not_ib + "; NCCL_NET=" + *net_name + " allows no fallback to sockets";
    return choice;
  }
  if (sockets.empty()) {
    const std::string* user_list = find_variable(env, "NCCL_SOCKET_IFNAME");
    choice.reason =
        why_not_ib + "; no running network interface" +
        (user_list != nullptr && user_list->size() > 1 ? " matches NCCL_SOCKET_IFNAME=" + *user_list
                                                       : std::string());
    return choice;
  }
  choice.transport = NetworkChoice::Transport::kSocket;
  choice.devices = sockets;
  choice.reason = why_not_ib;
  return choice;
}

bool nccl_uses_p2p(const std::string& path, const NcclEnvironment& env) {
  const int path_type = path_type_of_token(path);
  return path_type >= 0 && path_type <= p2p_level(env);
}

}  // namespace ccscope::topo
