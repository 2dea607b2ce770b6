// ccscope diag: the bring-up checklist; `diag nccl-log` is nccl_log_verb's.
#include <string>
#include <vector>

#include "ccscope/app/verbs.h"

namespace ccscope::app {

int diag_verb(const std::vector<std::string>& args, const std::vector<std::string>& command_line) {
  if (!args.empty() && args[0] == "nccl-log")
    return nccl_log_verb(std::vector<std::string>(args.begin() + 1, args.end()), command_line);
  return 2;
}

}  // namespace ccscope::app
