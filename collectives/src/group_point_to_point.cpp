#include "ccscope/collectives/group_point_to_point.h"

#include <string>
#include <utility>

#include "ccscope/collectives/error.h"

namespace ccscope {
namespace {

class GroupPointToPoint : public PointToPoint {
 public:
  GroupPointToPoint(PointToPoint& world, std::vector<int> members, int rank)
      : world_(world), members_(std::move(members)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  void send(int peer, const void* data, size_t bytes) override {
    world_.send(world_rank(peer), data, bytes);
  }
  void recv(int peer, void* data, size_t bytes) override {
    world_.recv(world_rank(peer), data, bytes);
  }
  void send_recv(int send_peer, const void* send_data, size_t send_bytes, int recv_peer,
                 void* recv_data, size_t recv_bytes) override {
    world_.send_recv(world_rank(send_peer), send_data, send_bytes, world_rank(recv_peer), recv_data,
                     recv_bytes);
  }

 private:
  int world_rank(int peer) const {
    if (peer < 0 || peer >= size())
      throw UsageError("group peer " + std::to_string(peer) + " outside a group of " +
                       std::to_string(size()) + " ranks");
    return members_[static_cast<size_t>(peer)];
  }
  PointToPoint& world_;
  std::vector<int> members_;
  int rank_;
};

}  // namespace

std::unique_ptr<PointToPoint> make_group_point_to_point(PointToPoint& world,
                                                        std::vector<int> members) {
  int rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= world.size())
      throw UsageError("group member " + std::to_string(members[i]) + " outside a world of " +
                       std::to_string(world.size()) + " ranks");
    if (members[i] == world.rank()) {
      if (rank >= 0) throw UsageError("rank " + std::to_string(world.rank()) + " twice in a group");
      rank = static_cast<int>(i);
    }
  }
  if (rank < 0)
    throw UsageError("rank " + std::to_string(world.rank()) + " is not a member of its group");
  return std::make_unique<GroupPointToPoint>(world, std::move(members), rank);
}

}  // namespace ccscope
