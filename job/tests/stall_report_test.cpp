// The stall report's pure part: which ranks it blames and what it says of them.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "ccscope/job/watchdog.h"

namespace ccscope {
namespace {

RankProgress answered(int rank, unsigned long long operation, std::string phase) {
  RankProgress p;
  p.rank = rank;
  p.answer = RankProgress::Answer::kAnswered;
  p.busy = true;
  p.operation = operation;
  p.phase = std::move(phase);
  return p;
}

TEST(Watchdog, NamesTheRankThatDoesNotAnswer) {
  RankProgress stopped;
  stopped.rank = 2;
  stopped.answer = RankProgress::Answer::kNoAnswer;
  const std::string report =
      describe_stall({answered(0, 57, "allreduce"), answered(1, 57, "allreduce"), stopped,
                      answered(3, 57, "allreduce")},
                     {"n0", "n0", "n1", "n1"}, 10, 0);
  EXPECT_NE(report.find("did not finish: 2."), std::string::npos) << report;
  EXPECT_NE(report.find("rank 2 (n1) does not answer"), std::string::npos) << report;
  EXPECT_NE(report.find("0,1,3 are waiting"), std::string::npos) << report;
}

TEST(Watchdog, NamesGoneAndBehindRanks) {
  RankProgress gone;
  gone.rank = 1;
  gone.answer = RankProgress::Answer::kGone;
  const std::string report =
      describe_stall({answered(0, 9, "x"), gone, answered(2, 7, "x")}, {"a", "b", "c"}, 5, 0);
  EXPECT_NE(report.find("did not finish: 1,2."), std::string::npos) << report;
  EXPECT_NE(report.find("rank 1 (b) is gone"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 2 (c) is behind: operation #7"), std::string::npos) << report;
}

TEST(Watchdog, AllWaitingPointsAtTheNetwork) {
  const std::string report =
      describe_stall({answered(0, 3, "x"), answered(1, 3, "x")}, {"a", "b"}, 5, 0);
  EXPECT_NE(report.find("no rank is behind"), std::string::npos) << report;
}

TEST(Watchdog, NamesANodeThatIsCutOff) {
  auto cut_off = [](int rank) {
    RankProgress p;
    p.rank = rank;
    p.answer = RankProgress::Answer::kUnreachable;
    p.detail = "10.0.0.3: No route to host";
    return p;
  };
  // Three nodes, c's link down, seen from a: b still answers, so c is named.
  const std::string report =
      describe_stall({answered(0, 9, "x"), answered(1, 9, "x"), cut_off(2), cut_off(3)},
                     {"a", "b", "c", "c"}, 5, 0);
  EXPECT_NE(report.find("did not finish: 2,3."), std::string::npos) << report;
  EXPECT_NE(report.find("rank 2 (c) cannot be reached"), std::string::npos) << report;
  EXPECT_NE(report.find("No route to host"), std::string::npos) << report;
  EXPECT_NE(report.find("node c is cut off"), std::string::npos) << report;
  EXPECT_EQ(report.find("node b is cut off"), std::string::npos) << report;

  // The reporter's own link is down: only its node answers, so no other node
  // is blamed; with two nodes either link may be the cut one.
  const std::string own =
      describe_stall({answered(0, 9, "x"), answered(1, 9, "x"), cut_off(2), cut_off(3)},
                     {"a", "a", "b", "b"}, 5, 0);
  EXPECT_EQ(own.find("is cut off"), std::string::npos) << own;
  EXPECT_NE(own.find("nodes a and b cannot reach each other"), std::string::npos) << own;
  const std::string alone =
      describe_stall({answered(0, 9, "x"), cut_off(1), cut_off(2)}, {"a", "b", "c"}, 5, 0);
  EXPECT_EQ(alone.find("is cut off"), std::string::npos) << alone;
  EXPECT_NE(alone.find("no other node can be reached from a (2 nodes): check a's own network link"),
            std::string::npos)
      << alone;
}

// Stage 3's shape: node leaders 0 and 2 run the all-reduce while ranks 1 and 3
// wait for them by design (fewer operations of their own).
RankProgress waiting_for_leaders(int rank, unsigned long long operation) {
  RankProgress p = answered(rank, operation, "diag stage 3: waiting for the node leaders");
  p.waiting_for = {0, 2};
  return p;
}

TEST(Watchdog, AStoppedLeaderIsNamedNotTheRanksWaitingForIt) {
  RankProgress stopped;
  stopped.rank = 2;
  stopped.answer = RankProgress::Answer::kNoAnswer;
  const std::string report =
      describe_stall({answered(0, 41, "all-reduce"), waiting_for_leaders(1, 20), stopped,
                      waiting_for_leaders(3, 20)},
                     {"n0", "n0", "n1", "n1"}, 10, 0);
  EXPECT_NE(report.find("did not finish: 2."), std::string::npos) << report;
  EXPECT_EQ(report.find("is behind"), std::string::npos) << report;
  EXPECT_NE(report.find("Rank(s) 1,3 wait for their group by design."), std::string::npos)
      << report;
  EXPECT_NE(report.find("rank 3 (n1) waits by design for rank(s) 0,2"), std::string::npos)
      << report;
}

TEST(Watchdog, ALeaderBehindTheOtherIsTheOnlyOneNamed) {
  const std::string report =
      describe_stall({answered(0, 41, "all-reduce"), waiting_for_leaders(1, 20),
                      answered(2, 40, "all-reduce"), waiting_for_leaders(3, 20)},
                     {"n0", "n0", "n1", "n1"}, 10, 0);
  EXPECT_NE(report.find("did not finish: 2."), std::string::npos) << report;
  EXPECT_NE(report.find("rank 2 (n1) is behind: operation #40"), std::string::npos) << report;
  EXPECT_EQ(report.find("rank 1 (n0) is behind"), std::string::npos) << report;
  // Both leaders stuck in the same operation: the network, no rank blamed.
  const std::string network =
      describe_stall({answered(0, 41, "all-reduce"), waiting_for_leaders(1, 20),
                      answered(2, 41, "all-reduce"), waiting_for_leaders(3, 20)},
                     {"n0", "n0", "n1", "n1"}, 10, 0);
  EXPECT_NE(network.find("no rank is behind"), std::string::npos) << network;
}

TEST(Watchdog, AWaitThatOutlastsItsLimitNamesTheRanksItWaitsFor) {
  // Rank 1's whole wait ran out while the leaders still answer (slowly
  // progressing): it reports, naming them.
  const std::string report =
      describe_stall({answered(0, 900, "all-reduce"), waiting_for_leaders(1, 20),
                      answered(2, 900, "all-reduce"), waiting_for_leaders(3, 20)},
                     {"n0", "n0", "n1", "n1"}, 320, 1);
  EXPECT_NE(report.find("a wait for the group lasted 320 s"), std::string::npos) << report;
  EXPECT_NE(report.find("did not finish: 0,2."), std::string::npos) << report;
  EXPECT_NE(report.find("rank 2 (n1) has not finished: operation #900"), std::string::npos)
      << report;
}

TEST(Watchdog, ProgressLineRoundTrip) {
  RankProgress p = answered(3, 57, "diag stage 3: wait\nfor leaders");
  p.stalled_seconds = 1.5;
  p.waiting_for = {0, 2, 4};
  const RankProgress back = parse_progress_line(format_progress_line(p));
  EXPECT_EQ(back.answer, RankProgress::Answer::kAnswered);
  EXPECT_EQ(back.rank, 3);
  EXPECT_TRUE(back.busy);
  EXPECT_EQ(back.operation, 57u);
  EXPECT_DOUBLE_EQ(back.stalled_seconds, 1.5);
  EXPECT_EQ(back.waiting_for, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(back.phase, "diag stage 3: wait for leaders");
  p.waiting_for.clear();
  EXPECT_TRUE(parse_progress_line(format_progress_line(p)).waiting_for.empty());
  EXPECT_EQ(parse_progress_line("3 1 57").answer, RankProgress::Answer::kNoAnswer);
  EXPECT_EQ(parse_progress_line("3 1 57 0.5 1,x phase").answer, RankProgress::Answer::kNoAnswer);
}

TEST(Watchdog, StallEvidenceIsBoundedInTime) {
  EXPECT_EQ(stall_evidence_within([] { return std::string("NCCL RAS: rank 1 behind\n"); },
                                  std::chrono::milliseconds(1000)),
            "ccscope: NCCL RAS: rank 1 behind\n");
  EXPECT_EQ(stall_evidence_within([]() -> std::string { throw std::runtime_error("refused"); },
                                  std::chrono::milliseconds(1000)),
            "ccscope: could not be had: refused\n");
  const auto start = std::chrono::steady_clock::now();
  const std::string late = stall_evidence_within(
      [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(600));
        return std::string("too late");
      },
      std::chrono::milliseconds(50));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_EQ(late, "ccscope: no answer within 0.05 s\n");
}

}  // namespace
}  // namespace ccscope
