#include "ccscope/diag/check.h"

namespace ccscope::diag {

Status worst_status(const std::vector<Check>& checks) {
  Status worst = Status::kPass;
  for (const Check& c : checks) {
    if (c.status == Status::kFail) return Status::kFail;
    if (c.status == Status::kWarn) worst = Status::kWarn;
  }
  return worst;
}

}  // namespace ccscope::diag
