#include "ccscope/diag/localize.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/diag/counters.h"

namespace ccscope::diag {
namespace {

namespace fs = std::filesystem;

std::string node_name(size_t i) { return "node" + std::to_string(i); }

// Every pair of nodes once (what rounds of disjoint pairs cover): a pair runs
// at the slower end's speed times `GBps`, times the link factor if listed.
std::vector<PairFigure> all_pairs(const std::vector<double>& node_speed, double GBps,
                                  const std::map<std::pair<size_t, size_t>, double>& links = {}) {
  std::vector<PairFigure> pairs;
  for (size_t i = 0; i < node_speed.size(); ++i)
    for (size_t j = i + 1; j < node_speed.size(); ++j) {
      const auto link = links.find({i, j});
      const double factor = link == links.end() ? 1.0 : link->second;
      pairs.push_back(
          {node_name(i), node_name(j), GBps * std::min(node_speed[i], node_speed[j]) * factor});
    }
  return pairs;
}

// Copies: callers pass temporaries.
std::vector<Check> named(const std::vector<Check>& checks, const std::string& name) {
  std::vector<Check> found;
  for (const Check& check : checks)
    if (check.name == name) found.push_back(check);
  return found;
}

size_t findings(const std::vector<Check>& checks) {
  return std::count_if(checks.begin(), checks.end(), [](const Check& check) {
    return check.status == Status::kWarn || check.status == Status::kFail;
  });
}

// --- low_outliers ---------------------------------------------------------------

TEST(LowOutliers, FindsTheLowOneAmongNoisyOnes) {
  const std::vector<double> figures = {100, 98, 103, 40, 101, 97};
  EXPECT_EQ(low_outliers(figures), std::vector<size_t>{3});
}

TEST(LowOutliers, TightClusterNoiseIsNotBlamed) {
  // MAD 0.05: 99 has modified z -13 but is only 1% low.
  const std::vector<double> figures = {100, 100.05, 99.95, 100, 99};
  EXPECT_TRUE(low_outliers(figures).empty());
}

TEST(LowOutliers, MadZeroFallsBackToTheRelativeRule) {
  EXPECT_EQ(low_outliers(std::vector<double>{10, 10, 10, 10, 7}), std::vector<size_t>{4});
  EXPECT_TRUE(low_outliers(std::vector<double>{10, 10, 10, 10, 8}).empty());  // only 20% low
}

TEST(LowOutliers, TwoFiguresDecideByTheRelativeRuleAndNameBoth) {
  EXPECT_EQ(low_outliers(std::vector<double>{100, 30}), (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(low_outliers(std::vector<double>{100, 80}).empty());
}

TEST(LowOutliers, SmallAndBadInputs) {
  EXPECT_TRUE(low_outliers(std::vector<double>{}).empty());
  EXPECT_TRUE(low_outliers(std::vector<double>{5}).empty());
  EXPECT_EQ(low_outliers(std::vector<double>{100, 102, 20}), std::vector<size_t>{2});
  // No majority among 3 spread figures: nothing to call low.
  EXPECT_TRUE(low_outliers(std::vector<double>{100, 50, 20}).empty());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(low_outliers(std::vector<double>{nan, 100, 101, 99, 10, inf}), std::vector<size_t>{4});
  EXPECT_TRUE(low_outliers(std::vector<double>{0, 0, 0}).empty());
  EXPECT_EQ(low_outliers(std::vector<double>{10, 10, 10, -5}), std::vector<size_t>{3});
}

// --- localize / judge_localization -----------------------------------------------

TEST(Localize, ThreeNodesOneSlowIsNamedAfterItsRetest) {
  const std::vector<PairFigure> pairs = all_pairs({1, 0.2, 1}, 10);
  const Localization localization = localize(pairs, 0);
  EXPECT_EQ(localization.suspects, std::vector<std::string>{"node1"});
  EXPECT_EQ(localization.known_good, (std::vector<std::string>{"node0", "node2"}));
  EXPECT_EQ(localization.slow_pairs.size(), 2u);
  EXPECT_TRUE(localization.slow_links.empty());
  EXPECT_FALSE(localization.cluster_wide);
  EXPECT_DOUBLE_EQ(localization.median_GBps, 10);  // not the pairs' median (2)
  ASSERT_EQ(localization.retests.size(), 1u);
  EXPECT_EQ(localization.retests[0].first, "node1");
  const std::string partner = localization.retests[0].second;
  EXPECT_TRUE(partner == "node0" || partner == "node2");

  const std::vector<Check> checks = judge_localization(localization, {{"node1", partner, 2.1}}, 0);
  const auto slow = named(checks, "cluster.slow_node");
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].status, Status::kFail);
  EXPECT_EQ(slow[0].host, "node1");
  EXPECT_EQ(slow[0].unit, "GB/s");
  EXPECT_DOUBLE_EQ(slow[0].measured, 2.1);
  EXPECT_DOUBLE_EQ(slow[0].expected, 10);
  EXPECT_NE(slow[0].message.find("re-test"), std::string::npos) << slow[0].message;
  EXPECT_NE(slow[0].message.find("2.1"), std::string::npos) << slow[0].message;
  EXPECT_FALSE(slow[0].remedy.empty());
  EXPECT_TRUE(named(checks, "cluster.slow_link").empty());
  EXPECT_EQ(findings(checks), 1u);
}

TEST(Localize, RetestAgainstNodeZeroGivenReversedStillCounts) {
  Localization localization = localize(all_pairs({1, 0.2, 1}, 10), 0);
  localization.retests = {{"node1", "node0"}};
  const std::vector<Check> checks = judge_localization(localization, {{"node0", "node1", 2}}, 0);
  ASSERT_EQ(named(checks, "cluster.slow_node").size(), 1u);
  EXPECT_EQ(named(checks, "cluster.slow_node")[0].status, Status::kFail);
  // Re-tested with another known-good node than planned: that counts too.
  localization.retests = {{"node1", "node2"}};
  const auto other =
      named(judge_localization(localization, {{"node0", "node1", 9.9}}, 0), "cluster.slow_node");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].status, Status::kPass);
  EXPECT_NE(other[0].message.find("node0"), std::string::npos);
}

TEST(Localize, MildlySlowNodeIsAWarning) {
  const Localization localization = localize(all_pairs({1, 1, 0.6, 1, 1}, 10), 0);
  ASSERT_EQ(localization.suspects, std::vector<std::string>{"node2"});
  const std::vector<Check> checks =
      judge_localization(localization, {{"node2", localization.retests[0].second, 6.1}}, 0);
  ASSERT_EQ(named(checks, "cluster.slow_node").size(), 1u);
  EXPECT_EQ(named(checks, "cluster.slow_node")[0].status, Status::kWarn);
}

TEST(Localize, SixNodesOneSlowLinkIsTheLinkNotANode) {
  const std::vector<PairFigure> pairs = all_pairs({1, 1, 1, 1, 1, 1}, 12, {{{2, 3}, 0.3}});
  const Localization localization = localize(pairs, 0);
  EXPECT_TRUE(localization.suspects.empty());
  EXPECT_EQ(localization.known_good.size(), 6u);
  ASSERT_EQ(localization.slow_links.size(), 1u);
  EXPECT_EQ(localization.slow_links[0].a, "node2");
  EXPECT_EQ(localization.slow_links[0].b, "node3");
  const std::vector<Check> checks = judge_localization(localization, {}, 0);
  EXPECT_TRUE(named(checks, "cluster.slow_node").empty());
  const auto links = named(checks, "cluster.slow_link");
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].status, Status::kFail);  // 0.3 of the median
  EXPECT_EQ(links[0].host, "node2");
  EXPECT_EQ(links[0].peer, "node3");
  EXPECT_NEAR(links[0].measured, 3.6, 1e-9);
  EXPECT_EQ(findings(checks), 1u);
}

TEST(Localize, ARetestOfTheLinkThatIsFineClearsIt) {
  const Localization localization = localize(all_pairs({1, 1, 1, 1}, 12, {{{0, 1}, 0.5}}), 0);
  ASSERT_EQ(localization.slow_links.size(), 1u);
  const std::vector<Check> checks = judge_localization(localization, {{"node1", "node0", 11.8}}, 0);
  EXPECT_EQ(findings(checks), 0u);
  EXPECT_EQ(named(checks, "cluster.pairwise").size(), 1u);
}

TEST(Localize, RetestClearsASuspect) {
  const Localization localization = localize(all_pairs({1, 1, 0.3, 1}, 10), 0);
  ASSERT_EQ(localization.suspects, std::vector<std::string>{"node2"});
  const std::vector<Check> checks =
      judge_localization(localization, {{"node2", localization.retests[0].second, 9.7}}, 0);
  const auto slow = named(checks, "cluster.slow_node");
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].status, Status::kPass);
  EXPECT_NE(slow[0].message.find("cleared"), std::string::npos) << slow[0].message;
  EXPECT_EQ(findings(checks), 0u);
  ASSERT_EQ(named(checks, "cluster.pairwise").size(), 1u);
  EXPECT_EQ(named(checks, "cluster.pairwise")[0].status, Status::kPass);
}

TEST(Localize, SuspectNotRetestedIsAWarning) {
  const Localization localization = localize(all_pairs({1, 0.1, 1, 1}, 10), 0);
  const std::vector<Check> checks = judge_localization(localization, {}, 0);
  ASSERT_EQ(named(checks, "cluster.slow_node").size(), 1u);
  EXPECT_EQ(named(checks, "cluster.slow_node")[0].status, Status::kWarn);
  EXPECT_NE(named(checks, "cluster.slow_node")[0].message.find("not re-tested"), std::string::npos);
}

TEST(Localize, TwoSlowNodesOfSixAreBothSuspectsWithDistinctPartners) {
  const Localization localization = localize(all_pairs({1, 0.2, 1, 1, 0.3, 1}, 10), 0);
  EXPECT_EQ(localization.suspects, (std::vector<std::string>{"node1", "node4"}));
  ASSERT_EQ(localization.retests.size(), 2u);
  EXPECT_NE(localization.retests[0].second, localization.retests[1].second);
}

TEST(Localize, HealthyNoisyFiguresGiveNoFinding) {
  std::mt19937 random(20240517);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  size_t false_findings = 0;
  for (size_t trial = 0; trial < 2000; ++trial) {
    const size_t nodes = 2 + trial % 15;
    std::vector<PairFigure> pairs = all_pairs(std::vector<double>(nodes, 1), 24);
    for (PairFigure& pair : pairs) pair.GBps *= noise(random);
    const Localization localization = localize(pairs, 25);
    std::vector<PairFigure> retests;
    for (const auto& [suspect, partner] : localization.retests)
      retests.push_back({suspect, partner, 24 * noise(random)});
    false_findings += findings(judge_localization(localization, retests, 25));
    false_findings += localization.suspects.size() + localization.slow_pairs.size();
  }
  EXPECT_EQ(false_findings, 0u);
}

TEST(Localize, HealthyNoisyPerRankFiguresGiveNoFinding) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  size_t false_findings = 0;
  for (size_t trial = 0; trial < 2000; ++trial) {
    std::vector<Subject> subjects;
    for (size_t rank = 0; rank < 2 + trial % 30; ++rank)
      subjects.push_back({node_name(rank / 8), static_cast<int>(rank), 300 * noise(random)});
    false_findings +=
        findings(judge_homogeneous_figures(Stage::kRank, "rank.gemm", "TFLOP/s", subjects, "x"));
  }
  EXPECT_EQ(false_findings, 0u);
}

TEST(Localize, EveryPairSlowIsClusterWide) {
  const Localization localization = localize(all_pairs({1, 1, 1, 1}, 3), 25);
  EXPECT_TRUE(localization.cluster_wide);
  EXPECT_TRUE(localization.known_good.empty());
  EXPECT_TRUE(localization.retests.empty());
  const std::vector<Check> checks = judge_localization(localization, {}, 25);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].name, "cluster.pairwise");
  EXPECT_EQ(checks[0].status, Status::kFail);
  EXPECT_EQ(checks[0].host, "");
  EXPECT_NE(checks[0].message.find("not a node"), std::string::npos) << checks[0].message;
  EXPECT_TRUE(named(checks, "cluster.slow_node").empty());
}

TEST(Localize, TwoNodesOnePairCannotSayWhichEnd) {
  // Without an expected figure one pair has nothing to be compared with.
  const std::vector<PairFigure> pair = {{"node0", "node1", 3}};
  EXPECT_EQ(findings(judge_localization(localize(pair, 0), {}, 0)), 0u);
  // Below the expected figure: both ends suspect, neither can be named.
  const Localization localization = localize(pair, 25);
  EXPECT_EQ(localization.suspects, (std::vector<std::string>{"node0", "node1"}));
  EXPECT_TRUE(localization.cluster_wide);
  const std::vector<Check> checks = judge_localization(localization, {}, 25);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].name, "cluster.pairwise");
  EXPECT_EQ(checks[0].status, Status::kFail);
  EXPECT_NE(checks[0].message.find("which end"), std::string::npos) << checks[0].message;
}

TEST(Localize, MadZeroAmongPairs) {
  // All healthy pairs exactly equal: the relative rule alone decides.
  Localization localization = localize(all_pairs({1, 1, 1, 1, 1}, 10, {{{0, 4}, 0.8}}), 0);
  EXPECT_TRUE(localization.slow_pairs.empty());  // 20% low: not slow
  localization = localize(all_pairs({1, 1, 1, 1, 1}, 10, {{{0, 4}, 0.7}}), 0);
  ASSERT_EQ(localization.slow_links.size(), 1u);
  EXPECT_EQ(named(judge_localization(localization, {}, 0), "cluster.slow_link")[0].status,
            Status::kWarn);
}

TEST(Localize, NoisyClusterNeedsMoreThanTheRelativeDrop) {
  // Healthy pairs spread +-30% around 11, every node with a good and a bad
  // pair: 8 GB/s is 41% below the median of the node bests (13.5) but
  // within the noise (MAD 2.25).
  const std::vector<PairFigure> pairs = {{"n0", "n1", 14},  {"n2", "n3", 13}, {"n0", "n2", 8},
                                         {"n1", "n3", 8.5}, {"n0", "n3", 11}, {"n1", "n2", 10}};
  const Localization localization = localize(pairs, 0);
  EXPECT_TRUE(localization.slow_pairs.empty()) << localization.slow_below_GBps;
  EXPECT_LT(localization.slow_below_GBps, 8);
}

TEST(Localize, BadInputIsLeftOut) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<PairFigure> pairs = {{"n0", "n0", 5}, {"", "n1", 5}, {"n0", "n1", nan}};
  const Localization localization = localize(pairs, nan);
  EXPECT_TRUE(localization.pairs.empty());
  const std::vector<Check> checks = judge_localization(localization, {}, 0);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].status, Status::kSkip);
  EXPECT_EQ(judge_localization(localize({}, 0), {{"a", "b", nan}}, -1).size(), 1u);
}

TEST(Localize, HealthyPairsGiveOnePassSummary) {
  const std::vector<Check> checks =
      judge_localization(localize(all_pairs({1, 1, 1}, 10), 12), {}, 12);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].name, "cluster.pairwise");
  EXPECT_EQ(checks[0].status, Status::kPass);
  EXPECT_DOUBLE_EQ(checks[0].measured, 10);
}

// --- judge_homogeneous_figures -----------------------------------------------------

TEST(HomogeneousFigures, OneSlowGpuFailsTheRestPass) {
  const std::vector<Subject> subjects = {{"node0", 0, 310},
                                         {"node0", 1, 305},
                                         {"node0", 2, 120},
                                         {"node0", 3, 300},
                                         {"node1", 4, 200}};
  const std::vector<Check> checks =
      judge_homogeneous_figures(Stage::kRank, "rank.gemm", "TFLOP/s", subjects, "check clocks");
  ASSERT_EQ(checks.size(), 5u);
  EXPECT_EQ(checks[0].status, Status::kPass);
  EXPECT_EQ(checks[2].status, Status::kFail);  // 120 < half of 300
  EXPECT_EQ(checks[2].rank, 2);
  EXPECT_EQ(checks[2].remedy, "check clocks");
  EXPECT_DOUBLE_EQ(checks[2].expected, 300);
  EXPECT_EQ(checks[4].status, Status::kWarn);  // 200: 33% low, above half
  EXPECT_EQ(checks[4].name, "rank.gemm");
  EXPECT_EQ(checks[4].stage, Stage::kRank);
}

TEST(HomogeneousFigures, TwoThatDisagreeByAFactorOfTwoAreBothWarned) {
  std::vector<Check> checks = judge_homogeneous_figures(
      Stage::kNode, "node.busbw", "GB/s", {{"node0", -1, 100}, {"node1", -1, 40}}, "r");
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0].status, Status::kWarn);
  EXPECT_EQ(checks[1].status, Status::kWarn);
  EXPECT_NE(checks[0].message.find("no majority"), std::string::npos);
  // 30% apart: timing noise on a shared machine, not a finding.
  checks = judge_homogeneous_figures(Stage::kNode, "node.busbw", "GB/s",
                                     {{"node0", -1, 100}, {"node1", -1, 70}}, "r");
  EXPECT_EQ(checks[0].status, Status::kPass);
  EXPECT_EQ(checks[1].status, Status::kPass);
  // One figure: SKIP, and no expected figure made up from itself.
  checks = judge_homogeneous_figures(Stage::kNode, "node.busbw", "GB/s", {{"node0", -1, 1}}, "r");
  EXPECT_EQ(checks[0].status, Status::kSkip);
  EXPECT_TRUE(std::isnan(checks[0].expected));
}

TEST(HomogeneousFigures, OneOrUnmeasuredIsSkipped) {
  EXPECT_EQ(judge_homogeneous_figures(Stage::kRank, "rank.gemm", "", {{"n", 0, 5}}, "r")[0].status,
            Status::kSkip);
  const std::vector<Check> checks = judge_homogeneous_figures(
      Stage::kRank, "rank.gemm", "", {{"n", 0, 5}, {"n", 1, 5}, {"n", 2, NAN}}, "r");
  EXPECT_EQ(checks[0].status, Status::kPass);
  EXPECT_EQ(checks[2].status, Status::kSkip);
  EXPECT_TRUE(judge_homogeneous_figures(Stage::kRank, "x", "", {}, "r").empty());
}

// --- counters ------------------------------------------------------------------------

class FakeTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        fs::temp_directory_path() /
        ("ccscope-localize-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const fs::path& relative, const std::string& text) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << text;
  }
  void write_ib(const std::string& node, const std::string& device, int port,
                const std::map<std::string, std::string>& counters) {
    for (const auto& [name, value] : counters)
      write(fs::path(node) / "class/infiniband" / device / "ports" / std::to_string(port) /
                "counters" / name,
            value + "\n");
  }
  void write_snmp(const std::string& node, uint64_t out_segments, uint64_t retransmitted) {
    write(fs::path(node) / "net/snmp",
          "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
          "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails "
          "EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"
          "Tcp: 1 200 120000 -1 10 5 0 0 3 " +
              std::to_string(out_segments) + " " + std::to_string(out_segments) + " " +
              std::to_string(retransmitted) + " 0 2 0\nUdp: InDatagrams\nUdp: 4\n");
  }
  std::string at(const std::string& node) const { return (root_ / node).string(); }
  fs::path root_;
};

const std::map<std::string, std::string> kQuietPort = {
    {"symbol_error", "0"},       {"link_error_recovery", "0"}, {"link_downed", "0"},
    {"port_rcv_errors", "0"},    {"port_xmit_discards", "0"},  {"VL15_dropped", "0"},
    {"port_xmit_data", "123456"}};

TEST_F(FakeTree, ReadsIbErrorCountersOnly) {
  write_ib("n0", "mlx5_0", 1, kQuietPort);
  write(fs::path("n0/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err"), "4\n");
  write(fs::path("n0/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent"), "99\n");
  const CounterSnapshot snapshot = read_ib_error_counters(at("n0"));
  EXPECT_EQ(snapshot.values.count("mlx5_0/1/symbol_error"), 1u);
  EXPECT_EQ(snapshot.values.count("mlx5_0/1/port_xmit_data"), 0u);  // traffic, not an error
  EXPECT_EQ(snapshot.values.at("mlx5_0/1/hw_counters/local_ack_timeout_err"), 4u);
  EXPECT_EQ(snapshot.values.count("mlx5_0/1/hw_counters/np_cnp_sent"), 0u);
  EXPECT_EQ(snapshot.values.size(), 7u);
}

TEST_F(FakeTree, MovedSymbolErrorBlamesThatPort) {
  for (const char* node : {"n0", "n1", "n2"}) {
    write_ib(node, "mlx5_0", 1, kQuietPort);
    write_ib(node, "mlx5_1", 1, kQuietPort);
  }
  std::vector<CounterSnapshot> before, after;
  for (const char* node : {"n0", "n1", "n2"}) before.push_back(read_ib_error_counters(at(node)));
  std::map<std::string, std::string> moved = kQuietPort;
  moved["symbol_error"] = "17";
  write_ib("n1", "mlx5_1", 1, moved);
  for (const char* node : {"n0", "n1", "n2"}) after.push_back(read_ib_error_counters(at(node)));
  const std::vector<Check> checks = judge_counter_deltas({"n0", "n1", "n2"}, before, after);
  const auto ib = named(checks, "cluster.ib_port_errors");
  ASSERT_EQ(ib.size(), 1u);
  EXPECT_EQ(ib[0].status, Status::kWarn);
  EXPECT_EQ(ib[0].host, "n1");
  EXPECT_NE(ib[0].message.find("mlx5_1 port 1"), std::string::npos) << ib[0].message;
  EXPECT_NE(ib[0].message.find("symbol_error +17"), std::string::npos) << ib[0].message;
  EXPECT_DOUBLE_EQ(ib[0].measured, 17);
  EXPECT_EQ(findings(checks), 1u);
}

TEST_F(FakeTree, LinkDownedFailsAndAResetCounterCountsItsAfterValue) {
  CounterSnapshot before, after;
  before.values = {{"mlx5_0/1/link_downed", 3}, {"mlx5_0/1/port_rcv_errors", 50}};
  after.values = {{"mlx5_0/1/link_downed", 4}, {"mlx5_0/1/port_rcv_errors", 2}};
  const std::vector<Check> checks = judge_counter_deltas({"n0"}, {before}, {after});
  const auto ib = named(checks, "cluster.ib_port_errors");
  ASSERT_EQ(ib.size(), 1u);
  EXPECT_EQ(ib[0].status, Status::kFail);
  EXPECT_NE(ib[0].message.find("link_downed +1"), std::string::npos) << ib[0].message;
  EXPECT_NE(ib[0].message.find("port_rcv_errors +2"), std::string::npos) << ib[0].message;
}

TEST_F(FakeTree, NodeRetransmittingOnePercentIsWarned) {
  const std::vector<std::string> hosts = {"n0", "n1", "n2", "n3"};
  std::vector<CounterSnapshot> before, after;
  for (const std::string& node : hosts) {
    write_snmp(node, 1000000, 100);
    before.push_back(read_tcp_counters(at(node)));
  }
  EXPECT_EQ(before[0].values.at("tcp/RetransSegs"), 100u);
  EXPECT_EQ(before[0].values.count("tcp/MaxConn"), 0u);  // -1: not a count
  for (size_t i = 0; i < hosts.size(); ++i) {
    const bool lossy = hosts[i] == "n2";
    write_snmp(hosts[i], 1000000 + 200000, 100 + (lossy ? 2000 : 3));
    after.push_back(read_tcp_counters(at(hosts[i])));
  }
  write(fs::path("n2/net/netstat"),
        "TcpExt: SyncookiesSent TCPLostRetransmit TCPTimeouts\nTcpExt: 0 5 2\n"
        "IpExt: InNoRoutes\nIpExt: 0\n");
  after[2] = read_tcp_counters(at("n2"));
  before[2].values["tcpext/TCPLostRetransmit"] = 0;
  const std::vector<Check> checks = judge_counter_deltas(hosts, before, after);
  const auto tcp = named(checks, "cluster.tcp_retransmissions");
  ASSERT_EQ(tcp.size(), 1u);
  EXPECT_EQ(tcp[0].status, Status::kWarn);
  EXPECT_EQ(tcp[0].host, "n2");
  EXPECT_DOUBLE_EQ(tcp[0].measured, 1.0);
  EXPECT_EQ(tcp[0].unit, "%");
  EXPECT_NE(tcp[0].message.find("TCPLostRetransmit +5"), std::string::npos) << tcp[0].message;
  EXPECT_EQ(findings(checks), 1u);
}

TEST_F(FakeTree, RetransmissionOutlierBelowTheAbsoluteRate) {
  // Others 0.001%, one at 0.3%: a robust outlier, under the 0.5% line.
  std::vector<CounterSnapshot> before(5), after(5);
  std::vector<std::string> hosts;
  for (size_t i = 0; i < 5; ++i) {
    hosts.push_back(node_name(i));
    before[i].values = {{"tcp/OutSegs", 0}, {"tcp/RetransSegs", 0}};
    after[i].values = {{"tcp/OutSegs", 100000}, {"tcp/RetransSegs", i == 4 ? 300u : 1u}};
  }
  const auto tcp = named(judge_counter_deltas(hosts, before, after), "cluster.tcp_retransmissions");
  ASSERT_EQ(tcp.size(), 1u);
  EXPECT_EQ(tcp[0].host, "node4");
  EXPECT_EQ(tcp[0].status, Status::kWarn);
  // Too few segments: not judged.
  for (auto& snapshot : after) snapshot.values["tcp/OutSegs"] = 500;
  const auto few = named(judge_counter_deltas(hosts, before, after), "cluster.tcp_retransmissions");
  ASSERT_EQ(few.size(), 1u);
  EXPECT_EQ(few[0].status, Status::kSkip);
}

TEST_F(FakeTree, AbsentTreesGiveNoFinding) {
  const CounterSnapshot ib = read_ib_error_counters(at("nothing-here"));
  const CounterSnapshot tcp = read_tcp_counters(at("nothing-here"));
  EXPECT_TRUE(ib.values.empty());
  EXPECT_TRUE(tcp.values.empty());
  const std::vector<Check> checks = judge_counter_deltas({"n0", "n1"}, {ib, tcp}, {ib, tcp});
  EXPECT_EQ(findings(checks), 0u);
  for (const Check& check : checks) EXPECT_EQ(check.status, Status::kSkip) << check.name;
  EXPECT_TRUE(judge_counter_deltas({}, {}, {}).size() == 2u);
}

TEST_F(FakeTree, MalformedFilesDoNotCrash) {
  write_ib("n0", "mlx5_0", 1,
           {{"symbol_error", "lots"},
            {"link_downed", ""},
            {"port_rcv_errors", "-3"},
            {"link_error_recovery", "99999999999999999999999"},
            {"VL15_dropped", "7 8"},
            {"port_xmit_discards", "5"}});
  fs::create_directories(root_ /
                         "n0/class/infiniband/mlx5_0/ports/1/counters/local_link_integrity_errors");
  write(fs::path("n0/class/infiniband/mlx5_1/ports"), "not a directory");
  write(fs::path("n0/class/infiniband/mlx5_2/ports/1/hw_counters"), "a file");
  const CounterSnapshot ib = read_ib_error_counters(at("n0"));
  EXPECT_EQ(ib.values.size(), 1u);
  EXPECT_EQ(ib.values.at("mlx5_0/1/port_xmit_discards"), 5u);

  write(fs::path("n0/net/snmp"), "Tcp: RetransSegs OutSegs\nTcp: 5\nTcp:\nTcp: x y\n\0\0garbage");
  write(fs::path("n0/net/netstat"), "TcpExt: TCPLostRetransmit\n");
  EXPECT_TRUE(read_tcp_counters(at("n0")).values.empty());
  write(fs::path("n1/net/snmp"), std::string(3000, ':') + "\nTcp: OutSegs RetransSegs\nTcp: 9 1");
  const CounterSnapshot tcp = read_tcp_counters(at("n1"));
  EXPECT_EQ(tcp.values.at("tcp/OutSegs"), 9u);
  EXPECT_THROW(judge_counter_deltas({"n0"}, {}, {ib}), std::invalid_argument);
}

TEST(CounterText, RoundTripsAndRejectsBadText) {
  CounterSnapshot snapshot;
  snapshot.values = {{"mlx5_0/1/symbol_error", 3},
                     {"tcp/RetransSegs", 18446744073709551615ULL},
                     {"mlx5_0/1/hw_counters/out_of_sequence", 0}};
  EXPECT_EQ(deserialize(serialize(snapshot)).values, snapshot.values);
  EXPECT_TRUE(deserialize(serialize({})).values.empty());
  for (const char* bad :
       {"", "garbage", "ccscope-counters 2\n", "ccscope-counters 1\nkey\n",
        "ccscope-counters 1\nkey x\n", "ccscope-counters 1\nkey -1\n",
        "ccscope-counters 1\nkey 1 2\n", "ccscope-counters 1\nkey 18446744073709551616\n",
        "ccscope-counters 1\nkey 1\nkey 2\n", "ccscope-counters 1\n 1\n"}) {
    EXPECT_THROW(deserialize(bad), std::runtime_error) << bad;
  }
  try {
    deserialize("ccscope-counters 1\ntcp/OutSegs 12\ntcp/RetransSegs twelve\n");
    FAIL();
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("line 3"), std::string::npos) << error.what();
  }
  CounterSnapshot spaced;
  spaced.values = {{"bad key", 1}};
  EXPECT_THROW(serialize(spaced), std::invalid_argument);
}

// Loss into node1 (1% of what is sent to it): its partners retransmit while
// sending to it, so the pairs, not the counting ends, point at node1.
TEST(PairRetransmissions, LossIntoOneNodeNamesIt) {
  const std::vector<PairRetransmissions> pairs = {
      {"node0", "node1", 10000, 100, 5000, 0},  // node0 -> node1: 1% retransmitted
      {"node0", "node2", 10000, 0, 10000, 1},
      {"node1", "node2", 5000, 0, 10000, 95},  // node2 -> node1
  };
  const std::vector<Check> checks = judge_pair_retransmissions(pairs);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].name, "cluster.packet_loss");
  EXPECT_EQ(checks[0].status, Status::kWarn);
  EXPECT_EQ(checks[0].host, "node1");
  EXPECT_NEAR(checks[0].measured, 0.95, 1e-9);  // its cleaner pair's rate, in %
  EXPECT_NE(checks[0].message.find("from node0 1.00%"), std::string::npos) << checks[0].message;
  EXPECT_NE(checks[0].message.find("sent to node1"), std::string::npos) << checks[0].message;
}

TEST(PairRetransmissions, CleanPairsPassAndALossyLinkIsALink) {
  std::vector<PairRetransmissions> pairs = {
      {"a", "b", 10000, 2, 10000, 0}, {"a", "c", 10000, 0, 10000, 0},
      {"b", "c", 10000, 0, 10000, 0}, {"a", "d", 10000, 0, 10000, 0},
      {"b", "d", 10000, 0, 10000, 0}, {"c", "d", 10000, 0, 10000, 3}};
  std::vector<Check> checks = judge_pair_retransmissions(pairs);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].status, Status::kPass);
  pairs[0].retransmitted_a = 200;  // a-b at 2%, a and b clean with c and d
  checks = judge_pair_retransmissions(pairs);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].status, Status::kWarn);
  EXPECT_EQ(checks[0].host, "a");
  EXPECT_EQ(checks[0].peer, "b");
}

TEST(PairRetransmissions, EveryPairLossyIsTheFabricAndTooLittleTrafficSkips) {
  std::vector<PairRetransmissions> pairs = {{"a", "b", 10000, 100, 10000, 100},
                                            {"a", "c", 10000, 100, 10000, 100},
                                            {"b", "c", 10000, 100, 10000, 100}};
  std::vector<Check> checks = judge_pair_retransmissions(pairs);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].status, Status::kWarn);
  EXPECT_EQ(checks[0].host, "");
  for (auto& p : pairs) p.sent_a = p.sent_b = 10;
  checks = judge_pair_retransmissions(pairs);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].status, Status::kSkip);
}

// Loss out of node2 (what it sends is lost): it retransmits in every pair,
// the others do not.
TEST(PairRetransmissions, LossOutOfOneNodeNamesIt) {
  const std::vector<Check> checks = judge_pair_retransmissions({
      {"node0", "node1", 10000, 0, 10000, 2},
      {"node0", "node2", 10000, 1, 10000, 40},  // node2 -> node0: 0.4%
      {"node1", "node2", 10000, 0, 10000, 90},
  });
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].host, "node2");
  EXPECT_NE(checks[0].message.find("sent by node2"), std::string::npos) << checks[0].message;
}

TEST(PairRetransmissions, DeltasIgnoreMissingAndResetCounters) {
  CounterSnapshot before, after;
  before.values = {{"tcp/OutSegs", 100}, {"tcp/RetransSegs", 5}};
  after.values = {{"tcp/OutSegs", 1100}, {"tcp/RetransSegs", 3}};
  uint64_t sent = 0, retransmitted = 7;
  tcp_segment_deltas(before, after, sent, retransmitted);
  EXPECT_EQ(sent, 1000u);
  EXPECT_EQ(retransmitted, 0u);  // went down: a reset, not a negative delta
  tcp_segment_deltas({}, after, sent, retransmitted);
  EXPECT_EQ(sent, 0u);
}

}  // namespace
}  // namespace ccscope::diag

namespace ccscope::diag {
namespace {

std::vector<std::string> node_names(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back("node" + std::to_string(i));
  return out;
}

// A half's all-reduce runs at its slowest node's rate.
auto halves_at(const std::map<std::string, double>& rate) {
  return [rate](const std::vector<std::string>& a, const std::vector<std::string>& b) {
    const auto slowest = [&](const std::vector<std::string>& half) {
      double r = 1e9;
      for (const auto& n : half) r = std::min(r, rate.count(n) ? rate.at(n) : 10.0);
      return r;
    };
    return std::pair{slowest(a), slowest(b)};
  };
}

TEST(SplitHalf, FindsTheSlowNodeInLog2NRounds) {
  for (const size_t n : {6u, 8u, 16u, 33u})
    for (size_t slow = 0; slow < n; ++slow) {
      const auto nodes = node_names(n);
      const auto r = localize_split_half(nodes, halves_at({{nodes[slow], 2.0}}));
      SCOPED_TRACE(fmt::format("{} nodes, slow {}", n, slow));
      ASSERT_FALSE(r.candidates.empty());
      EXPECT_LE(r.candidates.size(), 3u);
      EXPECT_NE(std::find(r.candidates.begin(), r.candidates.end(), nodes[slow]),
                r.candidates.end());
      EXPECT_LE(r.rounds, static_cast<size_t>(std::ceil(std::log2(static_cast<double>(n)))));
      EXPECT_FALSE(r.cluster_wide);
    }
  // 6 nodes: one round (halves of 3), then 3 pairs instead of 15.
  EXPECT_EQ(localize_split_half(node_names(6), halves_at({{"node4", 2.0}})).rounds, 1u);
  EXPECT_EQ(localize_split_half(node_names(6), halves_at({{"node4", 2.0}})).candidates,
            (std::vector<std::string>{"node3", "node4", "node5"}));
}

TEST(SplitHalf, NothingSlowOrEverythingSlowNamesNoNode) {
  const auto healthy = localize_split_half(node_names(8), halves_at({}));
  EXPECT_TRUE(healthy.candidates.empty());
  EXPECT_EQ(healthy.rounds, 1u);
  EXPECT_FALSE(healthy.cluster_wide);
  // Both halves slow alike: the halves cannot say; no node named.
  const auto both = localize_split_half(node_names(8), halves_at({{"node0", 2.0}, {"node7", 2.0}}));
  EXPECT_TRUE(both.candidates.empty());
  // Small groups go straight to pairs.
  EXPECT_EQ(localize_split_half(node_names(3), halves_at({})).rounds, 0u);
  EXPECT_EQ(localize_split_half(node_names(3), halves_at({})).candidates.size(), 3u);
  EXPECT_EQ(split_halves(node_names(5)).first.size(), 3u);
}

// Stage 3's plan after split-half: the pairs run among the slow half, topped up
// to 3 nodes from the faster ones (one pair cannot say which end is slow).
TEST(SplitHalf, PairNodesAndTheirEvidence) {
  const auto nodes = node_names(6);
  const auto slow4 = localize_split_half(nodes, halves_at({{"node4", 2.0}}));
  EXPECT_EQ(pair_nodes_after_split_half(nodes, slow4),
            (std::vector<std::string>{"node3", "node4", "node5"}));
  const Check evidence = judge_split_half(slow4, pair_nodes_after_split_half(nodes, slow4));
  EXPECT_EQ(evidence.name, "cluster.split_half");
  EXPECT_EQ(evidence.status, Status::kPass);
  EXPECT_DOUBLE_EQ(evidence.measured, 2.0);
  EXPECT_DOUBLE_EQ(evidence.expected, 10.0);
  EXPECT_NE(evidence.message.find("node pairs only among node3,node4,node5"), std::string::npos)
      << evidence.message;
  // 5 nodes, the slow one in the half of 2: a node of the faster half joins the pairs.
  const auto five = node_names(5);
  const auto slow3 = localize_split_half(five, halves_at({{"node3", 2.0}}));
  EXPECT_EQ(slow3.candidates, (std::vector<std::string>{"node3", "node4"}));
  EXPECT_EQ(pair_nodes_after_split_half(five, slow3),
            (std::vector<std::string>{"node3", "node4", "node0"}));
  // Halves alike: no pairs, and the evidence says so.
  const auto healthy = localize_split_half(nodes, halves_at({}));
  EXPECT_TRUE(pair_nodes_after_split_half(nodes, healthy).empty());
  EXPECT_NE(judge_split_half(healthy, {}).message.find("node pairs not run"), std::string::npos);
  EXPECT_EQ(judge_split_half(localize_split_half(node_names(3), halves_at({})), {}).status,
            Status::kSkip);
  // auto: split-half from 5 nodes; the flag's choice otherwise.
  EXPECT_FALSE(use_split_half(LocalizeMethod::kAuto, 4));
  EXPECT_TRUE(use_split_half(LocalizeMethod::kAuto, 5));
  EXPECT_FALSE(use_split_half(LocalizeMethod::kPairs, 64));
  EXPECT_TRUE(use_split_half(LocalizeMethod::kSplitHalf, 3));
}

}  // namespace
}  // namespace ccscope::diag
