// The patterns are checked against a serial simulation of each collective in
// every element type: the expected values must equal what a correct
// collective delivers, bit for bit, and a wrong value must be counted.
#include "patterns.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace ccscope::bench {
namespace {

const DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                           DataType::kBFloat16, DataType::kInt32,   DataType::kInt8,
                           DataType::kUInt8};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                         ReduceOp::kAvg};

// Reduces in a given rank order in the element type, rounding after every step
// as a real implementation would.
std::vector<unsigned char> reduce_in_type(const DataPattern& p, DataType t, ReduceOp op, int ranks,
                                          size_t count, size_t first,
                                          const std::vector<int>& order) {
  const size_t w = element_size(t);
  std::vector<unsigned char> acc(count * w), in(count * w);
  p.fill_input(order[0], first, count, acc.data());
  for (size_t k = 1; k < order.size(); ++k) {
    p.fill_input(order[k], first, count, in.data());
    for (size_t i = 0; i < count; ++i) {
      const double a = load_element(acc.data(), t, i), b = load_element(in.data(), t, i);
      double r = 0;
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
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
  for (int ranks : {1, 2, 3, 4, 7, 16, 64, 300}) {
    for (DataType t : kTypes) {
      for (ReduceOp op : kOps) {
        const size_t count = 1000;
        DataPattern p(Collective::kAllReduce, t, op, ranks, 0, count);
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
  DataPattern p(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum, 4, 0, 100);
  EXPECT_NE(p.input_value(0, 0), p.input_value(1, 0));
  EXPECT_NE(p.input_value(0, 0), p.input_value(0, 1));
}

TEST(Patterns, ReduceScatterBlocks) {
  const int ranks = 3;
  const size_t block = 40;
  for (DataType t : kTypes) {
    DataPattern p(Collective::kReduceScatter, t, ReduceOp::kSum, ranks, 0, block);
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
    DataPattern p(Collective::kAllGather, t, ReduceOp::kSum, ranks, 0, block);
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
  DataPattern p(Collective::kAllToAll, DataType::kInt32, ReduceOp::kSum, ranks, 0, per);
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
  DataPattern sr(Collective::kSendRecv, DataType::kFloat32, ReduceOp::kSum, 4, 0, 64);
  std::vector<float> from_rank_1(64);
  sr.fill_input(1, 0, 64, from_rank_1.data());
  EXPECT_EQ(sr.check_output(2, 0, 64, from_rank_1.data()).wrong, 0u);
  EXPECT_EQ(sr.check_output(3, 0, 64, from_rank_1.data()).wrong, 64u);  // rank 3 receives from 2
  DataPattern bc(Collective::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 4, 2, 64);
  std::vector<float> root_data(64), other(64);
  bc.fill_input(2, 0, 64, root_data.data());
  bc.fill_input(1, 0, 64, other.data());
  EXPECT_EQ(bc.check_output(0, 0, 64, root_data.data()).wrong, 0u);
  // A non-root's own initial data must not pass as the broadcast result.
  EXPECT_EQ(bc.check_output(1, 0, 64, other.data()).wrong, 64u);
}

TEST(Patterns, CountsEveryWrongElementAndReportsTheFirst) {
  DataPattern p(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum, 2, 0, 100);
  auto result = reduce_in_type(p, DataType::kFloat32, ReduceOp::kSum, 2, 100, 0, {0, 1});
  store_element(result.data(), DataType::kFloat32, 17,
                load_element(result.data(), DataType::kFloat32, 17) + 1);
  store_element(result.data(), DataType::kFloat32, 60, -1);
  const CheckResult c = p.check_output(0, 0, 100, result.data());
  EXPECT_EQ(c.wrong, 2u);
  EXPECT_EQ(c.first_index, 17u);
  EXPECT_EQ(c.received, c.expected + 1);
}

TEST(Patterns, ChunkedCheckUsesGlobalIndices) {
  DataPattern p(Collective::kAllReduce, DataType::kInt32, ReduceOp::kMax, 3, 0, 1000);
  const auto whole = reduce_in_type(p, DataType::kInt32, ReduceOp::kMax, 3, 1000, 0, {2, 0, 1});
  EXPECT_EQ(p.check_output(1, 500, 500, whole.data() + 500 * 4).wrong, 0u);
  EXPECT_GT(p.check_output(1, 499, 500, whole.data() + 500 * 4).wrong, 0u);
}

}  // namespace
}  // namespace ccscope::bench
