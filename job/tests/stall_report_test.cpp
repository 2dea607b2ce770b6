// The stall report's pure part: which ranks it blames and what it says of them.
#include <gtest/gtest.h>

#include <string>
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

}  // namespace
}  // namespace ccscope
