#pragma once
// Which of the world's ranks form this rank's group, as MPI_Comm_split orders
// them: the ranks of the same colour, by world rank. The NCCL and gloo backends
// build their group communicators from it (ids and addresses exchanged over the
// World), so both agree with MPI on who is rank 0 of a group.
#include <optional>
#include <string>
#include <vector>

namespace ccscope {

struct GroupMembership {
  std::vector<int> members;  // world ranks, ascending; empty when outside every group
  int group_rank = -1;       // this rank's index in `members`; -1 outside
  bool inside() const { return group_rank >= 0; }
};

// The colour a rank passes for a communicator over `color`'s ranks (negative:
// none) or, unset, over the world's first `first_ranks` (0: all). Throws
// UsageError when both are set or first_ranks is outside 0..world_size.
int group_color(std::optional<int> color, int first_ranks, int world_rank, int world_size);

// `colors[r]` is world rank r's colour (negative: in no group).
GroupMembership group_membership(const std::vector<int>& colors, int world_rank);

// Every rank's colour, from one World::all_gather of each rank's text form.
std::vector<int> parse_group_colors(const std::vector<std::string>& texts);

}  // namespace ccscope
