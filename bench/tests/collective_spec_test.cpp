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

TEST(CollectiveSpec, AllGatherSizeIsTheOutputRoundedToFourTimesRanks) {
  // 1000 B floats on 3 ranks: 250 elements -> block (250 / 12) * 4 = 80.
  const Layout l = layout_for(Collective::kAllGather, 1000, 4, 3, 2);
  EXPECT_EQ(l.param_count, 80u);
  EXPECT_EQ(l.send_count, 80u);
  EXPECT_EQ(l.recv_count, 240u);
  EXPECT_EQ(l.size_bytes, 960u);
  EXPECT_EQ(l.send_in_place_offset, 160u);
}

TEST(CollectiveSpec, ReduceScatterSizeIsTheInput) {
  const Layout l = layout_for(Collective::kReduceScatter, 1 << 20, 4, 4, 3);
  EXPECT_EQ(l.param_count, 65536u);
  EXPECT_EQ(l.send_count, 262144u);
  EXPECT_EQ(l.recv_count, 65536u);
  EXPECT_EQ(l.size_bytes, 1u << 20);
  EXPECT_EQ(l.recv_in_place_offset, 3u * 65536u);
}

TEST(CollectiveSpec, AllToAllRoundsToRanks) {
  const Layout l = layout_for(Collective::kAllToAll, 100, 4, 3, 0);  // 25 elements
  EXPECT_EQ(l.param_count, 8u);
  EXPECT_EQ(l.send_count, 24u);
  EXPECT_EQ(l.size_bytes, 96u);
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
