#pragma once
// `ccscope bench` flags: nccl-tests 2.19's (short and long spelling, getopt's
// habits) and ccscope's own, parsed into bench::BenchOptions.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/bench/options.h"

namespace ccscope::app {

struct ParsedBenchFlags {
  std::optional<bench::BenchOptions> options;  // empty when help was asked for
  std::string help_text;
};

// How ccscope was started: as an nccl-tests program (all_reduce_perf & co.),
// it keeps nccl-tests' fixed -n 20 by default; as `ccscope bench`, it samples
// adaptively to kDefaultTargetCiPercent unless -n (or -C 1, -G) is given.
struct BenchInvocation {
  bool as_nccl_tests_program = false;
};
inline constexpr double kDefaultTargetCiPercent = 2;

// `args` are the words after "bench". Throws UsageError with one line naming
// the bad argument and what to do.
ParsedBenchFlags parse_bench_flags(const std::vector<std::string>& args,
                                   const BenchInvocation& invocation);
ParsedBenchFlags parse_bench_flags(const std::vector<std::string>& args);

// nccl-tests' environment variables into `options`: NCCL_TESTS_MIN_BW (GB/s),
// NCCL_TESTS_SPLIT_MASK (hex, AND) or else NCCL_TESTS_SPLIT ("AND 3", "&3",
// "OR", "|", "MOD", "%", "DIV", "/" and a number), as nccl-tests 2.19 reads
// them; NCCL_TESTS_DEVICE is refused. `get` reads one (nullptr: unset).
// Throws UsageError naming the variable when its value cannot be read (nccl-tests
// reads a bad value as 0).
void apply_nccl_tests_environment(bench::BenchOptions& options,
                                  const std::function<const char*(const char*)>& get);
std::string bench_flags_help();

}  // namespace ccscope::app
