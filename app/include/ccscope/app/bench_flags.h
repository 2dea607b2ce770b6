#pragma once
// `ccscope bench` flags: nccl-tests 2.19's (short and long spelling, getopt's
// habits) and ccscope's own, parsed into bench::BenchOptions.
#include <optional>
#include <string>
#include <vector>

#include "ccscope/bench/options.h"

namespace ccscope::app {

struct ParsedBenchFlags {
  std::optional<bench::BenchOptions> options;  // empty when help was asked for
  std::string help_text;
};

// `args` are the words after "bench". Throws UsageError with one line naming
// the bad argument and what to do.
ParsedBenchFlags parse_bench_flags(const std::vector<std::string>& args);
std::string bench_flags_help();

}  // namespace ccscope::app
