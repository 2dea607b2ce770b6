#pragma once
// Runs a verb in this process, as main() would, and keeps its exit code and
// what it printed: the one harness of the app tests.
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ccscope::app::verb_testing {

using Verb = int (*)(const std::vector<std::string>&, const std::vector<std::string>&);

struct VerbRun {
  int rc = 0;
  std::string out, err;
};

inline VerbRun run_verb(Verb verb, const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int rc = verb(args, {});
  std::string out = ::testing::internal::GetCapturedStdout();
  return {rc, out, ::testing::internal::GetCapturedStderr()};
}

}  // namespace ccscope::app::verb_testing
