// ccscope compare / ccscope baseline: argument parsing and printing around
// compare_runs() and the baseline store.
#include "ccscope/reports/compare_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "ccscope/reports/baseline.h"
#include "ccscope/reports/compare.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports {
namespace {

int usage_error(const char* verb, const std::string& what) {
  std::fprintf(stderr, "ccscope %s: error: %s (ccscope %s --help)\n", verb, what.c_str(), verb);
  return 2;
}

// Runs CLI11 on args; returns an exit code when parsing ends the command.
std::optional<int> parse(CLI::App& app, const char* verb, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(verb, e.what());
  }
  return std::nullopt;
}

std::vector<std::string> split_commas(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  for (const auto& w : words) {
    size_t start = 0;
    for (size_t p; (p = w.find(',', start)) != std::string::npos; start = p + 1)
      if (p > start) out.push_back(w.substr(start, p - start));
    if (start < w.size()) out.push_back(w.substr(start));
  }
  return out;
}

// "64K", "1M", "1G" (binary, as nccl-tests) or plain bytes; "" = open.
// Throws std::invalid_argument for a sign, other suffixes or an overflow.
std::optional<size_t> parse_size(const std::string& text) {
  if (text.empty()) return std::nullopt;
  unsigned long long v = 0;
  const char* end = text.data() + text.size();
  auto [used, ec] = std::from_chars(text.data(), end, v);  // no sign accepted
  if (ec != std::errc()) throw std::invalid_argument(text);
  const std::string suffix(used, end);
  const std::string units = "KMGT";
  if (suffix.size() == 1 &&
      units.find(static_cast<char>(std::toupper(suffix[0]))) != std::string::npos) {
    const unsigned shift =
        10 * static_cast<unsigned>(units.find(static_cast<char>(std::toupper(suffix[0]))) + 1);
    if (v > (std::numeric_limits<unsigned long long>::max() >> shift))
      throw std::invalid_argument(text);
    v <<= shift;
  } else if (!suffix.empty()) {
    throw std::invalid_argument(text);
  }
  return static_cast<size_t>(v);
}

std::vector<LoadedRun> read_all(const std::vector<std::string>& files) {
  std::vector<LoadedRun> runs;
  for (const auto& f : files) runs.push_back(read_results(f));
  return runs;
}

}  // namespace

int compare_main(const std::vector<std::string>& args) {
  CLI::App app{
      "Compares results with a baseline: per size the busbw ratio current/baseline, a verdict over "
      "a size\n"
      "window. Exit 0 no regression, 1 regression, 125 cannot judge (for git bisect run), 2 bad "
      "input.\n"
      "Files: ccscope CSV/JSON, nccl-tests text or -J JSON, OSU output; several per side as a "
      "comma list\n"
      "(or repeat --base-file/--current-file): repeated samples enable a Mann-Whitney test.",
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
  app.add_option("--threshold", threshold_pct,
                 "smallest busbw drop that counts, in percent (default 5)")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--sizes", sizes,
                 "size window MIN:MAX, e.g. 1M:1G (default: busbw >= half its peak)");
  app.add_flag("--ignore-fingerprint", ignore_fingerprint,
               "compare with a baseline from another setup");
  if (auto code = parse(app, "compare", args)) return *code;
  if (!std::isfinite(threshold_pct))  // CLI11's range check lets NaN through
    return usage_error("compare", "--threshold must be a number from 0 to 100 (percent)");

  CompareOptions options;
  options.threshold = threshold_pct / 100;
  if (!sizes.empty()) {
    size_t colon = sizes.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument(sizes);
      options.min_size = parse_size(sizes.substr(0, colon));
      options.max_size = parse_size(sizes.substr(colon + 1));
    } catch (const std::exception&) {
      return usage_error("compare", "--sizes " + quote_name(sizes) +
                                        ": expected MIN:MAX in bytes such as 8:64K or 1M:");
    }
    if (options.min_size && options.max_size && *options.min_size > *options.max_size)
      return usage_error("compare", "--sizes " + quote_name(sizes) + ": MIN is larger than MAX");
  }
  try {
    std::vector<std::string> files = split_commas(positional);
    std::optional<Baseline> saved;
    if (!baseline_name.empty()) {
      saved = load_baseline(baseline_dir(dir), baseline_name);
      base_files.insert(base_files.begin(), saved->files.begin(), saved->files.end());
      current_files.insert(current_files.begin(), files.begin(), files.end());
    } else if (positional.size() == 2) {
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
    CompareResult result = compare_runs(baseline, current, options);
    std::fputs(result.report.c_str(), stdout);
    return result.exit_code;
  } catch (const InputError& e) {
    return usage_error("compare", e.what());
  }
}

int baseline_main(const std::vector<std::string>& args) {
  CLI::App app{
      "Keeps named baselines: copies of results files with the fingerprint of their setup.",
      "ccscope baseline"};
  app.require_subcommand(1);
  std::string dir, name;
  std::vector<std::string> files;
  CLI::App* save = app.add_subcommand("save", "save NAME FILES...: store results as baseline NAME");
  save->add_option("name", name, "baseline name")->required();
  save->add_option("files", files, "results files")->required();
  save->add_option("--dir", dir,
                   "baselines directory (default $CCSCOPE_BASELINE_DIR or ./baselines)");
  CLI::App* list = app.add_subcommand("list", "list the saved baselines");
  list->add_option("--dir", dir,
                   "baselines directory (default $CCSCOPE_BASELINE_DIR or ./baselines)");
  if (auto code = parse(app, "baseline", args)) return *code;
  try {
    if (save->parsed()) {
      Baseline b = save_baseline(baseline_dir(dir), name, split_commas(files));
      std::printf("saved baseline '%s' (%zu files) in %s\n", b.name.c_str(), b.files.size(),
                  baseline_dir(dir).c_str());
      return 0;
    }
    for (const auto& b : list_baselines(baseline_dir(dir))) {
      const Fingerprint& f = b.fingerprint;
      std::printf("%-20s %s  %zu file(s)  %s, %s, NCCL %s, %d ranks, %d nodes, %d per node\n",
                  b.name.c_str(), b.saved_utc.c_str(), b.files.size(), f.backend.c_str(),
                  f.gpu_model.empty() ? "?" : f.gpu_model.c_str(),
                  f.nccl_version.empty() ? "-" : f.nccl_version.c_str(), f.ranks, f.nodes,
                  f.ranks_per_node);
    }
    return 0;
  } catch (const InputError& e) {
    return usage_error("baseline", e.what());
  }
}

}  // namespace ccscope::reports
