// `ccscope compare BASELINE CURRENT [flags]`: read both sides, compare_runs
// (reports), print render_compare_text, exit by compare_exit_code.
//
// Exit codes are for `git bisect run`: 0 good, 1 bad, 125 skip. Whatever keeps
// compare from judging a commit's results (a file it cannot read, an empty
// current run, no common statistic, another setup than the saved baseline)
// is 125, never 2, which bisect would take for a bad commit; 2 is kept for
// flags that are wrong, a mistake in the command rather than in the results.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "ccscope/app/verbs.h"
#include "ccscope/common/sizes.h"
#include "ccscope/reports/baseline.h"
#include "ccscope/reports/compare.h"
#include "ccscope/reports/user_files.h"
#include "verb_support.h"

namespace ccscope::app {
using namespace ccscope::reports;
namespace {

// One line on stderr, exit 125: the results cannot be judged.
int cannot_judge(const std::string& why) {
  std::fprintf(stderr, "ccscope compare: cannot judge (exit 125): %s\n", why.c_str());
  return kCompareCannotJudge;
}

// "64K", "1M", "0.5G" (binary, as nccl-tests' -b/-e) or plain bytes; "" = open.
// Throws std::invalid_argument for anything parse_size refuses.
std::optional<size_t> parse_window_size(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const std::optional<size_t> bytes = parse_size(text);
  if (!bytes) throw std::invalid_argument(text);
  return bytes;
}

std::vector<LoadedRun> read_all(const std::vector<std::string>& files) {
  std::vector<LoadedRun> runs;
  for (const auto& f : files) runs.push_back(read_results(f));
  return runs;
}

}  // namespace

int compare_verb(const std::vector<std::string>& args, const std::vector<std::string>&) {
  CLI::App app{
      "Compares results with a baseline: per size the busbw ratio current/baseline, a verdict over "
      "a size\n"
      "window, by a statistic over ranks both sides have (ccscope's max or its avg column against\n"
      "nccl-tests' avg, ...; the output names it).\n"
      "Files: ccscope CSV/JSON, nccl-tests text or -J JSON, OSU output; several per side as a "
      "comma list\n"
      "(or repeat --base-file/--current-file): repeated samples enable a Mann-Whitney test.\n"
      "Exit (for git bisect run): 0 no regression, 1 regression, 125 cannot judge: also a file "
      "that cannot\n"
      "be read (missing, bad format), an empty current run, no common statistic, a baseline "
      "missing or\n"
      "from another setup; 2 only for bad flags.",
      "ccscope compare"};
  std::vector<std::string> positional, base_files, current_files;
  std::string baseline_name, dir, sizes;
  double threshold_pct = 5;
  bool ignore_fingerprint = false;
  app.add_option("files", positional, "BASELINE CURRENT (or CURRENT with --baseline NAME)");
  app.add_option("--base-file", base_files, "another baseline file (repeatable)");
  app.add_option("--current-file", current_files, "another current file (repeatable)");
  app.add_option("--baseline", baseline_name,
                 "compare against a saved baseline (ccscope baseline save)");
  app.add_option("--dir", dir,
                 "baselines directory (default $CCSCOPE_BASELINE_DIR or ./baselines)");
  add_number_option(app, "--threshold", threshold_pct,
                    "smallest busbw drop that counts, in percent (default 5)", {0, 100});
  app.add_option("--sizes", sizes,
                 "size window MIN:MAX, e.g. 1M:1G (default: busbw >= half its peak)");
  app.add_flag("--ignore-fingerprint", ignore_fingerprint,
               "compare with a baseline from another setup");
  if (auto code = parse_flags(app, "compare", args)) return *code;
  if (!std::isfinite(threshold_pct))  // CLI11's range check lets NaN through
    return usage_error("compare", "--threshold must be a number from 0 to 100 (percent)");

  CompareOptions options;
  options.threshold = threshold_pct / 100;
  if (!sizes.empty()) {
    size_t colon = sizes.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument(sizes);
      options.min_size = parse_window_size(sizes.substr(0, colon));
      options.max_size = parse_window_size(sizes.substr(colon + 1));
    } catch (const std::exception&) {
      return usage_error("compare", "--sizes " + quote_name(sizes) +
                                        ": expected MIN:MAX in bytes such as 8:64K or 1M:");
    }
    if (options.min_size && options.max_size && *options.min_size > *options.max_size)
      return usage_error("compare", "--sizes " + quote_name(sizes) + ": MIN is larger than MAX");
  }
  const std::vector<std::string> files = split_commas(positional);
  if (baseline_name.empty()) {
    if (positional.size() == 2) {
      auto b = split_commas({positional[0]}), c = split_commas({positional[1]});
      base_files.insert(base_files.begin(), b.begin(), b.end());
      current_files.insert(current_files.begin(), c.begin(), c.end());
    } else if (!positional.empty()) {
      return usage_error("compare",
                         "expected BASELINE CURRENT (comma lists for several files each)");
    }
    if (base_files.empty() || current_files.empty())
      return usage_error(
          "compare",
          "need baseline and current results: BASELINE CURRENT or --baseline NAME CURRENT");
  } else if (files.empty() && current_files.empty()) {
    return usage_error("compare", "need the current results: --baseline NAME CURRENT");
  }
  try {
    std::optional<Baseline> saved;
    if (!baseline_name.empty()) {
      saved = load_baseline(baseline_dir(dir), baseline_name);
      base_files.insert(base_files.begin(), saved->files.begin(), saved->files.end());
      current_files.insert(current_files.begin(), files.begin(), files.end());
    }
    const auto baseline = read_all(base_files), current = read_all(current_files);
    if (saved && !ignore_fingerprint)
      for (const auto& run : current) {
        std::string diff = fingerprint_difference(saved->fingerprint, fingerprint_of(run));
        if (!diff.empty()) {
          std::printf(
              "cannot judge: %s was measured on another setup than baseline '%s' (%s); "
              "use --ignore-fingerprint to compare anyway\n",
              printable(run.path).c_str(), saved->name.c_str(), diff.c_str());
          return kCompareCannotJudge;
        }
      }
    const CompareResult result = compare_runs(baseline, current, options);
    std::fputs(render_compare_text(result).c_str(), stdout);
    return compare_exit_code(result);
  } catch (const InputError& e) {
    return cannot_judge(e.what());
  }
}

}  // namespace ccscope::app
