#pragma once
// The regression verdict behind `ccscope compare` (and `git bisect run`):
// records of a baseline and a current run matched by (collective, backend,
// dtype, op, in-place, ranks, nodes) and size; per size the ratio
// current/baseline of busbw (= baseline time / current time). compare_runs
// returns the verdicts as data; render_compare_text and compare_exit_code
// turn them into what the verb prints and returns.
//
// Like with like only: a series whose two sides were measured differently
// (buffer rotation, -m, -G, time method, where both sides state it) cannot be
// judged, and neither can one whose sides share no statistic over ranks
// (ccscope's time is the slowest rank's by default and its files carry
// min/avg/max; nccl-tests' is the average; OSU's the average, min/max with -f).
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/reports/comparison_stats.h"
#include "ccscope/reports/loaded_results.h"

namespace ccscope::reports {

inline constexpr int kCompareOk = 0;
inline constexpr int kCompareRegression = 1;
inline constexpr int kCompareCannotJudge = 125;

struct CompareOptions {
  // The smallest slowdown that counts (0.05 = busbw 5% lower). With repeated
  // samples the slowdown must also be significant (Mann-Whitney p < 0.05);
  // with one record per side that states its interval, outside both intervals.
  double threshold = 0.05;
  // Sizes judged; default: where the baseline's bandwidth is >= half its peak.
  std::optional<size_t> min_size, max_size;
};

struct SizeVerdict {
  size_t size_bytes = 0;
  size_t base_samples = 0, current_samples = 0;
  double busbw_ratio = 1;          // median current / median baseline (from times)
  double ci_low = 0, ci_high = 0;  // 95% bootstrap interval (samples >= 2 per side)
  std::optional<double> p_value;   // Mann-Whitney, when both sides have >= 4 samples
  // One record per side, each with its time's 95% interval (ccscope.bench/5's
  // ci_half_width_percent, as a fraction): the half-widths, and whether the
  // difference of the times lies inside both, which is "no change" whatever
  // the threshold says. One side's interval alone is shown, not used.
  std::optional<double> base_interval, current_interval;
  bool within_intervals = false;
  bool in_window = false;
  bool slower = false;  // a regression at this size by the rule in use
};

// Which statistic over ranks a series was compared by, and where each side's
// times came from.
struct StatisticChoice {
  // "max", "avg", "min", "rank0" (LoadedRecord::time_statistic's tokens);
  // "" when neither side states what its time_s is (both compared by time_s).
  std::string statistic;
  // The figure each side's times were taken from: "time_s", "time_min_s",
  // "time_avg_s" or "time_max_s".
  std::string base_field, current_field;
  // What each side's time_s is ("" unstated; "max and avg" when its files differ).
  std::string base_time_s, current_time_s;
};

struct SeriesVerdict {
  std::string name;  // "allreduce mpi float sum out-of-place, 2 ranks, 1 nodes"
  std::vector<SizeVerdict> sizes;
  StatisticChoice statistic;  // set when a statistic was chosen
  std::string cannot_judge;   // why not (one line), or ""
  // time = alpha + size x beta of both sides' medians, when judged and fitted.
  std::optional<AlphaBetaFit> base_model, current_model;
  bool regression = false;
};

// One side's files, for the report's first lines.
struct CompareInput {
  std::string path;
  std::string format;  // LoadedRun::format
  size_t records = 0;
};

struct CompareResult {
  CompareOptions options;  // the rule the verdicts were made by
  std::vector<CompareInput> baseline, current;
  std::vector<SeriesVerdict> series;         // one per baseline series
  std::vector<std::string> only_in_current;  // names of series the baseline lacks
  // Why nothing could be judged at all (no baseline record with a time, an
  // empty current run), or "".
  std::string cannot_judge;
};

CompareResult compare_runs(const std::vector<LoadedRun>& baseline,
                           const std::vector<LoadedRun>& current, const CompareOptions& options);

// kCompareRegression when any series regressed; else kCompareCannotJudge when
// any series (or the whole comparison) could not be judged; else kCompareOk.
int compare_exit_code(const CompareResult& result);

// The text `ccscope compare` prints: inputs, rule, window, per series the
// statistic compared, a table of sizes, the alpha-beta models and a verdict,
// then a summary line with the exit code.
std::string render_compare_text(const CompareResult& result);

// "max over ranks", "avg over ranks", "min over ranks", "rank 0's"; for a
// statistic token of LoadedRecord::time_statistic.
std::string describe_statistic(const std::string& token);

}  // namespace ccscope::reports
