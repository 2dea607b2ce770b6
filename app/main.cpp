// ccscope <verb> [options]: dispatches to the verb's component.
#include <cstdio>
#include <filesystem>
#include <ios>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "ccscope/bench/bench_command.h"
#include "ccscope/reports/compare_command.h"
#include "ccscope/reports/report_command.h"
#include "ccscope/reports/user_files.h"
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

// nccl-tests' program names: `all_reduce_perf ARGS` is `ccscope bench allreduce ARGS`
// (installed as symbolic links to ccscope).
const char* collective_for_program(const std::string& argv0) {
  const std::string base = std::filesystem::path(argv0).filename().string();
  static const std::pair<const char*, const char*> kPrograms[] = {
      {"all_reduce_perf", "allreduce"},
      {"all_gather_perf", "allgather"},
      {"reduce_scatter_perf", "reducescatter"},
      {"broadcast_perf", "broadcast"},
      {"alltoall_perf", "alltoall"},
      {"sendrecv_perf", "sendrecv"}};
  for (const auto& [program, collective] : kPrograms)
    if (base == program) return collective;
  return nullptr;
}

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// Every verb's last line of defence: an exception a verb did not handle
// becomes one line and an exit code (bench: 1, a failure while measuring;
// the others: 2, their input), never std::terminate and exit 134.
template <typename Verb>
int guarded(const std::string& verb, int exit_code, const Verb& run) {
  const auto say = [&](const std::string& what) {
    std::fprintf(stderr, "ccscope %s: error: %s\n", verb.c_str(), what.c_str());
    return exit_code;
  };
  try {
    return run();
  } catch (const std::bad_alloc&) {
    return say("out of memory (is an input file huge, or not a results file?)");
  } catch (const std::filesystem::filesystem_error& e) {
    return say(ccscope::reports::printable(e.what()) + ": check the path");
  } catch (const std::ios_base::failure& e) {
    return say(std::string("input/output error: ") + e.what());
  } catch (const std::exception& e) {
    return say(ccscope::reports::printable(e.what()));
  } catch (...) {
    return say("an unexpected error (please report it)");
  }
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
  if (!words.empty()) {
    if (const char* collective = collective_for_program(words[0])) {
      // Every argument is bench's (nccl-tests has no verbs); --version answered above.
      std::vector<std::string> bench_args{collective};
      bench_args.insert(bench_args.end(), words.begin() + 1, words.end());
      return guarded("bench", kExitFailed,
                     [&] { return ccscope::bench::bench_main(bench_args, words); });
    }
  }
  if (words.size() < 2 || words[1] == "--help" || words[1] == "-h" || words[1] == "help") {
    print_usage(stdout);
    return words.size() < 2 ? 2 : 0;
  }
  const std::vector<std::string> verb_args(words.begin() + 2, words.end());
  const std::string& verb = words[1];
  if (verb == "bench")
    return guarded(verb, kExitFailed, [&] { return ccscope::bench::bench_main(verb_args, words); });
  if (verb == "report")
    return guarded(verb, kExitUsage, [&] { return ccscope::reports::report_main(verb_args); });
  if (verb == "compare")
    return guarded(verb, kExitUsage, [&] { return ccscope::reports::compare_main(verb_args); });
  if (verb == "baseline")
    return guarded(verb, kExitUsage, [&] { return ccscope::reports::baseline_main(verb_args); });
  std::fprintf(stderr, "ccscope: error: unknown verb %s: run ccscope --help for the list\n",
               ccscope::reports::quote_name(verb).c_str());
  return kExitUsage;
}
