// ccscope <verb> [options]: dispatches to the verb's component.
#include <cstdio>
#include <string>
#include <vector>

#include "ccscope/bench/bench_command.h"
#include "ccscope/reports/compare_command.h"
#include "ccscope/reports/report_command.h"
#include "ccscope/version.h"

namespace {

void print_usage(std::FILE* out) {
  std::fprintf(
      out,
      "ccscope %s: collective-communication benchmarks and diagnostics\n\n"
      "usage: ccscope <verb> [options]      (launch with mpiexec/srun for several ranks)\n\n"
      "verbs:\n"
      "  bench   sweep message sizes for a collective over MPI or NCCL, check results,\n"
      "          report algbw/busbw as nccl-tests does (ccscope bench --help)\n"
      "  report  one self-contained HTML page (inline SVG charts) or a markdown summary\n"
      "          from result files: ccscope CSV/JSON, nccl-tests text/JSON, OSU\n"
      "  compare BASELINE CURRENT: per-size busbw ratios and a regression verdict\n"
      "          (exit 0 no regression, 1 regression, 125 cannot judge: git bisect run)\n"
      "  baseline save NAME FILES... | list: keep fingerprinted baselines for compare\n\n"
      "options: --help, --version\n",
      ccscope::kVersion);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> words(argv, argv + argc);
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i] == "--version") {
      std::printf("ccscope %s (commit %s)\n", ccscope::kVersion, ccscope::kGitCommit);
      return 0;
    }
  }
  if (words.size() < 2 || words[1] == "--help" || words[1] == "-h" || words[1] == "help") {
    print_usage(stdout);
    return words.size() < 2 ? 2 : 0;
  }
  const std::vector<std::string> verb_args(words.begin() + 2, words.end());
  if (words[1] == "bench") return ccscope::bench::bench_main(verb_args, words);
  if (words[1] == "report") return ccscope::reports::report_main(verb_args);
  if (words[1] == "compare") return ccscope::reports::compare_main(verb_args);
  if (words[1] == "baseline") return ccscope::reports::baseline_main(verb_args);
  std::fprintf(stderr, "ccscope: error: unknown verb '%s': run ccscope --help for the list\n",
               words[1].c_str());
  return 2;
}
