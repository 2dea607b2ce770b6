#pragma once
// The `compare` and `baseline` verbs. `args` are the words after the verb.
// compare: 0 no regression, 1 regression, 125 cannot judge, 2 bad arguments or input.
// baseline: 0 ok, 2 bad arguments or input.
#include <string>
#include <vector>

namespace ccscope::reports {

int compare_main(const std::vector<std::string>& args);
int baseline_main(const std::vector<std::string>& args);

}  // namespace ccscope::reports
