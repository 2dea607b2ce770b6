#include "statistics.h"

#include <gtest/gtest.h>

#include <vector>

namespace ccscope::bench {
namespace {

TEST(Statistics, Mean) {
  const std::vector<double> v{1, 2, 3, 6};
  EXPECT_DOUBLE_EQ(mean(v), 3.0);
  EXPECT_DOUBLE_EQ(mean(std::vector<double>{}), 0.0);
}

TEST(Statistics, PercentileInterpolatesLikeNumpy) {
  const std::vector<double> v{4, 1, 3, 2};  // sorted 1 2 3 4
  EXPECT_DOUBLE_EQ(median(v), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
  EXPECT_DOUBLE_EQ(percentile(v, 99), 3.97);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{7}), 7.0);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{}, 50), 0.0);
}

TEST(Statistics, IterationsPerSample) {
  EXPECT_EQ(iterations_per_sample(20e-6, 100, 10e-6), 1u);  // slow enough alone
  EXPECT_EQ(iterations_per_sample(10e-6, 100, 10e-6), 1u);
  EXPECT_EQ(iterations_per_sample(0.5e-6, 100, 10e-6), 20u);  // 20 x 0.5 us = 10 us
  EXPECT_EQ(iterations_per_sample(0.3e-6, 100, 10e-6), 34u);  // rounded up
  EXPECT_EQ(iterations_per_sample(1e-9, 50, 10e-6), 50u);     // never more than -n
  EXPECT_EQ(iterations_per_sample(0.0, 100, 10e-6), 1u);      // unknown (no warm-up)
}

TEST(Statistics, AlgorithmBandwidth) {
  EXPECT_DOUBLE_EQ(algorithm_bandwidth_GBps(1'000'000'000, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(algorithm_bandwidth_GBps(100, 0), 0.0);
}

}  // namespace
}  // namespace ccscope::bench
