// An NCCL log analysis as JSON ("ccscope.nccl_log/1"), as text, as checks.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ccscope/diag/nccl_log.h"

namespace ccscope::diag {
namespace nccl_log_output_detail {

using Json = nlohmann::ordered_json;

Json optional_bool(const std::optional<bool>& v) { return v ? Json(*v) : Json(nullptr); }
Json text_or_null(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }
Json int_or_null(int v) { return v < 0 ? Json(nullptr) : Json(v); }

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

// A matrix cell: the transport classes of a -> b, short.
std::string cell(const NcclCommunicator& c, int from, int to) {
  std::string out;
  for (const auto& l : c.links) {
    if (l.from != from || l.to != to) continue;
    std::string t = l.transport;
    if (l.gdrdma_send.value_or(false) || l.gdrdma_receive.value_or(false)) t += "+GDR";
    if (!l.pxn_proxies.empty()) t += "+PXN";
    out += (out.empty() ? "" : ",") + t;
  }
  return out.empty() ? "." : out;
}

}  // namespace nccl_log_output_detail

std::string nccl_log_json(const NcclLogAnalysis& a) {
  using namespace nccl_log_output_detail;
  Json j;
  j["schema"] = "ccscope.nccl_log/1";
  Json inputs = Json::array();
  for (const auto& in : a.inputs)
    inputs.push_back({{"name", in.name},
                      {"bytes", in.bytes},
                      {"lines", in.lines},
                      {"nccl_lines", in.nccl_lines},
                      {"other_lines", in.other_lines},
                      {"garbled_lines", in.garbled_lines},
                      {"binary", in.binary},
                      {"truncated_last_line", in.truncated_last_line},
                      {"notes", in.notes}});
  j["inputs"] = inputs;
  j["summary"] = {{"ranks", a.ranks.size()},
                  {"nodes", a.nodes},
                  {"nodes_source", text_or_null(a.nodes_source)},
                  {"hosts", a.hosts},
                  {"nccl_versions", a.nccl_versions},
                  {"network", text_or_null(a.network)},
                  {"network_source", text_or_null(a.network_source)},
                  {"net_plugin", text_or_null(a.net_plugin)},
                  {"ib_devices", a.ib_devices},
                  {"socket_interfaces", a.socket_interfaces},
                  {"bootstrap_interfaces", a.bootstrap_interfaces},
                  {"gdr", text_or_null(a.gdr)}};
  Json ranks = Json::array();
  for (const auto& r : a.ranks) {
    Json comms = Json::array();
    for (const auto& m : r.communicators)
      comms.push_back({{"comm", m.comm},
                       {"comm_id", text_or_null(m.comm_id)},
                       {"rank", int_or_null(m.rank)},
                       {"nranks", m.nranks},
                       {"init", nccl_init_state_name(m.init)}});
    ranks.push_back({{"rank", int_or_null(r.rank)},
                     {"nranks", r.nranks},
                     {"host", r.host},
                     {"pid", r.pid},
                     {"cuda_device", r.cuda_device},
                     {"nccl_version", text_or_null(r.nccl_version)},
                     {"nccl_cuda", text_or_null(r.nccl_cuda)},
                     {"cuda_driver", text_or_null(r.cuda_driver)},
                     {"init", nccl_init_state_name(r.init)},
                     {"network", text_or_null(r.network)},
                     {"net_plugin", text_or_null(r.net_plugin)},
                     {"plugin_failures", r.plugin_failures},
                     {"bootstrap_interface", text_or_null(r.bootstrap_interface)},
                     {"bootstrap_address", text_or_null(r.bootstrap_address)},
                     {"ib_devices", r.ib_devices},
                     {"ib_no_device", r.ib_no_device},
                     {"socket_interfaces", r.socket_interfaces},
                     {"gdr_enabled_hcas", r.gdr_enabled_hcas},
                     {"gdr_disabled_hcas", r.gdr_disabled_hcas},
                     {"nvls_support", optional_bool(r.nvls_support)},
                     {"nvls_connected", r.nvls_connected},
                     {"collnet", r.collnet},
                     {"environment", r.environment},
                     {"communicators", comms},
                     {"sources", r.sources},
                     {"lines", r.lines},
                     {"warn_lines", r.warn_lines}});
  }
  j["ranks"] = ranks;
  Json comms = Json::array();
  for (const auto& c : a.communicators) {
    Json links = Json::array();
    for (const auto& l : c.links)
      links.push_back({{"from", l.from},
                       {"to", l.to},
                       {"transport", l.transport},
                       {"details", l.details},
                       {"channels", l.channels},
                       {"gdrdma_send", optional_bool(l.gdrdma_send)},
                       {"gdrdma_receive", optional_bool(l.gdrdma_receive)},
                       {"pxn_proxies", l.pxn_proxies}});
    comms.push_back({{"id", text_or_null(c.id)},
                     {"nranks", c.nranks},
                     {"nnodes", c.nnodes},
                     {"ranks_seen", c.ranks_seen},
                     {"links", links}});
  }
  j["communicators"] = comms;
  Json warnings = Json::array();
  for (const auto& w : a.warnings)
    warnings.push_back({{"pattern", w.pattern},
                        {"example", w.example},
                        {"first_seen", w.first_seen},
                        {"count", w.count},
                        {"hosts", w.hosts},
                        {"ranks", w.ranks}});
  j["warnings"] = warnings;
  Json findings = Json::array();
  for (const auto& f : a.findings)
    findings.push_back({{"severity", nccl_severity_name(f.severity)},
                        {"code", f.code},
                        {"host", text_or_null(f.host)},
                        {"rank", int_or_null(f.rank)},
                        {"peer", text_or_null(f.peer)},
                        {"message", f.message},
                        {"cause", text_or_null(f.cause)},
                        {"remedy", text_or_null(f.remedy)},
                        {"role", text_or_null(nccl_role_name(f.role))},
                        {"count", f.count},
                        {"ranks", f.ranks},
                        {"hosts", f.hosts}});
  j["findings"] = findings;
  j["worst"] = nccl_severity_name(worst_severity(a));
  // Invalid UTF-8 from a damaged log must not make dump() throw.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string nccl_log_text(const NcclLogAnalysis& a) {
  using namespace nccl_log_output_detail;
  std::string out;
  out += fmt::format("NCCL log: {} input(s), {} rank(s) on {} host(s), {} node(s){}\n",
                     a.inputs.size(), a.ranks.size(), a.hosts.size(), a.nodes,
                     a.nodes_source.empty() ? "" : " (by " + a.nodes_source + ")");
  for (const auto& in : a.inputs) {
    out += fmt::format("  {}: {} lines, {} NCCL, {} other", in.name, in.lines, in.nccl_lines,
                       in.other_lines);
    if (in.garbled_lines) out += fmt::format(", {} garbled", in.garbled_lines);
    if (in.binary) out += ", binary";
    if (in.truncated_last_line) out += ", last line cut";
    out += "\n";
  }
  out += fmt::format(
      "NCCL {}; network {}{}; GPUDirect RDMA {}\n",
      a.nccl_versions.empty() ? "?" : join(a.nccl_versions), a.network.empty() ? "?" : a.network,
      a.network_source.empty() ? "" : " (" + a.network_source + ")", a.gdr.empty() ? "?" : a.gdr);
  if (!a.net_plugin.empty()) out += "  net plugin: " + a.net_plugin + "\n";
  if (!a.ib_devices.empty()) out += "  IB devices: " + join(a.ib_devices) + "\n";
  if (!a.socket_interfaces.empty())
    out += "  socket interfaces: " + join(a.socket_interfaces) + "\n";
  if (!a.bootstrap_interfaces.empty())
    out += "  bootstrap interfaces: " + join(a.bootstrap_interfaces) + "\n";
  if (!a.ranks.empty()) {
    out += fmt::format("  {:>5}  {:<16} {:>8} {:>4}  {:<9} {:<14} {}\n", "rank", "host", "pid",
                       "gpu", "nccl", "init", "network");
    for (const auto& r : a.ranks)
      out += fmt::format("  {:>5}  {:<16} {:>8} {:>4}  {:<9} {:<14} {}\n",
                         r.rank < 0 ? std::string("?") : std::to_string(r.rank), r.host, r.pid,
                         r.cuda_device, r.nccl_version.empty() ? "?" : r.nccl_version,
                         nccl_init_state_name(r.init), r.network.empty() ? "-" : r.network);
  }
  for (const auto& c : a.communicators) {
    if (c.links.empty()) continue;
    std::set<int> ids;
    for (const auto& l : c.links) {
      ids.insert(l.from);
      ids.insert(l.to);
    }
    out += fmt::format("transports, communicator {} ({} ranks{}): row -> column\n",
                       c.id.empty() ? "?" : c.id, c.nranks,
                       c.nnodes > 0 ? fmt::format(", {} nodes", c.nnodes) : "");
    if (ids.size() > 32) {
      std::map<std::string, size_t> counts;
      for (const auto& l : c.links) ++counts[l.transport];
      for (const auto& [t, n] : counts) out += fmt::format("  {}: {} pair(s)\n", t, n);
      continue;
    }
    size_t width = 4;
    for (const int f : ids)
      for (const int t : ids) width = std::max(width, cell(c, f, t).size() + 2);
    out += fmt::format("  {:>5}", "");
    for (const int t : ids) out += fmt::format("{:<{}}", std::to_string(t), width);
    out += "\n";
    for (const int f : ids) {
      out += fmt::format("  {:>5} ", f);
      for (const int t : ids) out += fmt::format("{:<{}}", f == t ? "-" : cell(c, f, t), width);
      out += "\n";
    }
  }
  if (a.findings.empty()) {
    out += "findings: none\n";
  } else {
    out += "findings:\n";
    for (const auto& f : a.findings) {
      std::string where;
      if (!f.host.empty()) where += f.host;
      if (f.rank >= 0) where += (where.empty() ? "rank " : " rank ") + std::to_string(f.rank);
      out += fmt::format("  {} {}{}: {}\n",
                         f.severity == NcclSeverity::kFail   ? "FAIL"
                         : f.severity == NcclSeverity::kWarn ? "WARN"
                                                             : "info",
                         f.code, where.empty() ? "" : " [" + where + "]", f.message);
      if (f.role != NcclRole::kNone)
        out += fmt::format("       this log shows: {}\n",
                           f.role == NcclRole::kRoot        ? "the root cause"
                           : f.role == NcclRole::kSecondary ? "a secondary failure"
                                                            : "a failure (root unclear)");
      if (!f.cause.empty()) out += "       likely: " + f.cause + "\n";
      if (!f.remedy.empty()) out += "       do: " + f.remedy + "\n";
    }
  }
  return out;
}

std::vector<Check> nccl_log_checks(const NcclLogAnalysis& a, Stage stage) {
  std::vector<Check> out;
  for (const auto& f : a.findings) {
    Check c;
    c.stage = stage;
    c.name = "nccl_log." + f.code;
    c.status = f.severity == NcclSeverity::kFail   ? Status::kFail
               : f.severity == NcclSeverity::kWarn ? Status::kWarn
                                                   : Status::kPass;
    c.host = f.host;
    c.rank = f.rank;
    c.peer = f.peer;
    c.message = f.message;
    if (f.count > 1) {
      c.measured = static_cast<double>(f.count);
      c.unit = "";
    }
    if (c.status != Status::kPass) {
      c.remedy = f.cause.empty() ? f.remedy : "likely " + f.cause;
      if (!f.cause.empty() && !f.remedy.empty()) c.remedy += "; " + f.remedy;
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace ccscope::diag
