#pragma once
// Statistics behind `ccscope compare`: a rank test for "are these samples
// from the same distribution", a confidence interval for the ratio of medians,
// and the latency/bandwidth model time = alpha + size * beta.
#include <cstdint>
#include <optional>
#include <vector>

namespace ccscope::reports {


struct MannWhitney {
  double u = 0;        // U of the first sample: pairs (x, y) with x > y, ties count 1/2
  double p_value = 1;  // two-sided
  bool exact = false;  // exact permutation distribution (small samples, no ties)
};
// Two-sided Mann-Whitney U test. Exact when there are no ties and both samples
// have at most 10 values; otherwise the normal approximation with tie
// correction and continuity correction. Empty samples give p = 1.
MannWhitney mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y);

struct RatioInterval {
  double ratio = 0;  // median(numerator) / median(denominator)
  double low = 0;    // percentile bootstrap interval at `confidence`
  double high = 0;
};
// Bootstrap (resampling each side with replacement, fixed seed: the same
// inputs give the same interval) confidence interval for the ratio of medians.
RatioInterval median_ratio_interval(const std::vector<double>& numerator,
                                    const std::vector<double>& denominator,
                                    double confidence = 0.95, int resamples = 2000,
                                    uint64_t seed = 20261130);

struct AlphaBetaFit {
  double alpha_s = 0;             // latency: time of an empty message
  double beta_s_per_B = 0;        // inverse bandwidth
  std::vector<double> residuals;  // (measured - model) / measured, per point, in input order
  double max_abs_residual = 0;
};
// time = alpha + size * beta. beta is the least-squares slope over the large,
// bandwidth-bound sizes (those reaching at least half the peak size/time;
// at least the two largest); alpha is then the least-squares alpha with beta
// fixed over the remaining small sizes (all sizes when none remain).
// Needs at least two distinct sizes; std::nullopt otherwise.
std::optional<AlphaBetaFit> fit_alpha_beta(const std::vector<double>& sizes_B,
                                           const std::vector<double>& times_s);

}  // namespace ccscope::reports
