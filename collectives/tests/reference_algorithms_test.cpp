// The reference algorithms over the in-process transport: every rank count from 1
// to 8, uneven and edge-case counts, every type and op, in place and out of place,
// compared element for element with a serial computation. Plus the transport's own
// guarantees (timeouts instead of hangs, error propagation, size checks).
#include "ccscope/collectives/reference_algorithms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/in_process_transport.h"
#include "ccscope/collectives/types.h"
#include "expected_values.h"

namespace ccscope {
namespace {

// Every type and op there is (a new one must be handled by expected_values.h).
const std::vector<DataType>& kTypes = all_data_types();
const std::vector<ReduceOp>& kOps = all_reduce_ops();

using test::get;
using test::input_value;
using test::put;
using test::put_expected;

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
  kRingReduceScatter,
  kBinomialReduce,
  kLinearGather,
  kLinearScatter,
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
    case Algorithm::kBinomialReduce:
      return "BinomialReduce";
    case Algorithm::kLinearGather:
      return "LinearGather";
    case Algorithm::kLinearScatter:
      return "LinearScatter";
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
  int root = 0;  // reduce, gather, scatter
};

bool is_rooted(Algorithm algorithm) {
  return algorithm == Algorithm::kBinomialReduce || algorithm == Algorithm::kLinearGather ||
         algorithm == Algorithm::kLinearScatter;
}
bool is_gather(Algorithm algorithm) {
  return algorithm == Algorithm::kRingAllGather || algorithm == Algorithm::kLinearGather;
}

std::string describe(const Case& c, int rank, int n) {
  return algorithm_name(c.algorithm) + " type=" + std::string(name(c.type)) +
         " op=" + std::string(name(c.op)) + " count=" + std::to_string(c.count) +
         (c.in_place ? " in-place" : " out-of-place") + " ranks=" + std::to_string(n) +
         " rank=" + std::to_string(rank) +
         (is_rooted(c.algorithm) ? " root=" + std::to_string(c.root) : std::string());
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
  if (is_gather(c.algorithm)) {
    out_count = un * c.count;
    in_offset = ur * c.count;
    value_op = ReduceOp::kMin;  // any op: the values are just distinct-ish data
  } else if (c.algorithm == Algorithm::kRingReduceScatter ||
             c.algorithm == Algorithm::kLinearScatter) {
    in_count = un * c.count;
    out_offset = ur * c.count;
    if (c.algorithm == Algorithm::kLinearScatter) value_op = ReduceOp::kMin;
  }

  std::vector<unsigned char> input(in_count * es);
  for (size_t i = 0; i < in_count; ++i) {
    // gathers: element i of rank r's block is value (r, r*count + i).
    size_t index = is_gather(c.algorithm) ? ur * c.count + i : i;
    put(input, c.type, i, input_value(c.type, value_op, r, index));
  }
  // Reduce and gather leave a non-root's output alone: it must still hold what
  // it held (the canary bytes out of place; in place, the input around zeros).
  const bool untouched =
      (c.algorithm == Algorithm::kBinomialReduce || c.algorithm == Algorithm::kLinearGather) &&
      r != c.root;
  std::vector<unsigned char> expected(out_count * es);
  for (size_t i = 0; i < out_count; ++i) {
    if (untouched) {
      const bool in_input = i >= in_offset && i < in_offset + in_count;
      if (!c.in_place) {
        std::memset(expected.data() + i * es, kCanary, es);
      } else if (in_input) {
        std::memcpy(expected.data() + i * es, input.data() + (i - in_offset) * es, es);
      }  // else the zeros the in-place buffer starts with
    } else if (is_gather(c.algorithm)) {
      size_t owner = i / std::max<size_t>(c.count, 1);
      put(expected, c.type, i, input_value(c.type, value_op, static_cast<int>(owner), i));
    } else if (c.algorithm == Algorithm::kLinearScatter) {
      put(expected, c.type, i, input_value(c.type, value_op, c.root, out_offset + i));
    } else {
      put_expected(expected, i, c.type, c.op, n, out_offset + i);
    }
  }
  if (c.algorithm == Algorithm::kLinearScatter && r != c.root) {
    // Only the root's input is read: the others' must not matter.
    std::fill(input.begin(), input.end(), static_cast<unsigned char>(0x5A));
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
      case Algorithm::kBinomialReduce:
        return binomial_reduce(p2p, send, recv, c.count, c.type, c.op, c.root);
      case Algorithm::kLinearGather:
        return linear_gather(p2p, send, recv, c.count, c.type, c.root);
      case Algorithm::kLinearScatter:
        return linear_scatter(p2p, send, recv, c.count, c.type, c.root);
    }
  };
  const std::vector<unsigned char> original = input;
  if (c.in_place) {
    size_t total = std::max(in_count, out_count);
    buffer.assign(total * es + 1, 0);  // +1: never a null data() for count 0
    if (!input.empty()) std::memcpy(buffer.data() + in_offset * es, input.data(), input.size());
    unsigned char* base = buffer.data();
    if (all_reduce || c.algorithm == Algorithm::kBinomialReduce) {
      call(base, base);
    } else if (is_gather(c.algorithm)) {
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
  const bool reduces = !is_gather(algorithm) && algorithm != Algorithm::kLinearScatter;
  // Rooted ones from the first and the last rank (a root in the middle too at 5+).
  std::set<int> roots = {0};
  if (is_rooted(algorithm)) roots = {0, ranks / 2, ranks - 1};
  std::vector<Case> cases;
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      if (!reduces && op != ReduceOp::kSum) continue;  // data movement has no op
      for (size_t count : counts_for(ranks)) {
        for (bool in_place : {false, true})
          for (int root : roots) cases.push_back({algorithm, type, op, count, in_place, root});
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
                                         Algorithm::kRingAllGather, Algorithm::kRingReduceScatter,
                                         Algorithm::kBinomialReduce, Algorithm::kLinearGather,
                                         Algorithm::kLinearScatter),
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

TEST(ReferenceAlgorithms, TheMatrixCoversEveryTypeAndOp) {
  EXPECT_EQ(kTypes.size(), 12u);
  EXPECT_EQ(kOps.size(), 6u);
  EXPECT_NE(std::find(kTypes.begin(), kTypes.end(), DataType::kFloat8E5M2), kTypes.end());
  EXPECT_NE(std::find(kOps.begin(), kOps.end(), ReduceOp::kMulSum), kOps.end());
}

using ReduceCall = void (*)(PointToPoint&, const void*, void*, size_t, DataType, ReduceOp);
struct NamedReduce {
  const char* name;
  ReduceCall call;
  bool scatters;  // reduce_scatter: the input holds size() blocks of `count`
};
const NamedReduce kReduceCalls[] = {
    {"ring_all_reduce", &ring_all_reduce, false},
    {"recursive_doubling_all_reduce", &recursive_doubling_all_reduce, false},
    {"ring_reduce_scatter", &ring_reduce_scatter, true},
};

// Rank r contributes r+1 (a different value per rank, so a scalar applied to the
// wrong rank, twice or not at all shows); mulsum gives sum of (r+1)*(1+r%2).
TEST(ReferenceAlgorithms, MulSumScalesEveryRanksOwnInputByItsScalarOnce) {
  for (const NamedReduce& algorithm : kReduceCalls) {
    for (int ranks = 1; ranks <= 8; ++ranks) {
      double expected = 0;
      for (int r = 0; r < ranks; ++r) expected += (r + 1) * (1 + r % 2);
      for (bool in_place : {false, true}) {
        const size_t count = 5;
        std::vector<double> results(static_cast<size_t>(ranks) * count);
        std::vector<int> input_intact(static_cast<size_t>(ranks), 1);
        InProcessTransport::run(ranks, [&](PointToPoint& p2p) {
          const size_t r = static_cast<size_t>(p2p.rank());
          const size_t in_count = algorithm.scatters ? count * static_cast<size_t>(ranks) : count;
          std::vector<double> input(in_count, static_cast<double>(r + 1));
          const std::vector<double> original = input;
          std::vector<double> output(count, -1);
          double* out = output.data();
          if (in_place) {
            out = algorithm.scatters ? input.data() + r * count : input.data();
            algorithm.call(p2p, input.data(), out, count, DataType::kFloat64, ReduceOp::kMulSum);
          } else {
            algorithm.call(p2p, input.data(), out, count, DataType::kFloat64, ReduceOp::kMulSum);
            input_intact[r] = input == original;
          }
          std::copy(out, out + count, results.begin() + static_cast<std::ptrdiff_t>(r * count));
        });
        for (size_t i = 0; i < results.size(); ++i) {
          EXPECT_EQ(results[i], expected) << algorithm.name << " ranks=" << ranks << " rank "
                                          << i / count << (in_place ? " in place" : "");
        }
        for (int r = 0; r < ranks; ++r) {
          EXPECT_TRUE(input_intact[static_cast<size_t>(r)])
              << algorithm.name << " ranks=" << ranks << " rank " << r << " modified its input";
        }
      }
    }
  }
}

// NCCL premultiplies in the element type: the product is rounded to the type
// before the sum, so a product beyond the type's range overflows even when the
// sum would not. Rank 0 gives -v, rank 1 gives v: 2v overflows, -v + 2v = v fits.
TEST(ReferenceAlgorithms, MulSumRoundsThePremultipliedInputToTheType) {
  struct Overflow {
    DataType type;
    float v;
    bool to_nan;  // e4m3 has no infinity
  };
  for (const Overflow& o : {Overflow{DataType::kFloat16, 40000.0f, false},
                            Overflow{DataType::kFloat8E4M3, 256.0f, true},
                            Overflow{DataType::kFloat8E5M2, 40960.0f, false}}) {
    for (const NamedReduce& algorithm : kReduceCalls) {
      std::vector<double> results(2);
      InProcessTransport::run(2, [&](PointToPoint& p2p) {
        const size_t r = static_cast<size_t>(p2p.rank());
        std::vector<unsigned char> input((algorithm.scatters ? 2 : 1) * element_size(o.type));
        for (size_t i = 0; i < input.size() / element_size(o.type); ++i)
          store_element(input.data(), o.type, i, r == 0 ? -o.v : o.v);
        std::vector<unsigned char> output(element_size(o.type));
        algorithm.call(p2p, input.data(), output.data(), 1, o.type, ReduceOp::kMulSum);
        results[r] = load_element(output.data(), o.type, 0);
      });
      for (double result : results) {
        if (o.to_nan) {
          EXPECT_TRUE(std::isnan(result))
              << name(o.type) << " " << algorithm.name << ": " << result;
        } else {
          EXPECT_EQ(result, INFINITY) << name(o.type) << " " << algorithm.name;
        }
      }
    }
  }
}

TEST(ReferenceAlgorithms, LocalKernelsOnWideIntegersWrapAndStayExact) {
  std::vector<int64_t> a = {INT64_MAX, int64_t{1} << 62, -7}, b = {1, 4, 2}, out(3);
  reduce_elements(out.data(), a.data(), b.data(), 3, DataType::kInt64, ReduceOp::kSum);
  EXPECT_EQ(out[0], INT64_MIN);
  reduce_elements(out.data(), a.data(), b.data(), 3, DataType::kInt64, ReduceOp::kProd);
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[2], -14);
  divide_elements(a.data(), 3, DataType::kInt64, 2);
  EXPECT_EQ(a[2], -3);             // truncates toward zero
  EXPECT_EQ(a[0], INT64_MAX / 2);  // not through a double
  std::vector<uint64_t> u = {UINT64_MAX, UINT64_MAX - 1}, v = {2, 1}, uout(2);
  reduce_elements(uout.data(), u.data(), v.data(), 2, DataType::kUInt64, ReduceOp::kSum);
  EXPECT_EQ(uout, (std::vector<uint64_t>{1, UINT64_MAX}));
  reduce_elements(uout.data(), u.data(), v.data(), 2, DataType::kUInt64, ReduceOp::kMin);
  EXPECT_EQ(uout, (std::vector<uint64_t>{2, 1}));
  reduce_elements(uout.data(), u.data(), v.data(), 2, DataType::kUInt64, ReduceOp::kMax);
  EXPECT_EQ(uout, (std::vector<uint64_t>{UINT64_MAX, UINT64_MAX - 1}));
  divide_elements(u.data(), 1, DataType::kUInt64, 3);
  EXPECT_EQ(u[0], 0x5555555555555555u);
  std::vector<uint32_t> w = {0xffffffffu, 0x10000u}, x = {1, 0x10000u}, wout(2);
  reduce_elements(wout.data(), w.data(), x.data(), 2, DataType::kUInt32, ReduceOp::kSum);
  EXPECT_EQ(wout[0], 0u);
  reduce_elements(wout.data(), w.data(), x.data(), 2, DataType::kUInt32, ReduceOp::kProd);
  EXPECT_EQ(wout[1], 0u);
  EXPECT_EQ(wout[0], 0xffffffffu);
  // The premultiplication wraps like the type too.
  std::vector<int8_t> c = {100, -3};
  premultiply_elements(c.data(), c.data(), 2, DataType::kInt8, 2);
  EXPECT_EQ(c, (std::vector<int8_t>{-56, -6}));
  premultiply_elements(uout.data(), v.data(), 1, DataType::kUInt64, 2);
  EXPECT_EQ(uout[0], 4u);
}

TEST(ReferenceAlgorithms, LocalKernelsOnFp8RoundAfterEveryStep) {
  auto e4m3 = [](std::vector<float> values) {
    std::vector<uint8_t> bits;
    for (float v : values) bits.push_back(float_to_fp8_e4m3(v));
    return bits;
  };
  std::vector<uint8_t> a = e4m3({448, 448, 240, 16, -3, 7}), b = e4m3({448, 32, 8, 16, 5, 1});
  std::vector<uint8_t> out(a.size());
  reduce_elements(out.data(), a.data(), b.data(), a.size(), DataType::kFloat8E4M3, ReduceOp::kSum);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(out[0])));  // 896: overflow
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(out[1])));  // 480 > 448
  EXPECT_EQ(fp8_e4m3_to_float(out[2]), 256.0f);        // 248: a tie, to the even 256
  EXPECT_EQ(fp8_e4m3_to_float(out[3]), 32.0f);
  EXPECT_EQ(fp8_e4m3_to_float(out[4]), 2.0f);
  reduce_elements(out.data(), a.data(), b.data(), a.size(), DataType::kFloat8E4M3, ReduceOp::kProd);
  EXPECT_EQ(fp8_e4m3_to_float(out[3]), 256.0f);
  EXPECT_EQ(fp8_e4m3_to_float(out[4]), -15.0f);  // 15 = 1.875 * 8: exact
  reduce_elements(out.data(), a.data(), b.data(), a.size(), DataType::kFloat8E4M3, ReduceOp::kMin);
  EXPECT_EQ(fp8_e4m3_to_float(out[4]), -3.0f);
  divide_elements(a.data() + 5, 1, DataType::kFloat8E4M3, 2);
  EXPECT_EQ(fp8_e4m3_to_float(a[5]), 3.5f);

  std::vector<uint8_t> m = {float_to_fp8_e5m2(57344), float_to_fp8_e5m2(8)};
  std::vector<uint8_t> n = {float_to_fp8_e5m2(57344), float_to_fp8_e5m2(1)};
  reduce_elements(out.data(), m.data(), n.data(), 2, DataType::kFloat8E5M2, ReduceOp::kSum);
  EXPECT_EQ(fp8_e5m2_to_float(out[0]), INFINITY);
  EXPECT_EQ(fp8_e5m2_to_float(out[1]), 8.0f);  // 9: a tie between 8 and 10, to the even 8
  reduce_elements(out.data(), m.data(), n.data(), 2, DataType::kFloat8E5M2, ReduceOp::kMax);
  EXPECT_EQ(fp8_e5m2_to_float(out[0]), 57344.0f);
  premultiply_elements(out.data(), m.data(), 2, DataType::kFloat8E5M2, 2);
  EXPECT_EQ(fp8_e5m2_to_float(out[0]), INFINITY);
  EXPECT_EQ(fp8_e5m2_to_float(out[1]), 16.0f);
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

// --- all-to-all-v and batch_send_recv (the ring communicator's shapes) ---
namespace ccscope {
namespace {

// Elements rank `from` sends to rank `to` in the all-to-all-v tests: 0, 3, 6 or
// 9, so every rank count from 2 has zero-length and uneven blocks.
size_t v_count(int from, int to) { return static_cast<size_t>((from * 5 + to * 3 + 1) % 4) * 3; }
// Element i of that block: names sender, receiver and position.
int64_t v_value(DataType type, int from, int to, size_t i) {
  return data_value(type, from, static_cast<size_t>(to) * 1000 + i);
}

enum class VPath { kAlgorithm, kCommunicator };

// One all-to-all-v on this rank: the blocks packed back to back (as
// MPI_Alltoallv's displacements) between guard bytes; every received element
// compared. `corrupt_from`/`corrupt_to`: that sender flips one element of its
// block to that receiver after the expected values were fixed (-1: none).
void run_all_to_allv(PointToPoint& p2p, DataType type, VPath path, Findings& findings,
                     int corrupt_from = -1, int corrupt_to = -1) {
  const int n = p2p.size(), r = p2p.rank();
  const size_t es = element_size(type);
  std::vector<size_t> send_offset(n + 1, 0), recv_offset(n + 1, 0);
  for (int p = 0; p < n; ++p) {
    send_offset[p + 1] = send_offset[p] + v_count(r, p);
    recv_offset[p + 1] = recv_offset[p] + v_count(p, r);
  }
  std::vector<unsigned char> input(send_offset[n] * es + 1);
  std::vector<unsigned char> expected(recv_offset[n] * es);
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < v_count(r, p); ++i)
      put(input, type, send_offset[p] + i, v_value(type, r, p, i));
    for (size_t i = 0; i < v_count(p, r); ++i)
      put(expected, type, recv_offset[p] + i, v_value(type, p, r, i));
  }
  if (r == corrupt_from && v_count(r, corrupt_to) > 0) {
    const size_t i = send_offset[corrupt_to] + v_count(r, corrupt_to) - 1;
    put(input, type, i, get(input.data() + i * es, type) == 1 ? 2 : 1);
  }
  std::vector<unsigned char> guarded(kGuard + recv_offset[n] * es + kGuard, kCanary);
  unsigned char* out = guarded.data() + kGuard;
  const std::string what =
      std::string(path == VPath::kAlgorithm ? "pairwise_all_to_allv" : "ring batch_send_recv") +
      " type=" + std::string(name(type)) + " ranks=" + std::to_string(n) +
      " rank=" + std::to_string(r);
  if (path == VPath::kAlgorithm) {
    std::vector<const void*> send(n);
    std::vector<void*> recv(n);
    std::vector<size_t> send_counts(n), recv_counts(n);
    for (int p = 0; p < n; ++p) {
      send[p] = input.data() + send_offset[p] * es;
      recv[p] = out + recv_offset[p] * es;
      send_counts[p] = v_count(r, p);
      recv_counts[p] = v_count(p, r);
    }
    pairwise_all_to_allv(p2p, send, send_counts, recv, recv_counts, type);
  } else {
    // Listed in no particular order: sends downwards, receives rotated.
    std::vector<PeerSend> sends;
    std::vector<PeerRecv> recvs;
    for (int p = n - 1; p >= 0; --p)
      sends.push_back({p, input.data() + send_offset[p] * es, v_count(r, p)});
    for (int k = 0; k < n; ++k) {
      const int p = (r + k) % n;
      recvs.push_back({p, out + recv_offset[p] * es, v_count(p, r)});
    }
    auto comm = make_ring_communicator(p2p);
    comm->batch_send_recv(sends, recvs, type);
    comm->wait(std::chrono::milliseconds(0));
  }
  if (!guards_intact(guarded, recv_offset[n] * es)) {
    findings.add(what + ": wrote outside its output buffer");
  }
  compare_output(out, expected, type, what, findings);
}

class AllToAllvTest : public ::testing::TestWithParam<int> {};

TEST_P(AllToAllvTest, UnevenAndZeroCountsArriveExactlyForEveryType) {
  const int ranks = GetParam();
  Findings findings;
  InProcessTransport::run(ranks, [&](PointToPoint& p2p) {
    for (DataType type : kTypes) {
      run_all_to_allv(p2p, type, VPath::kAlgorithm, findings);
      run_all_to_allv(p2p, type, VPath::kCommunicator, findings);
    }
  });
  for (const std::string& text : findings.texts()) ADD_FAILURE() << text;
  EXPECT_EQ(findings.total(), 0u);
}

INSTANTIATE_TEST_SUITE_P(OneToFourRanks, AllToAllvTest, ::testing::Range(1, 5),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

TEST(AllToAllv, TheCountsHaveZeroAndUnevenBlocks) {
  // The pattern the tests above rely on, for 2 to 4 ranks.
  std::set<size_t> counts;
  for (int from = 0; from < 2; ++from)
    for (int to = 0; to < 2; ++to) counts.insert(v_count(from, to));
  EXPECT_TRUE(counts.count(0) == 1 && counts.size() >= 3);
}

TEST(AllToAllv, OneCorruptedElementIsCaughtOnItsReceiverOnly) {
  // Of 4 ranks, rank 3 sends 6 elements to rank 2 and corrupts its last one:
  // rank 2's element (blocks of ranks 0..2, then 5) must be the one finding.
  ASSERT_EQ(v_count(3, 2), 6u);
  const size_t element = v_count(0, 2) + v_count(1, 2) + v_count(2, 2) + 5;
  for (VPath path : {VPath::kAlgorithm, VPath::kCommunicator}) {
    Findings findings;
    InProcessTransport::run(4, [&](PointToPoint& p2p) {
      run_all_to_allv(p2p, DataType::kInt32, path, findings, 3, 2);
    });
    ASSERT_EQ(findings.total(), 1u);
    const std::string& text = findings.texts()[0];
    EXPECT_NE(text.find("rank=2: element " + std::to_string(element) + " is "), std::string::npos)
        << text;
  }
}

TEST(AllToAllv, MismatchedCountIsAnErrorNotAHang) {
  EXPECT_THROW(InProcessTransport::run(
                   2,
                   [](PointToPoint& p2p) {
                     const int r = p2p.rank();
                     std::vector<int32_t> send(4, r), recv(4, -1);
                     // Rank 0 expects 3 elements from rank 1, which sends 2.
                     std::vector<const void*> s = {send.data(), send.data() + 2};
                     std::vector<void*> d = {recv.data(), recv.data() + (r == 0 ? 1 : 2)};
                     std::vector<size_t> sc = {1, 2}, rc = {1, 3};  // rank 0
                     if (r == 1) {
                       sc = {2, 1};
                       rc = {2, 1};
                     }
                     pairwise_all_to_allv(p2p, s, sc, d, rc, DataType::kInt32);
                   },
                   short_timeout()),
               BackendError);
}

// A span shorter than the rank count is refused before anything is sent,
// naming the rank and the backend (every backend checks the same way).
TEST(AllToAllv, SpansWithoutOneEntryPerRankAreAUsageError) {
  std::string message;
  InProcessTransport::run(1, [&](PointToPoint& p2p) {
    auto comm = make_ring_communicator(p2p);
    std::vector<int32_t> send(2, 0), recv(2, 0);
    const std::vector<size_t> one = {2}, none = {};
    try {
      comm->all_to_all_v(send.data(), one, none, recv.data(), one, one, DataType::kInt32);
    } catch (const UsageError& e) {
      message = e.what();
    }
  });
  EXPECT_EQ(message,
            "rank 0, ring backend: all_to_all_v needs one count and displacement per rank (1)");
}

// The ring communicator's one-send-one-receive shapes.
TEST(RingBatchSendRecv, RingPassWithDifferentCountsPerRank) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    InProcessTransport::run(
        ranks,
        [](PointToPoint& p2p) {
          const int n = p2p.size(), r = p2p.rank();
          const int right = (r + 1) % n, left = (r + n - 1) % n;
          // Rank q sends q + 2 elements q*100 + i.
          std::vector<int64_t> out(r + 2), in(left + 2, -1);
          for (size_t i = 0; i < out.size(); ++i) out[i] = r * 100 + static_cast<int64_t>(i);
          const PeerSend send{right, out.data(), out.size()};
          const PeerRecv recv{left, in.data(), in.size()};
          auto comm = make_ring_communicator(p2p);
          comm->batch_send_recv({&send, 1}, {&recv, 1}, DataType::kInt64);
          for (size_t i = 0; i < in.size(); ++i) {
            if (in[i] != left * 100 + static_cast<int64_t>(i))
              throw std::runtime_error("rank " + std::to_string(r) + " element " +
                                       std::to_string(i) + " wrong");
          }
        },
        short_timeout());
  }
}

TEST(RingBatchSendRecv, SelfExchangeAlsoInOneBuffer) {
  InProcessTransport::run(
      3,
      [](PointToPoint& p2p) {
        const int r = p2p.rank();
        auto comm = make_ring_communicator(p2p);
        std::vector<int32_t> out = {r, r + 10, r + 20}, in(3, -1);
        const PeerSend send{r, out.data(), 3};
        const PeerRecv recv{r, in.data(), 3};
        comm->batch_send_recv({&send, 1}, {&recv, 1}, DataType::kInt32);
        if (in != out) throw std::runtime_error("self exchange failed");
        // The same memory sent and received (a ring pass in place, here to self).
        std::vector<int32_t> both = {r * 7, r * 7 + 1};
        const PeerSend send_both{r, both.data(), 2};
        const PeerRecv recv_both{r, both.data(), 2};
        comm->batch_send_recv({&send_both, 1}, {&recv_both, 1}, DataType::kInt32);
        if (both != std::vector<int32_t>{r * 7, r * 7 + 1})
          throw std::runtime_error("in-place self exchange failed");
        // A zero-count self exchange and an empty batch complete.
        const PeerSend none{r, nullptr, 0};
        const PeerRecv nothing{r, nullptr, 0};
        comm->batch_send_recv({&none, 1}, {&nothing, 1}, DataType::kInt32);
        comm->batch_send_recv({}, {}, DataType::kInt32);
      },
      short_timeout());
}

TEST(RingBatchSendRecv, OneSendOnlyAndOneReceiveOnly) {
  InProcessTransport::run(
      3,
      [](PointToPoint& p2p) {
        const int r = p2p.rank();
        auto comm = make_ring_communicator(p2p);
        std::vector<uint8_t> data = {1, 2, 3, 4, 5};
        if (r == 0) {
          const PeerSend send{2, data.data(), data.size()};
          comm->batch_send_recv({&send, 1}, {}, DataType::kUInt8);
        } else if (r == 2) {
          std::vector<uint8_t> in(5, 0);
          const PeerRecv recv{0, in.data(), in.size()};
          comm->batch_send_recv({}, {&recv, 1}, DataType::kUInt8);
          if (in != data) throw std::runtime_error("receive-only batch got wrong data");
        } else {
          comm->batch_send_recv({}, {}, DataType::kUInt8);
        }
      },
      short_timeout());
}

// Throws what `body` throws on any rank, as one line.
template <typename Body>
std::string usage_error_of(int ranks, Body body) {
  try {
    InProcessTransport::run(
        ranks,
        [&](PointToPoint& p2p) {
          auto comm = make_ring_communicator(p2p);
          body(*comm, p2p.rank(), p2p.size());
        },
        short_timeout());
  } catch (const UsageError& error) {
    return error.what();
  }
  return "(no UsageError)";
}

TEST(RingBatchSendRecv, OtherShapesAreUsageErrorsOfOneLine) {
  int32_t a = 0, b = 0, c = 0, d = 0;
  // Two sends and two receives over 3 ranks: neither shape.
  std::string text = usage_error_of(3, [&](Communicator& comm, int r, int n) {
    const PeerSend sends[] = {{(r + 1) % n, &a, 1}, {(r + 2) % n, &b, 1}};
    const PeerRecv recvs[] = {{(r + 2) % n, &c, 1}, {(r + 1) % n, &d, 1}};
    comm.batch_send_recv(sends, recvs, DataType::kInt32);
  });
  EXPECT_NE(text.find("ring backend: batch_send_recv supports at most one send and one receive"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  // One per rank in number, but rank 0 twice and rank 2 never: not all-to-all-v.
  text = usage_error_of(3, [&](Communicator& comm, int, int) {
    const PeerSend sends[] = {{0, &a, 1}, {0, &b, 1}, {1, &c, 1}};
    const PeerRecv recvs[] = {{0, &a, 1}, {1, &b, 1}, {2, &c, 1}};
    comm.batch_send_recv(sends, recvs, DataType::kInt32);
  });
  EXPECT_NE(text.find("supports at most one send"), std::string::npos) << text;
  // A send to itself with no receive from itself would never complete.
  text = usage_error_of(2, [&](Communicator& comm, int r, int) {
    const PeerSend send{r, &a, 1};
    comm.batch_send_recv({&send, 1}, {}, DataType::kInt32);
  });
  EXPECT_NE(text.find("(this rank) needs its matching send and receive"), std::string::npos)
      << text;
  // A peer outside the ranks.
  text = usage_error_of(2, [&](Communicator& comm, int, int) {
    const PeerRecv recv{2, &a, 1};
    comm.batch_send_recv({}, {&recv, 1}, DataType::kInt32);
  });
  EXPECT_NE(text.find("receive peer 2 is not a rank of this communicator (0..1)"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ccscope
