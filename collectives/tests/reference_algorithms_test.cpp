// The reference algorithms over the in-process transport: every rank count from 1
// to 8, uneven and edge-case counts, every type and op, in place and out of place,
// compared element for element with a serial computation. Plus the transport's own
// guarantees (timeouts instead of hangs, error propagation, size checks).
#include "ccscope/collectives/reference_algorithms.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/collectives/in_process_transport.h"
#include "ccscope/collectives/types.h"

namespace ccscope {
namespace {

const std::vector<DataType> kTypes = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                                      DataType::kBFloat16, DataType::kInt32,   DataType::kInt8,
                                      DataType::kUInt8};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};

// Writes an integer value (small enough to be exact in every type) as `type`.
void put(std::vector<unsigned char>& buffer, DataType type, size_t index, int64_t value) {
  unsigned char* p = buffer.data() + index * element_size(type);
  auto write = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
  switch (type) {
    case DataType::kFloat32:
      return write(static_cast<float>(value));
    case DataType::kFloat64:
      return write(static_cast<double>(value));
    case DataType::kFloat16:
      return write(float_to_half(static_cast<float>(value)));
    case DataType::kBFloat16:
      return write(float_to_bfloat16(static_cast<float>(value)));
    case DataType::kInt32:
      return write(static_cast<int32_t>(value));
    case DataType::kInt8:
      return write(static_cast<int8_t>(value));
    case DataType::kUInt8:
      return write(static_cast<uint8_t>(value));
  }
}

// The average as the algorithms compute it: the exact sum divided in the type's
// arithmetic (float for the 16-bit formats, truncation for integers).
void put_average(std::vector<unsigned char>& buffer, DataType type, size_t index, int64_t sum,
                 int n) {
  unsigned char* p = buffer.data() + index * element_size(type);
  auto write = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
  float f = static_cast<float>(sum) / static_cast<float>(n);
  switch (type) {
    case DataType::kFloat32:
      return write(f);
    case DataType::kFloat64:
      return write(static_cast<double>(sum) / n);
    case DataType::kFloat16:
      return write(float_to_half(f));
    case DataType::kBFloat16:
      return write(float_to_bfloat16(f));
    default:
      return put(buffer, type, index, sum / n);
  }
}

double get(const unsigned char* p, DataType type) {
  auto read = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (type) {
    case DataType::kFloat32:
      return read(float{});
    case DataType::kFloat64:
      return read(double{});
    case DataType::kFloat16:
      return half_to_float(read(uint16_t{}));
    case DataType::kBFloat16:
      return bfloat16_to_float(read(uint16_t{}));
    case DataType::kInt32:
      return read(int32_t{});
    case DataType::kInt8:
      return read(int8_t{});
    case DataType::kUInt8:
      return read(uint8_t{});
  }
  return 0;
}

// Input element `index` of `rank`: small integers chosen so that every result is
// exact in every type (|sum| <= 24, |product| <= 64, min/max within [-50, 50]).
int64_t input_value(DataType type, ReduceOp op, int rank, size_t index) {
  const bool is_unsigned = type == DataType::kUInt8;
  const int64_t i = static_cast<int64_t>(index % 1000003);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return is_unsigned ? (rank * 7 + i * 3) % 4 : (rank * 7 + i * 3) % 7 - 3;
    case ReduceOp::kProd:
      if (rank < 6 && (rank + i) % 3 == 0) return 2;
      return !is_unsigned && (rank + i) % 2 == 1 ? -1 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return is_unsigned ? (rank * 37 + i * 11) % 101 : (rank * 37 + i * 11) % 101 - 50;
  }
  return 0;
}

// Element `index` of the reduction over ranks 0..n-1, written into `out`.
void put_expected(std::vector<unsigned char>& out, size_t out_index, DataType type, ReduceOp op,
                  int n, size_t index) {
  int64_t acc = input_value(type, op, 0, index);
  for (int rank = 1; rank < n; ++rank) {
    int64_t v = input_value(type, op, rank, index);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op == ReduceOp::kAvg) {
    put_average(out, type, out_index, acc, n);
  } else {
    put(out, type, out_index, acc);
  }
}

std::vector<size_t> counts_for(int n) {
  std::set<size_t> counts = {0,
                             1,
                             static_cast<size_t>(n - 1),
                             static_cast<size_t>(n),
                             static_cast<size_t>(n + 1),
                             static_cast<size_t>(7 * n + 3),
                             3001};
  return {counts.begin(), counts.end()};
}

// Guard bytes around out-of-place outputs catch writes outside the output.
constexpr size_t kGuard = 64;
constexpr unsigned char kCanary = 0xA5;

enum class Algorithm {
  kRingAllReduce,
  kRecursiveDoublingAllReduce,
  kRingAllGather,
  kRingReduceScatter
};

std::string algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kRingAllReduce:
      return "RingAllReduce";
    case Algorithm::kRecursiveDoublingAllReduce:
      return "RecursiveDoublingAllReduce";
    case Algorithm::kRingAllGather:
      return "RingAllGather";
    case Algorithm::kRingReduceScatter:
      return "RingReduceScatter";
  }
  return "?";
}

// Names the parameter in gtest's messages instead of "4-byte object <...>".
void PrintTo(Algorithm algorithm, std::ostream* os) { *os << algorithm_name(algorithm); }

// Collects the first few mismatches of every rank; rank threads only append.
class Findings {
 public:
  void add(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (texts_.size() < 20) texts_.push_back(text);
    ++total_;
  }
  size_t total() const { return total_; }
  const std::vector<std::string>& texts() const { return texts_; }

 private:
  std::mutex mutex_;
  std::vector<std::string> texts_;
  size_t total_ = 0;
};

struct Case {
  Algorithm algorithm;
  DataType type;
  ReduceOp op;
  size_t count;
  bool in_place;
};

std::string describe(const Case& c, int rank, int n) {
  return algorithm_name(c.algorithm) + " type=" + std::string(name(c.type)) +
         " op=" + std::string(name(c.op)) + " count=" + std::to_string(c.count) +
         (c.in_place ? " in-place" : " out-of-place") + " ranks=" + std::to_string(n) +
         " rank=" + std::to_string(rank);
}

// Runs one collective on this rank and checks its output (and that an
// out-of-place input and the guard bytes are untouched).
void run_case(PointToPoint& p2p, const Case& c, Findings& findings) {
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t es = element_size(c.type);
  const bool all_reduce = c.algorithm == Algorithm::kRingAllReduce ||
                          c.algorithm == Algorithm::kRecursiveDoublingAllReduce;
  const size_t un = static_cast<size_t>(n);
  const size_t ur = static_cast<size_t>(r);
  // Element counts of input and output, and where the output starts in the
  // in-place buffer.
  size_t in_count = c.count, out_count = c.count, out_offset = 0, in_offset = 0;
  ReduceOp value_op = c.op;
  if (c.algorithm == Algorithm::kRingAllGather) {
    out_count = un * c.count;
    in_offset = ur * c.count;
    value_op = ReduceOp::kMin;  // any op: the values are just distinct-ish data
  } else if (c.algorithm == Algorithm::kRingReduceScatter) {
    in_count = un * c.count;
    out_offset = ur * c.count;
  }

  std::vector<unsigned char> input(in_count * es);
  for (size_t i = 0; i < in_count; ++i) {
    // all_gather: element i of rank r's block is value (r, r*count + i).
    size_t index = c.algorithm == Algorithm::kRingAllGather ? ur * c.count + i : i;
    put(input, c.type, i, input_value(c.type, value_op, r, index));
  }
  std::vector<unsigned char> expected(out_count * es);
  for (size_t i = 0; i < out_count; ++i) {
    if (c.algorithm == Algorithm::kRingAllGather) {
      size_t owner = i / std::max<size_t>(c.count, 1);
      put(expected, c.type, i, input_value(c.type, value_op, static_cast<int>(owner), i));
    } else {
      put_expected(expected, i, c.type, c.op, n, out_offset + i);
    }
  }

  std::vector<unsigned char> buffer;  // in place: one buffer; else guarded output
  const unsigned char* output;
  auto call = [&](const void* send, void* recv) {
    switch (c.algorithm) {
      case Algorithm::kRingAllReduce:
        return ring_all_reduce(p2p, send, recv, c.count, c.type, c.op);
      case Algorithm::kRecursiveDoublingAllReduce:
        return recursive_doubling_all_reduce(p2p, send, recv, c.count, c.type, c.op);
      case Algorithm::kRingAllGather:
        return ring_all_gather(p2p, send, recv, c.count, c.type);
      case Algorithm::kRingReduceScatter:
        return ring_reduce_scatter(p2p, send, recv, c.count, c.type, c.op);
    }
  };
  const std::vector<unsigned char> original = input;
  if (c.in_place) {
    size_t total = std::max(in_count, out_count);
    buffer.assign(total * es + 1, 0);  // +1: never a null data() for count 0
    if (!input.empty()) std::memcpy(buffer.data() + in_offset * es, input.data(), input.size());
    unsigned char* base = buffer.data();
    if (all_reduce) {
      call(base, base);
    } else if (c.algorithm == Algorithm::kRingAllGather) {
      call(base + in_offset * es, base);
    } else {
      call(base, base + out_offset * es);
    }
    output = base + out_offset * es;
  } else {
    input.push_back(0);  // keep data() non-null for count 0
    buffer.assign(kGuard + out_count * es + kGuard, kCanary);
    call(input.data(), buffer.data() + kGuard);
    output = buffer.data() + kGuard;
    for (size_t i = 0; i < kGuard; ++i) {
      if (buffer[i] != kCanary || buffer[kGuard + out_count * es + i] != kCanary) {
        findings.add(describe(c, r, n) + ": wrote outside its output buffer");
        break;
      }
    }
    if (!original.empty() && std::memcmp(input.data(), original.data(), original.size()) != 0) {
      findings.add(describe(c, r, n) + ": modified its out-of-place input");
    }
  }

  size_t wrong = 0;
  for (size_t i = 0; i < out_count; ++i) {
    if (std::memcmp(output + i * es, expected.data() + i * es, es) != 0) {
      if (wrong++ == 0) {
        findings.add(describe(c, r, n) + ": element " + std::to_string(i) + " is " +
                     std::to_string(get(output + i * es, c.type)) + ", expected " +
                     std::to_string(get(expected.data() + i * es, c.type)));
      }
    }
  }
  if (wrong > 1) {
    findings.add(describe(c, r, n) + ": " + std::to_string(wrong) + " of " +
                 std::to_string(out_count) + " elements wrong");
  }
}

class ReferenceAlgorithmTest : public ::testing::TestWithParam<std::tuple<Algorithm, int>> {};

TEST_P(ReferenceAlgorithmTest, MatchesSerialResultForEveryTypeOpAndCount) {
  const auto [algorithm, ranks] = GetParam();
  const bool reduces = algorithm != Algorithm::kRingAllGather;
  std::vector<Case> cases;
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      if (!reduces && op != ReduceOp::kSum) continue;  // all_gather has no op
      for (size_t count : counts_for(ranks)) {
        for (bool in_place : {false, true}) cases.push_back({algorithm, type, op, count, in_place});
      }
    }
  }
  Findings findings;
  // All cases run back to back in one transport run, as a real job would issue
  // them; the transport also checks that no message is left unreceived.
  InProcessTransport::run(ranks, [&](PointToPoint& p2p) {
    for (const Case& c : cases) run_case(p2p, c, findings);
  });
  for (const std::string& text : findings.texts()) ADD_FAILURE() << text;
  EXPECT_EQ(findings.total(), 0u) << "cases run: " << cases.size();
}

INSTANTIATE_TEST_SUITE_P(
    AllRankCounts, ReferenceAlgorithmTest,
    ::testing::Combine(::testing::Values(Algorithm::kRingAllReduce,
                                         Algorithm::kRecursiveDoublingAllReduce,
                                         Algorithm::kRingAllGather, Algorithm::kRingReduceScatter),
                       ::testing::Range(1, 9)),
    [](const ::testing::TestParamInfo<std::tuple<Algorithm, int>>& info) {
      return algorithm_name(std::get<0>(info.param)) + "_" +
             std::to_string(std::get<1>(info.param)) + "ranks";
    });

// Values that are not exact: every rank must still end with bit-identical results
// (the ring all-gathers one reduced copy; recursive doubling combines symmetrically).
TEST(ReferenceAlgorithms, AllReduceResultsAreIdenticalOnEveryRankWithInexactFloats) {
  for (int ranks : {3, 6, 7}) {
    for (auto algorithm : {&ring_all_reduce, &recursive_doubling_all_reduce}) {
      const size_t count = 1000;
      std::vector<std::vector<float>> results(static_cast<size_t>(ranks));
      InProcessTransport::run(ranks, [&](PointToPoint& p2p) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) {
          data[i] = 1.0f / static_cast<float>(i + 3 + static_cast<size_t>(p2p.rank()) * 7);
        }
        algorithm(p2p, data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum);
        results[static_cast<size_t>(p2p.rank())] = data;
      });
      for (int r = 1; r < ranks; ++r) {
        EXPECT_EQ(0, std::memcmp(results[0].data(), results[static_cast<size_t>(r)].data(),
                                 count * sizeof(float)))
            << "ranks=" << ranks << " rank " << r << " differs from rank 0";
      }
    }
  }
}

TEST(ReferenceAlgorithms, IntegerAverageTruncatesTowardZero) {
  // Sums -5 and 5 over 2 ranks: averages -2 and 2.
  InProcessTransport::run(2, [](PointToPoint& p2p) {
    std::vector<int32_t> data = {p2p.rank() == 0 ? -2 : -3, p2p.rank() == 0 ? 2 : 3};
    ring_all_reduce(p2p, data.data(), data.data(), 2, DataType::kInt32, ReduceOp::kAvg);
    if (data != std::vector<int32_t>{-2, 2}) throw std::runtime_error("wrong integer average");
  });
}

TEST(ReferenceAlgorithms, LocalKernelsWrapAndRound) {
  std::vector<int8_t> a = {100, -100}, b = {100, -100}, out(2);
  reduce_elements(out.data(), a.data(), b.data(), 2, DataType::kInt8, ReduceOp::kSum);
  EXPECT_EQ(out[0], static_cast<int8_t>(200));
  EXPECT_EQ(out[1], static_cast<int8_t>(-200));
  std::vector<uint16_t> h = {float_to_half(1.0f)}, h2 = {float_to_half(2.0f)};
  reduce_elements(h.data(), h.data(), h2.data(), 1, DataType::kFloat16, ReduceOp::kMax);
  EXPECT_EQ(half_to_float(h[0]), 2.0f);
  divide_elements(h.data(), 1, DataType::kFloat16, 3);
  EXPECT_EQ(h[0], float_to_half(2.0f / 3.0f));
}

// --- the transport itself ---

using Clock = std::chrono::steady_clock;
InProcessOptions short_timeout() {
  InProcessOptions options;
  options.timeout = std::chrono::milliseconds(200);
  return options;
}

TEST(InProcessTransport, RecvThatNoOneSendsToTimesOutQuickly) {
  auto start = Clock::now();
  EXPECT_THROW(InProcessTransport::run(
                   2,
                   [](PointToPoint& p2p) {
                     char byte;
                     if (p2p.rank() == 0) p2p.recv(1, &byte, 1);  // rank 1 never sends
                   },
                   short_timeout()),
               TimeoutError);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(InProcessTransport, BrokenAlgorithmTimesOutInsteadOfHanging) {
  // A "ring" whose ranks all receive from the right but send to the right too:
  // nobody ever sends to the left, so every recv starves.
  auto start = Clock::now();
  EXPECT_THROW(InProcessTransport::run(
                   5,
                   [](PointToPoint& p2p) {
                     int n = p2p.size(), r = p2p.rank();
                     std::vector<char> out(16, 'x'), in(16);
                     p2p.send_recv((r + 1) % n, out.data(), out.size(), (r + 2) % n, in.data(),
                                   in.size());
                     p2p.recv((r + n - 1) % n, in.data(), in.size());
                   },
                   short_timeout()),
               TimeoutError);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(InProcessTransport, SynchronousSendsExposeRelianceOnBuffering) {
  // Both ranks send first, then receive: fine with eager buffering, a deadlock
  // under MPI rendezvous semantics, which the default synchronous mode models.
  auto both_send_first = [](PointToPoint& p2p) {
    int peer = 1 - p2p.rank();
    std::vector<char> out(8, 'a'), in(8);
    p2p.send(peer, out.data(), out.size());
    p2p.recv(peer, in.data(), in.size());
  };
  EXPECT_THROW(InProcessTransport::run(2, both_send_first, short_timeout()), TimeoutError);
  InProcessOptions eager = short_timeout();
  eager.synchronous_send = false;
  EXPECT_NO_THROW(InProcessTransport::run(2, both_send_first, eager));
}

TEST(InProcessTransport, RingOfSendRecvDoesNotDeadlock) {
  for (int ranks = 1; ranks <= 8; ++ranks) {
    InProcessTransport::run(
        ranks,
        [](PointToPoint& p2p) {
          int n = p2p.size(), r = p2p.rank();
          for (int round = 0; round < 20; ++round) {
            int out = r * 100 + round, in = -1;
            p2p.send_recv((r + 1) % n, &out, sizeof(out), (r + n - 1) % n, &in, sizeof(in));
            if (in != ((r + n - 1) % n) * 100 + round) throw std::runtime_error("wrong payload");
          }
        },
        short_timeout());
  }
}

TEST(InProcessTransport, MessagesArriveInOrderIncludingZeroBytes) {
  InProcessTransport::run(2, [](PointToPoint& p2p) {
    if (p2p.rank() == 0) {
      for (int i = 0; i < 10; ++i) {
        p2p.send(1, &i, sizeof(i));
        p2p.send(1, nullptr, 0);
      }
    } else {
      for (int i = 0; i < 10; ++i) {
        int got = -1;
        p2p.recv(0, &got, sizeof(got));
        p2p.recv(0, nullptr, 0);
        if (got != i) throw std::runtime_error("out of order");
      }
    }
  });
}

TEST(InProcessTransport, FirstExceptionIsRethrownAndOtherRanksAreReleased) {
  auto start = Clock::now();
  try {
    InProcessTransport::run(3, [](PointToPoint& p2p) {  // default 10 s timeout
      if (p2p.rank() == 1) throw std::logic_error("rank 1 failed");
      char byte;
      p2p.recv(1, &byte, 1);  // would wait 10 s unless released
    });
    FAIL() << "expected an exception";
  } catch (const std::logic_error& error) {
    EXPECT_STREQ(error.what(), "rank 1 failed");
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(InProcessTransport, SizeMismatchIsBackendError) {
  EXPECT_THROW(InProcessTransport::run(
                   2,
                   [](PointToPoint& p2p) {
                     std::vector<char> data(8);
                     if (p2p.rank() == 0) {
                       p2p.send(1, data.data(), 8);
                     } else {
                       p2p.recv(0, data.data(), 4);
                     }
                   },
                   short_timeout()),
               BackendError);
}

TEST(InProcessTransport, UnreceivedMessageIsReported) {
  InProcessOptions eager = short_timeout();
  eager.synchronous_send = false;
  EXPECT_THROW(InProcessTransport::run(
                   2,
                   [](PointToPoint& p2p) {
                     if (p2p.rank() == 0) p2p.send(1, "x", 1);
                   },
                   eager),
               BackendError);
}

TEST(InProcessTransport, BadPeerAndRankCountAreUsageErrors) {
  EXPECT_THROW(InProcessTransport::run(
                   2, [](PointToPoint& p2p) { p2p.send(2, "x", 1); }, short_timeout()),
               UsageError);
  EXPECT_THROW(InProcessTransport::run(0, [](PointToPoint&) {}), UsageError);
}

TEST(InProcessTransport, SendRecvWithSelf) {
  InProcessTransport::run(3, [](PointToPoint& p2p) {
    int out = p2p.rank(), in = -1;
    p2p.send_recv(p2p.rank(), &out, sizeof(out), p2p.rank(), &in, sizeof(in));
    if (in != p2p.rank()) throw std::runtime_error("self exchange failed");
  });
}

}  // namespace
}  // namespace ccscope

// --- chain broadcast and pairwise all-to-all ---
namespace ccscope {
namespace {

// Reports the first wrong element of `output` against `expected` (and how many
// are wrong) under `what`.
void compare_output(const unsigned char* output, const std::vector<unsigned char>& expected,
                    DataType type, const std::string& what, Findings& findings) {
  const size_t es = element_size(type);
  const size_t count = expected.size() / es;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(output + i * es, expected.data() + i * es, es) == 0) continue;
    if (wrong++ == 0) {
      findings.add(what + ": element " + std::to_string(i) + " is " +
                   std::to_string(get(output + i * es, type)) + ", expected " +
                   std::to_string(get(expected.data() + i * es, type)));
    }
  }
  if (wrong > 1) {
    findings.add(what + ": " + std::to_string(wrong) + " of " + std::to_string(count) +
                 " elements wrong");
  }
}

bool guards_intact(const std::vector<unsigned char>& guarded, size_t payload_bytes) {
  for (size_t i = 0; i < kGuard; ++i) {
    if (guarded[i] != kCanary || guarded[kGuard + payload_bytes + i] != kCanary) return false;
  }
  return true;
}

// Element values: input_value with kMin gives distinct-ish numbers exact in every type.
int64_t data_value(DataType type, int rank, size_t index) {
  return input_value(type, ReduceOp::kMin, rank, index);
}

class ChainBroadcastTest : public ::testing::TestWithParam<int> {};

TEST_P(ChainBroadcastTest, EveryRootTypeCountAndChunkSizeInAndOutOfPlace) {
  const int ranks = GetParam();
  Findings findings;
  size_t cases = 0;
  InProcessTransport::run(ranks, [&](PointToPoint& p2p) {
    const int r = p2p.rank();
    for (DataType type : kTypes) {
      const size_t es = element_size(type);
      // 0: the default chunk (one chunk here); 1 byte: one element per chunk;
      // 3 elements and 1000 bytes: uneven last chunks. Tiny chunks only for
      // small counts (thousands of in-process messages are slow).
      for (size_t chunk_bytes : {size_t{0}, size_t{1}, 3 * es, size_t{1000}}) {
        for (size_t count : counts_for(ranks)) {
          if (chunk_bytes > 0 && chunk_bytes < 1000 && count > 100) continue;  // short run
          for (int root = 0; root < ranks; ++root) {
            for (bool in_place : {false, true}) {
              if (r == 0) ++cases;
              const std::string what =
                  "chain_broadcast type=" + std::string(name(type)) +
                  " count=" + std::to_string(count) +
                  " chunk_bytes=" + std::to_string(chunk_bytes) + " root=" + std::to_string(root) +
                  (in_place ? " in-place" : " out-of-place") + " ranks=" + std::to_string(ranks) +
                  " rank=" + std::to_string(r);
              std::vector<unsigned char> expected(count * es);
              for (size_t i = 0; i < count; ++i) put(expected, type, i, data_value(type, root, i));
              // Non-roots start from other data, which must be overwritten.
              std::vector<unsigned char> start(count * es);
              for (size_t i = 0; i < count; ++i)
                put(start, type, i, data_value(type, r + 1, i + 5));
              if (r == root) start = expected;

              if (in_place) {
                std::vector<unsigned char> buffer(count * es + 1);
                if (count > 0) std::memcpy(buffer.data(), start.data(), count * es);
                chain_broadcast(p2p, buffer.data(), buffer.data(), count, type, root, chunk_bytes);
                compare_output(buffer.data(), expected, type, what, findings);
              } else {
                std::vector<unsigned char> input = start;
                input.push_back(0);  // non-null data() for count 0
                std::vector<unsigned char> guarded(kGuard + count * es + kGuard, kCanary);
                // send is read on the root only: the others pass null.
                chain_broadcast(p2p, r == root ? input.data() : nullptr, guarded.data() + kGuard,
                                count, type, root, chunk_bytes);
                if (!guards_intact(guarded, count * es)) {
                  findings.add(what + ": wrote outside its output buffer");
                }
                if (r == root && count > 0 &&
                    std::memcmp(input.data(), start.data(), count * es) != 0) {
                  findings.add(what + ": modified its out-of-place input");
                }
                compare_output(guarded.data() + kGuard, expected, type, what, findings);
              }
            }
          }
        }
      }
    }
  });
  for (const std::string& text : findings.texts()) ADD_FAILURE() << text;
  EXPECT_EQ(findings.total(), 0u) << "cases run: " << cases;
}

INSTANTIATE_TEST_SUITE_P(AllRankCounts, ChainBroadcastTest, ::testing::Range(1, 9),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

class PairwiseAllToAllTest : public ::testing::TestWithParam<int> {};

TEST_P(PairwiseAllToAllTest, EveryTypeAndCountInAndOutOfPlace) {
  const int ranks = GetParam();
  const size_t n = static_cast<size_t>(ranks);
  Findings findings;
  size_t cases = 0;
  InProcessTransport::run(ranks, [&](PointToPoint& p2p) {
    const int r = p2p.rank();
    const size_t ur = static_cast<size_t>(r);
    for (DataType type : kTypes) {
      const size_t es = element_size(type);
      for (size_t count : counts_for(ranks)) {
        for (bool in_place : {false, true}) {
          if (r == 0) ++cases;
          const std::string what = "pairwise_all_to_all type=" + std::string(name(type)) +
                                   " count=" + std::to_string(count) +
                                   (in_place ? " in-place" : " out-of-place") +
                                   " ranks=" + std::to_string(ranks) + " rank=" + std::to_string(r);
          // Element i of block p on rank q is data_value(q, p*count + i); block p of
          // the output on rank r is block r of rank p's input.
          const size_t total = n * count;
          std::vector<unsigned char> input(total * es), expected(total * es);
          for (size_t i = 0; i < total; ++i) {
            put(input, type, i, data_value(type, r, i));
            const size_t peer = count == 0 ? 0 : i / count;
            put(expected, type, i,
                data_value(type, static_cast<int>(peer),
                           ur * count + i % std::max<size_t>(count, 1)));
          }
          if (in_place) {
            std::vector<unsigned char> buffer = input;
            buffer.push_back(0);
            pairwise_all_to_all(p2p, buffer.data(), buffer.data(), count, type);
            compare_output(buffer.data(), expected, type, what, findings);
          } else {
            const std::vector<unsigned char> original = input;
            input.push_back(0);
            std::vector<unsigned char> guarded(kGuard + total * es + kGuard, kCanary);
            pairwise_all_to_all(p2p, input.data(), guarded.data() + kGuard, count, type);
            if (!guards_intact(guarded, total * es)) {
              findings.add(what + ": wrote outside its output buffer");
            }
            if (total > 0 && std::memcmp(input.data(), original.data(), total * es) != 0) {
              findings.add(what + ": modified its out-of-place input");
            }
            compare_output(guarded.data() + kGuard, expected, type, what, findings);
          }
        }
      }
    }
  });
  for (const std::string& text : findings.texts()) ADD_FAILURE() << text;
  EXPECT_EQ(findings.total(), 0u) << "cases run: " << cases;
}

INSTANTIATE_TEST_SUITE_P(AllRankCounts, PairwiseAllToAllTest, ::testing::Range(1, 9),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

TEST(ReferenceAlgorithms, ChainBroadcastRejectsARootOutsideTheRanks) {
  for (int root : {-1, 3}) {
    EXPECT_THROW(InProcessTransport::run(
                     3,
                     [root](PointToPoint& p2p) {
                       int value = 0;
                       chain_broadcast(p2p, &value, &value, 1, DataType::kInt32, root);
                     },
                     short_timeout()),
                 UsageError);
  }
}

TEST(ReferenceAlgorithms, ChainBroadcastLargeVectorWithBufferedSends) {
  // Several default-size chunks, and eager sends: the pipeline must not depend on
  // rendezvous pacing either.
  InProcessOptions eager;
  eager.synchronous_send = false;
  const size_t count = 3 * kChainBroadcastChunkBytes / sizeof(int32_t) + 17;
  InProcessTransport::run(
      5,
      [count](PointToPoint& p2p) {
        std::vector<int32_t> data(count, -1);
        if (p2p.rank() == 2) {
          for (size_t i = 0; i < count; ++i) data[i] = static_cast<int32_t>(i * 3 + 1);
        }
        chain_broadcast(p2p, data.data(), data.data(), count, DataType::kInt32, 2);
        for (size_t i = 0; i < count; ++i) {
          if (data[i] != static_cast<int32_t>(i * 3 + 1)) {
            throw std::runtime_error("rank " + std::to_string(p2p.rank()) + " element " +
                                     std::to_string(i) + " wrong");
          }
        }
      },
      eager);
}

}  // namespace
}  // namespace ccscope
