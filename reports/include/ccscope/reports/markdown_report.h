#pragma once
// `ccscope report --markdown`: tables for CI summaries and terminals.
#include <string>
#include <vector>

#include "ccscope/reports/diag_results.h"
#include "ccscope/reports/html_report.h"  // ReportOptions
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/training_results.h"

namespace ccscope::reports {

// A table of the runs (metadata summary), then per collective and in-place
// variant a table: size | busbw of each run | ratio of each later run to run 1.
std::string render_markdown_report(const std::vector<LoadedRun>& runs,
                                   const ReportOptions& options);
// With training results: a "Training" table of their runs (and, for step
// records, a table of loss per run) after the bench tables; without bench
// runs only that.
std::string render_markdown_report(const std::vector<LoadedRun>& runs,
                                   const TrainingResults& training, const ReportOptions& options);
// With diag checks: a "Findings" section after the bench tables, per diag run a
// verdict line per stage and a table of its checks, FAIL then WARN, then PASS
// and SKIP; without diag checks the text above.
std::string render_markdown_report(const std::vector<LoadedRun>& runs,
                                   const TrainingResults& training, const DiagResults& diag,
                                   const ReportOptions& options);

}  // namespace ccscope::reports
