#pragma once
// A small blocking point-to-point interface on host memory. The reference
// algorithms (reference_algorithms.h) are written against it; it has an
// in-process implementation for unit tests (in_process_transport.h) and an MPI
// one (mpi_point_to_point.h).
//
// Rules every implementation keeps and every algorithm may rely on:
//  - Messages from one rank to another arrive in the order they were sent.
//  - A recv names the exact size of the matching send (a mismatch is a
//    BackendError). A zero-byte message is still a message and must be received.
//  - send may block until the peer receives (MPI rendezvous): an algorithm must
//    not rely on buffering. send_recv sends and receives concurrently, so it does
//    not deadlock when every rank calls it in a ring, in pairs, or with itself.
//  - A peer outside [0, size()) is a UsageError; a wait past the
//    implementation's time bound is a TimeoutError.
#include <cstddef>

namespace ccscope {

class PointToPoint {
 public:
  virtual ~PointToPoint() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual void send(int peer, const void* data, size_t bytes) = 0;
  virtual void recv(int peer, void* data, size_t bytes) = 0;
  // Sends `send_bytes` to `send_peer` while receiving `recv_bytes` from
  // `recv_peer`; returns when both completed. The buffers must not overlap.
  virtual void send_recv(int send_peer, const void* send_data, size_t send_bytes, int recv_peer,
                         void* recv_data, size_t recv_bytes) = 0;
};

}  // namespace ccscope
