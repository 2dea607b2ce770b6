#include "ccscope/topo/paths.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "ccscope/topo/nominal_rates.h"
#include "text.h"

namespace ccscope::topo {
namespace {

std::string format_GBps(double value) {
  char text[32];
  std::snprintf(text, sizeof text, value >= 100 ? "%.0f" : value >= 10 ? "%.1f" : "%.3g", value);
  return text;
}

const PciHop* host_bridge_of(const PciPlacement& p) {
  for (const PciHop& hop : p.path)
    if (hop.kind == PciHop::Kind::kHostBridge) return &hop;
  return nullptr;
}

// Index of the first bridge of `p` that is also on `other`'s path (-1 none),
// and its index on `other` in `other_index`.
int common_bridge(const PciPlacement& p, const PciPlacement& other, int& other_index) {
  for (size_t i = 0; i < p.path.size(); ++i) {
    if (p.path[i].kind != PciHop::Kind::kBridge) continue;
    for (size_t j = 0; j < other.path.size(); ++j)
      if (other.path[j].kind == PciHop::Kind::kBridge && other.path[j].id == p.path[i].id) {
        other_index = static_cast<int>(j);
        return static_cast<int>(i);
      }
  }
  return -1;
}

// The figure a GPU's PCIe link gives: the current link (what it trained at),
// else what the PCI placement read.
PcieLink gpu_link(const Gpu& gpu) {
  if (gpu.pcie_current.known()) return gpu.pcie_current;
  return gpu.pci.link;
}

struct NvlinkCount {
  int links = 0;
  double GBps = 0;  // the sum of the links' stated bandwidths, 0 when none stated
  int version = 0;
};

NvlinkCount active_links(const Gpu& gpu, bool to_switches, const std::string& peer) {
  NvlinkCount count;
  for (const NvLink& link : gpu.nvlinks) {
    if (!link.active) continue;
    if (to_switches ? !link.remote_is_switch : link.remote_bus_id != peer) continue;
    ++count.links;
    count.GBps += link.bandwidth_GBps;
    count.version = std::max(count.version, link.version);
  }
  return count;
}

// A link bandwidth stated per link (hwloc's matrix gives per peer: one
// switch/peer entry may bundle several links); how many links it is.
// The quotient is bounded before the conversion: a stated bandwidth of 1e300
// (a damaged file) must not make the int conversion undefined.
int links_in(const NvlinkCount& count, int version) {
  const double per_link = nvlink_link_GBps(version > 0 ? version : 2);
  if (count.GBps > 0 && per_link > 0) {
    const double links = std::min(count.GBps / per_link + 0.5, 1e9);
    return std::max(count.links, static_cast<int>(links));
  }
  return count.links;
}

// NVML's common-ancestor level of GPU index pairs, (lower, higher) -> level; the
// last entry of a pair wins, as in the scan of gpu_pair_path. The loops over
// every pair look levels up here rather than scanning the list for each pair.
using AncestorIndex = std::map<std::pair<int, int>, const std::string*>;

AncestorIndex ancestor_index(const HostTopology& host) {
  AncestorIndex index;
  for (const HostTopology::GpuAncestor& ancestor : host.gpu_ancestors)
    index[{std::min(ancestor.gpu_a, ancestor.gpu_b), std::max(ancestor.gpu_a, ancestor.gpu_b)}] =
        &ancestor.level;
  return index;
}

GpuPairPath pair_path(const HostTopology& host, const Gpu& a, const Gpu& b,
                      const NcclEnvironment& env, const AncestorIndex* ancestors);

}  // namespace

std::string path_token(PathLevel level, int nvlinks) {
  switch (level) {
    case PathLevel::kSelf:
      return "X";
    case PathLevel::kNvLink:
      return "NV" + std::to_string(nvlinks);
    case PathLevel::kPix:
      return "PIX";
    case PathLevel::kPxb:
      return "PXB";
    case PathLevel::kPhb:
      return "PHB";
    case PathLevel::kNode:
      return "NODE";
    case PathLevel::kSys:
      return "SYS";
    case PathLevel::kUnknown:
      break;
  }
  return "?";
}

PathLevel parse_path_level(const std::string& token, int* nvlinks) {
  if (nvlinks) *nvlinks = 0;
  if (token.size() > 2 && token.compare(0, 2, "NV") == 0 &&
      std::all_of(token.begin() + 2, token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      token.size() < 6) {
    if (nvlinks) *nvlinks = std::stoi(token.substr(2));
    return PathLevel::kNvLink;
  }
  static const std::pair<const char*, PathLevel> kTokens[] = {
      {"X", PathLevel::kSelf},  {"PIX", PathLevel::kPix},   {"PXB", PathLevel::kPxb},
      {"PHB", PathLevel::kPhb}, {"NODE", PathLevel::kNode}, {"SYS", PathLevel::kSys}};
  for (const auto& [text, level] : kTokens)
    if (token == text) return level;
  return PathLevel::kUnknown;
}

std::string path_legend() {
  return "  X    = Self\n"
         "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
         "(e.g., QPI/UPI)\n"
         "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
         "Bridges within a NUMA node\n"
         "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
         "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
         "Bridge)\n"
         "  PIX  = Connection traversing at most a single PCIe bridge\n"
         "  NV#  = Connection traversing a bonded set of # NVLinks\n"
         "  ?    = Not known (no source placed both devices)\n";
}

PathLevel pci_path_level(const PciPlacement& a, const PciPlacement& b) {
  if (a.bus_id.empty() || b.bus_id.empty()) return PathLevel::kUnknown;
  if (a.bus_id == b.bus_id) return PathLevel::kSelf;
  int b_index = -1;
  const int a_index = common_bridge(a, b, b_index);
  if (a_index >= 0) {
    // Index 0: the bridge right above the device; 1: a switch's upstream port
    // above the downstream port the device hangs from. Beyond: more switches.
    return a_index <= 1 && b_index <= 1 ? PathLevel::kPix : PathLevel::kPxb;
  }
  const PciHop* host_a = host_bridge_of(a);
  const PciHop* host_b = host_bridge_of(b);
  if (host_a && host_b && host_a->id == host_b->id) return PathLevel::kPhb;
  if (a.numa_node >= 0 && b.numa_node >= 0)
    return a.numa_node == b.numa_node ? PathLevel::kNode : PathLevel::kSys;
  if (a.package >= 0 && b.package >= 0)
    return a.package == b.package ? PathLevel::kNode : PathLevel::kSys;
  return PathLevel::kUnknown;
}

GpuPairPath gpu_pair_path(const HostTopology& host, const Gpu& a, const Gpu& b,
                          const NcclEnvironment& env) {
  return pair_path(host, a, b, env, nullptr);
}

namespace {

GpuPairPath pair_path(const HostTopology& host, const Gpu& a, const Gpu& b,
                      const NcclEnvironment& env, const AncestorIndex* ancestors) {
  GpuPairPath path;
  path.gpu_a = a.index;
  path.gpu_b = b.index;
  if (&a == &b || (!a.pci.bus_id.empty() && a.pci.bus_id == b.pci.bus_id)) {
    path.level = PathLevel::kSelf;
    return path;
  }
  // NVLink: direct links to the peer, else links of both to NVSwitches (the
  // narrower end bounds the pair).
  NvlinkCount direct = active_links(a, false, b.pci.bus_id);
  // Both ends state their links' speeds (nvlink -s, hwloc): the slower end bounds the pair.
  const NvlinkCount direct_b = active_links(b, false, a.pci.bus_id);
  if (direct.links > 0 && direct.GBps > 0 && direct_b.links > 0 && direct_b.GBps > 0)
    direct.GBps = std::min(direct.GBps, direct_b.GBps);
  const int version_a = direct.version ? direct.version : nvlink_version_of_model(a.name);
  NvlinkCount used = direct;
  if (direct.links == 0) {
    const NvlinkCount via_a = active_links(a, true, "");
    const NvlinkCount via_b = active_links(b, true, "");
    if (via_a.links > 0 && via_b.links > 0) {
      used = links_in(via_a, version_a) <= links_in(via_b, version_a) ? via_a : via_b;
      path.through_nvswitch = true;
    }
  }
  if (used.links > 0) {
    const int version = used.version ? used.version : version_a;
    path.level = PathLevel::kNvLink;
    path.nvlinks = links_in(used, version);
    path.expected_GBps = used.GBps > 0 ? used.GBps : path.nvlinks * nvlink_link_GBps(version);
    path.basis = std::to_string(path.nvlinks) + " x NVLink" +
                 (version ? std::to_string(version) : std::string("?")) +
                 (path.through_nvswitch ? " via NVSwitch" : "");
  } else {
    path.level = pci_path_level(a.pci, b.pci);
    if (path.level == PathLevel::kUnknown && ancestors) {
      const auto found = ancestors->find({std::min(a.index, b.index), std::max(a.index, b.index)});
      if (found != ancestors->end()) path.level = parse_path_level(*found->second);
    } else if (path.level == PathLevel::kUnknown) {
      for (const HostTopology::GpuAncestor& ancestor : host.gpu_ancestors)
        if ((ancestor.gpu_a == a.index && ancestor.gpu_b == b.index) ||
            (ancestor.gpu_a == b.index && ancestor.gpu_b == a.index))
          path.level = parse_path_level(ancestor.level);
    }
    // Over PCIe the narrower of the two GPUs' links bounds the pair (also
    // through host memory when P2P is off).
    const PcieLink link_a = gpu_link(a), link_b = gpu_link(b);
    if (link_a.known() && link_b.known()) {
      const bool a_narrower =
          pcie_GBps(link_a.generation, link_a.width) <= pcie_GBps(link_b.generation, link_b.width);
      const PcieLink& narrow = a_narrower ? link_a : link_b;
      path.expected_GBps = pcie_GBps(narrow.generation, narrow.width);
      path.basis =
          "PCIe gen" + std::to_string(narrow.generation) + " x" + std::to_string(narrow.width);
    }
  }
  path.p2p = nccl_uses_p2p(path.token(), env);
  if (!path.p2p && !path.basis.empty()) path.basis += ", through host memory (no P2P)";
  return path;
}

}  // namespace

std::vector<GpuPairPath> gpu_pair_paths(const HostTopology& host, const NcclEnvironment& env) {
  const AncestorIndex ancestors = ancestor_index(host);
  std::vector<GpuPairPath> paths;
  for (size_t i = 0; i < host.gpus.size(); ++i)
    for (size_t j = i + 1; j < host.gpus.size(); ++j)
      paths.push_back(pair_path(host, host.gpus[i], host.gpus[j], env, &ancestors));
  return paths;
}

std::vector<const Nic*> matrix_nics(const HostTopology& host) {
  std::vector<const Nic*> nics;
  for (const Nic& nic : host.nics)
    if (!nic.is_virtual && !nic.pci.bus_id.empty()) nics.push_back(&nic);
  return nics;
}

std::string render_path_matrix(const HostTopology& host, const NcclEnvironment& env) {
  const std::vector<const Nic*> nics = matrix_nics(host);
  std::vector<std::string> labels;
  for (const Gpu& gpu : host.gpus) labels.push_back("GPU" + std::to_string(gpu.index));
  for (size_t i = 0; i < nics.size(); ++i) labels.push_back("NIC" + std::to_string(i));
  const size_t gpu_count = host.gpus.size();
  const AncestorIndex ancestors = ancestor_index(host);
  auto cell = [&](size_t row, size_t column) -> std::string {
    if (row == column) return "X";
    if (row < gpu_count && column < gpu_count)
      return pair_path(host, host.gpus[row], host.gpus[column], env, &ancestors).token();
    const PciPlacement& a = row < gpu_count ? host.gpus[row].pci : nics[row - gpu_count]->pci;
    const PciPlacement& b =
        column < gpu_count ? host.gpus[column].pci : nics[column - gpu_count]->pci;
    return path_token(pci_path_level(a, b));
  };
  std::string out = "      ";
  for (const std::string& label : labels) out += text::padded(label, 6);
  out += "\n";
  for (size_t row = 0; row < labels.size(); ++row) {
    std::string line = text::padded(labels[row], 6);
    for (size_t column = 0; column < labels.size(); ++column) {
      line += text::padded(cell(row, column), 6);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += "\nLegend:\n\n" + path_legend();
  if (!nics.empty()) {
    out += "\nNIC Legend:\n\n";
    for (size_t i = 0; i < nics.size(); ++i)
      out += "  NIC" + std::to_string(i) + ": " + nics[i]->name + "\n";
  }
  return out;
}

namespace {

// The device an end of a node pair would use, with its rate and a description.
struct NetworkEnd {
  NetworkChoice::Transport transport = NetworkChoice::Transport::kNone;
  const Nic* nic = nullptr;
};

NetworkEnd network_end(const HostTopology& host, const NcclEnvironment& env, bool sockets_only) {
  NetworkEnd end;
  NetworkChoice choice;
  if (sockets_only) {
    choice.transport = NetworkChoice::Transport::kSocket;
    choice.devices = nccl_socket_interfaces(host.nics, env);
  } else {
    choice = choose_network(host.nics, env);
  }
  end.transport = choice.transport;
  // NCCL spreads channels over the devices it found; the fastest bounds what
  // one rank pair can reach. (By name, the first NIC of a name as find_nic:
  // a node may list thousands, each a device.)
  std::map<std::string_view, const Nic*> by_name;
  for (const Nic& nic : host.nics) by_name.emplace(nic.name, &nic);
  for (const std::string& name : choice.devices) {
    const auto found = by_name.find(name);
    const Nic* nic = found == by_name.end() ? nullptr : found->second;
    if (nic && (!end.nic || nic->effective_Gbps() > end.nic->effective_Gbps())) end.nic = nic;
  }
  return end;
}

std::string describe_rate(const Nic& nic) {
  std::string description = text::general(nic.effective_Gbps()) + " Gbit/s";
  if (nic.shaped_Gbps > 0 && (nic.rate_Gbps <= 0 || nic.shaped_Gbps < nic.rate_Gbps))
    description +=
        " (tc shaper" +
        (nic.rate_Gbps > 0 ? "; line rate " + text::general(nic.rate_Gbps) + " Gbit/s" : "") + ")";
  return description;
}

}  // namespace

NodePairPath node_pair_path(const HostTopology& a, const HostTopology& b,
                            const NcclEnvironment& env, bool sockets_only) {
  NodePairPath path;
  path.host_a = a.hostname;
  path.host_b = b.hostname;
  NetworkEnd end_a = network_end(a, env, sockets_only);
  NetworkEnd end_b = network_end(b, env, sockets_only);
  // Both ends must speak the same transport; otherwise NCCL falls back to sockets.
  if (end_a.transport != end_b.transport) {
    end_a = network_end(a, env, true);
    end_b = network_end(b, env, true);
  }
  path.transport = end_a.transport;
  if (end_a.nic) path.device_a = end_a.nic->name;
  if (end_b.nic) path.device_b = end_b.nic->name;
  if (!end_a.nic || !end_b.nic) {
    path.basis = std::string(transport_name(path.transport)) + ": no usable device on " +
                 (!end_a.nic ? a.hostname : b.hostname);
    return path;
  }
  const Nic& slower =
      end_a.nic->effective_Gbps() <= end_b.nic->effective_Gbps() ? *end_a.nic : *end_b.nic;
  path.expected_GBps = port_GBps(slower.effective_Gbps());
  path.basis = std::string(transport_name(path.transport)) + " over " + path.device_a +
               (path.device_a == path.device_b ? "" : "/" + path.device_b) + ": " +
               (slower.effective_Gbps() > 0 ? describe_rate(slower) + " at " +
                                                  (&slower == end_a.nic ? a.hostname : b.hostname)
                                            : "rate unknown");
  return path;
}

RankSetPath slowest_rank_path(const std::vector<HostTopology>& hosts,
                              const std::vector<size_t>& rank_hosts,
                              const std::vector<int>& rank_gpus, const NcclEnvironment& env,
                              bool sockets_only) {
  RankSetPath slowest;
  double lowest = std::numeric_limits<double>::infinity();
  std::set<std::pair<size_t, size_t>> node_pairs;
  std::set<std::tuple<size_t, int, int>> gpu_pairs;
  for (size_t r = 0; r < rank_hosts.size(); ++r)
    for (size_t s = r + 1; s < rank_hosts.size(); ++s) {
      const size_t host_r = rank_hosts[r], host_s = rank_hosts[s];
      if (host_r >= hosts.size() || host_s >= hosts.size()) continue;
      if (host_r != host_s) {
        node_pairs.insert({std::min(host_r, host_s), std::max(host_r, host_s)});
      } else if (r < rank_gpus.size() && s < rank_gpus.size() && rank_gpus[r] >= 0 &&
                 rank_gpus[s] >= 0 && rank_gpus[r] != rank_gpus[s]) {
        gpu_pairs.insert(
            {host_r, std::min(rank_gpus[r], rank_gpus[s]), std::max(rank_gpus[r], rank_gpus[s])});
      }
    }
  for (const auto& [i, j] : node_pairs) {
    const NodePairPath path = node_pair_path(hosts[i], hosts[j], env, sockets_only);
    if (path.expected_GBps > 0 && path.expected_GBps < lowest) {
      lowest = path.expected_GBps;
      slowest.expected_GBps = path.expected_GBps;
      slowest.description = path.basis + " between " + path.host_a + " and " + path.host_b;
    }
  }
  for (const auto& [host_index, gpu_a, gpu_b] : gpu_pairs) {
    const HostTopology& host = hosts[host_index];
    const Gpu* a = nullptr;
    const Gpu* b = nullptr;
    for (const Gpu& gpu : host.gpus) {
      if (gpu.index == gpu_a) a = &gpu;
      if (gpu.index == gpu_b) b = &gpu;
    }
    if (!a || !b) continue;
    const GpuPairPath path = gpu_pair_path(host, *a, *b, env);
    if (path.expected_GBps > 0 && path.expected_GBps < lowest) {
      lowest = path.expected_GBps;
      slowest.expected_GBps = path.expected_GBps;
      slowest.description = path.token() + " (" + path.basis + ") between GPU" +
                            std::to_string(gpu_a) + " and GPU" + std::to_string(gpu_b) + " of " +
                            host.hostname;
    }
  }
  if (slowest.expected_GBps > 0)
    slowest.description += ": " + format_GBps(slowest.expected_GBps) + " GB/s";
  return slowest;
}

}  // namespace ccscope::topo
