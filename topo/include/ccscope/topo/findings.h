#pragma once
// What the topology says is wrong or odd: nodes that differ from the rest of
// the cluster, links that trained below their maximum, sources that disagree.
// Pure functions over HostTopology values.
#include <string>
#include <vector>

#include "ccscope/topo/topology.h"

namespace ccscope::topo {

struct Finding {
  enum class Severity { kInfo, kWarn, kFail };
  Severity severity = Severity::kInfo;
  std::string host;     // the node it is about, "" for the whole cluster
  std::string check;    // "homogeneity.gpu_model", "pcie.trained_below_max", ...
  std::string message;  // one line: what was seen
  std::string remedy;   // one line: what to do
};
const char* severity_name(Finding::Severity severity);  // "info", "warn", "fail"

// The properties every node of a cluster should share, as text per node:
// gpu_count, gpu_model, nic_set, link_rates, driver, cuda, nccl.
struct NodeProperty {
  std::string name;
  std::string (*value)(const HostTopology&);
};
const std::vector<NodeProperty>& homogeneity_properties();

// For each property, the nodes whose value differs from the majority's (a
// finding per such node, naming the property, its value and the majority's).
// Without a majority (a tie) every value is listed on one cluster finding.
std::vector<Finding> check_homogeneity(const std::vector<HostTopology>& nodes);

// One node on its own: GPUs whose PCIe link trained below its maximum
// generation or width, NICs that are down, no GPU found (info), sources not read.
std::vector<Finding> check_node(const HostTopology& node);

// The probe against NCCL's own view of the node (its topology dump): a NIC NCCL
// uses that sysfs reports down or that the probe does not know, GPUs one side
// lacks, NVLinks the probe sees and NCCL does not (and the reverse), a PCIe
// link NCCL reads at another generation.
std::vector<Finding> cross_check_nccl(const HostTopology& probed, const HostTopology& nccl_view);

}  // namespace ccscope::topo
