#include "ccscope/diag/environment_check.h"

namespace ccscope::diag {

// First version: the checks follow in the next commit.
std::vector<Check> check_environment(const std::vector<RankEnvironment>& ranks) {
  Check check;
  check.stage = Stage::kCluster;
  check.name = "env.consistent";
  check.status = Status::kSkip;
  check.message =
      ranks.empty() ? "no rank environments gathered" : "environment checks not built yet";
  return {check};
}

}  // namespace ccscope::diag
