// The ring backend: host memory, the reference algorithms (reference_algorithms.h)
// over MPI point-to-point. It runs the textbook ring (and a pipelined chain
// broadcast, a pairwise all-to-all) on the same machine and MPI as the mpi
// backend, so MPI's own algorithm choice can be compared with a ring (and a
// binomial reduce, a linear gather and scatter, a pairwise all-to-all-v).
#include <cstring>
#include <memory>
#include <span>
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

class RingCommunicator : public detail::HostMemoryCommunicator {
 public:
  // `owned` may be null when `p2p` outlives the communicator.
  RingCommunicator(std::unique_ptr<PointToPoint> owned, PointToPoint& p2p)
      : owned_(std::move(owned)), p2p_(&p2p), rank_(p2p.rank()), size_(p2p.size()) {}

  std::string backend_name() const override { return "ring"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

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
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
              int root) override {
    binomial_reduce(*p2p_, send, recv, count, type, op, root);
  }
  void gather(const void* send, void* recv, size_t send_count, DataType type, int root) override {
    linear_gather(*p2p_, send, recv, send_count, type, root);
  }
  void scatter(const void* send, void* recv, size_t recv_count, DataType type, int root) override {
    linear_scatter(*p2p_, send, recv, recv_count, type, root);
  }
  void all_to_all_v(const void* send, std::span<const size_t> send_counts,
                    std::span<const size_t> send_displacements, void* recv,
                    std::span<const size_t> recv_counts, std::span<const size_t> recv_displacements,
                    DataType type) override {
    check_all_to_all_v_spans(*this, send_counts, send_displacements, recv_counts,
                             recv_displacements);
    const size_t es = element_size(type);
    std::vector<const void*> send_blocks;
    std::vector<void*> recv_blocks;
    for (size_t displacement : send_displacements)
      send_blocks.push_back(static_cast<const char*>(send) + displacement * es);
    for (size_t displacement : recv_displacements)
      recv_blocks.push_back(static_cast<char*>(recv) + displacement * es);
    pairwise_all_to_allv(*p2p_, send_blocks, send_counts, recv_blocks, recv_counts, type);
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

  // Two shapes, the ones the reference algorithms have a deadlock-free order
  // for: at most one send and one receive (one PointToPoint call), and one
  // send to and one receive from every rank (pairwise_all_to_allv).
  void batch_send_recv(std::span<const PeerSend> sends, std::span<const PeerRecv> recvs,
                       DataType type) override {
    for (const PeerSend& s : sends) check_peer(s.peer, "send");
    for (const PeerRecv& r : recvs) check_peer(r.peer, "receive");
    const size_t es = element_size(type);
    if (sends.size() <= 1 && recvs.size() <= 1) {
      if (sends.empty() && recvs.empty()) return;
      if (sends.empty() || recvs.empty()) {
        const int peer = sends.empty() ? recvs[0].peer : sends[0].peer;
        if (peer == rank_) {
          throw UsageError("ring backend: batch_send_recv: a " +
                           std::string(sends.empty() ? "receive from" : "send to") + " rank " +
                           std::to_string(rank_) +
                           " (this rank) needs its matching send and receive in the same batch");
        }
        if (sends.empty()) {
          p2p_->recv(peer, recvs[0].data, recvs[0].count * es);
        } else {
          p2p_->send(peer, sends[0].data, sends[0].count * es);
        }
        return;
      }
      const PeerSend& s = sends[0];
      const PeerRecv& r = recvs[0];
      const size_t send_bytes = s.count * es, recv_bytes = r.count * es;
      const auto* send_first = static_cast<const unsigned char*>(s.data);
      const auto* recv_first = static_cast<const unsigned char*>(r.data);
      if (send_bytes > 0 && recv_bytes > 0 && send_first < recv_first + recv_bytes &&
          recv_first < send_first + send_bytes) {
        // PointToPoint wants distinct buffers: send from a copy.
        std::vector<unsigned char> copy(send_first, send_first + send_bytes);
        p2p_->send_recv(s.peer, copy.data(), send_bytes, r.peer, r.data, recv_bytes);
        return;
      }
      p2p_->send_recv(s.peer, s.data, send_bytes, r.peer, r.data, recv_bytes);
      return;
    }
    const size_t n = static_cast<size_t>(size_);
    if (sends.size() == n && recvs.size() == n) {
      std::vector<const void*> send_blocks(n, nullptr);
      std::vector<void*> recv_blocks(n, nullptr);
      std::vector<size_t> send_counts(n, 0), recv_counts(n, 0);
      std::vector<bool> sent_to(n, false), received_from(n, false);
      bool every_rank_once = true;
      for (const PeerSend& s : sends) {
        const size_t p = static_cast<size_t>(s.peer);
        if (sent_to[p]) every_rank_once = false;
        sent_to[p] = true;
        send_blocks[p] = s.data;
        send_counts[p] = s.count;
      }
      for (const PeerRecv& r : recvs) {
        const size_t p = static_cast<size_t>(r.peer);
        if (received_from[p]) every_rank_once = false;
        received_from[p] = true;
        recv_blocks[p] = r.data;
        recv_counts[p] = r.count;
      }
      if (every_rank_once) {
        pairwise_all_to_allv(*p2p_, send_blocks, send_counts, recv_blocks, recv_counts, type);
        return;
      }
    }
    throw UsageError(
        "ring backend: batch_send_recv supports at most one send and one receive, "
        "or one send to and one receive from every rank (all-to-all-v); got " +
        std::to_string(sends.size()) + " sends and " + std::to_string(recvs.size()) +
        " receives over " + std::to_string(size_) + " ranks");
  }

  void wait(std::chrono::milliseconds) override {}  // every operation above is blocking

  std::unique_ptr<StampClock> make_clock(size_t stamps) override {
    return std::make_unique<detail::HostStampClock>(stamps);
  }

 private:
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_) {
      throw UsageError("ring backend: batch_send_recv " + std::string(what) + " peer " +
                       std::to_string(peer) + " is not a rank of this communicator (0.." +
                       std::to_string(size_ - 1) + ")");
    }
  }

  std::unique_ptr<PointToPoint> owned_;
  PointToPoint* p2p_;
  int rank_;
  int size_;
};

}  // namespace

std::unique_ptr<Communicator> make_ring_communicator(const World& world) {
  auto p2p = make_mpi_point_to_point(0, world.yielding_waits());
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
