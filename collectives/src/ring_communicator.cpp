// The ring backend: host memory, the reference algorithms (reference_algorithms.h)
// over MPI point-to-point. It runs the textbook ring (and a pipelined chain
// broadcast, a pairwise all-to-all) on the same machine and MPI as the mpi
// backend, so MPI's own algorithm choice can be compared with a ring.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/mpi_point_to_point.h"
#include "ccscope/collectives/reference_algorithms.h"
#include "host_memory.h"

namespace ccscope {
namespace {

class RingCommunicator : public Communicator {
 public:
  // `owned` may be null when `p2p` outlives the communicator.
  RingCommunicator(std::unique_ptr<PointToPoint> owned, PointToPoint& p2p)
      : owned_(std::move(owned)), p2p_(&p2p), rank_(p2p.rank()), size_(p2p.size()) {}

  std::string backend_name() const override { return "ring"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MemoryKind memory_kind() const override { return MemoryKind::kHost; }
  std::string device_name() const override { return "cpu"; }

  std::unique_ptr<Buffer> allocate(size_t bytes) override {
    return std::make_unique<detail::HostBuffer>(bytes);
  }
  void copy_from_host(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) override {
    std::memcpy(static_cast<char*>(dst.data()) + dst_offset, src, bytes);
  }
  void copy_to_host(void* dst, const Buffer& src, size_t src_offset, size_t bytes) override {
    std::memcpy(dst, static_cast<const char*>(const_cast<Buffer&>(src).data()) + src_offset, bytes);
  }

  void all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    ring_all_reduce(*p2p_, send, recv, count, type, op);
  }
  void all_gather(const void* send, void* recv, size_t send_count, DataType type) override {
    ring_all_gather(*p2p_, send, recv, send_count, type);
  }
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                      ReduceOp op) override {
    ring_reduce_scatter(*p2p_, send, recv, recv_count, type, op);
  }
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    chain_broadcast(*p2p_, send, recv, count, type, root);
  }
  void all_to_all(const void* send, void* recv, size_t count_per_peer, DataType type) override {
    pairwise_all_to_all(*p2p_, send, recv, count_per_peer, type);
  }
  void send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count,
                 DataType type) override {
    const size_t bytes = count * element_size(type);
    if (send == recv && bytes > 0) {
      // PointToPoint wants distinct buffers: send from a copy.
      std::vector<unsigned char> copy(static_cast<const unsigned char*>(send),
                                      static_cast<const unsigned char*>(send) + bytes);
      p2p_->send_recv(send_peer, copy.data(), bytes, recv_peer, recv, bytes);
      return;
    }
    p2p_->send_recv(send_peer, send, bytes, recv_peer, recv, bytes);
  }

  void wait(std::chrono::milliseconds) override {}  // every operation above is blocking

  std::unique_ptr<StampClock> make_clock(size_t stamps) override {
    return std::make_unique<detail::HostStampClock>(stamps);
  }

 private:
  std::unique_ptr<PointToPoint> owned_;
  PointToPoint* p2p_;
  int rank_;
  int size_;
};

}  // namespace

std::unique_ptr<Communicator> make_ring_communicator(const World& world) {
  auto p2p = make_mpi_point_to_point();
  if (p2p->rank() != world.rank() || p2p->size() != world.size()) {
    throw UsageError("ring backend: the World (rank " + std::to_string(world.rank()) + " of " +
                     std::to_string(world.size()) + ") is not MPI_COMM_WORLD (rank " +
                     std::to_string(p2p->rank()) + " of " + std::to_string(p2p->size()) + ")");
  }
  PointToPoint& endpoint = *p2p;
  return std::make_unique<RingCommunicator>(std::move(p2p), endpoint);
}

std::unique_ptr<Communicator> make_ring_communicator(PointToPoint& p2p) {
  return std::make_unique<RingCommunicator>(nullptr, p2p);
}

}  // namespace ccscope
