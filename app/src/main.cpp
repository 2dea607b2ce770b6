// ccscope <verb> [options]: dispatches to the verb (app/src/<verb>_verb.cpp).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <ios>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/job/run_job.h"
#include "ccscope/records/collective.h"
#include "ccscope/reports/compare.h"
#include "ccscope/reports/user_files.h"
#include "ccscope/version.h"

namespace {

using VerbFunction = int (*)(const std::vector<std::string>& args,
                             const std::vector<std::string>& command_line);

struct Verb {
  const char* name;
  // The exit code of an error the verb did not handle (bench: 1, a failure
  // while measuring; compare: 125, cannot judge; the others: 2, their input).
  int unhandled_exit;
  VerbFunction run;
  const char* usage;  // for `ccscope --help`
};

// The dispatch: one line per verb.
constexpr Verb kVerbs[] = {
    {"bench", 1, ccscope::app::bench_verb,
     "sweep message sizes for a collective over MPI or NCCL, check results,\n"
     "report algbw/busbw as nccl-tests does (ccscope bench --help)"},
    {"report", 2, ccscope::app::report_verb,
     "one self-contained HTML page (inline SVG charts) or a markdown summary\n"
     "from result files: ccscope CSV/JSON, nccl-tests text/JSON, OSU"},
    {"compare", ccscope::reports::kCompareCannotJudge, ccscope::app::compare_verb,
     "BASELINE CURRENT: per-size busbw ratios and a regression verdict\n"
     "(exit 0 no regression, 1 regression, 125 cannot judge: git bisect run; 2 bad flags)"},
    {"topo", 2, ccscope::app::topo_verb,
     "GPUs, NICs and the path between every pair of GPUs and of nodes with its\n"
     "expected bandwidth; --measure: every pair's bandwidth (ccscope topo --help)"},
    {"train", 1, ccscope::app::train_verb,
     "real training steps (single, DDP, ZeRO-1/2/3) over MPI: step time, communication\n"
     "share, bytes and memory against the formulas, loss vs one rank (ccscope train --help)"},
    {"advise", 2, ccscope::app::advise_verb,
     "the parallel layout to train a model with (DDP, ZeRO, TP, PP, EP): memory per\n"
     "rank and step time from measured bandwidth records (ccscope advise --help)"},
    {"diag", 2, ccscope::app::diag_verb,
     "the bring-up checklist: one rank, one node, many nodes, scaling; PASS/WARN/FAIL\n"
     "with a remedy per check; diag nccl-log FILE...: read NCCL debug logs (ccscope diag --help)"},
    {"baseline", 2, ccscope::app::baseline_verb,
     "save NAME FILES... | list: keep fingerprinted baselines for compare"},
};

constexpr int kExitUsage = 2;

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "ccscope %s: collective-communication benchmarks and diagnostics\n\n"
               "usage: ccscope <verb> [options]      (launch with mpiexec/srun for several "
               "ranks)\n\nverbs:\n",
               ccscope::kVersion);
  for (const Verb& verb : kVerbs) {
    std::string usage = verb.usage;
    for (size_t at = 0; (at = usage.find('\n', at)) != std::string::npos; at += 12)
      usage.replace(at, 1, "\n           ");
    std::fprintf(out, "  %-8s %s\n", verb.name, usage.c_str());
  }
  std::fprintf(out, "\noptions: --help, --version\n");
}

// nccl-tests' program names: `all_reduce_perf ARGS` is `ccscope bench allreduce ARGS`
// (installed as symbolic links to ccscope).
const char* collective_for_program(const std::string& argv0) {
  const std::string base = std::filesystem::path(argv0).filename().string();
  for (const auto& d : ccscope::all_collectives())
    if (base == d.nccl_tests_program) return d.name.data();  // views of literals
  return nullptr;
}

// Every verb's last line of defence: an exception a verb did not handle
// becomes one line and the verb's exit code, never std::terminate and exit 134.
int guarded(const Verb& verb, const std::vector<std::string>& args,
            const std::vector<std::string>& command_line) {
  const auto say = [&](const std::string& what) {
    std::fprintf(stderr, "ccscope %s: error: %s\n", verb.name, what.c_str());
    return verb.unhandled_exit;
  };
  try {
    return verb.run(args, command_line);
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

// A refusal is rank 0's to say (one line); the other ranks linger a moment before they exit
// with it: a launcher ends the whole job when one rank exits non-zero, and MPICH's Hydra once
// ended rank 0 before its line was out (exit 141, SIGPIPE on stderr, on a loaded machine).
int leave(int code) {
  if (code == kExitUsage && !ccscope::job::launcher_says_rank_zero())
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  return code;
}

const Verb* find_verb(const std::string& name) {
  for (const Verb& verb : kVerbs)
    if (name == verb.name) return &verb;
  return nullptr;
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
      return leave(guarded(*find_verb("bench"), bench_args, words));
    }
  }
  if (words.size() < 2 || words[1] == "--help" || words[1] == "-h" || words[1] == "help") {
    print_usage(stdout);
    return words.size() < 2 ? kExitUsage : 0;
  }
  if (const Verb* verb = find_verb(words[1]))
    return leave(guarded(*verb, std::vector<std::string>(words.begin() + 2, words.end()), words));
  std::fprintf(stderr, "ccscope: error: unknown verb %s: run ccscope --help for the list\n",
               ccscope::reports::quote_name(words[1]).c_str());
  return kExitUsage;
}
