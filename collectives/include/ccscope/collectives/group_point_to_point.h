#pragma once
// A group's PointToPoint over the world's: group rank i is world rank
// members[i]. Groups made this way over one world endpoint may run at once when
// they share no rank (the nodes of `ccscope diag`'s node stage), or one after
// the other when they do (the training probe's tensor, pipeline and data
// groups): every pair of ranks then meets its messages in the same program order,
// which is all the PointToPoint contract needs.
#include <memory>
#include <vector>

#include "ccscope/collectives/point_to_point.h"

namespace ccscope {

// `world` must outlive the result. UsageError when `members` does not hold
// world.rank() exactly once or names a rank outside the world.
std::unique_ptr<PointToPoint> make_group_point_to_point(PointToPoint& world,
                                                        std::vector<int> members);

}  // namespace ccscope
