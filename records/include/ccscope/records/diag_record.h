#pragma once
// The diagnostic-check record kind ("ccscope.diag_check/1"): one record per
// check of the bring-up checklist (`ccscope diag --csv FILE`), with its verdict
// (PASS, WARN, FAIL, SKIP), the figure measured beside the one expected, and a
// remedy. The checks of one diag run share a run_id. The JSON form
// ({schema, complete, checks: [...]}) is written and read by reports
// (ccscope/reports/diag_results.h): records depend on no JSON library.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/records/schema.h"

namespace ccscope::records {

struct DiagCheckRecord {
  std::string run_id;                        // one diag run: "diag-<utc time>"
  std::string time_utc;                      // when the check was judged (ISO 8601)
  int64_t stage = 1;                         // 1 rank, 2 node, 3 cluster, 4 scaling
  std::string stage_name;                    // rank, node, cluster, scaling
  std::string check;                         // dotted, stable: "rank.gemm", "cluster.clock_offset"
  std::string status;                        // PASS, WARN, FAIL, SKIP
  std::string host;                          // the node it is about; "" for the whole cluster
  int64_t rank = -1;                         // the rank it is about; -1 for none in particular
  std::string peer;                          // the other end of a link, else ""
  std::optional<double> measured, expected;  // absent when the check has no figure
  std::string unit;                          // "GB/s", "GFLOP/s", "ms", "" for a count or a yes/no
  std::string message;                       // one line: what was seen
  std::string remedy;                        // one line: what to do ("" on PASS)
};

// The statuses a record may hold, worst first.
inline constexpr std::string_view kDiagStatuses[] = {"FAIL", "WARN", "PASS", "SKIP"};

using DiagCheckField = Field<DiagCheckRecord, DiagCheckRecord>;
using DiagCheckKind = RecordKind<DiagCheckRecord, DiagCheckRecord>;
const DiagCheckKind& diag_check_kind();

// Cells in the table's order (csv_row(diag_check_kind(), cells) writes a row).
std::vector<Cell> diag_check_cells(const DiagCheckRecord& record);
// Reads a CSV written with the kind's columns (FieldError / CsvError on bad
// input: a status other than PASS/WARN/FAIL/SKIP, a stage below 1, a rank
// below -1, a number that is not one). An empty rank cell reads as -1.
std::vector<DiagCheckRecord> read_diag_check_csv(std::string_view text);

}  // namespace ccscope::records
