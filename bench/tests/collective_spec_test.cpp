#include "collective_spec.h"

#include <gtest/gtest.h>

namespace ccscope::bench {
namespace {

TEST(CollectiveSpec, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kReduceScatter, 3), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kSendRecv, 4), 1.0);
}

TEST(CollectiveSpec, AllReduceUsesTheWholeSize) {
  const Layout l = layout_for(Collective::kAllReduce, 1024, 4, 3, 1);
  EXPECT_EQ(l.param_count, 256u);
  EXPECT_EQ(l.send_count, 256u);
  EXPECT_EQ(l.recv_count, 256u);
  EXPECT_EQ(l.size_bytes, 1024u);
}

// nccl-tests 2.19: each rank's block is (count / ranks) & ~(16 / element size - 1)
// elements, i.e. a multiple of 16 bytes. Expected values worked out by hand:
struct SizeCase {
  Collective collective;
  size_t element_bytes;  // 1 int8, 2 half/bfloat16, 4 float, 8 double
  int ranks;
  size_t requested;
  size_t count;       // the "count" column (param_count)
  size_t size_bytes;  // the "size" column
};
const SizeCase kSizeTable[] = {
    // allgather: size = ranks x block x element size
    {Collective::kAllGather, 1, 2, 1000, 496, 992},            // 1000/2 = 500 -> 496
    {Collective::kAllGather, 2, 3, 1000, 160, 960},            // 500/3 = 166 -> 160 (x8)
    {Collective::kAllGather, 2, 6, 1048576, 87376, 1048512},   // 524288/6 = 87381 -> 87376
    {Collective::kAllGather, 4, 8, 1000, 28, 896},             // 250/8 = 31 -> 28 (x4)
    {Collective::kAllGather, 8, 3, 1000, 40, 960},             // 125/3 = 41 -> 40 (x2)
    {Collective::kAllGather, 2, 2, 8, 0, 0},                   // 4/2 = 2 -> 0
    {Collective::kAllGather, 4, 2, 1048576, 131072, 1048576},  // exact
    // reducescatter: size = ranks x block x element size (the input)
    {Collective::kReduceScatter, 4, 3, 1048576, 87380, 1048560},  // 262144/3 = 87381 -> 87380
    {Collective::kReduceScatter, 1, 6, 100, 16, 96},              // 100/6 = 16 -> 16
    {Collective::kReduceScatter, 2, 8, 100, 0, 0},                // 50/8 = 6 -> 0 (x8)
    {Collective::kReduceScatter, 8, 6, 1000, 20, 960},            // 125/6 = 20 -> 20
    {Collective::kReduceScatter, 1, 3, 1000, 320, 960},           // 333 -> 320
    // alltoall: size = ranks x per-peer block x element size
    {Collective::kAllToAll, 4, 3, 1000, 80, 960},            // 250/3 = 83 -> 80
    {Collective::kAllToAll, 8, 6, 1048576, 21844, 1048512},  // 131072/6 = 21845 -> 21844
    {Collective::kAllToAll, 1, 2, 40, 16, 32},               // 20 -> 16
    {Collective::kAllToAll, 2, 8, 1000, 56, 896},            // 500/8 = 62 -> 56
    // allreduce, broadcast, sendrecv: whole elements of the requested size
    {Collective::kAllReduce, 2, 3, 1001, 500, 1000},
    {Collective::kAllReduce, 1, 6, 7, 7, 7},
    {Collective::kBroadcast, 8, 8, 1000, 125, 1000},
    {Collective::kSendRecv, 4, 6, 10, 2, 8},
};

TEST(CollectiveSpec, SizesAreNcclTests219) {
  for (const SizeCase& c : kSizeTable) {
    const Layout l = layout_for(c.collective, c.requested, c.element_bytes, c.ranks, 1);
    const std::string what = std::string(name(c.collective)) + " " +
                             std::to_string(c.element_bytes) + " B x " + std::to_string(c.ranks) +
                             " ranks, " + std::to_string(c.requested) + " B requested";
    EXPECT_EQ(l.param_count, c.count) << what;
    EXPECT_EQ(l.size_bytes, c.size_bytes) << what;
    EXPECT_EQ(
        l.param_count * c.element_bytes %
            (c.collective == Collective::kAllReduce || c.collective == Collective::kBroadcast ||
                     c.collective == Collective::kSendRecv
                 ? 1
                 : 16),
        0u)
        << what;
  }
}

TEST(CollectiveSpec, InPlaceOffsetsAreTheRanksBlock) {
  const Layout gather = layout_for(Collective::kAllGather, 1000, 4, 3, 2);
  EXPECT_EQ(gather.send_count, 80u);
  EXPECT_EQ(gather.recv_count, 240u);
  EXPECT_EQ(gather.send_in_place_offset, 160u);
  const Layout scatter = layout_for(Collective::kReduceScatter, 1 << 20, 4, 4, 3);
  EXPECT_EQ(scatter.send_count, 262144u);
  EXPECT_EQ(scatter.recv_count, 65536u);
  EXPECT_EQ(scatter.recv_in_place_offset, 3u * 65536u);
}

TEST(CollectiveSpec, Names) {
  EXPECT_EQ(parse_collective("allreduce"), Collective::kAllReduce);
  EXPECT_EQ(parse_collective("all_reduce_perf"), Collective::kAllReduce);
  EXPECT_EQ(parse_collective("reduce_scatter"), Collective::kReduceScatter);
  EXPECT_FALSE(parse_collective("gossip"));
  EXPECT_FALSE(supports_in_place(Collective::kAllToAll));
  EXPECT_TRUE(supports_in_place(Collective::kAllGather));
}

}  // namespace
}  // namespace ccscope::bench
