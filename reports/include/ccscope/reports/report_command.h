#pragma once
#include <string>
#include <vector>

namespace ccscope::reports {

// `ccscope report RESULTS... [-o FILE] [--markdown] [--title T]`: `args` are the
// words after `report`. HTML by default, markdown with --markdown; stdout when
// no -o. Returns 0, or 2 (one line on stderr) for bad arguments or input.
int report_main(const std::vector<std::string>& args);

}  // namespace ccscope::reports
