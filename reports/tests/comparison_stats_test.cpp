// Mann-Whitney U, the bootstrap interval for a ratio of medians, the alpha-beta fit.
#include "ccscope/reports/comparison_stats.h"

#include <gtest/gtest.h>

#include <random>

namespace ccscope::reports {
namespace {

TEST(MannWhitney, ExactSmallSamples) {
  // Complete separation of 4 vs 4: U = 16, exact two-sided p = 2 / C(8,4) = 2/70.
  MannWhitney r = mann_whitney_u({5, 6, 7, 8}, {1, 2, 3, 4});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 16);
  EXPECT_NEAR(r.p_value, 2.0 / 70, 1e-12);
  // 3 vs 3 can never reach p < 0.05 (minimum 2/20).
  EXPECT_NEAR(mann_whitney_u({4, 5, 6}, {1, 2, 3}).p_value, 0.1, 1e-12);
  // Interleaved: no evidence.
  EXPECT_GT(mann_whitney_u({1, 3, 5, 7}, {2, 4, 6, 8}).p_value, 0.5);
}

TEST(MannWhitney, NormalApproximationWithTies) {
  // Reference computed by hand from the textbook formula (tie-corrected
  // variance, continuity correction): U = 18.5, z = 3.1125, p = 0.001855.
  MannWhitney r =
      mann_whitney_u({1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5}, {3, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7});
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 18.5);
  EXPECT_NEAR(r.p_value, 0.001855097, 1e-8);
  EXPECT_DOUBLE_EQ(mann_whitney_u({2, 2, 2}, {2, 2, 2}).p_value, 1);
  EXPECT_DOUBLE_EQ(mann_whitney_u({}, {1}).p_value, 1);
}

TEST(MedianRatioInterval, ContainsTheTruthAndIsReproducible) {
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(1.0, 0.02);
  std::vector<double> base, slow;
  for (int i = 0; i < 10; ++i) base.push_back(noise(rng)), slow.push_back(0.8 * noise(rng));
  RatioInterval r = median_ratio_interval(slow, base);
  EXPECT_NEAR(r.ratio, 0.8, 0.03);
  EXPECT_LT(r.low, r.ratio);
  EXPECT_GT(r.high, r.ratio);
  EXPECT_LT(r.high, 0.9);
  RatioInterval again = median_ratio_interval(slow, base);
  EXPECT_EQ(r.low, again.low);
  EXPECT_EQ(r.high, again.high);
}

TEST(AlphaBetaFit, RecoversLatencyAndBandwidth) {
  std::vector<double> sizes, times;
  for (double s = 8; s <= 256e6; s *= 4) sizes.push_back(s), times.push_back(10e-6 + s / 20e9);
  auto fit = fit_alpha_beta(sizes, times);
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->alpha_s, 10e-6, 0.2e-6);
  EXPECT_NEAR(fit->beta_s_per_B, 1 / 20e9, 0.01 / 20e9);
  EXPECT_LT(fit->max_abs_residual, 0.02);
  EXPECT_EQ(fit->residuals.size(), sizes.size());
  EXPECT_FALSE(fit_alpha_beta({8}, {1e-6}));
  EXPECT_FALSE(fit_alpha_beta({8, 8}, {1e-6, 2e-6}));
}

}  // namespace
}  // namespace ccscope::reports
