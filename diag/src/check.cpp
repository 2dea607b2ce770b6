#include "ccscope/diag/check.h"

namespace ccscope::diag {

const char* status_name(Status status) {
  switch (status) {
    case Status::kPass: return "PASS";
    case Status::kWarn: return "WARN";
    case Status::kFail: return "FAIL";
    case Status::kSkip: return "SKIP";
  }
  return "?";
}

int status_value(Status status) {
  switch (status) {
    case Status::kPass: return 0;
    case Status::kWarn: return 1;
    case Status::kFail: return 2;
    case Status::kSkip: return -1;
  }
  return -1;
}

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::kRank: return "rank";
    case Stage::kNode: return "node";
    case Stage::kCluster: return "cluster";
    case Stage::kScaling: return "scaling";
  }
  return "?";
}

Status worst_status(const std::vector<Check>& checks) {
  Status worst = Status::kPass;
  for (const Check& c : checks) {
    if (c.status == Status::kFail) return Status::kFail;
    if (c.status == Status::kWarn) worst = Status::kWarn;
  }
  return worst;
}

}  // namespace ccscope::diag
