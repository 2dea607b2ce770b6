// The stopping rule of adaptive sampling (--target-ci) on synthetic timing
// streams whose answers are known: steady noise converges after the number of
// samples its spread implies, a bimodal stream (the 66 us / 278 us rounds of an
// all-gather on a shared host) converges on its median when one mode holds
// most batches and not at even odds, a drifting one never converges, and the
// intervals the rule stops at hold the true median 95% of the time.
#include "adaptive.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace ccscope::bench {
namespace {

// Feeds samples until the rule stops; the budget is "spent" at `budget_samples`.
struct StreamRun {
  StopReason reason = StopReason::kContinue;
  std::vector<double> samples;
};
StreamRun run_until_stop(const std::function<double(size_t)>& next, const StoppingRule& rule,
                         size_t budget_samples) {
  StreamRun run;
  while (run.reason == StopReason::kContinue) {
    run.samples.push_back(next(run.samples.size()));
    run.reason = stopping_decision(run.samples, run.samples.size() >= budget_samples, rule);
  }
  return run;
}

// mt19937's output is the same on every platform (its distributions are not):
// a uniform value in [-1, 1) from its raw bits.
double uniform(std::mt19937& random) { return random() / 2147483648.0 - 1.0; }

// A row's budget is never less than what nccl-tests' -n 20 -w 5 spends on it.
TEST(Adaptive, RowBudgetIsAtLeastTheFixedSweepsTimeForTheRow) {
  EXPECT_EQ(row_budget_seconds(3.0, 1e-6), 3.0);         // an 8 B row: the budget
  EXPECT_EQ(row_budget_seconds(3.0, 0.12), 3.0);         // 25 x 0.12 s = 3 s: still the budget
  EXPECT_DOUBLE_EQ(row_budget_seconds(3.0, 0.4), 10.0);  // a 1 GiB all-reduce of 0.4 s
  EXPECT_DOUBLE_EQ(row_budget_seconds(0.5, 0.1), 2.5);
  EXPECT_EQ(row_budget_seconds(3.0, std::numeric_limits<double>::infinity()), 3.0);
  EXPECT_EQ(row_budget_seconds(3.0, -1.0), 3.0);
}

TEST(Adaptive, StudentTQuantiles) {
  EXPECT_NEAR(student_t_975(1), 12.706, 1e-3);
  EXPECT_NEAR(student_t_975(4), 2.776, 1e-3);
  EXPECT_NEAR(student_t_975(30), 2.042, 1e-3);
  EXPECT_NEAR(student_t_975(40), 2.021, 2e-3);  // the expansion beyond the table
  EXPECT_NEAR(student_t_975(120), 1.980, 2e-3);
  EXPECT_NEAR(student_t_975(100000), 1.960, 1e-3);
  EXPECT_TRUE(std::isinf(student_t_975(0)));
}

TEST(Adaptive, MeanIntervalOfKnownSamples) {
  // 1..5: mean 3, sd sqrt(2.5), se sqrt(0.5), t(4) 2.776.
  const std::vector<double> v{1, 2, 3, 4, 5};
  const MeanInterval m = mean_interval(v);
  EXPECT_DOUBLE_EQ(m.mean, 3.0);
  EXPECT_NEAR(m.half_width, 2.776 * std::sqrt(0.5), 1e-3);
  EXPECT_NEAR(m.relative_half_width, m.half_width / 3.0, 1e-12);
  EXPECT_EQ(m.samples, 5u);
  EXPECT_TRUE(std::isinf(mean_interval(std::vector<double>{7}).half_width));
}

TEST(Adaptive, MedianIntervalRanksAreTheBinomialOnes) {
  // The lower end's rank k: P(Binomial(n, 1/2) <= k - 1) <= 1.5% < P(... <= k).
  EXPECT_EQ(median_interval_rank(6), 0u);   // even [min, max] is a 96.9% interval
  EXPECT_EQ(median_interval_rank(7), 1u);   // [min, max]: 1 - 2/128 = 98.4%
  EXPECT_EQ(median_interval_rank(10), 2u);  // P(B <= 1) = 1.1%, P(B <= 2) = 5.5%
  EXPECT_EQ(median_interval_rank(20), 5u);  // P(B <= 4) = 0.6%, P(B <= 5) = 2.1%
  EXPECT_EQ(median_interval_rank(100), 39u);
  // Beyond 1000 the normal approximation, continuous with the exact ranks.
  const size_t exact = median_interval_rank(1000), approximate = median_interval_rank(1001);
  EXPECT_GE(approximate + 1, exact);
  EXPECT_LE(approximate, exact + 1);
}

TEST(Adaptive, MedianIntervalOfKnownSamples) {
  // 10, 1, 9, 2, ... : median 5.5, interval x(2)..x(9) = 2..9.
  const std::vector<double> v{10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  const MedianInterval m = median_interval(v);
  EXPECT_DOUBLE_EQ(m.median, 5.5);
  EXPECT_DOUBLE_EQ(m.lower, 2.0);
  EXPECT_DOUBLE_EQ(m.upper, 9.0);
  EXPECT_DOUBLE_EQ(m.half_width, 3.5);
  EXPECT_DOUBLE_EQ(m.relative_half_width, 3.5 / 5.5);
  // Asymmetric: the half-width is the wider side, so median +- it holds the interval.
  const MedianInterval skewed = median_interval(std::vector<double>{1, 1.1, 1.2, 1.3, 1.4, 1.5, 9});
  EXPECT_DOUBLE_EQ(skewed.half_width, 9 - 1.3);
  EXPECT_TRUE(std::isinf(median_interval(std::vector<double>(6, 1.0)).half_width));
}

TEST(Adaptive, SteadyStreamConvergesAfterTheSamplesItsSpreadNeeds) {
  // 100 us +- 5% uniform: density 1/(10 us) at the median, so the interval's
  // half-width is about 1.96 x 0.5 x 10 us / sqrt(n): +-2 us needs about 25.
  std::mt19937 random(7);
  const StoppingRule rule{0.02, 7, 100000};
  const StreamRun run =
      run_until_stop([&](size_t) { return 100e-6 * (1 + 0.05 * uniform(random)); }, rule, 1000);
  EXPECT_EQ(run.reason, StopReason::kConverged);
  EXPECT_GE(run.samples.size(), 12u);
  EXPECT_LE(run.samples.size(), 60u);
  const MedianInterval m = median_interval(run.samples);
  EXPECT_LE(m.relative_half_width, 0.02);
  EXPECT_LE(std::abs(m.median - 100e-6), m.half_width);  // the truth lies inside
}

TEST(Adaptive, NeverStopsBeforeTheMinimumSamples) {
  const StoppingRule rule{0.02, 7, 100000};
  const std::vector<double> identical(6, 1e-3);  // a zero-width spread, but no interval yet
  EXPECT_EQ(stopping_decision(identical, false, rule), StopReason::kContinue);
  const std::vector<double> seven(7, 1e-3);
  EXPECT_EQ(stopping_decision(seven, false, rule), StopReason::kConverged);
  // A spent budget does not end a row before it has an interval.
  const std::vector<double> spread{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(stopping_decision(spread, true, rule), StopReason::kContinue);
  const std::vector<double> spread7{1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(stopping_decision(spread7, true, rule), StopReason::kBudgetSpent);
}

TEST(Adaptive, BimodalStreamConvergesOnItsMedianWhereTheMeanCannot) {
  // A loaded host: 70% of batches at 66 us +- 5%, 30% stalled to 278 us. The
  // median is the fast mode's 0.5/0.7 quantile, 66 x (0.95 + 0.1 x 5/7) =
  // 67.41 us; the mean's interval (CV 0.75) would need (1.96 x 0.75 / 0.02)^2,
  // about 5,400 samples; the median's needs a few dozen.
  std::mt19937 random(11);
  const auto bimodal = [&](size_t) {
    return random() % 10 < 7 ? 66e-6 * (1 + 0.05 * uniform(random)) : 278e-6;
  };
  const StreamRun run = run_until_stop(bimodal, {0.02, 7, 100000}, 1000);
  EXPECT_EQ(run.reason, StopReason::kConverged);
  EXPECT_LE(run.samples.size(), 200u);
  const MedianInterval m = median_interval(run.samples);
  EXPECT_LE(std::abs(m.median - 66e-6 * (0.95 + 0.1 * 5 / 7.0)), m.half_width);
  EXPECT_GT(mean_interval(run.samples).relative_half_width, 0.1);  // the mean's, at that point

  // Even odds: the median sits between the modes and is not known to +-2%
  // by 1000 samples; the row ends at its budget, its interval says so.
  std::mt19937 again(11);
  const StreamRun even = run_until_stop([&](size_t) { return (again() & 1) ? 278e-6 : 66e-6; },
                                        {0.02, 7, 100000}, 1000);
  EXPECT_EQ(even.reason, StopReason::kBudgetSpent);
  EXPECT_GT(median_interval(even.samples).relative_half_width, 0.02);
}

// The share of `runs` streams stopped by the rule whose reported interval
// (median +- half-width) holds the stream's true median.
double coverage(const std::function<double(std::mt19937&)>& draw, double true_median, int runs) {
  int held = 0;
  for (int seed = 1; seed <= runs; ++seed) {
    std::mt19937 random(static_cast<unsigned>(seed));
    const StreamRun run =
        run_until_stop([&](size_t) { return draw(random); }, {0.02, 7, 100000}, 400);
    const MedianInterval m = median_interval(run.samples);
    held += std::abs(m.median - true_median) <= m.half_width;
  }
  return static_cast<double>(held) / runs;
}

TEST(Adaptive, StoppedIntervalsHoldTheTrueMedianNineteenTimesInTwenty) {
  // The honesty of the reported interval under the sequential rule (looking
  // after each batch lets a lucky run stop early): over 500 streams each, the
  // interval a row reports holds the true median at least 95% of the time,
  // less the sampling error of 500 runs (about 1%). (With the 95% order
  // statistics looked at as often, the steady streams' held it 92.2%.)
  const auto steady = [](std::mt19937& r) { return 1.0 + 0.05 * uniform(r); };
  EXPECT_GE(coverage(steady, 1.0, 500), 0.93);
  const auto bimodal = [](std::mt19937& r) { return r() % 10 < 7 ? 1.0 + 0.05 * uniform(r) : 4.2; };
  EXPECT_GE(coverage(bimodal, 0.95 + 0.1 * 5 / 7.0, 500), 0.93);
  // Heavy-tailed (a stall of up to 50x on one batch in five).
  const auto stalls = [](std::mt19937& r) {
    const double base = 1.0 + 0.02 * uniform(r);
    return r() % 5 == 0 ? base * (2 + 24 * (1 + uniform(r))) : base;
  };
  EXPECT_GE(coverage(stalls, 1.0 + 0.02 * (2 * (0.5 / 0.8) - 1), 500), 0.93);
}

TEST(Adaptive, DriftingStreamNeverConverges) {
  // 100 us rising to 200 us over 1000 samples (another job taking the host
  // over), +-20% noise: the median's interval narrows below 2% by 1000
  // samples, but the halves' medians differ by half the median, so the stream
  // runs to the budget.
  std::mt19937 random(3);
  const auto drifting = [&](size_t i) {
    return 100e-6 * (1 + static_cast<double>(i) / 1000) * (1 + 0.2 * uniform(random));
  };
  const StreamRun run = run_until_stop(drifting, {0.02, 7, 100000}, 1000);
  EXPECT_EQ(run.reason, StopReason::kBudgetSpent);
  EXPECT_EQ(run.samples.size(), 1000u);
  EXPECT_TRUE(drifts(run.samples, 0.04));
  // The same noise without the drift converges.
  std::mt19937 again(3);
  const StreamRun steady = run_until_stop(
      [&](size_t) { return 100e-6 * (1 + 0.2 * uniform(again)); }, {0.02, 7, 100000}, 1000);
  EXPECT_EQ(steady.reason, StopReason::kConverged);
  EXPECT_LT(steady.samples.size(), 600u);
}

TEST(Adaptive, TheSampleLimitBoundsMemory) {
  std::mt19937 random(5);
  const StreamRun run =
      run_until_stop([&](size_t) { return (random() & 1) ? 2.0 : 1.0; }, {0.001, 7, 50}, 100000);
  EXPECT_EQ(run.reason, StopReason::kSampleLimit);
  EXPECT_EQ(run.samples.size(), 50u);
}

TEST(Adaptive, ShortBatchesRegrowAsGoogleBenchmark) {
  // 1 ms wanted: a batch of 10 that took 0.1 ms grows 10x (1.4 x 10 capped at 10).
  EXPECT_EQ(regrown_batch_iterations(10, 1e-4, 1e-3, 0.1), 100u);
  // 0.4 ms: 1.4 x 1 / 0.4 = 3.5x.
  EXPECT_EQ(regrown_batch_iterations(10, 4e-4, 1e-3, 0.1), 35u);
  // Half the minimum or more: the sizing stands (scheduler noise is not a reason).
  EXPECT_EQ(regrown_batch_iterations(10, 5e-4, 1e-3, 0.1), 10u);
  EXPECT_EQ(regrown_batch_iterations(10, 5e-2, 1e-3, 0.1), 10u);
  // The budget's share caps it (0.25 ms max: 10 x 0.25 / 0.1 = 25), never below the current.
  EXPECT_EQ(regrown_batch_iterations(10, 1e-4, 1e-3, 2.5e-4), 25u);
  EXPECT_EQ(regrown_batch_iterations(10, 1e-4, 1e-3, 1e-5), 10u);
  // A batch under the clock's resolution: 10x.
  EXPECT_EQ(regrown_batch_iterations(3, 0.0, 1e-3, 0.1), 30u);
}

TEST(Adaptive, BatchIterationsFillTheClockSpan) {
  EXPECT_EQ(batch_iterations(0.5e-6, 1e-3, 0.1), 2000u);  // 2000 x 0.5 us = 1 ms
  EXPECT_EQ(batch_iterations(0.3e-6, 1e-3, 0.1), 3334u);  // rounded up
  EXPECT_EQ(batch_iterations(5e-3, 1e-3, 0.1), 1u);       // slow enough alone
  EXPECT_EQ(batch_iterations(1e-6, 1e-3, 1e-4), 100u);    // the budget's share caps it
  EXPECT_EQ(batch_iterations(1.0, 1e-3, 0.1), 1u);        // never 0
  EXPECT_EQ(batch_iterations(0.0, 1e-3, 0.1), 1u);        // unknown
}

}  // namespace
}  // namespace ccscope::bench
