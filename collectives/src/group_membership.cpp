#include "group_membership.h"

#include <cstdlib>

#include "ccscope/collectives/error.h"

namespace ccscope {

int group_color(std::optional<int> color, int first_ranks, int world_rank, int world_size) {
  if (color && first_ranks != 0)
    throw UsageError("a group communicator takes a colour or a count of first ranks, not both");
  if (color) return *color < 0 ? -1 : *color;
  if (first_ranks < 0 || first_ranks > world_size)
    throw UsageError("a communicator of the first " + std::to_string(first_ranks) +
                     " ranks needs 1 to " + std::to_string(world_size) + " ranks");
  const int first = first_ranks == 0 ? world_size : first_ranks;
  return world_rank < first ? 0 : -1;
}

GroupMembership group_membership(const std::vector<int>& colors, int world_rank) {
  GroupMembership group;
  if (world_rank < 0 || static_cast<size_t>(world_rank) >= colors.size()) return group;
  const int mine = colors[static_cast<size_t>(world_rank)];
  if (mine < 0) return group;
  for (size_t r = 0; r < colors.size(); ++r) {
    if (colors[r] != mine) continue;
    if (static_cast<int>(r) == world_rank)
      group.group_rank = static_cast<int>(group.members.size());
    group.members.push_back(static_cast<int>(r));
  }
  return group;
}

std::vector<int> parse_group_colors(const std::vector<std::string>& texts) {
  std::vector<int> colors;
  colors.reserve(texts.size());
  for (const std::string& text : texts) colors.push_back(std::atoi(text.c_str()));
  return colors;
}

}  // namespace ccscope
