// Who forms a rank's group (collectives/src/group_membership.h): the NCCL and
// gloo backends must order a group's ranks as MPI_Comm_split does.
#include "../src/group_membership.h"

#include <gtest/gtest.h>

#include "ccscope/collectives/error.h"

namespace ccscope {
namespace {

TEST(GroupMembership, RanksOfOneColourInWorldOrder) {
  // NCCL_TESTS_SPLIT="%2" over 5 ranks, or a training job's data-parallel groups.
  const std::vector<int> colors = {0, 1, 0, 1, 0};
  const GroupMembership even = group_membership(colors, 4);
  EXPECT_EQ(even.members, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(even.group_rank, 2);
  const GroupMembership odd = group_membership(colors, 1);
  EXPECT_EQ(odd.members, (std::vector<int>{1, 3}));
  EXPECT_EQ(odd.group_rank, 0);
}

TEST(GroupMembership, NegativeColourIsInNoGroup) {
  const GroupMembership none = group_membership({0, -1, 0}, 1);
  EXPECT_FALSE(none.inside());
  EXPECT_TRUE(none.members.empty());
  EXPECT_EQ(group_membership({0, -1, 0}, 2).members, (std::vector<int>{0, 2}));
}

TEST(GroupMembership, ColourFromOptions) {
  EXPECT_EQ(group_color(std::nullopt, 0, 3, 4), 0);   // the whole world
  EXPECT_EQ(group_color(std::nullopt, 2, 1, 4), 0);   // the first two ranks...
  EXPECT_EQ(group_color(std::nullopt, 2, 2, 4), -1);  // ...and not the third
  EXPECT_EQ(group_color(7, 0, 2, 4), 7);
  EXPECT_EQ(group_color(-3, 0, 2, 4), -1);
  EXPECT_THROW(group_color(1, 2, 0, 4), UsageError);
  EXPECT_THROW(group_color(std::nullopt, 5, 0, 4), UsageError);
  EXPECT_EQ(parse_group_colors({"3 host-a", "-1", "12"}), (std::vector<int>{3, -1, 12}));
}

}  // namespace
}  // namespace ccscope
