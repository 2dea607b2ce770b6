// The topology path record kind: every field of a `ccscope topo --csv` row, once.
#include "ccscope/records/topology_record.h"
#include "cells.h"

namespace ccscope::records {
namespace {

template <auto Member, long long MinValue = 0>
TopologyPathField field(std::string_view name, std::string_view unit, std::string_view meaning) {
  using M = std::remove_cvref_t<decltype(std::declval<TopologyPathRecord&>().*Member)>;
  return TopologyPathField{
      name,
      unit,
      cells::type_of<M>(),
      FieldScope::kRecord,
      1,
      "",
      true,
      meaning,
      [](const TopologyPathRecord& r) { return cells::cell_of(r.*Member); },
      [](const TopologyPathRecord& r) { return cells::cell_of(r.*Member); },
      [](TopologyPathRecord& r, const Cell& c) { cells::set_from<M, MinValue>(r.*Member, c); },
  };
}

Cell schema_cell() {
  Cell c;
  c.present = true;
  c.text = topology_path_kind().schema_id();
  return c;
}

}  // namespace

const TopologyPathKind& topology_path_kind() {
  using R = TopologyPathRecord;
  static const TopologyPathKind kind{
      "ccscope.topo_path",
      1,
      {
          TopologyPathField{"schema", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                            "record kind and version (ccscope.topo_path/1)",
                            [](const R&) { return schema_cell(); },
                            [](const R&) { return schema_cell(); }, [](R&, const Cell&) {}},
          field<&R::kind>("kind", "", "gpu_pair (two GPUs of a node) or node_pair"),
          field<&R::host_a>("host_a", "", "the first end's node"),
          field<&R::host_b>("host_b", "", "the second end's node"),
          field<&R::endpoint_a>("endpoint_a", "", "the first end: GPU<index> or the node's device"),
          field<&R::endpoint_b>("endpoint_b", "", "the second end"),
          field<&R::path>("path", "",
                          "nvidia-smi topo -m token (NV#, PIX, PXB, PHB, NODE, SYS) or the "
                          "transport between nodes (IB, RoCE, socket)"),
          field<&R::basis>("basis", "",
                           "what the expected figure is made of (the nominal-rate table)"),
          field<&R::expected_GBps>(
              "expected_GBps", "GB/s",
              "nominal per-direction bandwidth of the path; empty when unknown"),
          field<&R::measured_GBps>("measured_GBps", "GB/s",
                                   "per direction, both directions at once, median of repetitions "
                                   "(topo --measure)"),
          field<&R::percent_of_expected>("percent_of_expected", "%", "measured / expected x 100"),
          field<&R::below_threshold>("below_threshold", "",
                                     "measured below the threshold share of expected"),
          field<&R::round>("round", "",
                           "the measuring schedule's round (disjoint pairs per round)"),
      }};
  return kind;
}

std::vector<Cell> topology_path_cells(const TopologyPathRecord& record) {
  std::vector<Cell> cells;
  for (const TopologyPathField& f : topology_path_kind().fields)
    cells.push_back(f.measured(record));
  return cells;
}

std::vector<TopologyPathRecord> read_topology_path_csv(std::string_view text) {
  const std::vector<CsvRecordLine> lines = parse_csv(text);
  std::vector<TopologyPathRecord> records;
  if (lines.empty()) return records;
  const TopologyPathKind& kind = topology_path_kind();
  std::vector<const TopologyPathField*> columns;
  for (const std::string& name : lines.front().fields) columns.push_back(kind.find(name));
  for (size_t i = 1; i < lines.size(); ++i) {
    TopologyPathRecord record;
    for (size_t c = 0; c < columns.size() && c < lines[i].fields.size(); ++c) {
      if (!columns[c]) continue;
      try {
        columns[c]->set(record, cell_from_csv(lines[i].fields[c], columns[c]->type));
      } catch (const FieldError& e) {
        throw CsvError(lines[i].line, std::string(columns[c]->name) + ": " + e.what());
      }
    }
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace ccscope::records
