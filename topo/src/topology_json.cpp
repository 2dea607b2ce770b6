#include <nlohmann/json.hpp>

#include "ccscope/topo/report.h"

namespace ccscope::topo {
namespace {

using nlohmann::json;

json link_json(const PcieLink& link) {
  json j = json::object();
  if (link.generation > 0) j["generation"] = link.generation;
  if (link.width > 0) j["width"] = link.width;
  return j;
}

json placement_json(const PciPlacement& pci) {
  json path = json::array();
  for (const PciHop& hop : pci.path)
    path.push_back((hop.kind == PciHop::Kind::kHostBridge ? "host:" : "bridge:") + hop.id);
  return path;
}

json node_json(const HostTopology& node, const NcclEnvironment& env) {
  json j;
  j["hostname"] = node.hostname;
  j["numa_nodes"] = node.numa_nodes;
  j["packages"] = node.packages;
  j["cores"] = node.cores;
  j["pus"] = node.pus;
  j["cpu_model"] = node.cpu_model;
  j["driver_version"] = node.driver_version;
  j["cuda_version"] = node.cuda_version;
  j["nccl_version"] = node.nccl_version;
  j["gpus"] = json::array();
  for (const Gpu& gpu : node.gpus) {
    json g;
    g["index"] = gpu.index;
    g["name"] = gpu.name;
    g["uuid"] = gpu.uuid;
    g["pci_bus_id"] = gpu.pci.bus_id;
    g["numa_node"] = gpu.pci.numa_node;
    g["package"] = gpu.pci.package;
    g["pci_path"] = placement_json(gpu.pci);
    const PcieLink& current = gpu.pcie_current.known() ? gpu.pcie_current : gpu.pci.link;
    g["pcie_generation"] = current.generation;
    g["pcie_width"] = current.width;
    g["pcie_max"] = link_json(gpu.pcie_max);
    g["compute_capability"] = gpu.cuda_compute_capability;
    g["nvlinks"] = json::array();
    for (const NvLink& link : gpu.nvlinks)
      g["nvlinks"].push_back({{"link", link.link},
                              {"active", link.active},
                              {"version", link.version},
                              {"remote_pci_bus_id", link.remote_bus_id},
                              {"remote_is_switch", link.remote_is_switch},
                              {"bandwidth_GBps", link.bandwidth_GBps}});
    j["gpus"].push_back(g);
  }
  j["nics"] = json::array();
  for (const Nic& nic : node.nics)
    j["nics"].push_back({{"name", nic.name},
                         {"kind", nic_kind_name(nic.kind)},
                         {"rate_Gbps", nic.rate_Gbps},
                         {"shaped_Gbps", nic.shaped_Gbps},
                         {"effective_Gbps", nic.effective_Gbps()},
                         {"state", nic.state},
                         {"mtu", nic.mtu},
                         {"driver", nic.driver},
                         {"netdev", nic.netdev},
                         {"rdma_device", nic.rdma_device},
                         {"has_gid", nic.has_gid},
                         {"virtual", nic.is_virtual},
                         {"pci_bus_id", nic.pci.bus_id},
                         {"numa_node", nic.pci.numa_node},
                         {"pci_path", placement_json(nic.pci)}});
  j["gpu_pairs"] = json::array();
  for (const GpuPairPath& pair : gpu_pair_paths(node, env))
    j["gpu_pairs"].push_back({{"gpu_a", pair.gpu_a},
                              {"gpu_b", pair.gpu_b},
                              {"path", pair.token()},
                              {"p2p", pair.p2p},
                              {"expected_GBps", pair.expected_GBps},
                              {"basis", pair.basis}});
  j["gpu_ancestors"] = json::array();
  for (const HostTopology::GpuAncestor& a : node.gpu_ancestors)
    j["gpu_ancestors"].push_back({{"gpu_a", a.gpu_a}, {"gpu_b", a.gpu_b}, {"level", a.level}});
  j["sources"] = json::object();
  for (const SourceStatus& source : node.sources)
    j["sources"][source.name] = {{"read", source.read}, {"detail", source.detail}};
  j["notes"] = node.notes;
  return j;
}

// Readers of the document: a missing key reads as the type's default; a key
// of the wrong type is an error naming it.
template <typename T>
T get(const json& object, const char* key, const std::string& where, T fallback = T{}) {
  if (!object.is_object()) throw TopologyError(where + ": not an object");
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw TopologyError(where + "." + key + ": " + it->type_name() + " where " +
                        (std::is_same_v<T, std::string> ? "a string"
                         : std::is_same_v<T, bool>      ? "true/false"
                                                        : "a number") +
                        " belongs");
  }
}

const json& array_at(const json& object, const char* key, const std::string& where) {
  static const json empty = json::array();
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return empty;
  if (!it->is_array()) throw TopologyError(where + "." + key + ": not an array");
  return *it;
}

PciPlacement placement_from(const json& j, const std::string& where) {
  PciPlacement p;
  p.bus_id = normalize_bus_id(get<std::string>(j, "pci_bus_id", where));
  p.numa_node = get<int>(j, "numa_node", where, -1);
  p.package = get<int>(j, "package", where, -1);
  for (const json& hop : array_at(j, "pci_path", where)) {
    if (!hop.is_string()) throw TopologyError(where + ".pci_path: an item that is not a string");
    const std::string text = hop.get<std::string>();
    if (text.rfind("host:", 0) == 0) p.path.push_back({PciHop::Kind::kHostBridge, text.substr(5)});
    else if (text.rfind("bridge:", 0) == 0) p.path.push_back({PciHop::Kind::kBridge, text.substr(7)});
    else throw TopologyError(where + ".pci_path: '" + text + "' is not bridge:ID or host:ID");
  }
  return p;
}

NicKind nic_kind_from(const std::string& text) {
  if (text == "ethernet") return NicKind::kEthernet;
  if (text == "infiniband") return NicKind::kInfiniband;
  if (text == "roce") return NicKind::kRoce;
  return NicKind::kOther;
}

HostTopology node_from(const json& j, const std::string& where) {
  HostTopology node;
  node.hostname = get<std::string>(j, "hostname", where);
  node.numa_nodes = get<int>(j, "numa_nodes", where);
  node.packages = get<int>(j, "packages", where);
  node.cores = get<int>(j, "cores", where);
  node.pus = get<int>(j, "pus", where);
  node.cpu_model = get<std::string>(j, "cpu_model", where);
  node.driver_version = get<std::string>(j, "driver_version", where);
  node.cuda_version = get<std::string>(j, "cuda_version", where);
  node.nccl_version = get<std::string>(j, "nccl_version", where);
  const json& gpus = array_at(j, "gpus", where);
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string at = where + ".gpus[" + std::to_string(i) + "]";
    const json& g = gpus[i];
    Gpu gpu;
    gpu.index = get<int>(g, "index", at, static_cast<int>(i));
    gpu.name = get<std::string>(g, "name", at);
    gpu.uuid = get<std::string>(g, "uuid", at);
    gpu.pci = placement_from(g, at);
    gpu.pcie_current = {get<int>(g, "pcie_generation", at), get<int>(g, "pcie_width", at)};
    const auto max = g.find("pcie_max");
    if (max != g.end() && max->is_object())
      gpu.pcie_max = {get<int>(*max, "generation", at + ".pcie_max"),
                      get<int>(*max, "width", at + ".pcie_max")};
    gpu.cuda_compute_capability = get<int>(g, "compute_capability", at);
    const json& links = array_at(g, "nvlinks", at);
    for (size_t l = 0; l < links.size(); ++l) {
      const std::string link_at = at + ".nvlinks[" + std::to_string(l) + "]";
      NvLink link;
      link.link = get<int>(links[l], "link", link_at, -1);
      link.active = get<bool>(links[l], "active", link_at, true);
      link.version = get<int>(links[l], "version", link_at);
      link.remote_bus_id = normalize_bus_id(get<std::string>(links[l], "remote_pci_bus_id", link_at));
      link.remote_is_switch = get<bool>(links[l], "remote_is_switch", link_at);
      link.bandwidth_GBps = get<double>(links[l], "bandwidth_GBps", link_at);
      gpu.nvlinks.push_back(link);
    }
    node.gpus.push_back(std::move(gpu));
  }
  const json& nics = array_at(j, "nics", where);
  for (size_t i = 0; i < nics.size(); ++i) {
    const std::string at = where + ".nics[" + std::to_string(i) + "]";
    const json& n = nics[i];
    Nic nic;
    nic.name = get<std::string>(n, "name", at);
    nic.kind = nic_kind_from(get<std::string>(n, "kind", at));
    nic.rate_Gbps = get<double>(n, "rate_Gbps", at);
    nic.shaped_Gbps = get<double>(n, "shaped_Gbps", at);
    nic.state = get<std::string>(n, "state", at);
    nic.mtu = get<int>(n, "mtu", at);
    nic.driver = get<std::string>(n, "driver", at);
    nic.netdev = get<std::string>(n, "netdev", at);
    nic.rdma_device = get<std::string>(n, "rdma_device", at);
    nic.has_gid = get<bool>(n, "has_gid", at);
    nic.is_virtual = get<bool>(n, "virtual", at);
    nic.pci = placement_from(n, at);
    node.nics.push_back(std::move(nic));
  }
  const json& ancestors = array_at(j, "gpu_ancestors", where);
  for (size_t i = 0; i < ancestors.size(); ++i) {
    const std::string at = where + ".gpu_ancestors[" + std::to_string(i) + "]";
    node.gpu_ancestors.push_back({get<int>(ancestors[i], "gpu_a", at, -1),
                                  get<int>(ancestors[i], "gpu_b", at, -1),
                                  get<std::string>(ancestors[i], "level", at)});
  }
  const auto sources = j.find("sources");
  if (sources != j.end() && sources->is_object())
    for (const auto& [name, status] : sources->items())
      node.sources.push_back({name, get<bool>(status, "read", where + ".sources." + name),
                              get<std::string>(status, "detail", where + ".sources." + name)});
  return node;
}

}  // namespace

std::string topology_json(const TopologyReport& report) {
  json doc;
  doc["schema"] = "ccscope.topo/1";
  doc["nodes"] = json::array();
  for (const HostTopology& node : report.nodes) doc["nodes"].push_back(node_json(node, report.env));
  doc["node_pairs"] = json::array();
  for (const NodePairPath& pair : report.node_pairs)
    doc["node_pairs"].push_back({{"host_a", pair.host_a},
                                 {"host_b", pair.host_b},
                                 {"transport", transport_name(pair.transport)},
                                 {"device_a", pair.device_a},
                                 {"device_b", pair.device_b},
                                 {"expected_GBps", pair.expected_GBps},
                                 {"basis", pair.basis}});
  doc["measured"] = json::array();
  for (const MeasuredPair& m : report.measured)
    doc["measured"].push_back({{"endpoint_a", m.endpoint_a},
                               {"endpoint_b", m.endpoint_b},
                               {"path", m.path},
                               {"round", m.round},
                               {"expected_GBps", m.expected_GBps},
                               {"measured_GBps", m.measured_GBps},
                               {"below_threshold", m.below_threshold}});
  doc["threshold"] = report.threshold;
  doc["environment"] = report.env;
  doc["findings"] = json::array();
  for (const Finding& f : report.findings)
    doc["findings"].push_back({{"severity", severity_name(f.severity)},
                               {"host", f.host},
                               {"check", f.check},
                               {"message", f.message},
                               {"remedy", f.remedy}});
  return doc.dump(2) + "\n";
}

std::vector<HostTopology> read_topology_json(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw TopologyError(std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object() || !doc.contains("nodes"))
    throw TopologyError("not a ccscope topology JSON document (no \"nodes\" array)");
  const std::string schema = get<std::string>(doc, "schema", "document");
  if (!schema.empty() && schema.rfind("ccscope.topo/", 0) != 0)
    throw TopologyError("schema '" + schema + "' is not ccscope.topo");
  if (schema.size() > 13 && schema.substr(13) != "1")
    throw TopologyError("schema '" + schema + "' is newer than this ccscope reads (ccscope.topo/1)");
  std::vector<HostTopology> nodes;
  const json& items = array_at(doc, "nodes", "document");
  for (size_t i = 0; i < items.size(); ++i)
    nodes.push_back(node_from(items[i], "nodes[" + std::to_string(i) + "]"));
  return nodes;
}

}  // namespace ccscope::topo
