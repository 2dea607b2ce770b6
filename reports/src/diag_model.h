#pragma once
// What the HTML and markdown reports show of diag checks, computed once: the
// checks grouped by diag run, each run's findings in the order a reader acts
// on them (FAIL, then WARN, then PASS and SKIP), a verdict per stage, and the
// findings' table text. Private to reports/src.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccscope/reports/diag_results.h"

namespace ccscope::reports::diag_model {

// One check as table text ("" where the record holds none).
struct Finding {
  const records::DiagCheckRecord* check = nullptr;
  std::string stage;     // "2 node"
  std::string where;     // "gpu-node-07 rank 3 -> GPU5"; "cluster" for none
  std::string measured;  // "41.5 GB/s"
  std::string expected;  // "150 GB/s"
};

// "stage 2 node: 1 FAIL, 2 WARN, 10 PASS" (statuses worst first, zeros left out).
struct StageVerdict {
  int64_t stage = 0;
  std::string status;  // the stage's worst: FAIL, WARN, PASS (SKIP when every check is)
  std::string line;
};

struct DiagRun {
  std::string run_id;
  std::string status;                 // the run's worst, as a stage's
  std::string first_time, last_time;  // of its checks' time_utc, "" when none
  bool complete = true;               // false: its JSON document said "complete": false
  std::vector<StageVerdict> stages;   // by stage
  // FAIL, WARN, PASS, SKIP; by stage within a status; then in the order given.
  std::vector<Finding> findings;
  size_t attention = 0;  // the leading FAIL and WARN findings
};

// One per run_id, as they first appear.
std::vector<DiagRun> diag_runs(const DiagResults& diag);

// "fail", "warn", "pass", "skip": the status for class names.
std::string status_class(const std::string& status);

}  // namespace ccscope::reports::diag_model
