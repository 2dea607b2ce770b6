#pragma once
// The diagnostic-check record kind ("ccscope.diag_check/1"): one record per
// check of the bring-up checklist (`ccscope diag --csv FILE`), with its verdict
// (PASS, WARN, FAIL, SKIP), the figure measured beside the one expected, and a
// remedy. The checks of one diag run share a run_id. The JSON form
// ({schema, complete, checks: [...]}) is written and read by reports
// (ccscope/reports/diag_results.h): records depend on no JSON library.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/records/schema.h"

namespace ccscope::records {

// The verdict of a check. PASS: as expected. WARN: works, but below what it should be or
// odd; the run goes on. FAIL: broken; the checklist stops after this stage (unless
// --keep-going). SKIP: cannot be judged here (no GPU, one node).
enum class DiagStatus { kPass, kWarn, kFail, kSkip };
const char* status_name(DiagStatus status);  // "PASS", "WARN", "FAIL", "SKIP"
// The gauge value Prometheus gets: 0 PASS, 1 WARN, 2 FAIL, -1 SKIP.
int status_value(DiagStatus status);
// The checklist's stages, in order.
enum class DiagStage { kRank = 1, kNode = 2, kCluster = 3, kScaling = 4 };
const char* stage_name(DiagStage stage);  // "rank", "node", "cluster", "scaling"

// One check of the bring-up checklist and its verdict: what was measured, what was expected
// (from topo, or from the rest of the cluster), and one line on what to do. Every part of diag
// returns these (diag::Check is this type); a record adds the run it belongs to.
struct DiagCheck {
  DiagStage stage = DiagStage::kRank;
  std::string name;  // dotted, stable: "rank.gemm", "cluster.clock_offset"
  DiagStatus status = DiagStatus::kPass;
  std::string host;  // the node it is about; "" for the whole cluster
  int rank = -1;     // the rank it is about; -1 for none in particular
  std::string peer;  // the other end of a link ("node2"), else ""
  double measured = std::numeric_limits<double>::quiet_NaN();  // NaN: the check has no figure
  double expected = std::numeric_limits<double>::quiet_NaN();
  std::string unit;     // "GB/s", "GFLOP/s", "ms", "" for a count or a yes/no
  std::string message;  // one line: what was seen
  std::string remedy;   // one line: what to do ("" on PASS)
};

struct DiagCheckRecord {
  std::string run_id;    // one diag run: "diag-<utc time>"
  std::string time_utc;  // when the check was judged (ISO 8601)
  DiagCheck check;
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
