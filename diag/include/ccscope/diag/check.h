#pragma once
// One check of the bring-up checklist and its verdict: what was measured, what
// was expected (from topo, or from the rest of the cluster), and one line on
// what to do. Every part of diag (the stages, the log analysis, the
// localisation, the clock and environment checks) returns these.
#include <limits>
#include <string>
#include <vector>

namespace ccscope::diag {

// PASS: as expected. WARN: works, but below what it should be or odd; the run
// goes on. FAIL: broken; the checklist stops after this stage (unless
// --keep-going). SKIP: cannot be judged here (no GPU, one node).
enum class Status { kPass, kWarn, kFail, kSkip };
const char* status_name(Status status);  // "PASS", "WARN", "FAIL", "SKIP"
// The gauge value Prometheus gets: 0 PASS, 1 WARN, 2 FAIL, -1 SKIP.
int status_value(Status status);

// The checklist's stages, in order.
enum class Stage { kRank = 1, kNode = 2, kCluster = 3, kScaling = 4 };
const char* stage_name(Stage stage);  // "rank", "node", "cluster", "scaling"

struct Check {
  Stage stage = Stage::kRank;
  std::string name;  // dotted, stable: "rank.gemm", "cluster.clock_offset"
  Status status = Status::kPass;
  std::string host;  // the node it is about; "" for the whole cluster
  int rank = -1;     // the rank it is about; -1 for none in particular
  std::string peer;  // the other end of a link ("node2"), else ""
  double measured = std::numeric_limits<double>::quiet_NaN();
  double expected = std::numeric_limits<double>::quiet_NaN();
  std::string unit;     // "GB/s", "GFLOP/s", "ms", "" for a count or a yes/no
  std::string message;  // one line: what was seen
  std::string remedy;   // one line: what to do ("" on PASS)
};

// The worst status of `checks` (SKIP counts as PASS); PASS when empty.
Status worst_status(const std::vector<Check>& checks);

}  // namespace ccscope::diag
