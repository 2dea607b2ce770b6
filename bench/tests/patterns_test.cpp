// The patterns are checked against a serial simulation of each collective in
// every element type: the expected values must equal what a correct
// collective delivers, bit for bit, and a wrong value must be counted.
#include "patterns.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace ccscope::bench {
namespace {

const std::vector<DataType>& kTypes = all_data_types();
const std::vector<ReduceOp>& kOps = all_reduce_ops();
constexpr uint64_t kSeed = 12345;

// Reduces in a given rank order in the element type, rounding after every step
// as a real implementation would.
std::vector<unsigned char> reduce_in_type(const DataPattern& p, DataType t, ReduceOp op, int ranks,
                                          size_t count, size_t first,
                                          const std::vector<int>& order) {
  const size_t w = element_size(t);
  std::vector<unsigned char> acc(count * w), in(count * w);
  // mulsum: every rank's input times its scalar, in the type (as NCCL).
  const auto load_input = [&](int rank, unsigned char* out) {
    p.fill_input(rank, first, count, out);
    if (op == ReduceOp::kMulSum)
      for (size_t i = 0; i < count; ++i)
        store_element(out, t, i, load_element(out, t, i) * premul_scalar(rank));
  };
  load_input(order[0], acc.data());
  for (size_t k = 1; k < order.size(); ++k) {
    load_input(order[k], in.data());
    for (size_t i = 0; i < count; ++i) {
      const double a = load_element(acc.data(), t, i), b = load_element(in.data(), t, i);
      double r = 0;
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
        case ReduceOp::kMulSum:
          r = a + b;
          break;
        case ReduceOp::kProd:
          r = a * b;
          break;
        case ReduceOp::kMin:
          r = std::min(a, b);
          break;
        case ReduceOp::kMax:
          r = std::max(a, b);
          break;
      }
      store_element(acc.data(), t, i, r);
    }
  }
  if (op == ReduceOp::kAvg)
    for (size_t i = 0; i < count; ++i) {
      const double s = load_element(acc.data(), t, i);
      store_element(
          acc.data(), t, i,
          is_floating(t) ? s / ranks : static_cast<double>(static_cast<long long>(s) / ranks));
    }
  return acc;
}

TEST(Patterns, AllReduceExactInEveryTypeOpAndOrder) {
  for (int ranks : {1, 2, 3, 4, 7, 16, 64, 192}) {
    for (DataType t : kTypes) {
      for (ReduceOp op : kOps) {
        const size_t count = 1000;
        DataPattern p(Collective::kAllReduce, t, op, ranks, 0, count, kSeed);
        std::vector<int> forward(static_cast<size_t>(ranks)), backward;
        for (int r = 0; r < ranks; ++r) forward[static_cast<size_t>(r)] = r;
        backward.assign(forward.rbegin(), forward.rend());
        for (const auto& order : {forward, backward}) {
          const auto result = reduce_in_type(p, t, op, ranks, count, 0, order);
          const CheckResult check = p.check_output(ranks - 1, 0, count, result.data());
          ASSERT_EQ(check.wrong, 0u)
              << "ranks " << ranks << " " << name(t) << " " << name(op) << " first bad "
              << check.first_index << " expected " << check.expected << " got " << check.received;
        }
      }
    }
  }
}

TEST(Patterns, InputsDependOnRankAndIndex) {
  DataPattern p(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum, 4, 0, 100, kSeed);
  // Two ranks contribute to each element; which ones changes along the vector.
  std::vector<int> contributors(4, 0);
  for (size_t i = 0; i < 100; ++i)
    for (int r = 0; r < 4; ++r) contributors[static_cast<size_t>(r)] += p.input_value(r, i) != 0;
  for (int r = 0; r < 4; ++r) EXPECT_GT(contributors[static_cast<size_t>(r)], 20) << r;
}

TEST(Patterns, ReduceScatterBlocks) {
  const int ranks = 3;
  const size_t block = 40;
  for (DataType t : kTypes) {
    DataPattern p(Collective::kReduceScatter, t, ReduceOp::kSum, ranks, 0, block, kSeed);
    for (int r = 0; r < ranks; ++r) {
      const auto full = reduce_in_type(p, t, ReduceOp::kSum, ranks, block * ranks, 0, {0, 1, 2});
      const CheckResult c = p.check_output(
          r, 0, block, full.data() + static_cast<size_t>(r) * block * element_size(t));
      EXPECT_EQ(c.wrong, 0u) << name(t) << " rank " << r;
    }
  }
}

TEST(Patterns, AllGatherConcatenatesBlocks) {
  const int ranks = 4;
  const size_t block = 12;
  for (DataType t : kTypes) {
    DataPattern p(Collective::kAllGather, t, ReduceOp::kSum, ranks, 0, block, kSeed);
    const size_t w = element_size(t);
    std::vector<unsigned char> out(block * ranks * w);
    for (int r = 0; r < ranks; ++r)
      p.fill_input(r, 0, block, out.data() + static_cast<size_t>(r) * block * w);
    EXPECT_EQ(p.check_output(2, 0, block * ranks, out.data()).wrong, 0u) << name(t);
    std::vector<unsigned char> swapped(out);
    std::memcpy(swapped.data(), out.data() + block * w,
                block * w);  // block 1 where block 0 belongs
    EXPECT_GT(p.check_output(2, 0, block * ranks, swapped.data()).wrong, 0u) << name(t);
  }
}

TEST(Patterns, AllToAllTransposesBlocks) {
  const int ranks = 3;
  const size_t per = 5;
  DataPattern p(Collective::kAllToAll, DataType::kInt32, ReduceOp::kSum, ranks, 0, per, kSeed);
  std::vector<std::vector<int32_t>> send(ranks, std::vector<int32_t>(per * ranks));
  for (int r = 0; r < ranks; ++r)
    p.fill_input(r, 0, per * ranks, send[static_cast<size_t>(r)].data());
  for (int r = 0; r < ranks; ++r) {
    std::vector<int32_t> recv(per * ranks);
    for (int src = 0; src < ranks; ++src)
      for (size_t k = 0; k < per; ++k)
        recv[static_cast<size_t>(src) * per + k] =
            send[static_cast<size_t>(src)][static_cast<size_t>(r) * per + k];
    EXPECT_EQ(p.check_output(r, 0, per * ranks, recv.data()).wrong, 0u);
  }
}

TEST(Patterns, SendRecvAndBroadcast) {
  DataPattern sr(Collective::kSendRecv, DataType::kFloat32, ReduceOp::kSum, 4, 0, 64, kSeed);
  std::vector<float> from_rank_1(64);
  sr.fill_input(1, 0, 64, from_rank_1.data());
  EXPECT_EQ(sr.check_output(2, 0, 64, from_rank_1.data()).wrong, 0u);
  EXPECT_EQ(sr.check_output(3, 0, 64, from_rank_1.data()).wrong, 64u);  // rank 3 receives from 2
  DataPattern bc(Collective::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 4, 2, 64, kSeed);
  std::vector<float> root_data(64), other(64);
  bc.fill_input(2, 0, 64, root_data.data());
  bc.fill_input(1, 0, 64, other.data());
  EXPECT_EQ(bc.check_output(0, 0, 64, root_data.data()).wrong, 0u);
  // A non-root's own initial data must not pass as the broadcast result.
  EXPECT_EQ(bc.check_output(1, 0, 64, other.data()).wrong, 64u);
}

TEST(Patterns, CountsEveryWrongElementAndReportsTheFirst) {
  DataPattern p(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum, 2, 0, 100, kSeed);
  auto result = reduce_in_type(p, DataType::kFloat32, ReduceOp::kSum, 2, 100, 0, {0, 1});
  store_element(result.data(), DataType::kFloat32, 17,
                load_element(result.data(), DataType::kFloat32, 17) + 1);
  store_element(result.data(), DataType::kFloat32, 60, -1);
  const CheckResult c = p.check_output(0, 0, 100, result.data());
  EXPECT_EQ(c.wrong, 2u);
  EXPECT_EQ(c.first_index, 17u);
  EXPECT_EQ(c.received, c.expected + 1);
}

// The output each rank of a correct collective holds, computed by simulating
// it serially from every rank's inputs (not from expected_value).
std::vector<unsigned char> correct_output(const DataPattern& p, Collective c, DataType t,
                                          ReduceOp op, int ranks, int rank, int root,
                                          const Layout& layout) {
  const size_t w = element_size(t);
  std::vector<int> order(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) order[static_cast<size_t>(r)] = r;
  std::vector<unsigned char> out(layout.recv_count * w);
  switch (c) {
    case Collective::kAllReduce:
      return reduce_in_type(p, t, op, ranks, layout.recv_count, 0, order);
    case Collective::kReduceScatter:
      return reduce_in_type(p, t, op, ranks, layout.recv_count,
                            static_cast<size_t>(rank) * layout.recv_count, order);
    case Collective::kAllGather:
      for (int r = 0; r < ranks; ++r)
        p.fill_input(r, 0, layout.param_count,
                     out.data() + static_cast<size_t>(r) * layout.param_count * w);
      return out;
    case Collective::kBroadcast:
      p.fill_input(root, 0, layout.recv_count, out.data());
      return out;
    case Collective::kAllToAll: {
      std::vector<unsigned char> send(layout.send_count * w);
      for (int src = 0; src < ranks; ++src) {
        p.fill_input(src, 0, layout.send_count, send.data());
        std::memcpy(out.data() + static_cast<size_t>(src) * layout.param_count * w,
                    send.data() + static_cast<size_t>(rank) * layout.param_count * w,
                    layout.param_count * w);
      }
      return out;
    }
    case Collective::kSendRecv:
      p.fill_input((rank + ranks - 1) % ranks, 0, layout.recv_count, out.data());
      return out;
    case Collective::kReduce:
      if (rank == root) return reduce_in_type(p, t, op, ranks, layout.recv_count, 0, order);
      std::fill(out.begin(), out.end(), kOutputFill);  // a non-root's output is left alone
      return out;
    case Collective::kGather:
      if (rank != root) {
        std::fill(out.begin(), out.end(), kOutputFill);
        return out;
      }
      for (int r = 0; r < ranks; ++r)
        p.fill_input(r, 0, layout.param_count,
                     out.data() + static_cast<size_t>(r) * layout.param_count * w);
      return out;
    case Collective::kScatter: {
      std::vector<unsigned char> send(layout.param_count * static_cast<size_t>(ranks) * w);
      p.fill_input(root, 0, layout.param_count * static_cast<size_t>(ranks), send.data());
      std::memcpy(out.data(), send.data() + static_cast<size_t>(rank) * layout.param_count * w,
                  layout.param_count * w);
      return out;
    }
    case Collective::kAllToAllV: {
      // Each sender's own layout says how much it sends to whom, in peer order.
      size_t at = 0;
      for (int src = 0; src < ranks; ++src) {
        const Layout from =
            layout_for(c, layout.param_count * static_cast<size_t>(ranks) * w, w, ranks, src);
        std::vector<unsigned char> send(from.send_count * w);
        p.fill_input(src, 0, from.send_count, send.data());
        const size_t r = static_cast<size_t>(rank);
        std::memcpy(out.data() + at * w, send.data() + from.send_displacements[r] * w,
                    from.send_counts[r] * w);
        at += from.send_counts[r];
      }
      return out;
    }
  }
  return out;
}

// A correct output passes; the same output with one block shifted by one
// element, or produced under the previous seed (a stale result), fails, for
// every collective, type and op.
TEST(Patterns, ShiftedBlockAndStaleOutputFailEverywhere) {
  for (const CollectiveDescription& d : all_collectives()) {
    const Collective c = d.id;
    for (DataType t : kTypes) {
      const std::vector<ReduceOp> ops =
          has_reduction(c) ? kOps : std::vector<ReduceOp>{ReduceOp::kSum};
      for (ReduceOp op : ops) {
        for (int ranks : {2, 3, 5}) {
          const size_t w = element_size(t);
          const Layout layout = layout_for(c, 4096 * w, w, ranks, 1);
          // Reduce and gather write the root's output only: check the root there.
          const int root = ranks - 1;
          const int rank = c == Collective::kReduce || c == Collective::kGather ? root : 1;
          const std::string what = std::string(name(c)) + " " + std::string(name(t)) + " " +
                                   std::string(name(op)) + " x" + std::to_string(ranks);
          const uint64_t seed = pattern_seed(c, t, op, layout.size_bytes, false, 0, 1);
          const uint64_t previous = pattern_seed(c, t, op, layout.size_bytes, false, 0, 0);
          ASSERT_NE(seed, previous);
          const DataPattern p(c, t, op, ranks, root, layout.param_count, seed);
          auto out = correct_output(p, c, t, op, ranks, rank, root, layout);
          ASSERT_EQ(p.check_output(rank, 0, layout.recv_count, out.data()).wrong, 0u) << what;

          const size_t block = std::min(layout.param_count, layout.recv_count);
          auto shifted = out;
          std::memmove(shifted.data(), shifted.data() + w, (block - 1) * w);
          EXPECT_GT(p.check_output(rank, 0, layout.recv_count, shifted.data()).wrong, block / 4)
              << what << ": shifted block";

          const DataPattern before(c, t, op, ranks, root, layout.param_count, previous);
          const auto stale = correct_output(before, c, t, op, ranks, rank, root, layout);
          EXPECT_GT(p.check_output(rank, 0, layout.recv_count, stale.data()).wrong,
                    layout.recv_count / 4)
              << what << ": stale output";
        }
      }
    }
  }
}

// reduce, gather, scatter and all-to-all-v (nccl-tests' reduce_perf,
// gather_perf, scatter_perf, alltoallv_perf): on every rank, root or not, a
// correct output passes and the same output with one element changed fails
// with exactly that element counted.
TEST(Patterns, OneCorruptElementIsCaughtInReduceGatherScatterAndAllToAllV) {
  for (Collective c :
       {Collective::kReduce, Collective::kGather, Collective::kScatter, Collective::kAllToAllV}) {
    for (DataType t : kTypes) {
      for (int ranks : {2, 3, 4}) {
        const size_t w = element_size(t);
        const int root = 1;
        for (int rank = 0; rank < ranks; ++rank) {
          const Layout layout = layout_for(c, 1024 * w, w, ranks, rank);
          const std::string what = std::string(name(c)) + " " + std::string(name(t)) + " x" +
                                   std::to_string(ranks) + " rank " + std::to_string(rank);
          ASSERT_GT(layout.recv_count, 0u) << what;
          const DataPattern p(c, t, ReduceOp::kSum, ranks, root, layout.param_count, kSeed);
          auto out = correct_output(p, c, t, ReduceOp::kSum, ranks, rank, root, layout);
          ASSERT_EQ(p.check_output(rank, 0, layout.recv_count, out.data()).wrong, 0u) << what;
          for (size_t victim : {size_t{0}, layout.recv_count / 2, layout.recv_count - 1}) {
            auto corrupt = out;
            unsigned char* element = corrupt.data() + victim * w;
            store_element(element, t, 0, load_element(element, t, 0) + 1);
            // x + 1 keeps a NaN (the fill of an untouched output) or a large
            // float as it was: flip a bit then.
            if (std::memcmp(element, out.data() + victim * w, w) == 0) element[0] ^= 1;
            const CheckResult check = p.check_output(rank, 0, layout.recv_count, corrupt.data());
            EXPECT_EQ(check.wrong, 1u) << what << " element " << victim;
            EXPECT_EQ(check.first_index, victim) << what;
          }
        }
      }
    }
  }
}

// In place, the output a rank's reduce or gather leaves alone still holds its
// input where input and output share the buffer (nccl-tests' expected buffer
// is a copy of it), the fill elsewhere.
TEST(Patterns, InPlaceReduceAndGatherLeaveANonRootsInputAsItWas) {
  const DataType t = DataType::kInt32;
  const int ranks = 3, root = 0, rank = 2;
  for (Collective c : {Collective::kReduce, Collective::kGather}) {
    const Layout layout = layout_for(c, 480, 4, ranks, rank);
    const DataPattern p(c, t, ReduceOp::kSum, ranks, root, layout.param_count, kSeed, 0, true);
    std::vector<int32_t> buffer(layout.recv_count, -1);  // the fill's bytes, 0xff
    p.fill_input(rank, 0, layout.send_count, buffer.data() + layout.send_in_place_offset);
    EXPECT_EQ(p.check_output(rank, 0, layout.recv_count, buffer.data()).wrong, 0u) << name(c);
    buffer[layout.send_in_place_offset] += 1;
    EXPECT_EQ(p.check_output(rank, 0, layout.recv_count, buffer.data()).wrong, 1u) << name(c);
    // Out of place the same buffer is wrong where the input was written.
    const DataPattern out_of_place(c, t, ReduceOp::kSum, ranks, root, layout.param_count, kSeed);
    EXPECT_GE(out_of_place.check_output(rank, 0, layout.recv_count, buffer.data()).wrong,
              layout.send_count - 1)
        << name(c);
  }
}

// NCCL's average on a rank count that is not a power of two: x * (1/n) on
// every rank, then a sum, each step rounded to the type.
std::vector<unsigned char> nccl_style_average(const DataPattern& p, DataType t, int ranks,
                                              size_t count) {
  const size_t w = element_size(t);
  std::vector<unsigned char> acc(count * w), in(count * w), scale(w);
  store_element(scale.data(), t, 0, 1.0 / ranks);
  const double inverse = load_element(scale.data(), t, 0);
  for (int r = 0; r < ranks; ++r) {
    p.fill_input(r, 0, count, in.data());
    for (size_t i = 0; i < count; ++i) {
      store_element(in.data(), t, i, load_element(in.data(), t, i) * inverse);
      store_element(
          acc.data(), t, i,
          (r == 0 ? 0.0 : load_element(acc.data(), t, i)) + load_element(in.data(), t, i));
    }
  }
  return acc;
}

TEST(Patterns, AverageToleranceIsTwoUlpsAndRejectsZeros) {
  for (DataType t :
       {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64}) {
    for (int ranks : {3, 6, 96, 192}) {
      const size_t count = 2000;
      const DataPattern p(Collective::kAllReduce, t, ReduceOp::kAvg, ranks, 0, count, kSeed, 2);
      const std::string what = std::string(name(t)) + " x" + std::to_string(ranks);
      const auto nccl = nccl_style_average(p, t, ranks, count);
      EXPECT_EQ(p.check_output(0, 0, count, nccl.data()).wrong, 0u) << what;
      // An all-zero output, and one off by 3 ulps, fail everywhere.
      const size_t w = element_size(t);
      std::vector<unsigned char> zeros(count * w, 0), off(count * w);
      EXPECT_EQ(p.check_output(0, 0, count, zeros.data()).wrong, count) << what;
      for (size_t i = 0; i < count; ++i) {
        const double e = p.expected_value(0, i);
        store_element(off.data(), t, i, e + 3 * unit_in_last_place(t, e));
      }
      EXPECT_EQ(p.check_output(0, 0, count, off.data()).wrong, count) << what;
      // A large relative error (the old n-ulps bound admitted 75% at bfloat16 x 96).
      for (size_t i = 0; i < count; ++i)
        store_element(off.data(), t, i, p.expected_value(0, i) * 0.25);
      EXPECT_EQ(p.check_output(0, 0, count, off.data()).wrong, count) << what;
    }
  }
}

TEST(Patterns, UnitInLastPlace) {
  EXPECT_EQ(unit_in_last_place(DataType::kFloat32, 1.0), std::ldexp(1.0, -23));
  EXPECT_EQ(unit_in_last_place(DataType::kFloat32, 1.5), std::ldexp(1.0, -23));
  EXPECT_EQ(unit_in_last_place(DataType::kBFloat16, 3.0), std::ldexp(1.0, -6));
  EXPECT_EQ(unit_in_last_place(DataType::kFloat16, 1e-7), std::ldexp(1.0, -24));  // subnormal
  EXPECT_EQ(unit_in_last_place(DataType::kFloat8E4M3, 448), 32.0);
  EXPECT_EQ(unit_in_last_place(DataType::kInt32, 1000), 1.0);
}

TEST(Patterns, SeedsDifferPerCheckAndPlacement) {
  const auto seed = [](bool in_place, int check) {
    return pattern_seed(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum, 1024, in_place,
                        0, check);
  };
  EXPECT_NE(seed(false, 0), seed(false, 1));
  EXPECT_NE(seed(false, 0), seed(true, 0));
  EXPECT_NE(seed(false, -1), seed(false, 0));  // the timed inputs are never a check's
  EXPECT_EQ(seed(true, 3), seed(true, 3));     // every rank computes the same
}

TEST(Patterns, ChunkedCheckUsesGlobalIndices) {
  DataPattern p(Collective::kAllReduce, DataType::kInt32, ReduceOp::kMax, 3, 0, 1000, kSeed);
  const auto whole = reduce_in_type(p, DataType::kInt32, ReduceOp::kMax, 3, 1000, 0, {2, 0, 1});
  EXPECT_EQ(p.check_output(1, 500, 500, whole.data() + 500 * 4).wrong, 0u);
  EXPECT_GT(p.check_output(1, 499, 500, whole.data() + 500 * 4).wrong, 0u);
}

// --- The tiled fast path against the definitions one element at a time ---

// What fill_input, expected_output and check_output must agree with: the
// pattern's values one element at a time (input_value, expected_value), in the
// element type's bytes. An output a collective leaves alone holds the
// kOutputFill bytes (expected_value reads them back: NaN for a float type).
std::vector<unsigned char> reference_input(const DataPattern& p, DataType t, int rank, size_t first,
                                           size_t count) {
  std::vector<unsigned char> bytes(count * element_size(t));
  for (size_t i = 0; i < count; ++i)
    store_element(bytes.data(), t, i, p.input_value(rank, first + i));
  return bytes;
}
std::vector<unsigned char> reference_output(const DataPattern& p, DataType t, int rank,
                                            size_t first, size_t count) {
  const size_t w = element_size(t);
  std::vector<unsigned char> bytes(count * w);
  for (size_t i = 0; i < count; ++i) {
    const double value = p.expected_value(rank, first + i);
    if (std::isnan(value)) {
      std::memset(bytes.data() + i * w, kOutputFill, w);
    } else {
      store_element(bytes.data(), t, i, value);
    }
  }
  return bytes;
}

// The first element where two buffers differ, or -1.
long first_difference(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                      size_t w) {
  for (size_t i = 0; i * w < a.size(); ++i)
    if (std::memcmp(a.data() + i * w, b.data() + i * w, w) != 0) return static_cast<long>(i);
  return -1;
}

// Writes [0, count) in chunks of varying length, each through `write(first,
// n, out)` (the sweep fills and checks a staged buffer chunk by chunk).
template <class Write>
std::vector<unsigned char> in_chunks(size_t count, size_t w, Write write) {
  std::vector<unsigned char> bytes(count * w);
  const size_t lengths[] = {1, 3, 200, 255, 256, 257, 1000};
  for (size_t first = 0, k = 0; first < count; ++k) {
    const size_t n = std::min(lengths[k % std::size(lengths)], count - first);
    write(first, n, bytes.data() + first * w);
    first += n;
  }
  return bytes;
}

// Every collective, type and op (sum for data movement), at 1, 3 and 4 ranks
// (reduce and gather also in place): every rank's input and expected output from the tiles
// equal the element-by-element definitions, whole and in chunks, and the
// reference output passes the check.
TEST(Patterns, TilesEqualTheDefinitionsElementByElement) {
  for (const CollectiveDescription& d : all_collectives()) {
    const Collective c = d.id;
    const std::vector<ReduceOp> ops =
        has_reduction(c) ? kOps : std::vector<ReduceOp>{ReduceOp::kSum};
    for (DataType t : kTypes) {
      const size_t w = element_size(t);
      for (ReduceOp op : ops) {
        for (int ranks : {1, 3, 4}) {
          for (bool in_place : {false, true}) {
            // In place changes what a rank's output holds where the
            // collective leaves it alone: reduce's and gather's non-roots.
            if (in_place && c != Collective::kReduce && c != Collective::kGather) continue;
            // Outputs of about 700 elements: several tiles, none whole at the ends.
            const size_t bytes = (has_reduction(c) && c != Collective::kReduceScatter
                                      ? 700
                                      : 700 * static_cast<size_t>(ranks)) *
                                 w;
            const int root = ranks - 1;
            const uint64_t seed = pattern_seed(c, t, op, bytes, in_place, 0, ranks);
            const Layout layout0 = layout_for(c, bytes, w, ranks, 0);
            const DataPattern p(c, t, op, ranks, root, layout0.param_count, seed, 0, in_place);
            for (int rank = 0; rank < ranks; ++rank) {
              const Layout layout = layout_for(c, bytes, w, ranks, rank);
              const std::string what = std::string(name(c)) + " " + std::string(name(t)) + " " +
                                       std::string(name(op)) + " x" + std::to_string(ranks) +
                                       (in_place ? " in place" : "") + " rank " +
                                       std::to_string(rank);
              const auto input = reference_input(p, t, rank, 0, layout.send_count);
              std::vector<unsigned char> filled(input.size());
              p.fill_input(rank, 0, layout.send_count, filled.data());
              ASSERT_EQ(first_difference(filled, input, w), -1) << what << ": input";
              const auto chunked = in_chunks(
                  layout.send_count, w,
                  [&](size_t first, size_t n, void* out) { p.fill_input(rank, first, n, out); });
              ASSERT_EQ(first_difference(chunked, input, w), -1) << what << ": input in chunks";

              const auto output = reference_output(p, t, rank, 0, layout.recv_count);
              std::vector<unsigned char> expected(output.size());
              p.expected_output(rank, 0, layout.recv_count, expected.data());
              ASSERT_EQ(first_difference(expected, output, w), -1) << what << ": output";
              const auto pieces =
                  in_chunks(layout.recv_count, w, [&](size_t first, size_t n, void* out) {
                    p.expected_output(rank, first, n, out);
                  });
              ASSERT_EQ(first_difference(pieces, output, w), -1) << what << ": output in chunks";
              const CheckResult check = p.check_output(rank, 0, layout.recv_count, output.data());
              ASSERT_EQ(check.wrong, 0u) << what << ": first bad " << check.first_index;
            }
          }
        }
      }
    }
  }
}

// The rank counts where the contributors' masks change shape (more ranks than
// a tile's 256 elements), every reduction op and type of all-reduce.
TEST(Patterns, TilesEqualTheDefinitionsAtManyRanks) {
  for (int ranks : {2, 7, 255, 256, 257, 1000, 70000}) {
    for (DataType t : kTypes) {
      for (ReduceOp op : kOps) {
        const size_t count = 1300;
        const DataPattern p(Collective::kAllReduce, t, op, ranks, 0, count, kSeed + ranks);
        const std::string what =
            std::string(name(t)) + " " + std::string(name(op)) + " x" + std::to_string(ranks);
        for (int rank : {0, 1, ranks / 2, ranks - 1}) {
          const auto input = reference_input(p, t, rank, 0, count);
          std::vector<unsigned char> filled(input.size());
          p.fill_input(rank, 0, count, filled.data());
          ASSERT_EQ(first_difference(filled, input, element_size(t)), -1)
              << what << " rank " << rank;
        }
        const auto output = reference_output(p, t, 0, 0, count);
        std::vector<unsigned char> expected(output.size());
        p.expected_output(0, 0, count, expected.data());
        ASSERT_EQ(first_difference(expected, output, element_size(t)), -1) << what;
      }
    }
  }
}

// Far into a buffer (past 2^32 words of random bits, where their keys change),
// the tiles still equal the definitions.
TEST(Patterns, TilesEqualTheDefinitionsAtHighIndices) {
  for (DataType t : kTypes) {
    const size_t w = element_size(t);
    // The element whose random bits start word 2^32.
    const size_t boundary = (size_t{1} << 32) * 4 / w;
    for (Collective c : {Collective::kAllReduce, Collective::kAllGather}) {
      for (ReduceOp op : has_reduction(c) ? kOps : std::vector<ReduceOp>{ReduceOp::kSum}) {
        const DataPattern p(c, t, op, 3, 0, size_t{1} << 40, kSeed);
        const size_t first = boundary - 300, count = 600;
        const std::string what =
            std::string(name(c)) + " " + std::string(name(t)) + " " + std::string(name(op));
        const auto input = reference_input(p, t, 1, first, count);
        std::vector<unsigned char> filled(input.size());
        p.fill_input(1, first, count, filled.data());
        ASSERT_EQ(first_difference(filled, input, w), -1) << what;
        if (c == Collective::kAllReduce) {
          const auto output = reference_output(p, t, 1, first, count);
          std::vector<unsigned char> expected(output.size());
          p.expected_output(1, first, count, expected.data());
          ASSERT_EQ(first_difference(expected, output, w), -1) << what;
          EXPECT_EQ(p.check_output(1, first, count, output.data()).wrong, 0u) << what;
        }
      }
    }
  }
}

// One element changed anywhere (at the ends, around tile boundaries), for
// every collective and type (all-reduce: every op), on every rank: the check
// counts exactly it and reports its index, expected and received value, as
// the definitions give them.
TEST(Patterns, OneCorruptElementIsReportedAtItsIndex) {
  for (const CollectiveDescription& d : all_collectives()) {
    const Collective c = d.id;
    const std::vector<ReduceOp> ops =
        c == Collective::kAllReduce ? kOps : std::vector<ReduceOp>{ReduceOp::kSum};
    for (DataType t : kTypes) {
      const size_t w = element_size(t);
      for (ReduceOp op : ops) {
        const int ranks = 3, root = 2;
        const size_t bytes = 1200 * w;
        const DataPattern p(c, t, op, ranks, root, layout_for(c, bytes, w, ranks, 0).param_count,
                            kSeed);
        for (int rank = 0; rank < ranks; ++rank) {
          const Layout layout = layout_for(c, bytes, w, ranks, rank);
          if (layout.recv_count == 0) continue;
          std::vector<unsigned char> out(layout.recv_count * w);
          p.expected_output(rank, 0, layout.recv_count, out.data());
          ASSERT_EQ(p.check_output(rank, 0, layout.recv_count, out.data()).wrong, 0u);
          for (size_t victim : {size_t{0}, size_t{255}, size_t{256}, size_t{257},
                                layout.recv_count / 2, layout.recv_count - 1}) {
            if (victim >= layout.recv_count) continue;
            const std::string what = std::string(name(c)) + " " + std::string(name(t)) + " " +
                                     std::string(name(op)) + " rank " + std::to_string(rank) +
                                     " element " + std::to_string(victim);
            auto corrupt = out;
            unsigned char* element = corrupt.data() + victim * w;
            store_element(element, t, 0, load_element(element, t, 0) + 1);
            // x + 1 keeps a NaN (the fill) or a large float as it was: flip a bit then.
            if (std::memcmp(element, out.data() + victim * w, w) == 0) element[0] ^= 1;
            const CheckResult check = p.check_output(rank, 0, layout.recv_count, corrupt.data());
            EXPECT_EQ(check.wrong, 1u) << what;
            ASSERT_TRUE(check.has_first) << what;
            EXPECT_EQ(check.first_index, victim) << what;
            const double expected = p.expected_value(rank, victim);
            if (std::isnan(expected)) {
              EXPECT_TRUE(std::isnan(check.expected)) << what;
            } else {
              EXPECT_EQ(check.expected, expected) << what;
            }
            const double received = load_element(element, t, 0);
            if (std::isnan(received)) {
              EXPECT_TRUE(std::isnan(check.received)) << what;
            } else {
              EXPECT_EQ(check.received, received) << what;
            }
            // Checked from an offset, the index is still the output's.
            const size_t from = victim / 2;
            const CheckResult part =
                p.check_output(rank, from, layout.recv_count - from, corrupt.data() + from * w);
            EXPECT_EQ(part.wrong, 1u) << what;
            EXPECT_EQ(part.first_index, victim) << what;
          }
        }
      }
    }
  }
}

// A block shifted by any amount fails, in every type, also by the amounts
// where the random bits' layout repeats (a word holds 1, 2 or 4 elements; a
// tile is 256 elements): most elements differ from their neighbours at that
// distance, as they would with independent values of the type's range.
TEST(Patterns, ValuesDifferFromThoseAnyDistanceAway) {
  for (DataType t : kTypes) {
    for (Collective c : {Collective::kAllGather, Collective::kAllReduce}) {
      const size_t count = 8192;
      const DataPattern p(c, t, ReduceOp::kSum, 4, 0, count, kSeed);
      std::vector<double> values(count);
      for (size_t i = 0; i < count; ++i)
        values[i] = c == Collective::kAllGather ? p.input_value(1, i) : p.expected_value(0, i);
      for (size_t shift : {1, 2, 3, 4, 5, 8, 16, 64, 128, 255, 256, 257, 512, 1024, 4096}) {
        size_t same = 0;
        for (size_t i = 0; i + shift < count; ++i) same += values[i] == values[i + shift];
        // e5m2's data movement has 8 values: 1/8 the same by chance.
        EXPECT_LT(same, (count - shift) / 4) << name(c) << " " << name(t) << " shift " << shift;
      }
    }
  }
}

// Each rank contributes first to every ranks-th element, and second as often.
TEST(Patterns, EveryRankContributesEvenly) {
  for (int ranks : {2, 3, 5, 16}) {
    const size_t count = 4096;
    const DataPattern p(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum, ranks, 0, count,
                        kSeed);
    std::vector<size_t> contributions(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r)
      for (size_t i = 0; i < count; ++i)
        contributions[static_cast<size_t>(r)] += p.input_value(r, i) != 0;
    for (int r = 0; r < ranks; ++r) {
      // Exactly count/ranks times first, about as often second.
      EXPECT_GT(contributions[static_cast<size_t>(r)], count / static_cast<size_t>(ranks))
          << ranks << " ranks, rank " << r;
      EXPECT_LT(contributions[static_cast<size_t>(r)], 4 * count / static_cast<size_t>(ranks))
          << ranks << " ranks, rank " << r;
    }
  }
}

}  // namespace
}  // namespace ccscope::bench
