#include "ccscope/collectives/world.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

namespace ccscope {
namespace {

TEST(World, NodesFromHostnames) {
  const std::vector<std::string> hosts{"a", "a", "b", "c", "b", "a"};
  const World r4 = World::from_hostnames(4, hosts);
  EXPECT_EQ(r4.node_count(), 3);
  EXPECT_EQ(r4.node_index(), 1);  // nodes numbered by first appearance
  EXPECT_EQ(r4.local_rank(), 1);
  EXPECT_EQ(r4.local_size(), 2);
  EXPECT_EQ(r4.max_ranks_per_node(), 3);
  const World r5 = World::from_hostnames(5, hosts);
  EXPECT_EQ(r5.node_index(), 0);
  EXPECT_EQ(r5.local_rank(), 2);
  EXPECT_EQ(r5.hostname(), "a");
  const World single = World::from_hostnames(0, {"x"});
  EXPECT_EQ(single.node_count(), 1);
  EXPECT_EQ(single.local_size(), 1);
}

}  // namespace
}  // namespace ccscope
