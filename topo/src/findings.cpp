#include "ccscope/topo/findings.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "text.h"

namespace ccscope::topo {
namespace {

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// NICs that carry traffic between nodes: not loopback, not down.
std::vector<const Nic*> cluster_nics(const HostTopology& node) {
  std::vector<const Nic*> nics;
  for (const Nic& nic : node.nics)
    if (nic.name != "lo" && nic.state != "down") nics.push_back(&nic);
  std::sort(nics.begin(), nics.end(), [](const Nic* a, const Nic* b) { return a->name < b->name; });
  return nics;
}

std::string gpu_count(const HostTopology& n) { return std::to_string(n.gpus.size()); }
std::string gpu_model(const HostTopology& n) {
  std::set<std::string> names;
  for (const Gpu& gpu : n.gpus) names.insert(gpu.name);
  return names.empty() ? "none" : join({names.begin(), names.end()}, ", ");
}
std::string nic_set(const HostTopology& n) {
  std::vector<std::string> names;
  for (const Nic* nic : cluster_nics(n))
    names.push_back(nic->name + " " + nic_kind_name(nic->kind));
  return names.empty() ? "none" : join(names, ", ");
}
std::string link_rates(const HostTopology& n) {
  std::vector<std::string> rates;
  for (const Nic* nic : cluster_nics(n))
    rates.push_back(
        nic->name + " " +
        (nic->effective_Gbps() > 0 ? text::general(nic->effective_Gbps()) + " Gbit/s" : "?"));
  for (const Gpu& gpu : n.gpus)
    if (gpu.pcie_current.known())
      rates.push_back("GPU" + std::to_string(gpu.index) + " PCIe gen" +
                      std::to_string(gpu.pcie_current.generation) + " x" +
                      std::to_string(gpu.pcie_current.width));
  return rates.empty() ? "none" : join(rates, ", ");
}
std::string or_none(const std::string& text) { return text.empty() ? "none" : text; }
std::string driver(const HostTopology& n) { return or_none(n.driver_version); }
std::string cuda(const HostTopology& n) { return or_none(n.cuda_version); }
std::string nccl(const HostTopology& n) { return or_none(n.nccl_version); }

}  // namespace

const char* severity_name(Finding::Severity severity) {
  switch (severity) {
    case Finding::Severity::kWarn:
      return "warn";
    case Finding::Severity::kFail:
      return "fail";
    case Finding::Severity::kInfo:
      break;
  }
  return "info";
}

const std::vector<NodeProperty>& homogeneity_properties() {
  static const std::vector<NodeProperty> properties = {
      {"gpu_count", gpu_count}, {"gpu_model", gpu_model},
      {"nic_set", nic_set},     {"link_rates", link_rates},
      {"driver", driver},       {"cuda", cuda},
      {"nccl", nccl},
  };
  return properties;
}

std::vector<Finding> check_homogeneity(const std::vector<HostTopology>& nodes) {
  std::vector<Finding> findings;
  if (nodes.size() < 2) return findings;
  for (const NodeProperty& property : homogeneity_properties()) {
    std::map<std::string, std::vector<std::string>> hosts_by_value;
    for (const HostTopology& node : nodes)
      hosts_by_value[property.value(node)].push_back(node.hostname);
    if (hosts_by_value.size() < 2) continue;
    size_t most = 0, holders_of_most = 0;
    std::string majority;
    for (const auto& [value, hosts] : hosts_by_value) {
      if (hosts.size() > most) {
        most = hosts.size();
        majority = value;
        holders_of_most = 1;
      } else if (hosts.size() == most) {
        ++holders_of_most;
      }
    }
    const std::string check = "homogeneity." + property.name;
    if (holders_of_most > 1) {
      std::vector<std::string> parts;
      for (const auto& [value, hosts] : hosts_by_value)
        parts.push_back(join(hosts, ",") + ": " + value);
      findings.push_back(
          {Finding::Severity::kWarn, "", check,
           property.name + " differs between nodes with no majority: " + join(parts, "; "),
           "make the nodes alike, or run on the ones that match"});
      continue;
    }
    for (const auto& [value, hosts] : hosts_by_value) {
      if (value == majority) continue;
      for (const std::string& host : hosts)
        findings.push_back({Finding::Severity::kWarn, host, check,
                            host + ": " + property.name + " is " + value + ", the other " +
                                std::to_string(most) + " nodes' is " + majority,
                            "fix " + host + " or leave it out of the job"});
    }
  }
  return findings;
}

std::vector<Finding> check_node(const HostTopology& node) {
  std::vector<Finding> findings;
  for (const Gpu& gpu : node.gpus) {
    const PcieLink& now = gpu.pcie_current;
    const PcieLink& max = gpu.pcie_max;
    if (now.known() && max.known() && (now.generation < max.generation || now.width < max.width))
      findings.push_back({Finding::Severity::kWarn, node.hostname, "pcie.trained_below_max",
                          "GPU" + std::to_string(gpu.index) + " (" + gpu.pci.bus_id +
                              ") PCIe link runs at gen" + std::to_string(now.generation) + " x" +
                              std::to_string(now.width) + ", below its maximum gen" +
                              std::to_string(max.generation) + " x" + std::to_string(max.width),
                          "reseat the card or check the slot and BIOS link settings (an idle GPU "
                          "may lower its generation to save power: read it under load)"});
  }
  for (const Nic& nic : node.nics)
    if (nic.name.find(':') != std::string::npos && nic.state != "active" && !nic.state.empty())
      findings.push_back({Finding::Severity::kWarn, node.hostname, "nic.rdma_port_not_active",
                          "RDMA port " + nic.name + " is " + nic.state,
                          "check the cable and the subnet manager (ibstat " + nic.name + ")"});
  if (node.gpus.empty())
    findings.push_back({Finding::Severity::kInfo, node.hostname, "gpu.none",
                        "no GPU found on " + node.hostname,
                        "none needed for MPI host-memory runs"});
  return findings;
}

std::vector<Finding> cross_check_nccl(const HostTopology& probed, const HostTopology& nccl_view) {
  std::vector<Finding> findings;
  const std::string& host = probed.hostname;
  for (const Nic& used : nccl_view.nics) {
    const Nic* seen = probed.find_nic(used.name);
    if (!seen) {
      findings.push_back({Finding::Severity::kWarn, host, "sources.nic_unknown",
                          "NCCL uses " + used.name + ", which the probe did not find",
                          "compare NCCL_SOCKET_IFNAME / NCCL_IB_HCA with the node's interfaces"});
    } else if (seen->state == "down") {
      findings.push_back({Finding::Severity::kFail, host, "sources.nic_down",
                          "NCCL uses " + used.name + ", which sysfs reports down",
                          "bring the link up or exclude it (NCCL_SOCKET_IFNAME / NCCL_IB_HCA)"});
    }
  }
  for (const Gpu& gpu : probed.gpus) {
    const Gpu* other = nccl_view.find_gpu_by_bus_id(gpu.pci.bus_id);
    if (!other) {
      findings.push_back({Finding::Severity::kWarn, host, "sources.gpu_missing_in_nccl",
                          "GPU" + std::to_string(gpu.index) + " (" + gpu.pci.bus_id +
                              ") is not in NCCL's topology",
                          "NCCL saw only the GPUs of its ranks; check CUDA_VISIBLE_DEVICES"});
      continue;
    }
    const auto active = [](const Gpu& g) {
      return std::count_if(g.nvlinks.begin(), g.nvlinks.end(),
                           [](const NvLink& l) { return l.active; });
    };
    if (active(gpu) != active(*other))
      findings.push_back({Finding::Severity::kWarn, host, "sources.nvlink_mismatch",
                          "GPU" + std::to_string(gpu.index) + ": the probe sees " +
                              std::to_string(active(gpu)) + " active NVLinks, NCCL " +
                              std::to_string(active(*other)),
                          "check nvidia-smi nvlink --status; NCCL needs the fabric manager on "
                          "NVSwitch systems"});
    if (gpu.pcie_current.generation > 0 && other->pci.link.generation > 0 &&
        gpu.pcie_current.generation != other->pci.link.generation)
      findings.push_back({Finding::Severity::kInfo, host, "sources.pcie_generation",
                          "GPU" + std::to_string(gpu.index) + ": NVML reads PCIe gen" +
                              std::to_string(gpu.pcie_current.generation) + ", NCCL gen" +
                              std::to_string(other->pci.link.generation),
                          "an idle GPU may train down; read both under load"});
  }
  for (const Gpu& gpu : nccl_view.gpus)
    if (!probed.find_gpu_by_bus_id(gpu.pci.bus_id))
      findings.push_back({Finding::Severity::kWarn, host, "sources.gpu_missing_in_probe",
                          "NCCL has a GPU at " + gpu.pci.bus_id + " that the probe did not find",
                          "check that NVML (the driver) and hwloc see the same devices"});
  return findings;
}

}  // namespace ccscope::topo
