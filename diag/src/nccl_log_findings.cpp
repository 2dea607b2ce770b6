// The findings of an NCCL log: what is misconfigured, what failed and why,
// and for a failure whether this log shows its root or only its echo.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nccl_log_internal.h"

namespace ccscope::diag::nccl_log_detail {
namespace {

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}
std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  const size_t shown = std::min<size_t>(ranks.size(), 16);
  for (size_t i = 0; i < shown; ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  if (ranks.size() > shown) out += fmt::format(",... ({} ranks)", ranks.size());
  return out;
}
bool starts_with(const std::string& text, const char* what) { return text.rfind(what, 0) == 0; }

// Rank number and host of every rank index in `indices`, into `f`.
void concern(NcclLogFinding& f, const NcclLogAnalysis& a, const std::vector<size_t>& indices) {
  std::set<int> ranks;
  std::set<std::string> hosts;
  for (const size_t i : indices) {
    if (a.ranks[i].rank >= 0) ranks.insert(a.ranks[i].rank);
    hosts.insert(a.ranks[i].host);
  }
  f.ranks.assign(ranks.begin(), ranks.end());
  f.hosts.assign(hosts.begin(), hosts.end());
  if (f.hosts.size() == 1) f.host = f.hosts[0];
  if (f.ranks.size() == 1) f.rank = f.ranks[0];
}

std::string rank_label(const NcclRankInfo& r) {
  return r.rank >= 0 ? fmt::format("rank {} ({}:{} GPU {})", r.rank, r.host, r.pid, r.cuda_device)
                     : fmt::format("{}:{} GPU {}", r.host, r.pid, r.cuda_device);
}

// Could lines of this rank's process that were not read have said more? Its
// own cut lines, cut lines of unknown processes in its inputs, or an input
// that ends inside a line.
bool unreadable_lines_of(const Parsed& p, const NcclRankInfo& r) {
  const auto own = p.process_unreadable.find(r.host + ":" + std::to_string(r.pid));
  if (own != p.process_unreadable.end() && own->second > 0) return true;
  for (const auto& source : r.sources) {
    const auto it = p.input_unattributed.find(source);
    if (it != p.input_unattributed.end() && it->second > 0) return true;
    for (const auto& in : p.analysis.inputs)
      if (in.name == source && in.truncated_last_line) return true;
  }
  return false;
}

void input_findings(Parsed& p) {
  auto& a = p.analysis;
  for (const auto& in : a.inputs) {
    if (in.binary) {
      auto f = finding(NcclSeverity::kWarn, "log.binary", in.name + ": binary data, not a text log",
                       "a core file, a compressed log or the wrong file",
                       "give the NCCL_DEBUG output (stderr of the job, or NCCL_DEBUG_FILE)");
      a.findings.push_back(f);
    }
    if (in.nccl_lines == 0 && !in.binary)
      a.findings.push_back(finding(NcclSeverity::kWarn, "log.no_nccl_lines",
                                   in.name + ": no NCCL lines",
                                   "NCCL_DEBUG was not set, or the "
                                   "output went elsewhere (NCCL_DEBUG_FILE)",
                                   "rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET is "
                                   "enough) and capture every rank's stderr"));
    if (in.garbled_lines > 0)
      a.findings.push_back(
          finding(NcclSeverity::kInfo, "log.garbled_lines",
                  fmt::format("{}: {} NCCL line(s) cut or written over each other, not read",
                              in.name, in.garbled_lines),
                  "ranks writing to one stream at the same time",
                  "NCCL_DEBUG_FILE=/path/nccl.%h.%p gives one file per process"));
    if (in.truncated_last_line)
      a.findings.push_back(finding(NcclSeverity::kInfo, "log.truncated",
                                   in.name + ": the last line is cut (no final newline)",
                                   "the process was killed while writing, or the copy is partial",
                                   ""));
  }
}

void version_findings(Parsed& p) {
  auto& a = p.analysis;
  // No NCCL line gave the version: the framework's output did.
  bool own = !p.bare_versions.empty();
  for (const auto& r : a.ranks) own |= !r.nccl_version.empty();
  if (!own && !p.framework_versions.empty()) {
    std::vector<std::string> parts;
    for (const auto& [v, source] : p.framework_versions) parts.push_back(v + " (" + source + ")");
    a.findings.push_back(finding(
        p.framework_versions.size() > 1 ? NcclSeverity::kFail : NcclSeverity::kInfo,
        p.framework_versions.size() > 1 ? "version.nccl_mismatch" : "version.from_framework",
        "NCCL version " + join(parts, "; ") + ", from the framework's output (no NCCL line)",
        p.framework_versions.size() > 1 ? "different NCCL builds in the job's processes"
                                        : "NCCL_DEBUG was not set; the framework printed it",
        p.framework_versions.size() > 1 ? "run one NCCL build on every node" : ""));
  }
  // No NCCL line gave the job's size: the framework's banner did.
  int nccl_nranks = 0;
  for (const auto& c : a.communicators) nccl_nranks = std::max(nccl_nranks, c.nranks);
  for (const auto& r : a.ranks) nccl_nranks = std::max(nccl_nranks, r.nranks);
  if (nccl_nranks == 0 && p.framework_world_size > 0) {
    std::vector<int> ranks(p.framework_ranks.begin(), p.framework_ranks.end());
    a.findings.push_back(finding(
        NcclSeverity::kInfo, "job.from_framework",
        fmt::format("world size {} ({}){}, from the framework's output (no NCCL init line)",
                    p.framework_world_size, p.framework_world_size_source,
                    ranks.empty()
                        ? std::string()
                        : fmt::format("; rank(s) {} printed their init line", join_ranks(ranks))),
        "", ""));
  }
  auto compare = [&](auto field, const char* code, const char* what, NcclSeverity sev,
                     const char* remedy) {
    std::map<std::string, std::vector<size_t>> by_value;
    for (size_t i = 0; i < a.ranks.size(); ++i)
      if (!(a.ranks[i].*field).empty()) by_value[a.ranks[i].*field].push_back(i);
    if (by_value.size() < 2) return;
    std::vector<std::string> parts;
    std::vector<size_t> all;
    for (const auto& [value, idx] : by_value) {
      NcclLogFinding tmp;
      concern(tmp, a, idx);
      parts.push_back(
          fmt::format("{} on {} (ranks {})", value, join(tmp.hosts), join_ranks(tmp.ranks)));
      all.insert(all.end(), idx.begin(), idx.end());
    }
    auto f =
        finding(sev, code, fmt::format("{} differs between ranks: {}", what, join(parts, "; ")),
                "different containers, images or LD_LIBRARY_PATH on some nodes", remedy);
    concern(f, a, all);
    a.findings.push_back(f);
  };
  compare(&NcclRankInfo::nccl_version, "version.nccl_mismatch", "NCCL version", NcclSeverity::kFail,
          "run one NCCL build on every node (same image; check ldd of the program and "
          "LD_LIBRARY_PATH): mixed versions hang or fail in bootstrap");
  compare(&NcclRankInfo::nccl_cuda, "version.cuda_mismatch", "CUDA version NCCL was built for",
          NcclSeverity::kWarn, "use the same NCCL/CUDA build on every node");
  compare(&NcclRankInfo::cuda_driver, "version.driver_mismatch", "CUDA driver version",
          NcclSeverity::kInfo, "keep the driver the same across the cluster");
}

// Could a process (host:pid) have printed a line that was not read?
bool unreadable_process(const Parsed& p, const std::string& process) {
  for (const auto& r : p.analysis.ranks)
    if (r.host + ":" + std::to_string(r.pid) == process && unreadable_lines_of(p, r)) return true;
  return false;
}

void environment_findings(Parsed& p) {
  auto& a = p.analysis;
  std::map<std::string, std::map<std::string, std::vector<std::string>>> values;  // var->val->procs
  for (const auto& [process, env] : p.process_environment)
    for (const auto& [var, value] : env) values[var][value].push_back(process);
  for (const auto& [var, by_value] : values) {
    size_t processes = 0;
    for (const auto& [value, procs] : by_value) processes += procs.size();
    if (by_value.size() > 1) {
      std::vector<std::string> parts;
      for (const auto& [value, procs] : by_value)
        parts.push_back(fmt::format(
            "{}={} on {}", var, value,
            procs.size() > 4 ? std::to_string(procs.size()) + " processes" : join(procs)));
      if (var == "NCCL_HOSTID") {
        a.findings.push_back(finding(
            NcclSeverity::kInfo, "env.hostid_differs",
            "NCCL_HOSTID differs between processes: NCCL treats them as different nodes even on "
            "one machine (" +
                join(parts, "; ") + ")",
            "set on purpose to test the network path on one machine", ""));
        continue;
      }
      a.findings.push_back(finding(NcclSeverity::kWarn, "env.differs",
                                   var + " differs between processes: " + join(parts, "; "),
                                   "the launcher did not pass the same environment to every node "
                                   "(mpirun -x, srun --export, a per-node profile)",
                                   "set NCCL_* variables the same way for every rank"));
      continue;
    }
    // Set on some processes only, while the others got through init without it.
    std::vector<std::string> without, maybe;
    for (const auto& [process, best] : p.process_best_init)
      if (!p.process_environment.count(process) || !p.process_environment.at(process).count(var))
        if (best >= NcclInitState::kInitComplete)
          (unreadable_process(p, process) ? maybe : without).push_back(process);
    if (!maybe.empty())
      p.unreadable_could_change.push_back(fmt::format(
          "{} on {}", var,
          maybe.size() > 4 ? std::to_string(maybe.size()) + " processes" : join(maybe)));
    if (!without.empty() && processes > 0)
      a.findings.push_back(
          finding(NcclSeverity::kInfo, "env.partial",
                  fmt::format("{}={} is set on {} process(es) but not on {}", var,
                              by_value.begin()->first, processes,
                              without.size() > 4 ? std::to_string(without.size()) + " others"
                                                 : join(without)),
                  "the launcher passed it to some nodes only",
                  "set NCCL_* variables the same way for every rank"));
  }
}

bool uses_socket(const NcclLogAnalysis& a) {
  if (a.network == "Socket") return true;
  for (const auto& r : a.ranks)
    if (r.network == "Socket") return true;
  for (const auto& c : a.communicators)
    for (const auto& l : c.links)
      if (l.transport == "NET/Socket") return true;
  return false;
}

// When every rank that says something (`says`) says the same (the ranks in
// `idx`), a rank that says nothing but whose line may be among the unreadable
// ones is counted with them; the garbled finding says so (`otherwise`).
template <typename Says>
void assume_like_the_others(Parsed& p, std::vector<size_t>& idx, const char* otherwise, Says says) {
  const auto& a = p.analysis;
  for (size_t i = 0; i < a.ranks.size(); ++i)
    if (says(a.ranks[i]) && std::find(idx.begin(), idx.end(), i) == idx.end()) return;
  std::vector<std::string> assumed;
  for (size_t i = 0; i < a.ranks.size(); ++i)
    if (!says(a.ranks[i]) && unreadable_lines_of(p, a.ranks[i])) {
      idx.push_back(i);
      assumed.push_back(rank_label(a.ranks[i]));
    }
  if (!assumed.empty())
    p.unreadable_could_change.push_back(std::string(otherwise) + " on " + join(assumed));
}

void network_findings(Parsed& p) {
  auto& a = p.analysis;
  std::vector<size_t> socket_ranks, ib_ranks;
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    if (a.ranks[i].network == "Socket") socket_ranks.push_back(i);
    if (!a.ranks[i].ib_devices.empty()) ib_ranks.push_back(i);
  }
  if (a.network == "Socket")
    assume_like_the_others(p, socket_ranks, "another network",
                           [](const NcclRankInfo& r) { return !r.network.empty(); });
  const auto env_hint = [&]() {
    std::vector<std::string> hints;
    for (const auto& r : a.ranks) {
      for (const char* var : {"NCCL_IB_DISABLE", "NCCL_NET", "NCCL_IB_HCA"}) {
        const auto it = r.environment.find(var);
        if (it != r.environment.end()) hints.push_back(std::string(var) + "=" + it->second);
      }
    }
    std::sort(hints.begin(), hints.end());
    hints.erase(std::unique(hints.begin(), hints.end()), hints.end());
    return hints.empty() ? std::string() : " (set: " + join(hints) + ")";
  };
  if (uses_socket(a)) {
    if (!a.ib_devices.empty()) {
      auto f = finding(NcclSeverity::kWarn, "net.socket_with_ib",
                       fmt::format("NCCL uses TCP sockets although IB/RoCE devices were found ({})",
                                   join(a.ib_devices)),
                       "IB disabled or refused" + env_hint() +
                           ": NCCL_IB_DISABLE=1, NCCL_NET=Socket, or the verbs devices failed "
                           "to open (container without /dev/infiniband, missing libibverbs)",
                       "unset NCCL_IB_DISABLE / NCCL_NET; check ibv_devinfo inside the job's "
                       "container; expect several times the bandwidth over IB");
      concern(f, a, socket_ranks.empty() ? ib_ranks : socket_ranks);
      a.findings.push_back(f);
    } else if (a.nodes > 1) {
      auto f = finding(NcclSeverity::kWarn, "net.socket_between_nodes",
                       fmt::format("{} nodes talk over TCP sockets (NET/Socket)", a.nodes),
                       "no IB/RoCE device found by NCCL" + env_hint(),
                       "if the nodes have RDMA NICs, make them visible (rdma-core, "
                       "/dev/infiniband in the container, NCCL_IB_HCA); else expect a fraction "
                       "of the NIC's line rate");
      concern(f, a, socket_ranks);
      a.findings.push_back(f);
    }
  }
  // Ranks that chose different networks.
  std::map<std::string, std::vector<size_t>> by_network;
  for (size_t i = 0; i < a.ranks.size(); ++i)
    if (!a.ranks[i].network.empty()) by_network[a.ranks[i].network].push_back(i);
  if (by_network.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [net, idx] : by_network) {
      NcclLogFinding tmp;
      concern(tmp, a, idx);
      parts.push_back(fmt::format("{} on {}", net, join(tmp.hosts)));
    }
    a.findings.push_back(finding(NcclSeverity::kWarn, "net.network_mismatch",
                                 "ranks chose different networks: " + join(parts, "; "),
                                 "IB missing or disabled on some nodes",
                                 "make every node see the same NICs and NCCL_* settings"));
  }
  // GPUDirect RDMA where IB is used.
  const bool ib = a.network == "IB" || !a.ib_devices.empty();
  if (ib && a.network != "Socket") {
    std::vector<size_t> disabled;
    for (size_t i = 0; i < a.ranks.size(); ++i)
      if (!a.ranks[i].gdr_disabled_hcas.empty()) disabled.push_back(i);
    size_t links_without = 0, ib_links = 0;
    for (const auto& c : a.communicators)
      for (const auto& l : c.links)
        if (starts_with(l.transport, "NET/IB")) {
          ++ib_links;
          if (!l.gdrdma_send.value_or(false) && !l.gdrdma_receive.value_or(false)) ++links_without;
        }
    if (!disabled.empty() || links_without > 0) {
      std::string msg =
          !disabled.empty()
              ? fmt::format("GPUDirect RDMA disabled for HCA {} on {} rank(s)",
                            join(a.ranks[disabled[0]].gdr_disabled_hcas), disabled.size())
              : fmt::format("{} of {} NET/IB rank pairs without GPUDirect RDMA (no /GDRDMA)",
                            links_without, ib_links);
      auto f = finding(NcclSeverity::kWarn, "net.gdr_not_used", msg,
                       "nvidia_peermem not loaded (or no DMA-BUF support), the GPU and NIC too far "
                       "apart on PCIe for NCCL_NET_GDR_LEVEL, or ACS/IOMMU blocking peer-to-peer",
                       "lsmod | grep nvidia_peermem; nvidia-smi topo -m (GPU-NIC should be "
                       "PIX/PXB); raise NCCL_NET_GDR_LEVEL if the distance is the reason");
      concern(f, a, disabled);
      a.findings.push_back(f);
    }
  }
  // External net plugins that did not load.
  std::map<std::string, std::vector<size_t>> failures;
  for (size_t i = 0; i < a.ranks.size(); ++i)
    for (const auto& text : a.ranks[i].plugin_failures) failures[number_pattern(text)].push_back(i);
  // When every rank that says anything of the plugin says the same, a rank
  // whose plugin line may be among the unreadable ones is counted with them
  // (and the garbled finding says so).
  if (failures.size() == 1)
    assume_like_the_others(
        p, failures.begin()->second, "another network plugin result",
        [](const NcclRankInfo& r) { return !r.plugin_failures.empty() || !r.net_plugin.empty(); });
  bool asked = false;
  for (const auto& r : a.ranks) asked |= r.environment.count("NCCL_NET_PLUGIN") > 0;
  for (const auto& [pattern, idx] : failures) {
    const auto& text = a.ranks[idx[0]].plugin_failures[0];
    bool default_missing = (pattern.find("libnccl-net.so") != std::string::npos ||
                            pattern.find("No plugin found") != std::string::npos) &&
                           (pattern.find("No such file") != std::string::npos ||
                            pattern.find("Could not find") != std::string::npos ||
                            pattern.find("No plugin found") != std::string::npos);
    const std::string fallback =
        a.network.empty() ? "NCCL's internal IB/Socket transport" : "NCCL's internal " + a.network;
    std::string shown = text;
    for (const auto& t : a.ranks[idx[0]].plugin_failures)
      if (number_pattern(t) == pattern) shown = t;
    auto f = finding(default_missing && !asked ? NcclSeverity::kInfo : NcclSeverity::kWarn,
                     "net.plugin_not_loaded",
                     fmt::format("network plugin not loaded: {}; fallback: {}", shown, fallback),
                     default_missing ? "no external plugin installed (normal without SHARP/EFA/"
                                       "a vendor plugin)"
                                     : "the plugin library is missing from LD_LIBRARY_PATH, or "
                                       "built for another NCCL version (plugin API symbol)",
                     default_missing && !asked
                         ? ""
                         : "check NCCL_NET_PLUGIN and that the plugin .so and its dependencies "
                           "resolve (ldd) on every node");
    concern(f, a, idx);
    f.count = idx.size();
    a.findings.push_back(f);
  }
  // NCCL_NET asked for one network, another was used.
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    const auto it = a.ranks[i].environment.find("NCCL_NET");
    if (it != a.ranks[i].environment.end() && !a.ranks[i].network.empty() &&
        it->second != a.ranks[i].network) {
      auto f = finding(NcclSeverity::kWarn, "net.requested_not_used",
                       fmt::format("NCCL_NET={} but {} uses network {}", it->second,
                                   rank_label(a.ranks[i]), a.ranks[i].network),
                       "the requested network or plugin did not initialise",
                       "look for the NET/Plugin lines of that rank");
      concern(f, a, {i});
      a.findings.push_back(f);
      break;
    }
  }
  // Virtual or loopback interfaces.
  std::map<std::string, std::vector<size_t>> virtual_ifs;
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    if (is_virtual_interface(a.ranks[i].bootstrap_interface))
      virtual_ifs["bootstrap " + a.ranks[i].bootstrap_interface].push_back(i);
    for (const auto& s : a.ranks[i].socket_interfaces)
      if (is_virtual_interface(s)) virtual_ifs["NET/Socket " + s].push_back(i);
  }
  for (const auto& [what, idx] : virtual_ifs) {
    auto f = finding(
        a.nodes > 1 ? NcclSeverity::kWarn : NcclSeverity::kInfo, "net.virtual_interface",
        fmt::format("{} is a virtual or loopback interface (on {} rank(s))", what, idx.size()),
        a.nodes > 1 ? "NCCL picked the first interface it found; between nodes a "
                      "loopback or container bridge address is unreachable or the "
                      "same on every host"
                    : "harmless on one node",
        "set NCCL_SOCKET_IFNAME to the cluster network (e.g. =eth0 or =^docker,lo)");
    concern(f, a, idx);
    a.findings.push_back(f);
  }
}

void transport_findings(Parsed& p) {
  auto& a = p.analysis;
  for (const auto& c : a.communicators) {
    std::map<std::pair<int, int>, std::set<std::string>> classes;
    for (const auto& l : c.links) classes[{l.from, l.to}].insert(l.transport);
    for (const auto& [pair, forward] : classes) {
      if (pair.first >= pair.second) continue;
      const auto back = classes.find({pair.second, pair.first});
      if (back == classes.end() || back->second == forward) continue;
      const auto list = [](const std::set<std::string>& s) {
        return join(std::vector<std::string>(s.begin(), s.end()), "+");
      };
      auto f =
          finding(NcclSeverity::kWarn, "transport.asymmetric",
                  fmt::format("ranks {} -> {} use {} but {} -> {} use {}", pair.first, pair.second,
                              list(forward), pair.second, pair.first, list(back->second)),
                  "P2P allowed one way only (NCCL_P2P_LEVEL/DISABLE differing between "
                  "ranks, or peer access not symmetric), or differing NCCL settings",
                  "compare the NCCL_* environment of both ranks; nvidia-smi topo -p2p r");
      f.rank = pair.first;
      f.peer = "rank " + std::to_string(pair.second);
      f.ranks = {pair.first, pair.second};
      a.findings.push_back(f);
    }
  }
}

void warn_findings(Parsed& p) {
  auto& a = p.analysis;
  if (p.ofi_warn_lines > 0) {
    const bool ofi_used = a.network.find("Libfabric") != std::string::npos ||
                          a.network.find("OFI") != std::string::npos ||
                          a.net_plugin.find("OFI") != std::string::npos ||
                          a.net_plugin.find("ofi") != std::string::npos;
    auto f = finding(
        ofi_used ? NcclSeverity::kWarn : NcclSeverity::kInfo, "net.ofi_plugin_warnings",
        fmt::format(
            "{} NET/OFI WARN line(s) of the libfabric plugin{}: {}", p.ofi_warn_lines,
            ofi_used ? ""
                     : ", harmless here (NCCL uses " +
                           (a.network.empty() ? std::string("another network") : a.network) + ")",
            p.ofi_warn_example),
        ofi_used ? "the OFI plugin carries this job's traffic and reported a problem"
                 : "aws-ofi-nccl is installed (EFA images) and probed at start on nodes without "
                   "EFA; NCCL falls back to its own transport",
        ofi_used ? "check the EFA/libfabric setup (fi_info -p efa)"
                 : "none needed; NCCL_NET_PLUGIN=none stops the probe");
    concern(f, a, std::vector<size_t>(p.ofi_warn_ranks.begin(), p.ofi_warn_ranks.end()));
    f.count = p.ofi_warn_lines;
    a.findings.push_back(f);
  }
  for (const auto& g : a.warnings) {
    auto f = finding(NcclSeverity::kWarn, "nccl.warn",
                     fmt::format("NCCL WARN x{} on {} (ranks {}): {}", g.count, join(g.hosts),
                                 g.ranks.empty() ? "?" : join_ranks(g.ranks), g.example),
                     "", "first at " + g.first_seen);
    f.count = g.count;
    f.ranks = g.ranks;
    f.hosts = g.hosts;
    if (f.hosts.size() == 1) f.host = f.hosts[0];
    if (f.ranks.size() == 1) f.rank = f.ranks[0];
    a.findings.push_back(f);
  }
}

void init_findings(Parsed& p) {
  auto& a = p.analysis;
  bool any_error = !p.errors.empty() || !a.warnings.empty();
  // Per communicator: members that did not complete init.
  std::map<std::string, std::vector<size_t>> incomplete;
  std::map<std::string, size_t> completed;
  std::map<std::string, std::map<size_t, NcclInitState>> state_of;
  // A rank whose Init COMPLETE could be among the unreadable lines is not
  // called incomplete (unless an error says it failed); the log.garbled_lines
  // finding names it.
  std::vector<std::string> unconfirmed;
  const auto could_have_completed = [&](size_t i, NcclInitState state) {
    if (state == NcclInitState::kAborted || !unreadable_lines_of(p, a.ranks[i])) return false;
    unconfirmed.push_back(rank_label(a.ranks[i]));
    return true;
  };
  for (size_t i = 0; i < a.ranks.size(); ++i)
    for (const auto& m : a.ranks[i].communicators) {
      const std::string key = m.comm_id.empty() ? "" : m.comm_id;
      if (m.init == NcclInitState::kInitComplete || m.init == NcclInitState::kDestroyed) {
        ++completed[key];
      } else if (could_have_completed(i, m.init)) {
        continue;
      } else {
        incomplete[key].push_back(i);
        state_of[key][i] = m.init;
      }
    }
  // Ranks with NCCL lines but no communicator at all, when others have one.
  bool any_comm = false;
  for (const auto& r : a.ranks) any_comm |= !r.communicators.empty();
  std::vector<size_t> never_started;
  for (size_t i = 0; i < a.ranks.size(); ++i)
    if (any_comm && a.ranks[i].communicators.empty() &&
        a.ranks[i].init < NcclInitState::kInitComplete && !could_have_completed(i, a.ranks[i].init))
      never_started.push_back(i);
  if (!unconfirmed.empty())
    p.unreadable_could_change.push_back(fmt::format(
        "Init COMPLETE of {} (not called incomplete)",
        join(unconfirmed.size() > 8
                 ? std::vector<std::string>(unconfirmed.begin(), unconfirmed.begin() + 8)
                 : unconfirmed,
             "; ")));
  for (const auto& [key, idx] : incomplete) {
    std::vector<std::string> states;
    for (const size_t i : idx)
      states.push_back(
          fmt::format("{}: {}", rank_label(a.ranks[i]), nccl_init_state_name(state_of[key][i])));
    const bool others_done = completed[key] > 0;
    auto f = finding(
        others_done || any_error ? NcclSeverity::kFail : NcclSeverity::kWarn, "init.incomplete",
        fmt::format(
            "{} rank(s) of communicator {} never reached Init COMPLETE: {}", idx.size(),
            key.empty() ? "?" : key,
            join(states.size() > 8 ? std::vector<std::string>(states.begin(), states.begin() + 8)
                                   : states,
                 "; ")),
        others_done ? "the others finished: these hit an error or wait for a peer "
                      "(see the errors below)"
                    : "init hung or failed (or the log was cut before the end)",
        "look at the first WARN of these ranks; if there is none, at the ranks "
        "they connect to");
    concern(f, a, idx);
    f.count = idx.size();
    a.findings.push_back(f);
  }
  if (!never_started.empty()) {
    auto f = finding(any_error ? NcclSeverity::kFail : NcclSeverity::kWarn, "init.incomplete",
                     fmt::format("{} process(es) logged NCCL lines but no communicator init: {}",
                                 never_started.size(), rank_label(a.ranks[never_started[0]])),
                     "failed before ncclCommInitRank (bootstrap, CUDA) or the log was cut",
                     "look at the first WARN of these processes");
    concern(f, a, never_started);
    a.findings.push_back(f);
  }
  // Ranks a communicator has but no log shows; not when as many processes
  // whose rank is unknown had lines that could not be read (their init lines).
  for (const auto& c : a.communicators) {
    if (c.nranks <= 0 || c.ranks_seen.size() >= static_cast<size_t>(c.nranks)) continue;
    size_t unnumbered = 0;
    for (const auto& r : a.ranks)
      unnumbered += unreadable_lines_of(p, r) &&
                    !std::binary_search(c.ranks_seen.begin(), c.ranks_seen.end(), r.rank);
    if (c.ranks_seen.size() + unnumbered >= static_cast<size_t>(c.nranks)) {
      p.unreadable_could_change.push_back(
          fmt::format("the rank numbers of {} process(es) (communicator {})", unnumbered, c.id));
      continue;
    }
    std::vector<int> missing;
    for (int r = 0, j = 0; r < c.nranks && missing.size() < 64; ++r) {
      while (j < static_cast<int>(c.ranks_seen.size()) && c.ranks_seen[j] < r) ++j;
      if (j >= static_cast<int>(c.ranks_seen.size()) || c.ranks_seen[j] != r) missing.push_back(r);
    }
    auto f = finding(
        any_error ? NcclSeverity::kWarn : NcclSeverity::kInfo, "log.ranks_missing",
        fmt::format("communicator {} has {} ranks; the logs show {} (missing: {})",
                    c.id.empty() ? "?" : c.id, c.nranks, c.ranks_seen.size(), join_ranks(missing)),
        "only some ranks' output was collected",
        any_error ? "collect the missing ranks' logs: a root cause may be there" : "");
    a.findings.push_back(f);
  }
}

// Which host an address in an error line is.
std::string host_of(const Parsed& p, const std::string& peer) {
  const auto it = p.host_of_address.find(peer);
  if (it != p.host_of_address.end()) return it->second;
  for (const auto& r : p.analysis.ranks)
    if (r.host == peer) return peer;
  return {};
}

const char* ib_status_meaning(int status) {
  switch (status) {
    case 1:
      return "local length error";
    case 2:
      return "local QP operation error";
    case 4:
      return "local protection error (memory registration: GPUDirect/peermem or DMA-BUF problem)";
    case 5:
      return "work request flushed (a secondary error after the queue pair failed)";
    case 9:
      return "remote invalid request";
    case 10:
      return "remote access error (the peer's memory registration)";
    case 11:
      return "remote operation error";
    case 12:
      return "transport retry counter exceeded: no acknowledgement from the peer (link down or "
             "flapping, the peer node down, or a fabric problem in between)";
    case 13:
      return "RNR retry exceeded: the peer stopped posting receives (it stalled or exited)";
    default:
      return "see ibv_wc_status_str";
  }
}

void error_findings(Parsed& p) {
  auto& a = p.analysis;
  // One finding per kind (and IB status), with every rank it hit.
  std::map<std::pair<ErrorKind, int>, std::vector<const ErrorEvent*>> groups;
  for (const auto& e : p.errors) groups[{e.kind, e.ib_status}].push_back(&e);
  for (const auto& [key, events] : groups) {
    const auto& first = *events.front();
    std::set<int> ranks;
    std::set<std::string> hosts, peers, peer_hosts;
    for (const auto* e : events) {
      int rank = e->rank;
      if (e->rank_index < a.ranks.size()) {
        rank = a.ranks[e->rank_index].rank;
        hosts.insert(a.ranks[e->rank_index].host);
      } else if (!e->host.empty()) {
        hosts.insert(e->host);
      }
      if (rank >= 0) ranks.insert(rank);
      if (!e->peer.empty()) {
        peers.insert(e->peer);
        const auto h = host_of(p, e->peer);
        peer_hosts.insert(h.empty() ? e->peer : h);
      }
    }
    // Is the peer's log among the inputs?
    std::vector<std::string> peers_logged, peers_missing;
    for (const auto& ph : peer_hosts)
      (std::find(a.hosts.begin(), a.hosts.end(), ph) != a.hosts.end() ? peers_logged
                                                                      : peers_missing)
          .push_back(ph);
    const auto peer_text = [&]() {
      std::string out;
      if (!peers_logged.empty())
        out += "the root cause should be in the log of " + join(peers_logged) +
               " (it exited or failed first)";
      if (!peers_missing.empty())
        out += std::string(out.empty() ? "" : "; ") + "the log of " + join(peers_missing) +
               " is not among the inputs: get it, the root cause is there";
      return out.empty() ? std::string(
                               "find the rank that failed first (the earliest WARN "
                               "across all logs)")
                         : out;
    };
    NcclLogFinding f;
    f.severity = NcclSeverity::kFail;
    const std::string example = first.message.substr(0, 240);
    switch (first.kind) {
      case ErrorKind::kConnectionRefused:
        f = finding(NcclSeverity::kFail, "error.connection_refused",
                    "connection refused: " + example,
                    "nothing listened at the peer's address: the peer had not started, had "
                    "already exited, or the address is on the wrong interface",
                    peer_text() + "; check NCCL_SOCKET_IFNAME and firewalls between the nodes");
        f.role = NcclRole::kSecondary;
        break;
      case ErrorKind::kConnectFailed:
        f = finding(NcclSeverity::kFail, "error.connect_failed", "connect failed: " + example,
                    "no route to the peer's address (wrong interface, firewall, or the peer "
                    "went away)",
                    "check NCCL_SOCKET_IFNAME on every node and that the nodes reach each other "
                    "on that network (ping, nc)");
        f.role = NcclRole::kUnknown;
        break;
      case ErrorKind::kPeerClosed:
        f = finding(NcclSeverity::kFail, "error.peer_closed",
                    "connection closed by the peer: " + example,
                    "the remote process exited or crashed (a secondary failure here)", peer_text());
        f.role = NcclRole::kSecondary;
        break;
      case ErrorKind::kRemoteError:
        f = finding(NcclSeverity::kFail, "error.remote", "remote error: " + example,
                    "a remote process exited or there was a network error (a secondary failure "
                    "here)",
                    peer_text());
        f.role = NcclRole::kSecondary;
        break;
      case ErrorKind::kIbCompletion: {
        const int status = key.second;
        f = finding(NcclSeverity::kFail, "error.ib_completion",
                    fmt::format("IB completion error status {}: {}", status, example),
                    fmt::format("status {}: {}", status, ib_status_meaning(status)),
                    status == 5   ? "look for the first completion error with another status"
                    : status == 4 ? "check nvidia_peermem / DMA-BUF and NCCL_NET_GDR_LEVEL on this "
                                    "node"
                                  : "check the link on both ends (ibstat, ibv_devinfo, "
                                    "ibdiagnet, switch and subnet manager logs); " +
                                        peer_text());
        f.role = status == 4                   ? NcclRole::kRoot
                 : status == 5 || status == 13 ? NcclRole::kSecondary
                                               : NcclRole::kUnknown;
        break;
      }
      case ErrorKind::kInvalidUsage:
        f = finding(NcclSeverity::kFail, "error.invalid_usage", "invalid usage: " + example,
                    first.message.find("Message truncated") != std::string::npos
                        ? "a receive smaller than the send it matched: the ranks' send/recv "
                          "counts or order differ (API misuse, not a network fault)"
                        : "the program called NCCL wrongly (send/recv not grouped or unmatched, "
                          "a wrong root or count, mismatched collectives between ranks)",
                    "fix the calling code on this rank; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL "
                    "shows the calls");
        f.role = NcclRole::kRoot;
        break;
      case ErrorKind::kCudaError:
        f = finding(NcclSeverity::kFail, "error.cuda", "CUDA error: " + example,
                    "a CUDA failure on this rank (out of memory, a device fault, a driver "
                    "problem)",
                    "check nvidia-smi and dmesg (Xid) on this node");
        f.role = NcclRole::kRoot;
        break;
      case ErrorKind::kSystemError:
        f = finding(NcclSeverity::kFail, "error.system", "system error: " + example,
                    "a system call or library call failed on this rank (socket, memory "
                    "registration, shared memory)",
                    "check /dev/shm size, ulimit -l (locked memory) and the WARN before it");
        f.role = NcclRole::kRoot;
        break;
      case ErrorKind::kUngroupedSendRecv:
        f = finding(NcclSeverity::kFail, "error.ungrouped_send_recv",
                    "API misuse, not a network fault: " + example,
                    "ncclSend and ncclRecv called outside a group, each rank sending first: NCCL "
                    "2.29's NET/Socket then connects to the peer's local (AF_UNIX) address and "
                    "fails with an internal error",
                    "put each rank's matching ncclSend/ncclRecv between ncclGroupStart() and "
                    "ncclGroupEnd() (NCCL docs: Group Calls, point-to-point); in PyTorch, "
                    "batch_isend_irecv");
        f.role = NcclRole::kRoot;
        break;
      case ErrorKind::kInternalError: {
        const bool misuse = std::any_of(p.errors.begin(), p.errors.end(), [](const ErrorEvent& e) {
          return e.kind == ErrorKind::kUngroupedSendRecv;
        });
        f = finding(NcclSeverity::kFail, "error.internal", "internal error: " + example,
                    misuse ? "follows the ungrouped send/recv (error.ungrouped_send_recv)"
                           : "an NCCL internal error (often after a network failure)",
                    misuse ? "fix the grouping of send/recv" : "look at the WARN lines before it");
        f.role = misuse ? NcclRole::kSecondary : NcclRole::kUnknown;
        break;
      }
      case ErrorKind::kBootstrapTimeout:
        f = finding(NcclSeverity::kFail, "error.bootstrap_timeout",
                    "bootstrap timed out: " + example,
                    "some ranks never joined (not started, crashed, or unreachable)", peer_text());
        f.role = NcclRole::kSecondary;
        break;
      case ErrorKind::kWatchdogTimeout: {
        std::map<long, std::vector<int>> by_seq;
        for (const auto* e : events) by_seq[e->seq].push_back(e->rank);
        std::string seqs;
        for (auto& [seq, rs] : by_seq) {
          std::sort(rs.begin(), rs.end());
          rs.erase(std::unique(rs.begin(), rs.end()), rs.end());
          seqs +=
              fmt::format("{}SeqNum {} on ranks {}", seqs.empty() ? "" : "; ", seq, join_ranks(rs));
        }
        // Ranks the job has that did not time out: the suspects.
        int nranks = p.framework_world_size;
        for (const auto& c : a.communicators) nranks = std::max(nranks, c.nranks);
        std::vector<int> quiet;
        for (int r = 0; r < nranks && quiet.size() < 64; ++r)
          if (!ranks.count(r)) quiet.push_back(r);
        std::string cause =
            "a collective waited past its timeout: some rank did not join it (crashed, stuck "
            "in other work, or called a different collective), or the network stalled";
        if (by_seq.size() > 1)
          cause +=
              fmt::format("; ranks stopped at different SeqNum: rank(s) {} at SeqNum {} are behind",
                          join_ranks(by_seq.begin()->second), by_seq.begin()->first);
        f = finding(NcclSeverity::kFail, "error.watchdog_timeout",
                    fmt::format("watchdog timeout ({}{} {}): {}", first.op.empty() ? "?" : first.op,
                                first.numel >= 0 ? fmt::format(", NumelIn {}", first.numel) : "",
                                seqs, example),
                    cause,
                    quiet.empty() ? "find the rank that is not in the collective (py-spy dump, "
                                    "the first error across all logs)"
                                  : "ranks without a timeout (" + join_ranks(quiet) +
                                        ") are the suspects: look at their logs");
        f.role = NcclRole::kSecondary;
        break;
      }
    }
    f.count = events.size();
    f.ranks.assign(ranks.begin(), ranks.end());
    f.hosts.assign(hosts.begin(), hosts.end());
    if (f.hosts.size() == 1) f.host = f.hosts[0];
    if (f.ranks.size() == 1) f.rank = f.ranks[0];
    if (!peer_hosts.empty())
      f.peer = join(std::vector<std::string>(peer_hosts.begin(), peer_hosts.end()));
    a.findings.push_back(f);
  }
}

}  // namespace

// The garbled-lines finding says what the lines not read could have changed.
void unreadable_note(Parsed& p) {
  if (p.unreadable_could_change.empty()) return;
  for (auto& f : p.analysis.findings)
    if (f.code == "log.garbled_lines" || f.code == "log.truncated") {
      f.message += "; they could have said: " + join(p.unreadable_could_change, "; ");
      return;
    }
}

void add_findings(Parsed& p) {
  input_findings(p);
  error_findings(p);
  init_findings(p);
  version_findings(p);
  environment_findings(p);
  network_findings(p);
  transport_findings(p);
  warn_findings(p);
  unreadable_note(p);
  std::stable_sort(p.analysis.findings.begin(), p.analysis.findings.end(),
                   [](const auto& x, const auto& y) {
                     return static_cast<int>(x.severity) > static_cast<int>(y.severity);
                   });
}

}  // namespace ccscope::diag::nccl_log_detail
