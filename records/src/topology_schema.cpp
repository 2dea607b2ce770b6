// The topology path record kind: every field of a `ccscope topo --csv` row, once.
#include "ccscope/records/topology_record.h"
#include "record_table.h"

namespace ccscope::records {

const TopologyPathKind& topology_path_kind() {
  using R = TopologyPathRecord;
  static const TopologyPathKind kind{
      "ccscope.topo_path",
      1,
      {
          TopologyPathField{"schema", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                            "record kind and version (ccscope.topo_path/1)",
                            [](const R&) { return schema_cell(topology_path_kind().schema_id()); },
                            [](const R&) { return schema_cell(topology_path_kind().schema_id()); },
                            [](R&, const Cell& c) { check_schema(topology_path_kind(), c); }},
          member_field<R, &R::kind>("kind", "", "gpu_pair (two GPUs of a node) or node_pair"),
          member_field<R, &R::host_a>("host_a", "", "the first end's node"),
          member_field<R, &R::host_b>("host_b", "", "the second end's node"),
          member_field<R, &R::endpoint_a>("endpoint_a", "",
                                          "the first end: GPU<index> or the node's device"),
          member_field<R, &R::endpoint_b>("endpoint_b", "", "the second end"),
          member_field<R, &R::path>(
              "path", "",
              "nvidia-smi topo -m token (NV#, PIX, PXB, PHB, NODE, SYS) or the "
              "transport between nodes (IB, RoCE, socket)"),
          member_field<R, &R::basis>(
              "basis", "", "what the expected figure is made of (the nominal-rate table)"),
          member_field<R, &R::expected_GBps>(
              "expected_GBps", "GB/s",
              "nominal per-direction bandwidth of the path; empty when unknown"),
          member_field<R, &R::measured_GBps>(
              "measured_GBps", "GB/s",
              "per direction, both directions at once, median of repetitions "
              "(topo --measure)"),
          member_field<R, &R::percent_of_expected>("percent_of_expected", "%",
                                                   "measured / expected x 100"),
          member_field<R, &R::below_threshold>("below_threshold", "",
                                               "measured below the threshold share of expected"),
          member_field<R, &R::round>("round", "",
                                     "the measuring schedule's round (disjoint pairs per round)"),
      }};
  return kind;
}

std::vector<Cell> topology_path_cells(const TopologyPathRecord& record) {
  return cells_of(topology_path_kind(), record);
}

std::vector<TopologyPathRecord> read_topology_path_csv(std::string_view text) {
  return read_csv(topology_path_kind(), text);
}

}  // namespace ccscope::records
