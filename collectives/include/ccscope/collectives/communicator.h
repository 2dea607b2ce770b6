#pragma once
// The one interface every backend (MPI on host memory, NCCL on device memory)
// implements. Tools see only this; they never include mpi.h or nccl.h.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ccscope/collectives/types.h"

namespace ccscope {

enum class MemoryKind { kHost, kDevice };

// Memory a backend can communicate from; freed when destroyed.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
};

// Timestamps taken in the order of a communicator's operations (host clock for
// blocking backends, CUDA events on the stream for NCCL). Read them only after
// Communicator::wait().
class StampClock {
 public:
  virtual ~StampClock() = default;
  virtual void stamp(size_t index) = 0;
  virtual double seconds_between(size_t first, size_t second) = 0;
  // True once the operations before stamp `index` have completed (always true
  // for blocking backends); lets a caller see progress while it waits.
  virtual bool completed(size_t index) = 0;
};

// Operations recorded once and replayed as one unit (a CUDA graph for NCCL).
class CapturedOperations {
 public:
  virtual ~CapturedOperations() = default;
  // Issues every recorded operation again, asynchronously (wait() completes them).
  virtual void launch() = 0;
};

// Collectives use NCCL's argument conventions (counts in elements):
//  all_gather:     send holds send_count elements, recv holds size()*send_count.
//                  In place: send == recv + rank()*send_count*element_size.
//  reduce_scatter: send holds size()*recv_count elements, recv holds recv_count.
//                  In place: recv == send + rank()*recv_count*element_size.
//  all_reduce, broadcast: in place when send == recv (send is read on root only
//                  for broadcast).
//  all_to_all:     send and recv hold size()*count_per_peer elements; block p of
//                  send goes to rank p.
//  send_recv:      sends count elements to send_peer, receives count from recv_peer.
//  reduce:         as all_reduce, but only the root's recv is written (and read
//                  only there); in place when send == recv.
//  gather:         send holds send_count elements; the root's recv holds
//                  size()*send_count, block r from rank r (recv is used on the
//                  root only). In place: send == recv + rank()*send_count*element_size.
//  scatter:        the root's send holds size()*recv_count elements, block r for
//                  rank r (send is used on the root only); recv holds recv_count.
//                  In place (root): recv == send + rank()*recv_count*element_size.
//  all_to_all_v:   send_counts[p] elements at send_displacements[p] (elements)
//                  go to rank p; recv_counts[p] from rank p land at
//                  recv_displacements[p]; every span has size() entries; out of
//                  place only.
//  batch_send_recv: every send and receive of the batch posted together, as
//                  torch.distributed.batch_isend_irecv (NCCL: ncclSend/ncclRecv
//                  in one group; MPI: Isend/Irecv then Waitall), so that no
//                  order of the batch's transfers can deadlock. Counts may
//                  differ per peer and may be 0; a peer may be this rank.
//                  Between one pair, messages are matched in the order listed.
//                  An all-to-all with per-peer counts (MPI_Alltoallv) is one
//                  send to and one receive from every rank.
// Operations may return before they complete (NCCL); wait() completes them.
struct PeerSend {
  int peer = 0;
  const void* data = nullptr;
  size_t count = 0;  // elements
};
struct PeerRecv {
  int peer = 0;
  void* data = nullptr;
  size_t count = 0;  // elements; must equal the matching send's
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual std::string backend_name() const = 0;  // "mpi", "nccl"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual MemoryKind memory_kind() const = 0;
  // Human-readable device: "cpu" or the GPU's name.
  virtual std::string device_name() const = 0;

  // The largest element count one operation takes (MPI: its int count).
  virtual size_t max_count() const { return static_cast<size_t>(-1); }
  // Device memory this rank may still allocate (the GPU's free memory shared
  // out among the local ranks on that GPU); nullopt for host memory or when
  // unknown. The sweep's preflight checks -e against it, as nccl-tests caps
  // maxBytes by cudaMemGetInfo.
  virtual std::optional<size_t> device_memory_available() const { return std::nullopt; }
  // Why this backend cannot run `type` here ("" when it can): NCCL's fp8 below
  // compute capability 9.0.
  virtual std::string unsupported_reason(DataType type) const {
    (void)type;
    return "";
  }
  // Device backends: the GPU this rank's operations run on and the stream they
  // are queued on (an opaque cudaStream_t), for a caller that orders its own
  // device work with them by CUDA events (the training probe's GPU path: a
  // gradient bucket's all-reduce after its backward). -1 and null for host backends.
  virtual int device_ordinal() const { return -1; }
  virtual void* device_stream() const { return nullptr; }
  virtual std::unique_ptr<Buffer> allocate(size_t bytes) = 0;
  virtual void copy_from_host(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const Buffer& src, size_t src_offset, size_t bytes) = 0;

  virtual void all_reduce(const void* send, void* recv, size_t count, DataType type,
                          ReduceOp op) = 0;
  virtual void all_gather(const void* send, void* recv, size_t send_count, DataType type) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                              ReduceOp op) = 0;
  virtual void broadcast(const void* send, void* recv, size_t count, DataType type, int root) = 0;
  virtual void all_to_all(const void* send, void* recv, size_t count_per_peer, DataType type) = 0;
  virtual void send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count,
                         DataType type) = 0;
  virtual void batch_send_recv(std::span<const PeerSend> sends, std::span<const PeerRecv> recvs,
                               DataType type) = 0;
  // Collectives a backend may lack: by default they throw UsageError
  // ("<collective> is not supported by the <backend> backend").
  virtual void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                      int root);
  virtual void gather(const void* send, void* recv, size_t send_count, DataType type, int root);
  virtual void scatter(const void* send, void* recv, size_t recv_count, DataType type, int root);
  virtual void all_to_all_v(const void* send, std::span<const size_t> send_counts,
                            std::span<const size_t> send_displacements, void* recv,
                            std::span<const size_t> recv_counts,
                            std::span<const size_t> recv_displacements, DataType type);

  // Blocks until every issued operation completed; throws TimeoutError after
  // `timeout` and BackendError on an asynchronous backend failure.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
  virtual std::unique_ptr<StampClock> make_clock(size_t stamps) = 0;

  // Operations issued between group_start() and group_end() may be fused into
  // one launch (ncclGroupStart/End; nccl-tests' -m). No-ops for blocking backends.
  virtual void group_start() {}
  virtual void group_end() {}
  // Records the operations `issue` makes, without running them, for replay
  // (nccl-tests' -G: CUDA graph capture); nullptr when the backend cannot.
  virtual std::unique_ptr<CapturedOperations> capture(const std::function<void()>& issue) {
    (void)issue;
    return nullptr;
  }
  // What the backend uses, for the record: "key=value" pairs separated by ", "
  // (NCCL: buffer allocator, all-to-all call, communicator config). "" if nothing to say.
  virtual std::string resources() const { return ""; }
};

// all_to_all_v's contract on its spans (one entry per rank of `comm`), checked by
// every backend that runs it: throws UsageError naming the backend otherwise.
void check_all_to_all_v_spans(const Communicator& comm, std::span<const size_t> send_counts,
                              std::span<const size_t> send_displacements,
                              std::span<const size_t> recv_counts,
                              std::span<const size_t> recv_displacements);

}  // namespace ccscope
