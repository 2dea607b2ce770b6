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
  void copy_from_host(Buffer& d, size_t o, const void* s, size_t b) override {
    inner_->copy_from_host(d, o, s, b);
  }
  void copy_to_host(void* d, const Buffer& s, size_t o, size_t b) override {
    inner_->copy_to_host(d, s, o, b);
    if (rank() == victim_ && b > 100) static_cast<unsigned char*>(d)[b / 2] ^= 1;
  }
  void all_reduce(const void* s, void* r, size_t c, DataType t, ReduceOp o) override {
    inner_->all_reduce(s, r, c, t, o);
  }
  void all_gather(const void* s, void* r, size_t c, DataType t) override {
    inner_->all_gather(s, r, c, t);
  }
  void reduce_scatter(const void* s, void* r, size_t c, DataType t, ReduceOp o) override {
    inner_->reduce_scatter(s, r, c, t, o);
  }
  void broadcast(const void* s, void* r, size_t c, DataType t, int root) override {
    inner_->broadcast(s, r, c, t, root);
  }
  void all_to_all(const void* s, void* r, size_t c, DataType t) override {
    inner_->all_to_all(s, r, c, t);
  }
  void send_recv(const void* s, int sp, void* r, int rp, size_t c, DataType t) override {
    inner_->send_recv(s, sp, r, rp, c, t);
  }
  void batch_send_recv(std::span<const PeerSend> s, std::span<const PeerRecv> r,
                       DataType t) override {
    inner_->batch_send_recv(s, r, t);
  }
  void wait(std::chrono::milliseconds timeout) override { inner_->wait(timeout); }
  std::unique_ptr<StampClock> make_clock(size_t stamps) override {
    return inner_->make_clock(stamps);
  }

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
    std::vector<PairBandwidth> figures =
        measure_pair_rounds(*comm, *control, rank_rounds(kRanks), options);
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
      measure_pair_rounds(comm, *control, rank_rounds(2),
                          {4096, 0, 1, std::chrono::milliseconds(10000)});
    } catch (const std::runtime_error& e) {
      std::lock_guard<std::mutex> lock(mutex);
      errors.push_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 2u);  // both ranks fail, neither hangs
  EXPECT_NE(errors[0].find("rank 1 received a wrong byte from rank 0 at offset 2048"),
            std::string::npos)
      << errors[0];
}

}  // namespace
}  // namespace ccscope::bench

namespace ccscope::bench {
namespace {

// Passes messages through, but flips one byte of the `nth` large message rank `victim` receives.
class CorruptingPointToPoint : public PointToPoint {
 public:
  CorruptingPointToPoint(PointToPoint& inner, int victim, int nth)
      : inner_(inner), victim_(victim), nth_(nth) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void send(int peer, const void* data, size_t bytes) override { inner_.send(peer, data, bytes); }
  void recv(int peer, void* data, size_t bytes) override {
    inner_.recv(peer, data, bytes);
    if (rank() == victim_ && bytes > 1 && ++received_ == nth_)
      static_cast<unsigned char*>(data)[7] ^= 0x40;
  }
  void send_recv(int sp, const void* sd, size_t sb, int rp, void* rd, size_t rb) override {
    inner_.send_recv(sp, sd, sb, rp, rd, rb);
  }

 private:
  PointToPoint& inner_;
  int victim_, nth_, received_ = 0;
};

TEST(PairBandwidthOneWay, BothDirectionsOfEveryPairInDisjointRounds) {
  constexpr int kRanks = 4;
  std::mutex mutex;
  std::vector<PairBandwidth> figures;
  InProcessTransport::run(kRanks, [&](PointToPoint& p2p) {
    auto control = point_to_point_control(p2p);
    std::vector<PairBandwidth> mine =
        measure_pair_rounds_one_way(p2p, *control, rank_rounds(kRanks), {64 << 10, 1, 3, {}});
    std::lock_guard<std::mutex> lock(mutex);
    if (p2p.rank() == 2) figures = std::move(mine);
  });
  ASSERT_EQ(figures.size(), 6u);  // 3 rounds of 2 pairs
  for (const PairBandwidth& pair : figures) {
    EXPECT_GT(pair.GBps_a_to_b, 0);
    EXPECT_GT(pair.GBps_b_to_a, 0);
    EXPECT_EQ(pair.GBps, std::min(pair.GBps_a_to_b, pair.GBps_b_to_a));
    EXPECT_LT(pair.round, 3u);
  }
}

TEST(PairBandwidthOneWay, AWrongByteFailsEveryRankAlike) {
  std::mutex mutex;
  std::vector<std::string> errors;
  InProcessTransport::run(3, [&](PointToPoint& p2p) {
    CorruptingPointToPoint corrupting(p2p, 2, 3);  // rank 2's third message
    auto control = point_to_point_control(p2p);
    try {
      measure_pair_rounds_one_way(corrupting, *control, rank_rounds(3), {4096, 1, 2, {}});
    } catch (const std::runtime_error& e) {
      std::lock_guard<std::mutex> lock(mutex);
      errors.push_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 3u);  // the resting rank too: nobody waits for a peer that left
  EXPECT_NE(errors[0].find("rank 2 received a wrong byte from rank"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("at offset 7"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace ccscope::bench
