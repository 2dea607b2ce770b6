#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "ccscope/common/json_text.h"
#include "ccscope/topo/report.h"
#include "xml.h"  // quoted_for_message

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
    // The link now: NVML's current figure, else what the PCI placement read; a
    // partial figure (a generation without a width) only when neither is whole,
    // so that what the reader gives back (pcie_current) writes out the same.
    const PcieLink& current =
        gpu.pcie_current.known() ||
                (!gpu.pci.link.known() && (gpu.pcie_current.generation || gpu.pcie_current.width))
            ? gpu.pcie_current
            : gpu.pci.link;
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
  // GPU-NIC affinity: how each GPU reaches each NIC of the matrix (computed,
  // not read back).
  j["gpu_nic_paths"] = json::array();
  for (const Gpu& gpu : node.gpus)
    for (const Nic* nic : matrix_nics(node))
      j["gpu_nic_paths"].push_back({{"gpu", gpu.index},
                                    {"nic", nic->name},
                                    {"path", path_token(pci_path_level(gpu.pci, nic->pci))}});
  j["gpu_ancestors"] = json::array();
  for (const HostTopology::GpuAncestor& a : node.gpu_ancestors)
    j["gpu_ancestors"].push_back({{"gpu_a", a.gpu_a}, {"gpu_b", a.gpu_b}, {"level", a.level}});
  j["sources"] = json::object();
  for (const SourceStatus& source : node.sources)
    j["sources"][source.name] = {{"read", source.read}, {"detail", source.detail}};
  j["notes"] = node.notes;
  return j;
}

// What the reader accepts beyond well-formed JSON. The paths and the text view
// run over every GPU pair of a node (gpu_pair_paths; the matrix over every
// GPU/NIC pair) and scan the NVLinks and PCI paths of both ends for each, so an
// unbounded document would take hours to show: a node may hold at most 1024
// GPUs, 4096 NICs and one common-ancestor entry per GPU pair, a PCI path at
// most 64 hops (the bus numbers bound a real tree at 256 levels; real ones are a
// handful), and the document at most 100000 NVLinks in all (a DGX-2: 96). A
// figure in GB/s or Gbit/s is finite, not negative and at most 1e6 (1 PB/s,
// 1 Pbit/s); an integer fits an int. Anything beyond is a TopologyError.
constexpr size_t kMaxGpusPerNode = 1024;
constexpr size_t kMaxNicsPerNode = 4096;
constexpr size_t kMaxAncestorsPerNode = kMaxGpusPerNode * (kMaxGpusPerNode - 1) / 2;
constexpr size_t kMaxPciPathHops = 64;
constexpr size_t kMaxNvlinks = 100000;
constexpr double kMaxRate = 1e6;

// One line, short, whatever the document holds: a key or value quoted in a
// message loses its control characters and its length.
std::string quoted(const std::string& text) { return quoted_for_message(text, 40); }

std::string number_text(const json& value) {
  std::string text = value.dump();
  return text.size() > 40 ? text.substr(0, 40) + "..." : text;
}

const char* kind_of(const json& value) {
  return value.is_number()    ? "a number"
         : value.is_string()  ? "a string"
         : value.is_boolean() ? "true/false"
         : value.is_array()   ? "an array"
         : value.is_object()  ? "an object"
                              : "null";
}

[[noreturn]] void wrong_type(const std::string& at, const json& value, const char* wanted) {
  throw TopologyError(at + ": " + kind_of(value) + " where " + wanted + " belongs");
}

// The member `key` of `object`, nullptr when missing or null (a missing key reads
// as its default). `where` names `object` in messages: "nodes[0].gpus[3]".
const json* member(const json& object, const char* key, const std::string& where) {
  if (!object.is_object()) wrong_type(where, object, "an object");
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string text_at(const json& object, const char* key, const std::string& where) {
  const json* value = member(object, key, where);
  if (!value) return {};
  if (!value->is_string()) wrong_type(where + "." + key, *value, "a string");
  return value->get<std::string>();
}

bool flag_at(const json& object, const char* key, const std::string& where, bool fallback) {
  const json* value = member(object, key, where);
  if (!value) return fallback;
  if (!value->is_boolean()) wrong_type(where + "." + key, *value, "true/false");
  return value->get<bool>();
}

// An int: an integer in int's range, or a float with such a whole value (2.0).
// nlohmann's get<int> would wrap a large integer and leave a large float's
// conversion undefined; a boolean is not a number here.
int int_at(const json& object, const char* key, const std::string& where, int fallback = 0) {
  const json* value = member(object, key, where);
  if (!value) return fallback;
  const std::string at = where + "." + key;
  if (!value->is_number()) wrong_type(at, *value, "a whole number");
  constexpr auto kMin = std::numeric_limits<int>::min(), kMax = std::numeric_limits<int>::max();
  bool fits = false;
  if (value->is_number_unsigned()) {
    fits = value->get<std::uint64_t>() <= static_cast<std::uint64_t>(kMax);
  } else if (value->is_number_integer()) {
    const std::int64_t v = value->get<std::int64_t>();
    fits = v >= kMin && v <= kMax;
  } else {
    const double v = value->get<double>();
    if (std::isfinite(v) && v != std::trunc(v))
      throw TopologyError(at + ": " + number_text(*value) + " is not a whole number");
    fits = v >= kMin && v <= kMax;  // false for NaN and the infinities
  }
  if (!fits)
    throw TopologyError(at + ": " + number_text(*value) + " is out of range (" +
                        std::to_string(kMin) + " to " + std::to_string(kMax) + ")");
  return value->is_number_float() ? static_cast<int>(value->get<double>()) : value->get<int>();
}

// A rate or bandwidth: 0 (unknown) to kMaxRate.
double rate_at(const json& object, const char* key, const std::string& where) {
  const json* value = member(object, key, where);
  if (!value) return 0;
  const std::string at = where + "." + key;
  if (!value->is_number()) wrong_type(at, *value, "a number");
  const double v = value->get<double>();
  if (!(v >= 0 && v <= kMaxRate))  // also NaN
    throw TopologyError(at + ": " + number_text(*value) + " is out of range (0 to 1e6)");
  return v;
}

// The array `key` of `object`; an empty one when missing or null.
const json& array_at(const json& object, const char* key, const std::string& where) {
  static const json empty = json::array();
  const json* value = member(object, key, where);
  if (!value) return empty;
  if (!value->is_array()) wrong_type(where + "." + key, *value, "an array");
  return *value;
}

void check_count(size_t count, size_t limit, const std::string& at, const char* what) {
  if (count > limit)
    throw TopologyError(at + ": " + std::to_string(count) + " " + what + ", more than the " +
                        std::to_string(limit) + " ccscope reads");
}

std::string item(const std::string& where, const char* key, size_t index) {
  return where + "." + key + "[" + std::to_string(index) + "]";
}

PciPlacement placement_from(const json& j, const std::string& where, bool has_package) {
  PciPlacement p;
  p.bus_id = normalize_bus_id(text_at(j, "pci_bus_id", where));
  p.numa_node = int_at(j, "numa_node", where, -1);
  if (has_package) p.package = int_at(j, "package", where, -1);
  const json& path = array_at(j, "pci_path", where);
  check_count(path.size(), kMaxPciPathHops, where + ".pci_path", "hops");
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string at = item(where, "pci_path", i);
    if (!path[i].is_string()) wrong_type(at, path[i], "a string");
    const std::string text = path[i].get<std::string>();
    if (text.rfind("host:", 0) == 0)
      p.path.push_back({PciHop::Kind::kHostBridge, text.substr(5)});
    else if (text.rfind("bridge:", 0) == 0)
      p.path.push_back({PciHop::Kind::kBridge, text.substr(7)});
    else
      throw TopologyError(at + ": " + quoted(text) + " is not bridge:ID or host:ID");
  }
  return p;
}

NicKind nic_kind_from(const std::string& text) {
  if (text == "ethernet") return NicKind::kEthernet;
  if (text == "infiniband") return NicKind::kInfiniband;
  if (text == "roce") return NicKind::kRoce;
  return NicKind::kOther;
}

HostTopology node_from(const json& j, const std::string& where, size_t& nvlinks_read) {
  HostTopology node;
  node.hostname = text_at(j, "hostname", where);
  node.numa_nodes = int_at(j, "numa_nodes", where);
  node.packages = int_at(j, "packages", where);
  node.cores = int_at(j, "cores", where);
  node.pus = int_at(j, "pus", where);
  node.cpu_model = text_at(j, "cpu_model", where);
  node.driver_version = text_at(j, "driver_version", where);
  node.cuda_version = text_at(j, "cuda_version", where);
  node.nccl_version = text_at(j, "nccl_version", where);
  const json& gpus = array_at(j, "gpus", where);
  check_count(gpus.size(), kMaxGpusPerNode, where + ".gpus", "GPUs");
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string at = item(where, "gpus", i);
    const json& g = gpus[i];
    Gpu gpu;
    gpu.index = int_at(g, "index", at, static_cast<int>(i));
    gpu.name = text_at(g, "name", at);
    gpu.uuid = text_at(g, "uuid", at);
    gpu.pci = placement_from(g, at, true);
    gpu.pcie_current = {int_at(g, "pcie_generation", at), int_at(g, "pcie_width", at)};
    if (const json* max = member(g, "pcie_max", at)) {
      if (!max->is_object()) wrong_type(at + ".pcie_max", *max, "an object");
      gpu.pcie_max = {int_at(*max, "generation", at + ".pcie_max"),
                      int_at(*max, "width", at + ".pcie_max")};
    }
    gpu.cuda_compute_capability = int_at(g, "compute_capability", at);
    const json& links = array_at(g, "nvlinks", at);
    nvlinks_read += links.size();
    if (nvlinks_read > kMaxNvlinks)
      throw TopologyError(at + ".nvlinks: more than the " + std::to_string(kMaxNvlinks) +
                          " NVLinks ccscope reads in one document");
    for (size_t l = 0; l < links.size(); ++l) {
      const std::string link_at = item(at, "nvlinks", l);
      const json& n = links[l];
      NvLink link;
      link.link = int_at(n, "link", link_at, -1);
      link.active = flag_at(n, "active", link_at, true);
      link.version = int_at(n, "version", link_at);
      link.remote_bus_id = normalize_bus_id(text_at(n, "remote_pci_bus_id", link_at));
      link.remote_is_switch = flag_at(n, "remote_is_switch", link_at, false);
      link.bandwidth_GBps = rate_at(n, "bandwidth_GBps", link_at);
      gpu.nvlinks.push_back(std::move(link));
    }
    node.gpus.push_back(std::move(gpu));
  }
  const json& nics = array_at(j, "nics", where);
  check_count(nics.size(), kMaxNicsPerNode, where + ".nics", "NICs");
  for (size_t i = 0; i < nics.size(); ++i) {
    const std::string at = item(where, "nics", i);
    const json& n = nics[i];
    Nic nic;
    nic.name = text_at(n, "name", at);
    nic.kind = nic_kind_from(text_at(n, "kind", at));
    nic.rate_Gbps = rate_at(n, "rate_Gbps", at);
    nic.shaped_Gbps = rate_at(n, "shaped_Gbps", at);
    nic.state = text_at(n, "state", at);
    nic.mtu = int_at(n, "mtu", at);
    nic.driver = text_at(n, "driver", at);
    nic.netdev = text_at(n, "netdev", at);
    nic.rdma_device = text_at(n, "rdma_device", at);
    nic.has_gid = flag_at(n, "has_gid", at, false);
    nic.is_virtual = flag_at(n, "virtual", at, false);
    nic.pci = placement_from(n, at, false);  // the writer has no "package" for a NIC
    node.nics.push_back(std::move(nic));
  }
  const json& ancestors = array_at(j, "gpu_ancestors", where);
  check_count(ancestors.size(), kMaxAncestorsPerNode, where + ".gpu_ancestors", "entries");
  for (size_t i = 0; i < ancestors.size(); ++i) {
    const std::string at = item(where, "gpu_ancestors", i);
    node.gpu_ancestors.push_back({int_at(ancestors[i], "gpu_a", at, -1),
                                  int_at(ancestors[i], "gpu_b", at, -1),
                                  text_at(ancestors[i], "level", at)});
  }
  if (const json* sources = member(j, "sources", where)) {
    if (!sources->is_object()) wrong_type(where + ".sources", *sources, "an object");
    for (const auto& [name, status] : sources->items()) {
      const std::string at = where + ".sources." + quoted(name);
      node.sources.push_back(
          {name, flag_at(status, "read", at, false), text_at(status, "detail", at)});
    }
  }
  const json& notes = array_at(j, "notes", where);
  for (size_t i = 0; i < notes.size(); ++i) {
    if (!notes[i].is_string()) wrong_type(item(where, "notes", i), notes[i], "a string");
    node.notes.push_back(notes[i].get<std::string>());
  }
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
    doc = parse_json_text(text);
  } catch (const JsonLimitError& e) {
    throw TopologyError(e.what());
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond double ("1e400").
    // nlohmann's message quotes the last token read, which may be long.
    std::string what = e.what();
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos)
      what = what.substr(what.find("] ") + 2);
    if (what.size() > 160) what = what.substr(0, 160) + "...";
    throw TopologyError("not valid JSON: " + what);
  }
  if (!doc.is_object() || !doc.contains("nodes"))
    throw TopologyError("not a ccscope topology JSON document (no \"nodes\" array)");
  const json* schema_value = member(doc, "schema", "document");
  if (schema_value && !schema_value->is_string()) wrong_type("schema", *schema_value, "a string");
  const std::string schema = schema_value ? schema_value->get<std::string>() : "";
  // "ccscope.topo/<version>": this reader knows version 1 (a missing schema reads as 1).
  static constexpr std::string_view kPrefix = "ccscope.topo/";
  const std::string version = schema.rfind(kPrefix, 0) == 0 ? schema.substr(kPrefix.size()) : "";
  const bool numbered = !version.empty() && version.size() <= 9 && version[0] != '0' &&
                        version.find_first_not_of("0123456789") == std::string::npos;
  if (!schema.empty() && !numbered)
    throw TopologyError("schema: " + quoted(schema) + " is not ccscope.topo/<version>");
  if (numbered && version != "1")
    throw TopologyError("schema: " + quoted(schema) +
                        " is newer than this ccscope reads (ccscope.topo/1)");
  const json& items = doc.at("nodes");
  if (!items.is_array()) wrong_type("nodes", items, "an array");
  std::vector<HostTopology> nodes;
  size_t nvlinks_read = 0;
  for (size_t i = 0; i < items.size(); ++i)
    nodes.push_back(node_from(items[i], "nodes[" + std::to_string(i) + "]", nvlinks_read));
  return nodes;
}

}  // namespace ccscope::topo
