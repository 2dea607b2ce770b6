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

std::map<std::string, std::string> g_env;
const char* fake_getenv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

TEST(World, LauncherRankCount) {
  g_env = {};
  EXPECT_EQ(launcher_rank_count(fake_getenv), 0);
  g_env = {{"PMI_SIZE", "4"}};
  EXPECT_EQ(launcher_rank_count(fake_getenv), 4);
  g_env = {{"OMPI_COMM_WORLD_SIZE", "8"}};
  EXPECT_EQ(launcher_rank_count(fake_getenv), 8);
  g_env = {{"SLURM_STEP_NUM_TASKS", "16"}};
  EXPECT_EQ(launcher_rank_count(fake_getenv), 16);
  g_env = {{"SLURM_NTASKS", "16"}};  // an allocation, not a launched step
  EXPECT_EQ(launcher_rank_count(fake_getenv), 0);
  g_env = {{"PMI_SIZE", "garbage"}};
  EXPECT_EQ(launcher_rank_count(fake_getenv), 0);
}

}  // namespace
}  // namespace ccscope
