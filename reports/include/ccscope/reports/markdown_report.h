#pragma once
// `ccscope report --markdown`: tables for CI summaries and terminals.
#include <string>
#include <vector>

#include "ccscope/reports/html_report.h"  // ReportOptions
#include "ccscope/reports/loaded_results.h"

namespace ccscope::reports {

// A table of the runs (metadata summary), then per collective and in-place
// variant a table: size | busbw of each run | ratio of each later run to run 1.
std::string render_markdown_report(const std::vector<LoadedRun>& runs,
                                   const ReportOptions& options);

}  // namespace ccscope::reports
