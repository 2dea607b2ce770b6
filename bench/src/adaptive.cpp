#include "adaptive.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "ccscope/common/statistics.h"

namespace ccscope::bench {

double student_t_975(size_t degrees) {
  // Exact to 3 decimals up to 30 degrees (the small samples a run stops at);
  // beyond, the Cornish-Fisher expansion around the normal quantile.
  static constexpr std::array<double, 31> kTable = {
      0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
      2.201, 2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080,
      2.074, 2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (degrees == 0) return std::numeric_limits<double>::infinity();
  if (degrees < kTable.size()) return kTable[degrees];
  const double z = 1.959964, v = static_cast<double>(degrees);
  const double z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v);
}

MeanInterval mean_interval(std::span<const double> samples) {
  MeanInterval out;
  out.samples = samples.size();
  out.mean = mean(samples);
  const double inf = std::numeric_limits<double>::infinity();
  out.half_width = out.relative_half_width = inf;
  if (samples.size() < 2) return out;
  double squares = 0;
  for (double x : samples) squares += (x - out.mean) * (x - out.mean);
  const double n = static_cast<double>(samples.size());
  const double standard_error = std::sqrt(squares / (n - 1) / n);
  out.half_width = student_t_975(samples.size() - 1) * standard_error;
  out.relative_half_width = out.mean > 0 ? out.half_width / out.mean : inf;
  return out;
}

size_t median_interval_rank(size_t samples) {
  if (samples < 7) return 0;
  const double n = static_cast<double>(samples);
  if (samples > 1000) {
    // Normal approximation of Binomial(n, 1/2) (within one rank of the exact
    // answer at 1000 samples); 2.170 is the normal's 98.5% quantile.
    const double k = std::floor((n - 2.170090 * std::sqrt(n)) / 2);
    return std::max<size_t>(1, static_cast<size_t>(k));
  }
  // The largest k with P(B <= k - 1) <= 1.5%, B ~ Binomial(n, 1/2): its terms
  // by recurrence from P(B = 0) = 2^-n (no underflow to 1000 samples).
  double term = std::pow(0.5, n), cumulative = 0;
  size_t k = 0;
  for (size_t i = 0; i < samples && cumulative + term <= 0.015; ++i) {
    cumulative += term;
    k = i + 1;
    term *= (n - static_cast<double>(i)) / (static_cast<double>(i) + 1);
  }
  return k;
}

MedianInterval median_interval(std::span<const double> samples) {
  MedianInterval out;
  out.samples = samples.size();
  out.median = median(samples);
  const double inf = std::numeric_limits<double>::infinity();
  out.half_width = out.relative_half_width = inf;
  const size_t k = median_interval_rank(samples.size());
  if (k == 0) return out;
  std::vector<double> sorted(samples.begin(), samples.end());
  const auto at = [&](size_t rank) {  // 1-based order statistic
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(rank - 1),
                     sorted.end());
    return sorted[rank - 1];
  };
  out.lower = at(k);
  out.upper = at(samples.size() + 1 - k);
  out.half_width = std::max(out.median - out.lower, out.upper - out.median);
  out.relative_half_width = out.median > 0 ? out.half_width / out.median : inf;
  return out;
}

bool drifts(std::span<const double> samples, double relative) {
  if (samples.size() < 4) return false;
  const size_t half = samples.size() / 2;
  const double first = median(samples.first(half)), second = median(samples.last(half));
  const double all = median(samples);
  return all > 0 && std::abs(second - first) > relative * all;
}

StopReason stopping_decision(std::span<const double> samples, bool budget_spent,
                             const StoppingRule& rule) {
  const size_t n = samples.size();
  const size_t least = std::max<size_t>(rule.min_samples, 7);
  const bool look = n <= 64 || n % std::max<size_t>(1, n / 32) == 0;
  if (n >= least && look && median_interval(samples).relative_half_width <= rule.target_relative &&
      !drifts(samples, 2 * rule.target_relative))
    return StopReason::kConverged;
  if (budget_spent && n >= least) return StopReason::kBudgetSpent;
  if (n >= rule.max_samples) return StopReason::kSampleLimit;
  return StopReason::kContinue;
}

size_t batch_iterations(double iteration_seconds, double min_batch_seconds,
                        double max_batch_seconds) {
  if (!(iteration_seconds > 0)) return 1;
  // (less a hair, so that 1 ms / 0.5 us is 2000, not 2001 by rounding error)
  double wanted = std::ceil(min_batch_seconds / iteration_seconds - 1e-9);
  wanted = std::min(wanted, std::floor(max_batch_seconds / iteration_seconds));
  return wanted < 1 ? 1 : static_cast<size_t>(std::min(wanted, 1e9));
}

size_t regrown_batch_iterations(size_t iterations, double batch_seconds, double min_batch_seconds,
                                double max_batch_seconds) {
  iterations = std::max<size_t>(iterations, 1);
  if (!(batch_seconds < 0.5 * min_batch_seconds)) return iterations;
  const double factor =
      batch_seconds > 0 ? std::min(10.0, 1.4 * min_batch_seconds / batch_seconds) : 10.0;
  double wanted = std::ceil(static_cast<double>(iterations) * factor);
  if (batch_seconds > 0)
    wanted = std::min(
        wanted, std::floor(max_batch_seconds * static_cast<double>(iterations) / batch_seconds));
  wanted = std::min(wanted, 1e9);
  return std::max(iterations, static_cast<size_t>(wanted));
}

double row_budget_seconds(double budget, double iteration_seconds) {
  const double fixed = kFixedSweepOperations * iteration_seconds;
  return std::isfinite(fixed) && fixed > budget ? fixed : budget;
}

}  // namespace ccscope::bench
