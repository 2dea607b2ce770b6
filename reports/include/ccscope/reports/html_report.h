#pragma once
// `ccscope report`: one self-contained HTML page (inline CSS and SVG, no script,
// nothing fetched over the network) from results read back from files.
#include <string>
#include <vector>

#include "ccscope/reports/diag_results.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/training_results.h"

namespace ccscope::reports {

struct ReportOptions {
  std::string title = "ccscope report";
};

// Title, summary table, busbw vs message size charts (one per collective, runs
// overlaid, in-place dashed), speed-up and efficiency vs rank count when runs of
// one collective differ in rank count, and each run's metadata in a <details>.
// Every string taken from the runs is escaped; the output parses as XML.
std::string render_html_report(const std::vector<LoadedRun>& runs, const ReportOptions& options);
// With training results (ccscope train's CSVs) too: a "Training" section of
// their runs (a table, communication share per strategy and rank count,
// speed-up and efficiency vs rank count per strategy) and loss vs step per
// run. Without bench runs the page holds only that; without training results
// it is the page above, byte for byte.
std::string render_html_report(const std::vector<LoadedRun>& runs, const TrainingResults& training,
                               const ReportOptions& options);
// With diag checks (ccscope diag's CSV or JSON) too: a "Findings" section after
// the bench sections, per diag run a verdict line per stage and a table of its
// checks, FAIL then WARN first, PASS and SKIP folded in a <details>. Without
// bench runs or training results the page holds only what it has; without
// diag checks it is the page above, byte for byte.
std::string render_html_report(const std::vector<LoadedRun>& runs, const TrainingResults& training,
                               const DiagResults& diag, const ReportOptions& options);

}  // namespace ccscope::reports
