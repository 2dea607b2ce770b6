// The diagnostic-check record kind: every field of a `ccscope diag --csv` row
// (and of a check of its --json document), once.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "ccscope/records/diag_record.h"
#include "record_table.h"

namespace ccscope::records {

const char* status_name(DiagStatus status) {
  switch (status) {
    case DiagStatus::kPass:
      return "PASS";
    case DiagStatus::kWarn:
      return "WARN";
    case DiagStatus::kFail:
      return "FAIL";
    case DiagStatus::kSkip:
      return "SKIP";
  }
  return "?";
}

int status_value(DiagStatus status) {
  switch (status) {
    case DiagStatus::kPass:
      return 0;
    case DiagStatus::kWarn:
      return 1;
    case DiagStatus::kFail:
      return 2;
    case DiagStatus::kSkip:
      return -1;
  }
  return -1;
}

const char* stage_name(DiagStage stage) {
  switch (stage) {
    case DiagStage::kRank:
      return "rank";
    case DiagStage::kNode:
      return "node";
    case DiagStage::kCluster:
      return "cluster";
    case DiagStage::kScaling:
      return "scaling";
  }
  return "?";
}

namespace {

using R = DiagCheckRecord;

// The status decides where a report shows the check: a word outside the four
// would be shown as nothing, so it is refused.
void set_status(R& r, const Cell& c) {
  if (!c.present) throw FieldError("empty; a check's status is PASS, WARN, FAIL or SKIP");
  for (DiagStatus s : {DiagStatus::kPass, DiagStatus::kWarn, DiagStatus::kFail, DiagStatus::kSkip})
    if (c.text == status_name(s)) {
      r.check.status = s;
      return;
    }
  throw FieldError("'" + c.text + "' is not PASS, WARN, FAIL or SKIP");
}

void set_stage(R& r, const Cell& c) {
  int64_t stage = 1;
  cells::set_from<int64_t, 1>(stage, c);
  if (stage > 4) throw FieldError(c.text + " is not a stage: 1 rank, 2 node, 3 cluster, 4 scaling");
  r.check.stage = static_cast<DiagStage>(stage);
}

// An empty rank cell is "no rank in particular", as the struct's default says
// (the generic codec would read it as rank 0).
void set_rank(R& r, const Cell& c) {
  if (!c.present) {
    r.check.rank = -1;
    return;
  }
  cells::set_from<int, -1>(r.check.rank, c);
}

// A figure: NaN in the check is an empty cell; figures may be below zero (a clock offset).
Cell figure_cell(double value) { return std::isnan(value) ? Cell{} : cells::cell_of(value); }
void set_figure(double& figure, const Cell& c) {
  std::optional<double> value;
  cells::set_from<std::optional<double>, std::numeric_limits<long long>::min()>(value, c);
  figure = value.value_or(std::numeric_limits<double>::quiet_NaN());
}

// A text member of the check.
template <auto Member>
DiagCheckField check_text(std::string_view name, std::string_view meaning) {
  return DiagCheckField{
      name,
      "",
      FieldType::kText,
      FieldScope::kRecord,
      1,
      "",
      true,
      meaning,
      [](const R& r) { return cells::cell_of(r.check.*Member); },
      [](const R& r) { return cells::cell_of(r.check.*Member); },
      [](R& r, const Cell& c) { cells::set_from<std::string, 0>(r.check.*Member, c); }};
}

}  // namespace

const DiagCheckKind& diag_check_kind() {
  static const DiagCheckKind kind{
      "ccscope.diag_check",
      1,
      {
          DiagCheckField{"schema", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                         "record kind and version (ccscope.diag_check/1)",
                         [](const R&) { return schema_cell(diag_check_kind().schema_id()); },
                         [](const R&) { return schema_cell(diag_check_kind().schema_id()); },
                         [](R&, const Cell& c) { check_schema(diag_check_kind(), c); }},
          member_field<R, &R::run_id>("run_id", "", "the diag run: diag-<UTC time>"),
          member_field<R, &R::time_utc>("time_utc", "",
                                        "when the check was judged (ISO 8601, UTC)"),
          DiagCheckField{
              "stage", "", FieldType::kInteger, FieldScope::kRecord, 1, "", true,
              "checklist stage: 1 rank, 2 node, 3 cluster, 4 scaling",
              [](const R& r) { return cells::cell_of(static_cast<int64_t>(r.check.stage)); },
              [](const R& r) { return cells::cell_of(static_cast<int64_t>(r.check.stage)); },
              set_stage},
          // Derived from the stage: read back from it.
          DiagCheckField{
              "stage_name", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
              "rank, node, cluster or scaling",
              [](const R& r) { return cells::cell_of(std::string(stage_name(r.check.stage))); },
              [](const R& r) { return cells::cell_of(std::string(stage_name(r.check.stage))); },
              [](R&, const Cell&) {}},
          check_text<&DiagCheck::name>("check",
                                       "dotted, stable name: rank.gemm, cluster.clock_offset"),
          DiagCheckField{
              "status", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
              "PASS, WARN (works, below expectation or odd), FAIL (broken) or SKIP "
              "(cannot be judged here)",
              [](const R& r) { return cells::cell_of(std::string(status_name(r.check.status))); },
              [](const R& r) { return cells::cell_of(std::string(status_name(r.check.status))); },
              set_status},
          check_text<&DiagCheck::host>("host", "the node the check is about; empty: the cluster"),
          DiagCheckField{"rank", "", FieldType::kInteger, FieldScope::kRecord, 1, "", true,
                         "the rank the check is about; -1: none in particular",
                         [](const R& r) { return cells::cell_of(r.check.rank); },
                         [](const R& r) { return cells::cell_of(r.check.rank); }, set_rank},
          check_text<&DiagCheck::peer>("peer", "the other end of a link; empty when none"),
          DiagCheckField{"measured", "", FieldType::kNumber, FieldScope::kRecord, 1, "", true,
                         "the figure measured, in the row's unit; empty when the check has none",
                         [](const R& r) { return figure_cell(r.check.measured); },
                         [](const R& r) { return figure_cell(r.check.measured); },
                         [](R& r, const Cell& c) { set_figure(r.check.measured, c); }},
          DiagCheckField{"expected", "", FieldType::kNumber, FieldScope::kRecord, 1, "", true,
                         "the figure expected, in the row's unit (from topo, a nominal rate or "
                         "the rest of the cluster)",
                         [](const R& r) { return figure_cell(r.check.expected); },
                         [](const R& r) { return figure_cell(r.check.expected); },
                         [](R& r, const Cell& c) { set_figure(r.check.expected, c); }},
          check_text<&DiagCheck::unit>("unit",
                                       "unit of measured and expected: GB/s, GFLOP/s, ms; empty "
                                       "for a count or a yes/no"),
          check_text<&DiagCheck::message>("message", "one line: what was seen"),
          check_text<&DiagCheck::remedy>("remedy", "one line: what to do (empty on PASS)"),
      }};
  return kind;
}

std::vector<Cell> diag_check_cells(const DiagCheckRecord& record) {
  return cells_of(diag_check_kind(), record);
}

std::vector<DiagCheckRecord> read_diag_check_csv(std::string_view text) {
  return read_csv(diag_check_kind(), text);
}

}  // namespace ccscope::records
