#pragma once
// The topology record kind ("ccscope.topo_path/1"): one record per path the
// topology probe rated, and measured when `ccscope topo --measure` ran: a pair
// of GPUs of a node, or a pair of nodes. `ccscope topo --csv FILE` writes them.
#include <optional>
#include <string>
#include <vector>

#include "ccscope/records/schema.h"

namespace ccscope::records {

struct TopologyPathRecord {
  std::string kind;  // "gpu_pair", "node_pair"
  std::string host_a, host_b;
  std::string endpoint_a, endpoint_b;  // "GPU0", "node1", "mlx5_0:1"
  std::string path;                    // nvidia-smi token ("NV4", "PIX") or "socket", "IB", "RoCE"
  std::string basis;                   // what the expected figure is made of
  std::optional<double> expected_GBps;
  std::optional<double> measured_GBps;
  std::optional<double> percent_of_expected;
  std::optional<bool> below_threshold;
  std::optional<int64_t> round;
};

using TopologyPathField = Field<TopologyPathRecord, TopologyPathRecord>;
using TopologyPathKind = RecordKind<TopologyPathRecord, TopologyPathRecord>;
const TopologyPathKind& topology_path_kind();

std::vector<Cell> topology_path_cells(const TopologyPathRecord& record);
// Reads a CSV written with the kind's columns (FieldError / CsvError on bad input).
std::vector<TopologyPathRecord> read_topology_path_csv(std::string_view text);

}  // namespace ccscope::records
