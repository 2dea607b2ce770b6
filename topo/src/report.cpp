#include "ccscope/topo/report.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "text.h"

namespace ccscope::topo {
namespace {

std::string figure(double GBps) {
  if (GBps <= 0) return "?";
  char text[32];
  std::snprintf(text, sizeof text, GBps >= 100 ? "%.0f" : GBps >= 1 ? "%.2f" : "%.4f", GBps);
  return text;
}

// The expected figure and path name of a measured pair.
void rate_measured(TopologyReport& report, MeasuredPair& m) {
  for (const NodePairPath& p : report.node_pairs)
    if ((p.host_a == m.endpoint_a && p.host_b == m.endpoint_b) ||
        (p.host_a == m.endpoint_b && p.host_b == m.endpoint_a)) {
      m.expected_GBps = p.expected_GBps;
      m.path = std::string(transport_name(p.transport)) +
               (p.device_a.empty() ? "" : " over " + p.device_a);
      return;
    }
  // "node0/GPU3": the GPU index after the node's name; -1 when not of that form.
  const auto gpu_of = [](const std::string& endpoint) {
    const size_t at = endpoint.find("/GPU");
    int index = -1;
    if (at == std::string::npos) return index;
    const char* end = endpoint.data() + endpoint.size();
    const auto [stop, error] = std::from_chars(endpoint.data() + at + 4, end, index);
    return error == std::errc() && stop == end ? index : -1;
  };
  const int gpu_a = gpu_of(m.endpoint_a), gpu_b = gpu_of(m.endpoint_b);
  if (gpu_a < 0 || gpu_b < 0) return;
  const std::string host = m.endpoint_a.substr(0, m.endpoint_a.find("/GPU"));
  for (const HostTopology& node : report.nodes) {
    if (node.hostname != host) continue;
    for (const GpuPairPath& p : gpu_pair_paths(node, report.env))
      if ((p.gpu_a == gpu_a && p.gpu_b == gpu_b) || (p.gpu_a == gpu_b && p.gpu_b == gpu_a)) {
        m.expected_GBps = p.expected_GBps;
        m.path = p.token();
      }
  }
}

}  // namespace

void complete_report(TopologyReport& report) {
  report.node_pairs.clear();
  for (size_t i = 0; i < report.nodes.size(); ++i)
    for (size_t j = i + 1; j < report.nodes.size(); ++j)
      report.node_pairs.push_back(
          node_pair_path(report.nodes[i], report.nodes[j], report.env, report.sockets_only));
  for (const HostTopology& node : report.nodes)
    for (Finding& f : check_node(node)) report.findings.push_back(std::move(f));
  for (Finding& f : check_homogeneity(report.nodes)) report.findings.push_back(std::move(f));
  for (MeasuredPair& m : report.measured) {
    if (m.expected_GBps <= 0 && m.path.empty()) rate_measured(report, m);
    m.below_threshold = m.expected_GBps > 0 && m.measured_GBps < report.threshold * m.expected_GBps;
    if (m.below_threshold)
      report.findings.push_back(
          {Finding::Severity::kFail, m.endpoint_a, "measure.below_expected",
           m.endpoint_a + " <-> " + m.endpoint_b + " (" + m.path + "): " + figure(m.measured_GBps) +
               " GB/s, " +
               std::to_string(static_cast<int>(100 * m.measured_GBps / m.expected_GBps)) +
               "% of the expected " + figure(m.expected_GBps) + " GB/s (threshold " +
               std::to_string(static_cast<int>(100 * report.threshold + 0.5)) + "%)",
           "check the link of both ends (cable, negotiated rate, errors: ethtool -S / ibstat / "
           "perfquery), then the switch port"});
  }
}

std::string render_topology_text(const TopologyReport& report) {
  std::string out;
  for (const HostTopology& node : report.nodes) {
    out += "== " + (node.hostname.empty() ? std::string("(unnamed node)") : node.hostname) + ": " +
           std::to_string(node.gpus.size()) + " GPUs, " + std::to_string(node.nics.size()) +
           " network interfaces/ports";
    if (node.packages || node.cores)
      out += ", " + std::to_string(node.packages) + " packages, " +
             std::to_string(node.numa_nodes) + " NUMA nodes, " + std::to_string(node.cores) +
             " cores";
    out += "\n  sources:";
    for (const SourceStatus& s : node.sources)
      out += "\n    " + text::padded(s.name, 6) + (s.read ? "read      " : "not read  ") + s.detail;
    out += "\n";
    if (node.gpus.empty()) {
      out += "  no GPU found\n";
    } else {
      out += "\n" + render_path_matrix(node, report.env) + "\n";
      out += "  GPU  name                              bus id         PCIe (now/max)\n";
      for (const Gpu& gpu : node.gpus) {
        const PcieLink now = gpu.pcie_current.known() ? gpu.pcie_current : gpu.pci.link;
        auto link = [](const PcieLink& l) {
          return l.generation ? "gen" + std::to_string(l.generation) +
                                    (l.width ? " x" + std::to_string(l.width) : "")
                              : std::string("?");
        };
        out += "  " + text::padded(std::to_string(gpu.index), 5) + text::padded(gpu.name, 34) +
               text::padded(gpu.pci.bus_id, 15) + link(now) + " / " + link(gpu.pcie_max) + "\n";
      }
      const std::vector<GpuPairPath> pairs = gpu_pair_paths(node, report.env);
      if (!pairs.empty()) {
        out += "\n  GPU pair  path  transport  expected GB/s  basis\n";
        for (const GpuPairPath& p : pairs)
          out += "  " + text::padded(std::to_string(p.gpu_a) + "-" + std::to_string(p.gpu_b), 10) +
                 text::padded(p.token(), 6) + text::padded(p.p2p ? "P2P" : "SHM", 11) +
                 text::padded(figure(p.expected_GBps), 15) + p.basis + "\n";
      }
    }
    out += "\n  NIC            kind        state    rate Gbit/s  MTU    driver\n";
    for (const Nic& nic : node.nics) {
      const std::string rate =
          nic.effective_Gbps() > 0
              ? text::general(nic.effective_Gbps()) +
                    (nic.shaped_Gbps > 0 && nic.shaped_Gbps < nic.rate_Gbps ? " (tc)" : "")
              : "?";
      out += "  " + text::padded(nic.name, 15) + text::padded(nic_kind_name(nic.kind), 12) +
             text::padded(nic.state.empty() ? "?" : nic.state, 9) + text::padded(rate, 13) +
             text::padded(nic.mtu ? std::to_string(nic.mtu) : "?", 7) +
             (nic.driver.empty() ? (nic.is_virtual ? "(virtual)" : "") : nic.driver) + "\n";
    }
    for (const std::string& note : node.notes) out += "  note: " + note + "\n";
    out += "\n";
  }
  if (report.nodes.size() > 1) {
    out +=
        "nodes:\n  host                 GPUs  GPU model                      NICs up  driver       "
        " CUDA   NCCL\n";
    for (const HostTopology& node : report.nodes) {
      std::string model = node.gpus.empty() ? "-" : node.gpus.front().name;
      const size_t up =
          static_cast<size_t>(std::count_if(node.nics.begin(), node.nics.end(), [](const Nic& n) {
            return n.name != "lo" && (n.state == "up" || n.state == "active");
          }));
      out += "  " + text::padded(node.hostname, 21) +
             text::padded(std::to_string(node.gpus.size()), 6) + text::padded(model, 31) +
             text::padded(std::to_string(up), 9) +
             text::padded(node.driver_version.empty() ? "-" : node.driver_version, 14) +
             text::padded(node.cuda_version.empty() ? "-" : node.cuda_version, 7) +
             (node.nccl_version.empty() ? "-" : node.nccl_version) + "\n";
    }
    out += "\nnode pairs:\n  pair                        transport  expected GB/s  basis\n";
    for (const NodePairPath& p : report.node_pairs)
      out += "  " + text::padded(p.host_a + " - " + p.host_b, 28) +
             text::padded(transport_name(p.transport), 11) +
             text::padded(figure(p.expected_GBps), 15) + p.basis + "\n";
    out += "\n";
  }
  if (!report.measured.empty()) {
    std::vector<const MeasuredPair*> sorted;
    for (const MeasuredPair& m : report.measured) sorted.push_back(&m);
    // Slowest last: the pair to look at ends the table, a ranked list.
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const MeasuredPair* a, const MeasuredPair* b) {
                       return a->measured_GBps > b->measured_GBps;
                     });
    out +=
        "measured (GB/s per direction, the slower direction; MPI: one way at a time, NCCL: "
        "both ways at once; slowest last):\n  pair                        round  path              "
        " measured GB/s  "
        "expected GB/s  % of expected\n";
    for (const MeasuredPair* m : sorted) {
      std::string percent = "?";
      if (m->expected_GBps > 0)
        percent =
            std::to_string(static_cast<int>(100 * m->measured_GBps / m->expected_GBps + 0.5)) +
            "%" + (m->below_threshold ? "  BELOW THRESHOLD" : "");
      out += "  " + text::padded(m->endpoint_a + " - " + m->endpoint_b, 28) +
             text::padded(std::to_string(m->round), 7) + text::padded(m->path, 19) +
             text::padded(figure(m->measured_GBps), 15) +
             text::padded(figure(m->expected_GBps), 15) + percent + "\n";
    }
    out += "\n";
  }
  out += "findings:\n";
  if (report.findings.empty()) out += "  none\n";
  for (const Finding& f : report.findings)
    out += "  " + text::padded(severity_name(f.severity), 5) + f.message + "\n        -> " +
           f.remedy + "\n";
  return out;
}

std::vector<records::TopologyPathRecord> path_records(const TopologyReport& report) {
  const auto measured_for = [&report](const std::string& a, const std::string& b) {
    for (const MeasuredPair& m : report.measured)
      if ((m.endpoint_a == a && m.endpoint_b == b) || (m.endpoint_a == b && m.endpoint_b == a))
        return &m;
    return static_cast<const MeasuredPair*>(nullptr);
  };
  const auto fill = [](records::TopologyPathRecord& r, double expected, const MeasuredPair* m) {
    if (expected > 0) r.expected_GBps = expected;
    if (!m) return;
    r.measured_GBps = m->measured_GBps;
    r.round = static_cast<int64_t>(m->round);
    if (expected > 0) {
      r.percent_of_expected = 100 * m->measured_GBps / expected;
      r.below_threshold = m->below_threshold;
    }
  };
  std::vector<records::TopologyPathRecord> out;
  for (const HostTopology& node : report.nodes)
    for (const GpuPairPath& p : gpu_pair_paths(node, report.env)) {
      records::TopologyPathRecord r;
      r.kind = "gpu_pair";
      r.host_a = r.host_b = node.hostname;
      r.endpoint_a = "GPU" + std::to_string(p.gpu_a);
      r.endpoint_b = "GPU" + std::to_string(p.gpu_b);
      r.path = p.token();
      r.basis = p.basis;
      fill(r, p.expected_GBps,
           measured_for(node.hostname + "/" + r.endpoint_a, node.hostname + "/" + r.endpoint_b));
      out.push_back(std::move(r));
    }
  for (const NodePairPath& p : report.node_pairs) {
    records::TopologyPathRecord r;
    r.kind = "node_pair";
    r.host_a = p.host_a;
    r.host_b = p.host_b;
    r.endpoint_a = p.device_a;
    r.endpoint_b = p.device_b;
    r.path = transport_name(p.transport);
    r.basis = p.basis;
    fill(r, p.expected_GBps, measured_for(p.host_a, p.host_b));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ccscope::topo
