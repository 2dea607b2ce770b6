// The diagnostic-check record kind: every field of a `ccscope diag --csv` row
// (and of a check of its --json document), once.
#include <algorithm>
#include <iterator>
#include <limits>

#include "ccscope/records/diag_record.h"
#include "record_table.h"

namespace ccscope::records {
namespace {

// Measured and expected figures may be below zero (a clock offset, a skew).
constexpr long long kAnyValue = std::numeric_limits<long long>::min();

// The status decides where a report shows the check: a word outside the four
// would be shown as nothing, so it is refused.
void set_status(DiagCheckRecord& r, const Cell& c) {
  if (!c.present) throw FieldError("empty; a check's status is PASS, WARN, FAIL or SKIP");
  if (std::find(std::begin(kDiagStatuses), std::end(kDiagStatuses), c.text) ==
      std::end(kDiagStatuses))
    throw FieldError("'" + c.text + "' is not PASS, WARN, FAIL or SKIP");
  r.status = c.text;
}

// An empty rank cell is "no rank in particular", as the struct's default says
// (the generic codec would read it as rank 0).
void set_rank(DiagCheckRecord& r, const Cell& c) {
  if (!c.present) {
    r.rank = -1;
    return;
  }
  cells::set_from<int64_t, -1>(r.rank, c);
}

}  // namespace

const DiagCheckKind& diag_check_kind() {
  using R = DiagCheckRecord;
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
          member_field<R, &R::stage, 1>("stage", "",
                                        "checklist stage: 1 rank, 2 node, 3 cluster, 4 scaling"),
          member_field<R, &R::stage_name>("stage_name", "", "rank, node, cluster or scaling"),
          member_field<R, &R::check>("check", "",
                                     "dotted, stable name: rank.gemm, cluster.clock_offset"),
          DiagCheckField{"status", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                         "PASS, WARN (works, below expectation or odd), FAIL (broken) or SKIP "
                         "(cannot be judged here)",
                         [](const R& r) { return cells::cell_of(r.status); },
                         [](const R& r) { return cells::cell_of(r.status); }, set_status},
          member_field<R, &R::host>("host", "", "the node the check is about; empty: the cluster"),
          DiagCheckField{"rank", "", FieldType::kInteger, FieldScope::kRecord, 1, "", true,
                         "the rank the check is about; -1: none in particular",
                         [](const R& r) { return cells::cell_of(r.rank); },
                         [](const R& r) { return cells::cell_of(r.rank); }, set_rank},
          member_field<R, &R::peer>("peer", "", "the other end of a link; empty when none"),
          member_field<R, &R::measured, kAnyValue>(
              "measured", "",
              "the figure measured, in the row's unit; empty when the check has none"),
          member_field<R, &R::expected, kAnyValue>(
              "expected", "",
              "the figure expected, in the row's unit (from topo, a nominal rate or the rest of "
              "the cluster)"),
          member_field<R, &R::unit>("unit", "",
                                    "unit of measured and expected: GB/s, GFLOP/s, ms; empty for "
                                    "a count or a yes/no"),
          member_field<R, &R::message>("message", "", "one line: what was seen"),
          member_field<R, &R::remedy>("remedy", "", "one line: what to do (empty on PASS)"),
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
