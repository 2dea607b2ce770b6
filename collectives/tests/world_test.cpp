#include "ccscope/collectives/world.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "ccscope/collectives/watchdog.h"

namespace ccscope {
namespace {

TEST(World, NodesFromHostnames) {
  const std::vector<std::string> hosts{"a", "a", "b", "c", "b", "a"};
  const World r4 = World::from_hostnames(4, hosts);
  EXPECT_EQ(r4.node_count(), 3);
  EXPECT_EQ(r4.node_index(), 1);  // nodes numbered by first appearance
  EXPECT_EQ(r4.local_rank(), 1);
  EXPECT_EQ(r4.local_size(), 2);
  EXPECT_EQ(r4.max_ranks_per_node(), 3);
  const World r5 = World::from_hostnames(5, hosts);
  EXPECT_EQ(r5.node_index(), 0);
  EXPECT_EQ(r5.local_rank(), 2);
  EXPECT_EQ(r5.hostname(), "a");
  const World single = World::from_hostnames(0, {"x"});
  EXPECT_EQ(single.node_count(), 1);
  EXPECT_EQ(single.local_size(), 1);
}

std::map<std::string, std::string> g_env;
const char* fake_getenv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

TEST(World, LauncherRankCount) {
  g_env = {};
  EXPECT_EQ(launcher_rank_count(fake_getenv), 0);
  g_env = {{"PMI_SIZE", "4"}};
  EXPECT_EQ(launcher_rank_count(fake_getenv), 4);
  g_env = {{"OMPI_COMM_WORLD_SIZE", "8"}};
  EXPECT_EQ(launcher_rank_count(fake_getenv), 8);
  g_env = {{"SLURM_STEP_NUM_TASKS", "16"}};
  EXPECT_EQ(launcher_rank_count(fake_getenv), 16);
  g_env = {{"SLURM_NTASKS", "16"}};  // an allocation, not a launched step
  EXPECT_EQ(launcher_rank_count(fake_getenv), 0);
  g_env = {{"PMI_SIZE", "garbage"}};
  EXPECT_EQ(launcher_rank_count(fake_getenv), 0);
}

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
