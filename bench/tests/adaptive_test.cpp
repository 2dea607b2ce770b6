// The stopping rule of adaptive sampling (--target-ci) on synthetic timing
// streams whose answers are known: steady noise converges after the number of
// samples its spread implies, a bimodal stream (the 66 us / 278 us rounds of an
// all-gather on a shared host) needs hundreds, a drifting one never converges.
#include "adaptive.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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

TEST(Adaptive, SteadyStreamConvergesAfterTheSamplesItsSpreadNeeds) {
  // 100 us +- 5% uniform: relative sd 0.05/sqrt(3) = 2.9%, so +-2% needs
  // n with t(n-1) x 2.9% / sqrt(n) <= 2%: about 10 samples.
  std::mt19937 random(7);
  const StoppingRule rule{0.02, 5, 100000};
  const StreamRun run =
      run_until_stop([&](size_t) { return 100e-6 * (1 + 0.05 * uniform(random)); }, rule, 1000);
  EXPECT_EQ(run.reason, StopReason::kConverged);
  EXPECT_GE(run.samples.size(), 6u);
  EXPECT_LE(run.samples.size(), 20u);
  const MeanInterval m = mean_interval(run.samples);
  EXPECT_LE(m.relative_half_width, 0.02);
  EXPECT_LE(std::abs(m.mean - 100e-6), m.half_width);  // the truth lies inside
}

TEST(Adaptive, NeverStopsBeforeTheMinimumSamples) {
  const StoppingRule rule{0.02, 5, 100000};
  const std::vector<double> identical(4, 1e-3);  // a zero-width interval
  EXPECT_EQ(stopping_decision(identical, false, rule), StopReason::kContinue);
  const std::vector<double> five(5, 1e-3);
  EXPECT_EQ(stopping_decision(five, false, rule), StopReason::kConverged);
}

TEST(Adaptive, BimodalStreamNeedsHundredsOfSamplesAndKeepsTheTrueMean) {
  // 66 us or 278 us with equal odds: mean 172 us, sd 106 us (62% of the mean):
  // +-5% needs about (1.96 x 0.62 / 0.05)^2 = 590 samples; +-2% about 3700,
  // more than a budget of 1000 holds.
  std::mt19937 random(11);
  const auto bimodal = [&](size_t) { return (random() & 1) ? 278e-6 : 66e-6; };
  const StreamRun loose = run_until_stop(bimodal, {0.05, 5, 100000}, 100000);
  EXPECT_EQ(loose.reason, StopReason::kConverged);
  EXPECT_GE(loose.samples.size(), 400u);
  EXPECT_LE(loose.samples.size(), 800u);
  const MeanInterval m = mean_interval(loose.samples);
  EXPECT_LE(std::abs(m.mean - 172e-6), m.half_width);

  const StreamRun tight = run_until_stop(bimodal, {0.02, 5, 100000}, 1000);
  EXPECT_EQ(tight.reason, StopReason::kBudgetSpent);
  EXPECT_EQ(tight.samples.size(), 1000u);
  EXPECT_GT(mean_interval(tight.samples).relative_half_width, 0.02);
}

TEST(Adaptive, DriftingStreamNeverConverges) {
  // 100 us rising to 200 us over 1000 samples (another job taking the host
  // over), +-20% noise: steady, +-2% would need about 130 samples, by when the
  // halves already differ by 6%; at 1000 the interval of the mean is 1.4%, but
  // the halves differ by half the mean, so the stream runs to the budget.
  std::mt19937 random(3);
  const auto drifting = [&](size_t i) {
    return 100e-6 * (1 + static_cast<double>(i) / 1000) * (1 + 0.2 * uniform(random));
  };
  const StreamRun run = run_until_stop(drifting, {0.02, 5, 100000}, 1000);
  EXPECT_EQ(run.reason, StopReason::kBudgetSpent);
  EXPECT_EQ(run.samples.size(), 1000u);
  EXPECT_LT(mean_interval(run.samples).relative_half_width, 0.02);  // the interval alone would stop
  EXPECT_TRUE(drifts(run.samples, 0.04));
  // The same noise without the drift converges.
  std::mt19937 again(3);
  const StreamRun steady = run_until_stop(
      [&](size_t) { return 100e-6 * (1 + 0.2 * uniform(again)); }, {0.02, 5, 100000}, 1000);
  EXPECT_EQ(steady.reason, StopReason::kConverged);
  EXPECT_LT(steady.samples.size(), 300u);
}

TEST(Adaptive, TheSampleLimitBoundsMemory) {
  std::mt19937 random(5);
  const StreamRun run =
      run_until_stop([&](size_t) { return (random() & 1) ? 2.0 : 1.0; }, {0.001, 5, 50}, 100000);
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
