#include "ccscope/bench/pair_bandwidth.h"

#include <gtest/gtest.h>

#include <mutex>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/in_process_transport.h"
#include "ccscope/topo/schedule.h"

namespace ccscope::bench {
namespace {

std::vector<RankPairRound> rank_rounds(size_t ranks) {
  std::vector<RankPairRound> rounds;
  for (const topo::PairRound& round : topo::disjoint_pair_rounds(ranks)) {
    RankPairRound pairs;
    for (const auto& [a, b] : round) pairs.emplace_back(static_cast<int>(a), static_cast<int>(b));
    rounds.push_back(pairs);
  }
  return rounds;
}

// Passes everything to the ring communicator, but rank `victim` receives one
// wrong byte in its last exchange.
class CorruptingCommunicator : public Communicator {
 public:
  CorruptingCommunicator(std::unique_ptr<Communicator> inner, int victim)
      : inner_(std::move(inner)), victim_(victim) {}
  std::string backend_name() const override { return inner_->backend_name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  MemoryKind memory_kind() const override { return inner_->memory_kind(); }
  std::string device_name() const override { return inner_->device_name(); }
  std::unique_ptr<Buffer> allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void copy_from_host(Buffer& d, size_t o, const void* s, size_t b) override { inner_->copy_from_host(d, o, s, b); }
  void copy_to_host(void* d, const Buffer& s, size_t o, size_t b) override {
    inner_->copy_to_host(d, s, o, b);
    if (rank() == victim_ && b > 100) static_cast<unsigned char*>(d)[b / 2] ^= 1;
  }
  void all_reduce(const void* s, void* r, size_t c, DataType t, ReduceOp o) override { inner_->all_reduce(s, r, c, t, o); }
  void all_gather(const void* s, void* r, size_t c, DataType t) override { inner_->all_gather(s, r, c, t); }
  void reduce_scatter(const void* s, void* r, size_t c, DataType t, ReduceOp o) override { inner_->reduce_scatter(s, r, c, t, o); }
  void broadcast(const void* s, void* r, size_t c, DataType t, int root) override { inner_->broadcast(s, r, c, t, root); }
  void all_to_all(const void* s, void* r, size_t c, DataType t) override { inner_->all_to_all(s, r, c, t); }
  void send_recv(const void* s, int sp, void* r, int rp, size_t c, DataType t) override { inner_->send_recv(s, sp, r, rp, c, t); }
  void wait(std::chrono::milliseconds timeout) override { inner_->wait(timeout); }
  std::unique_ptr<StampClock> make_clock(size_t stamps) override { return inner_->make_clock(stamps); }

 private:
  std::unique_ptr<Communicator> inner_;
  int victim_;
};

TEST(PairBandwidth, EveryPairOnceInDisjointRoundsOnEveryRank) {
  constexpr int kRanks = 5;  // odd: one rank rests each round
  std::mutex mutex;
  std::vector<std::vector<PairBandwidth>> by_rank(kRanks);
  PairBandwidthOptions options;
  options.bytes = 64 << 10;
  options.repetitions = 3;
  InProcessTransport::run(kRanks, [&](PointToPoint& p2p) {
    auto control = point_to_point_control(p2p);
    auto comm = make_ring_communicator(p2p);
    std::vector<PairBandwidth> figures = measure_pair_rounds(*comm, *control, rank_rounds(kRanks), options);
    std::lock_guard<std::mutex> lock(mutex);
    by_rank[static_cast<size_t>(p2p.rank())] = std::move(figures);
  });
  ASSERT_EQ(by_rank[0].size(), 10u);  // 5 * 4 / 2 pairs
  for (const PairBandwidth& pair : by_rank[0]) {
    EXPECT_GT(pair.GBps, 0) << pair.rank_a << "-" << pair.rank_b;
    EXPECT_LT(pair.round, 5u);
  }
  for (int r = 1; r < kRanks; ++r) {
    ASSERT_EQ(by_rank[static_cast<size_t>(r)].size(), by_rank[0].size());
    for (size_t i = 0; i < by_rank[0].size(); ++i)
      EXPECT_EQ(by_rank[static_cast<size_t>(r)][i].GBps, by_rank[0][i].GBps);
  }
}

TEST(PairBandwidth, AWrongByteFromThePeerFailsTheMeasurement) {
  std::mutex mutex;
  std::vector<std::string> errors;
  InProcessTransport::run(2, [&](PointToPoint& p2p) {
    auto control = point_to_point_control(p2p);
    CorruptingCommunicator comm(make_ring_communicator(p2p), 1);
    try {
      measure_pair_rounds(comm, *control, rank_rounds(2), {4096, 0, 1, std::chrono::milliseconds(10000)});
    } catch (const std::runtime_error& e) {
      std::lock_guard<std::mutex> lock(mutex);
      errors.push_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 2u);  // both ranks fail, neither hangs
  EXPECT_NE(errors[0].find("rank 1 received a wrong byte from rank 0 at offset 2048"), std::string::npos)
      << errors[0];
}

}  // namespace
}  // namespace ccscope::bench
