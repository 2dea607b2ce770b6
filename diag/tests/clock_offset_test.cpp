#include "ccscope/diag/clock_offset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/collectives/in_process_transport.h"

namespace ccscope::diag {
namespace {

// A sample of a remote `offset` ahead, `out` seconds on the way there, `back`
// on the way back, held `hold` at the remote, sent at `t0`.
ClockSample exchange(double t0, double offset, double out, double back, double hold = 1e-6) {
  const double t1 = t0 + out + offset;
  const double t2 = t1 + hold;
  const double t3 = t0 + out + hold + back;
  return {t0, t1, t2, t3};
}

TEST(ClockEstimate, RecoversAnExactOffsetFromSymmetricDelays) {
  const std::vector<ClockSample> samples = {exchange(0, 0.05, 10e-6, 10e-6),
                                            exchange(1, 0.05, 10e-6, 10e-6)};
  const ClockEstimate estimate = estimate_clock_offset(samples);
  EXPECT_NEAR(estimate.offset_s, 0.05, 1e-12);
  EXPECT_NEAR(estimate.min_rtt_s, 20e-6, 1e-12);
  EXPECT_NEAR(estimate.error_bound_s, 10e-6, 1e-12);
  EXPECT_EQ(estimate.samples, 2u);
}

TEST(ClockEstimate, NegativeOffsetMeansTheRemoteIsBehind) {
  const std::vector<ClockSample> samples = {exchange(5, -0.012, 4e-6, 4e-6)};
  EXPECT_NEAR(estimate_clock_offset(samples).offset_s, -0.012, 1e-12);
}

TEST(ClockEstimate, AsymmetricDelaysStayWithinTheBound) {
  // 90 us out, 10 us back: the estimate is off by (90 - 10) / 2 = 40 us, which
  // the bound (rtt / 2 = 50 us) covers.
  const std::vector<ClockSample> samples = {exchange(0, 0.02, 90e-6, 10e-6)};
  const ClockEstimate estimate = estimate_clock_offset(samples);
  EXPECT_NEAR(estimate.offset_s, 0.02 + 40e-6, 1e-12);
  EXPECT_NEAR(estimate.error_bound_s, 50e-6, 1e-12);
  EXPECT_LE(std::abs(estimate.offset_s - 0.02), estimate.error_bound_s);
}

TEST(ClockEstimate, OutlierRoundTripsAreFilteredOut) {
  // Long, lopsided round trips (a descheduled thread, a queue) would pull the
  // estimate milliseconds away; the shortest one decides.
  std::vector<ClockSample> samples;
  for (int i = 0; i < 10; ++i) samples.push_back(exchange(i, 0.03, 8e-3, 20e-6));
  samples.push_back(exchange(20, 0.03, 5e-6, 5e-6));
  for (int i = 0; i < 10; ++i) samples.push_back(exchange(30 + i, 0.03, 20e-6, 6e-3));
  const ClockEstimate estimate = estimate_clock_offset(samples);
  EXPECT_NEAR(estimate.offset_s, 0.03, 1e-9);
  EXPECT_NEAR(estimate.min_rtt_s, 10e-6, 1e-9);
  EXPECT_EQ(estimate.samples, 21u);
}

TEST(ClockEstimate, InvalidSamplesAreDroppedAndNoneLeavesNoEstimate) {
  // t3 before t0 by more than the hold: a stepped clock.
  const ClockSample stepped = {0, 0.05, 0.0500001, -1};
  const ClockSample not_finite = {0, NAN, 0.1, 0.2};
  const std::vector<ClockSample> invalid = {stepped, not_finite};
  const ClockEstimate none = estimate_clock_offset(invalid);
  EXPECT_EQ(none.samples, 0u);
  EXPECT_TRUE(std::isinf(none.error_bound_s));
  EXPECT_EQ(estimate_clock_offset({}).samples, 0u);

  std::vector<ClockSample> mixed = invalid;
  mixed.push_back(exchange(3, 0.004, 30e-6, 30e-6));
  const ClockEstimate one = estimate_clock_offset(mixed);
  EXPECT_EQ(one.samples, 1u);
  EXPECT_NEAR(one.offset_s, 0.004, 1e-12);
}

TEST(InjectedClockOffset, ParsesTheHostsEntry) {
  EXPECT_DOUBLE_EQ(injected_clock_offset_s("node2=50", "node2"), 0.05);
  EXPECT_DOUBLE_EQ(injected_clock_offset_s("node1=3, node2 = -12.5", "node2"), -0.0125);
  EXPECT_DOUBLE_EQ(injected_clock_offset_s("node2=50", "node2.cluster.local"), 0.05);
  EXPECT_DOUBLE_EQ(injected_clock_offset_s("node2=50", "node1"), 0);
  EXPECT_DOUBLE_EQ(injected_clock_offset_s("node2=50", "node20"), 0);
  EXPECT_DOUBLE_EQ(injected_clock_offset_s("", "node2"), 0);
}

TEST(InjectedClockOffset, MalformedValuesThrowOneLineNamingTheVariable) {
  for (const char* bad : {"node2", "=50", "node2=", "node2=fast", "node2=50ms", "node2=inf",
                          "node1=1,,node2=2", "node2=1,node2=2"}) {
    try {
      injected_clock_offset_s(bad, "node2");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& error) {
      const std::string what = error.what();
      EXPECT_NE(what.find("CCSCOPE_TEST_CLOCK_OFFSET"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(InjectedClockOffset, ReadsTheProcessEnvironment) {
  ASSERT_EQ(setenv(kTestClockOffsetVariable, "testhost=7", 1), 0);
  EXPECT_DOUBLE_EQ(injected_clock_offset_from_process_s("testhost"), 0.007);
  ASSERT_EQ(unsetenv(kTestClockOffsetVariable), 0);
  EXPECT_DOUBLE_EQ(injected_clock_offset_from_process_s("testhost"), 0);
}

// Runs measure_clock_offsets on `ranks` threads, rank r's clock shifted by
// offsets[r]; returns the reference's estimates and checks the others got none.
std::vector<ClockEstimate> measure(int ranks, int reference, const std::vector<int>& remotes,
                                   const std::vector<double>& offsets, size_t exchanges = 32) {
  std::vector<ClockEstimate> result;
  std::mutex result_mutex;
  InProcessTransport::run(ranks, [&](PointToPoint& p2p) {
    ClockOptions options;
    options.exchanges = exchanges;
    options.injected_offset_s = offsets[static_cast<size_t>(p2p.rank())];
    std::vector<ClockEstimate> estimates = measure_clock_offsets(p2p, reference, remotes, options);
    std::lock_guard lock(result_mutex);
    if (p2p.rank() == reference)
      result = std::move(estimates);
    else
      EXPECT_TRUE(estimates.empty()) << "rank " << p2p.rank();
  });
  return result;
}

TEST(MeasureClockOffsets, FindsAnInjectedOffset) {
  const std::vector<ClockEstimate> estimates = measure(2, 0, {1}, {0, 0.05});
  ASSERT_EQ(estimates.size(), 1u);
  EXPECT_EQ(estimates[0].samples, 32u);
  EXPECT_NEAR(estimates[0].offset_s, 0.05, 2e-3);
  EXPECT_LE(std::abs(estimates[0].offset_s - 0.05), estimates[0].error_bound_s + 1e-6);
  EXPECT_LT(estimates[0].error_bound_s, 2e-3);
}

TEST(MeasureClockOffsets, SameClockGivesOffsetWithinTheBound) {
  const std::vector<ClockEstimate> estimates = measure(2, 0, {1}, {0, 0});
  ASSERT_EQ(estimates.size(), 1u);
  EXPECT_LT(std::abs(estimates[0].offset_s), estimates[0].error_bound_s + 1e-3);
}

TEST(MeasureClockOffsets, OneEstimatePerRemoteInTheirOrder) {
  // Reference 1; rank 3 takes no part; the reference's own clock is off too.
  const std::vector<ClockEstimate> estimates = measure(4, 1, {2, 0}, {-0.02, 0.01, 0.04, 0.5}, 8);
  ASSERT_EQ(estimates.size(), 2u);
  EXPECT_NEAR(estimates[0].offset_s, 0.03, 2e-3);   // rank 2 vs rank 1
  EXPECT_NEAR(estimates[1].offset_s, -0.03, 2e-3);  // rank 0 vs rank 1
  EXPECT_EQ(estimates[0].samples, 8u);
}

TEST(MeasureClockOffsets, NoRemotesIsNoMessage) { EXPECT_TRUE(measure(2, 0, {}, {0, 0}).empty()); }

TEST(MeasureClockOffsets, BadRolesAreUsageErrorsOnEveryRank) {
  const auto expect_usage_error = [](int reference, std::vector<int> remotes, size_t exchanges) {
    EXPECT_THROW(InProcessTransport::run(2,
                                         [&](PointToPoint& p2p) {
                                           ClockOptions options;
                                           options.exchanges = exchanges;
                                           measure_clock_offsets(p2p, reference, remotes, options);
                                         }),
                 UsageError);
  };
  expect_usage_error(2, {1}, 4);
  expect_usage_error(0, {2}, 4);
  expect_usage_error(0, {0}, 4);
  expect_usage_error(0, {1, 1}, 4);
  expect_usage_error(0, {1}, 0);
}

ClockEstimate estimate_of(double offset_s, double bound_s) {
  return {offset_s, bound_s, 2 * bound_s, 32};
}

TEST(JudgeClockOffsets, OffsetSurelyAboveTheThresholdWarnsNamingTheHost) {
  const std::vector<Check> checks =
      judge_clock_offsets({"node2"}, {estimate_of(0.05, 50e-6)}, "node1", 0.01);
  ASSERT_EQ(checks.size(), 1u);
  const Check& check = checks[0];
  EXPECT_EQ(check.name, "cluster.clock_offset");
  EXPECT_EQ(check.stage, Stage::kCluster);
  EXPECT_EQ(check.status, Status::kWarn);
  EXPECT_EQ(check.host, "node2");
  EXPECT_EQ(check.peer, "node1");
  EXPECT_DOUBLE_EQ(check.measured, 50);
  EXPECT_DOUBLE_EQ(check.expected, 10);
  EXPECT_EQ(check.unit, "ms");
  EXPECT_NE(check.message.find("node2's clock is 50.000 ms ahead of node1's"), std::string::npos)
      << check.message;
  EXPECT_NE(check.remedy.find("chrony"), std::string::npos) << check.remedy;
  EXPECT_NE(check.remedy.find("PTP"), std::string::npos) << check.remedy;
}

TEST(JudgeClockOffsets, SmallOffsetPasses) {
  const std::vector<Check> checks =
      judge_clock_offsets({"node2"}, {estimate_of(-0.002, 50e-6)}, "node1", 0.01);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].status, Status::kPass);
  EXPECT_DOUBLE_EQ(checks[0].measured, -2);
  EXPECT_NE(checks[0].message.find("behind"), std::string::npos) << checks[0].message;
  EXPECT_EQ(checks[0].remedy, "");
}

TEST(JudgeClockOffsets, UncertainOffsetPassesAndSaysSo) {
  // 15 ms +- 8 ms over a 10 ms threshold: it may be 7 ms.
  const std::vector<Check> checks =
      judge_clock_offsets({"node2"}, {estimate_of(0.015, 0.008)}, "node1", 0.01);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].status, Status::kPass);
  EXPECT_NE(checks[0].message.find("uncertain"), std::string::npos) << checks[0].message;
  // Just past certainty: 15 ms +- 4.9 ms is surely above 10 ms.
  EXPECT_EQ(judge_clock_offsets({"node2"}, {estimate_of(0.015, 0.0049)}, "node1", 0.01)[0].status,
            Status::kWarn);
}

TEST(JudgeClockOffsets, OneCheckPerRemoteAndSkips) {
  const std::vector<Check> checks = judge_clock_offsets(
      {"node2", "node3", "node4"}, {estimate_of(0, 1e-5), ClockEstimate{}, estimate_of(-0.2, 1e-5)},
      "node1", 0.01);
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_EQ(checks[0].status, Status::kPass);
  EXPECT_EQ(checks[1].status, Status::kSkip);  // no samples
  EXPECT_EQ(checks[2].status, Status::kWarn);
  EXPECT_EQ(checks[2].host, "node4");

  const std::vector<Check> one_node = judge_clock_offsets({}, {}, "node1", 0.01);
  ASSERT_EQ(one_node.size(), 1u);
  EXPECT_EQ(one_node[0].status, Status::kSkip);
  EXPECT_EQ(one_node[0].host, "node1");

  EXPECT_THROW(judge_clock_offsets({"node2"}, {}, "node1", 0.01), UsageError);
  EXPECT_THROW(judge_clock_offsets({}, {}, "node1", -1), UsageError);
}

TEST(JudgeClockOffsets, MeasuredInjectedOffsetWarns) {
  const std::vector<ClockEstimate> estimates = measure(2, 0, {1}, {0, 0.05});
  const std::vector<Check> checks = judge_clock_offsets({"node2"}, estimates, "node1", 0.01);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].status, Status::kWarn);
}

}  // namespace
}  // namespace ccscope::diag
