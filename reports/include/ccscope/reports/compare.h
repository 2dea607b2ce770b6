#pragma once
// The regression verdict behind `ccscope compare` (and `git bisect run`):
// records of a baseline and a current run matched by (collective, backend,
// dtype, op, in-place, ranks, nodes) and size; per size the ratio
// current/baseline of busbw (= baseline time / current time). A series whose
// two sides were measured differently (buffer rotation, -m, -G, time method,
// where both sides state it) cannot be judged (exit 125).
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/reports/loaded_results.h"

namespace ccscope::reports {

inline constexpr int kCompareOk = 0;
inline constexpr int kCompareRegression = 1;
inline constexpr int kCompareCannotJudge = 125;

struct CompareOptions {
  // The smallest slowdown that counts (0.05 = busbw 5% lower). With repeated
  // samples the slowdown must also be significant (Mann-Whitney p < 0.05).
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
  bool in_window = false;
  bool slower = false;  // a regression at this size by the rule in use
};

struct SeriesVerdict {
  std::string name;  // "allreduce mpi float sum out-of-place, 2 ranks on 1 node"
  std::vector<SizeVerdict> sizes;
  std::string cannot_judge;  // why not, or ""
  std::string model;         // alpha/beta of both runs and which changed
  bool regression = false;
};

struct CompareResult {
  int exit_code = kCompareOk;
  std::vector<SeriesVerdict> series;
  std::string report;  // the text `ccscope compare` prints
};

CompareResult compare_runs(const std::vector<LoadedRun>& baseline,
                           const std::vector<LoadedRun>& current, const CompareOptions& options);

}  // namespace ccscope::reports
