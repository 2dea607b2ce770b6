// The death watch's pure parts: who watches whom, who reports a death, and the
// line it prints (the I/O is tested by bench/tests/integration/killed_rank.sh
// and ci/tests/vcluster/test_faults.sh).
#include "ccscope/job/watchdog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>

namespace ccscope {
namespace {

const std::vector<std::string> kOneHost = {"vm", "vm", "vm", "vm"};
const std::vector<std::string> kTwoByTwo = {"node0", "node0", "node1", "node1"};
const std::vector<std::string> kThreeByOne = {"node0", "node1", "node2"};

TEST(DeathWatch, DeputyIsTheFirstRankOnAnotherHost) {
  EXPECT_EQ(watch_deputy(kTwoByTwo), 2);
  EXPECT_EQ(watch_deputy(kThreeByOne), 1);
  EXPECT_EQ(watch_deputy(kOneHost), 1);  // one host: rank 1
  EXPECT_EQ(watch_deputy({"vm"}), -1);   // one rank: nobody to watch
  EXPECT_EQ(watch_deputy({}), -1);
}

TEST(DeathWatch, EveryRankIsWatchedByRankZeroAndTheDeputy) {
  EXPECT_EQ(watch_connections(0, kTwoByTwo), std::vector<int>{});   // accepts only
  EXPECT_EQ(watch_connections(2, kTwoByTwo), std::vector<int>{0});  // the deputy
  EXPECT_EQ(watch_connections(1, kTwoByTwo), (std::vector<int>{0, 2}));
  EXPECT_EQ(watch_connections(3, kTwoByTwo), (std::vector<int>{0, 2}));
  EXPECT_EQ(watch_connections(0, {"vm"}), std::vector<int>{});
  // Each pair is connected once: rank 0 and the deputy watch everyone.
  for (const auto& hosts : {kOneHost, kTwoByTwo, kThreeByOne}) {
    const int n = static_cast<int>(hosts.size()), deputy = watch_deputy(hosts);
    std::vector<int> watched_by_zero(static_cast<size_t>(n)),
        watched_by_deputy(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      for (int target : watch_connections(r, hosts)) {
        if (target == 0) ++watched_by_zero[static_cast<size_t>(r)];
        if (target == deputy) ++watched_by_deputy[static_cast<size_t>(r)];
        if (r == deputy) ++watched_by_deputy[static_cast<size_t>(target)];
      }
    for (int r = 1; r < n; ++r) EXPECT_EQ(watched_by_zero[static_cast<size_t>(r)], 1) << r;
    for (int r = 0; r < n; ++r)
      if (r != deputy) {
        EXPECT_EQ(watched_by_deputy[static_cast<size_t>(r)], 1) << r;
      }
  }
}

TEST(DeathWatch, TheReporterIsOnAnotherNodeThanTheDeadRankWhenThereIsOne) {
  // 2 nodes x 2: a launcher kills node0's ranks when rank 1 dies there, so
  // node1's deputy (rank 2) reports it; rank 0 reports node1's deaths.
  EXPECT_EQ(death_reporter(0, kTwoByTwo), 2);
  EXPECT_EQ(death_reporter(1, kTwoByTwo), 2);
  EXPECT_EQ(death_reporter(2, kTwoByTwo), 0);
  EXPECT_EQ(death_reporter(3, kTwoByTwo), 0);
  EXPECT_EQ(death_reporter(0, kThreeByOne), 1);
  EXPECT_EQ(death_reporter(1, kThreeByOne), 0);
  EXPECT_EQ(death_reporter(2, kThreeByOne), 0);
  // One host: rank 0, or rank 1 for rank 0.
  EXPECT_EQ(death_reporter(0, kOneHost), 1);
  EXPECT_EQ(death_reporter(1, kOneHost), 0);
  EXPECT_EQ(death_reporter(3, kOneHost), 0);
  EXPECT_EQ(death_reporter(0, {"vm"}), -1);
  EXPECT_EQ(death_reporter(7, kOneHost), -1);
  // Never the dead rank itself.
  for (const auto& hosts : {kOneHost, kTwoByTwo, kThreeByOne})
    for (int dead = 0; dead < static_cast<int>(hosts.size()); ++dead)
      EXPECT_NE(death_reporter(dead, hosts), dead);
}

PeerLoss loss_of(int rank, int error = 0, bool goodbye = false) {
  PeerLoss loss;
  loss.rank = rank;
  loss.pid = 4242;
  loss.error = error;
  loss.said_goodbye = goodbye;
  return loss;
}

TEST(DeathWatch, AConnectionClosedWithoutGoodbyeIsADeathNamedInOneLine) {
  const DeathVerdict verdict = judge_peer_loss(
      loss_of(1), 0, kThreeByOne, "allreduce 1 MiB out-of-place, timed (operation #35)");
  EXPECT_TRUE(verdict.died);
  EXPECT_TRUE(verdict.report);
  EXPECT_EQ(verdict.line,
            "ccscope: rank 1 (node1, pid 4242) died during allreduce 1 MiB out-of-place, timed "
            "(operation #35): its watchdog connection to rank 0 closed without a goodbye (the "
            "process was killed, crashed or exited outside ccscope); ending the job with exit "
            "code 1\n");
  EXPECT_EQ(kPeerDiedExitCode, 1);
}

TEST(DeathWatch, OnlyTheReporterPrints) {
  // Rank 1 died on node1; the deputy is rank 1 itself, so rank 0 reports and
  // rank 2 (also watching through the deputy pair) stays silent.
  const DeathVerdict other = judge_peer_loss(loss_of(1), 2, kThreeByOne, "x");
  EXPECT_TRUE(other.died);
  EXPECT_FALSE(other.report);
  EXPECT_TRUE(other.line.empty());
  // Rank 0 died: the deputy names it.
  const DeathVerdict deputy = judge_peer_loss(loss_of(0), 2, kTwoByTwo, "x");
  EXPECT_TRUE(deputy.report);
  EXPECT_NE(deputy.line.find("rank 0 (node0, pid 4242) died"), std::string::npos);
  EXPECT_NE(deputy.line.find("connection to rank 2 closed"), std::string::npos);
}

TEST(DeathWatch, AGoodbyeOrADeadLinkIsNoDeath) {
  // It left on purpose (a clean end, or it ends the job with its own report).
  EXPECT_FALSE(judge_peer_loss(loss_of(1, 0, true), 0, kThreeByOne, "x").died);
  EXPECT_FALSE(judge_peer_loss(loss_of(1, ECONNRESET, true), 0, kThreeByOne, "x").died);
  // No answer from its host: the link or the node; the stall report says so.
  for (int error : {ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, EHOSTDOWN, ENETDOWN}) {
    const DeathVerdict verdict = judge_peer_loss(loss_of(1, error), 0, kThreeByOne, "x");
    EXPECT_FALSE(verdict.died) << error;
    EXPECT_FALSE(verdict.report) << error;
  }
}

TEST(DeathWatch, AResetAndAnUnknownPhaseAreSaid) {
  const DeathVerdict verdict = judge_peer_loss(loss_of(2, ECONNRESET), 0, kThreeByOne, "");
  EXPECT_TRUE(verdict.report);
  EXPECT_NE(verdict.line.find("died during start-up: its watchdog connection to rank 0 was reset"),
            std::string::npos);
  PeerLoss no_pid = loss_of(2);
  no_pid.pid = 0;
  EXPECT_NE(judge_peer_loss(no_pid, 0, kThreeByOne, "x").line.find("rank 2 (node2) died"),
            std::string::npos);
  // Exactly one line.
  EXPECT_EQ(std::count(verdict.line.begin(), verdict.line.end(), '\n'), 1);
  EXPECT_EQ(verdict.line.back(), '\n');
}

}  // namespace
}  // namespace ccscope
