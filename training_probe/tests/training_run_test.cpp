// The rank records of a model-parallel run gathered over in-process ranks by
// the train_rank kind's table (training_run.h), without MPI.
#include "ccscope/training_probe/training_run.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/in_process_transport.h"

namespace ccscope::training_probe {
namespace {

// A rank's record whose figures no decimal text of a few digits holds exactly.
records::TrainRankRecord record_of(int rank) {
  records::TrainRankRecord r;
  r.run_id = "3d-t1p3d1-n3";
  r.strategy = "3d";
  r.schedule = "1f1b";
  r.host = "never-sent";
  r.rank = rank;
  r.stage = rank;
  r.tp_rank = 0;
  r.dp_rank = 0;
  r.pp = 3;
  r.micro_batches = 4;
  r.step_median_s = 1.0 / (3 + rank);
  r.pipeline_s = 0.1 + 0.2 * rank;
  r.pipeline_busy_s = 1e-300 * (rank + 1);
  r.bubble = 2.0 / 3;
  r.peak_in_flight = 7 + rank;
  r.memory_B = 1e15 + rank;
  r.load_imbalance = 1.0 + 1.0 / (7 + rank);
  return r;
}

TEST(TrainingRun, RankRecordsGatherExactlyByTheTable) {
  constexpr int kRanks = 3;
  const std::vector<std::string> hosts = {"node-a", "node-a", "node-b"};
  std::vector<std::vector<records::TrainRankRecord>> gathered(kRanks);
  std::mutex lock;
  InProcessTransport::run(kRanks, [&](PointToPoint& p2p) {
    auto comm = make_ring_communicator(p2p);
    auto records = gather_rank_records(*comm, record_of(p2p.rank()), hosts);
    std::lock_guard<std::mutex> hold(lock);
    gathered[static_cast<size_t>(p2p.rank())] = std::move(records);
  });
  EXPECT_TRUE(gathered[1].empty());
  EXPECT_TRUE(gathered[2].empty());
  ASSERT_EQ(gathered[0].size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    const records::TrainRankRecord& got = gathered[0][static_cast<size_t>(r)];
    const records::TrainRankRecord want = record_of(r);
    EXPECT_EQ(got.host, hosts[static_cast<size_t>(r)]);
    EXPECT_EQ(got.run_id, want.run_id);
    EXPECT_EQ(got.schedule, want.schedule);
    EXPECT_EQ(got.rank, want.rank);
    EXPECT_EQ(got.stage, want.stage);
    EXPECT_EQ(got.pp, want.pp);
    EXPECT_EQ(got.micro_batches, want.micro_batches);
    EXPECT_EQ(got.peak_in_flight, want.peak_in_flight);
    // Bit for bit: the doubles are not rounded on the way.
    EXPECT_EQ(got.step_median_s, want.step_median_s);
    EXPECT_EQ(got.pipeline_s, want.pipeline_s);
    EXPECT_EQ(got.pipeline_busy_s, want.pipeline_busy_s);
    EXPECT_EQ(got.bubble, want.bubble);
    EXPECT_EQ(got.memory_B, want.memory_B);
    EXPECT_EQ(got.load_imbalance, want.load_imbalance);
  }
}

TEST(TrainingRun, TheSlowestRankSetsTheStepByTheTable) {
  constexpr int kRanks = 3;
  std::vector<records::TrainStepRecord> slowest(kRanks);
  std::vector<double> all_to_all(kRanks);
  std::mutex lock;
  InProcessTransport::run(kRanks, [&](PointToPoint& p2p) {
    const int me = p2p.rank();
    auto comm = make_ring_communicator(p2p);
    records::TrainStepRecord own;
    own.step = 4;
    own.loss = 0.25 + me;               // the same on every rank in a run; here told apart
    own.step_s = 1.0 / (3 + me);        // rank 0's is the largest
    own.compute_s = 0.1 + 0.2 * me;     // rank 2's
    own.comm_s = me == 1 ? 1e-300 : 0;  // rank 1's
    own.exposed_comm_s = 0.5;
    own.bytes_sent = 1e15 + me;
    own.grad_norm = 2.0 + me;
    double a2a = 3.0 - me;
    const records::TrainStepRecord step = slowest_over_ranks(*comm, own, a2a);
    std::lock_guard<std::mutex> hold(lock);
    slowest[static_cast<size_t>(me)] = step;
    all_to_all[static_cast<size_t>(me)] = a2a;
  });
  for (int r = 0; r < kRanks; ++r) {
    const records::TrainStepRecord& s = slowest[static_cast<size_t>(r)];
    EXPECT_EQ(s.step_s, 1.0 / 3);
    EXPECT_EQ(s.compute_s, 0.1 + 0.2 * 2);
    EXPECT_EQ(s.comm_s, 1e-300);
    EXPECT_EQ(s.exposed_comm_s, 0.5);
    EXPECT_EQ(s.bytes_sent, 1e15 + 2);
    EXPECT_EQ(all_to_all[static_cast<size_t>(r)], 3.0);
    // Not seconds or bytes: the rank's own.
    EXPECT_EQ(s.loss, 0.25 + r);
    EXPECT_EQ(s.grad_norm, 2.0 + r);
    EXPECT_EQ(s.step, 4);
  }
}

}  // namespace
}  // namespace ccscope::training_probe
