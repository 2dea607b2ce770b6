#include "ccscope/collectives/mpi_point_to_point.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <string>

#include "ccscope/collectives/error.h"
#include "mpi_wait.h"

namespace ccscope {
namespace {

constexpr int kTag = 0;  // the endpoint owns its communicator, so one tag is enough

// The error class's text: one line ("Message truncated"), where the code's own
// text may be a multi-line error stack (MPICH).
std::string mpi_error_text(int code) {
  int error_class = code;
  if (MPI_Error_class(code, &error_class) != MPI_SUCCESS) error_class = code;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(error_class, text, &length) != MPI_SUCCESS) {
    return "MPI error code " + std::to_string(code);
  }
  std::string line(text, static_cast<size_t>(length));
  return line.substr(0, line.find('\n'));
}

[[noreturn]] void fail(int code, const std::string& what) {
  throw BackendError(what + " failed: " + mpi_error_text(code));
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) fail(code, what);
}

// Per-message calls: the text (bytes, peer) is only built once a call failed,
// so the success path formats nothing.
std::string message_text(const char* call, size_t bytes, const char* direction, int peer) {
  return std::string(call) + " of " + std::to_string(bytes) + " bytes " + direction + " rank " +
         std::to_string(peer);
}

std::string sendrecv_text(size_t send_bytes, int send_peer, size_t recv_bytes, int recv_peer) {
  return "MPI_Sendrecv (" + std::to_string(send_bytes) + " bytes to rank " +
         std::to_string(send_peer) + ", " + std::to_string(recv_bytes) + " bytes from rank " +
         std::to_string(recv_peer) + ")";
}

class MpiPointToPoint final : public PointToPoint {
 public:
  MpiPointToPoint(size_t max_chunk_bytes, bool yielding_waits)
      : chunk_(max_chunk_bytes == 0 ? static_cast<size_t>(INT_MAX)
                                    : std::min(max_chunk_bytes, static_cast<size_t>(INT_MAX))),
        yielding_waits_(yielding_waits) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
      throw UsageError("MPI point-to-point: MPI is not initialised (create an MpiSession first)");
    }
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup(MPI_COMM_WORLD)");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }

  ~MpiPointToPoint() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  MpiPointToPoint(const MpiPointToPoint&) = delete;
  MpiPointToPoint& operator=(const MpiPointToPoint&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void send(int peer, const void* data, size_t bytes) override {
    check_peer(peer, "send to");
    const auto* base = static_cast<const char*>(data);
    for (size_t k = 0, chunks = chunk_count(bytes); k < chunks; ++k) {
      const void* chunk = base + k * chunk_;
      const int length = chunk_length(bytes, k);
      const int code = detail::waited_call(
          yielding_waits_, [&] { return MPI_Send(chunk, length, MPI_BYTE, peer, kTag, comm_); },
          [&](MPI_Request* r) { return MPI_Isend(chunk, length, MPI_BYTE, peer, kTag, comm_, r); });
      if (code != MPI_SUCCESS) fail(code, message_text("MPI_Send", bytes, "to", peer));
    }
  }

  void recv(int peer, void* data, size_t bytes) override {
    check_peer(peer, "recv from");
    auto* base = static_cast<char*>(data);
    for (size_t k = 0, chunks = chunk_count(bytes); k < chunks; ++k) {
      MPI_Status status;
      int length = chunk_length(bytes, k);
      void* chunk = base + k * chunk_;
      const int code = detail::waited_call(
          yielding_waits_,
          [&] { return MPI_Recv(chunk, length, MPI_BYTE, peer, kTag, comm_, &status); },
          [&](MPI_Request* r) { return MPI_Irecv(chunk, length, MPI_BYTE, peer, kTag, comm_, r); },
          &status);
      if (code != MPI_SUCCESS) fail(code, message_text("MPI_Recv", bytes, "from", peer));
      if (const int received = received_count(status); received != length)
        wrong_count(message_text("MPI_Recv", bytes, "from", peer), length, received);
    }
  }

  void send_recv(int send_peer, const void* send_data, size_t send_bytes, int recv_peer,
                 void* recv_data, size_t recv_bytes) override {
    check_peer(send_peer, "send to");
    check_peer(recv_peer, "recv from");
    const auto* send_base = static_cast<const char*>(send_data);
    auto* recv_base = static_cast<char*>(recv_data);
    size_t send_chunks = chunk_count(send_bytes);
    size_t recv_chunks = chunk_count(recv_bytes);
    // Chunk k of each message travels in step k; once one side has no chunks left
    // it talks to MPI_PROC_NULL.
    for (size_t k = 0; k < std::max(send_chunks, recv_chunks); ++k) {
      bool sending = k < send_chunks;
      bool receiving = k < recv_chunks;
      int send_length = sending ? chunk_length(send_bytes, k) : 0;
      int recv_length = receiving ? chunk_length(recv_bytes, k) : 0;
      MPI_Status status;
      const void* send_chunk = sending ? send_base + k * chunk_ : nullptr;
      void* recv_chunk = receiving ? recv_base + k * chunk_ : nullptr;
      const int to = sending ? send_peer : MPI_PROC_NULL;
      const int from = receiving ? recv_peer : MPI_PROC_NULL;
      int code = MPI_SUCCESS;
      if (!yielding_waits_) {
        code = MPI_Sendrecv(send_chunk, send_length, MPI_BYTE, to, kTag, recv_chunk, recv_length,
                            MPI_BYTE, from, kTag, comm_, &status);
      } else {  // (MPI_Isendrecv is MPI 4.0; Open MPI 4.1 lacks it)
        MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        MPI_Status statuses[2];
        code = MPI_Irecv(recv_chunk, recv_length, MPI_BYTE, from, kTag, comm_, &requests[0]);
        if (code == MPI_SUCCESS)
          code = MPI_Isend(send_chunk, send_length, MPI_BYTE, to, kTag, comm_, &requests[1]);
        if (code == MPI_SUCCESS)
          code = detail::test_yielding(
              [&](int* done) { return MPI_Testall(2, requests, done, statuses); });
        if (code == MPI_ERR_IN_STATUS)
          code =
              statuses[0].MPI_ERROR != MPI_SUCCESS ? statuses[0].MPI_ERROR : statuses[1].MPI_ERROR;
        status = statuses[0];
      }
      if (code != MPI_SUCCESS)
        fail(code, sendrecv_text(send_bytes, send_peer, recv_bytes, recv_peer));
      if (!receiving) continue;
      if (const int received = received_count(status); received != recv_length)
        wrong_count(sendrecv_text(send_bytes, send_peer, recv_bytes, recv_peer), recv_length,
                    received);
    }
  }

 private:
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_) {
      throw UsageError("rank " + std::to_string(rank_) + ": " + what + " rank " +
                       std::to_string(peer) + ", but MPI_COMM_WORLD has " + std::to_string(size_) +
                       " ranks");
    }
  }

  // A zero-byte message is still one MPI message.
  size_t chunk_count(size_t bytes) const { return bytes == 0 ? 1 : (bytes + chunk_ - 1) / chunk_; }
  int chunk_length(size_t bytes, size_t k) const {
    return static_cast<int>(std::min(chunk_, bytes - k * chunk_));
  }

  static int received_count(const MPI_Status& status) {
    int received = 0;
    check(MPI_Get_count(&status, MPI_BYTE, &received), "MPI_Get_count");
    return received;
  }

  [[noreturn]] static void wrong_count(const std::string& what, int expected, int received) {
    throw BackendError(what + ": expected a message of " + std::to_string(expected) +
                       " bytes, got " + std::to_string(received) +
                       " (the ranks disagree on the message size)");
  }

  size_t chunk_;
  bool yielding_waits_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
};

}  // namespace

std::unique_ptr<PointToPoint> make_mpi_point_to_point(size_t max_chunk_bytes, bool yielding_waits) {
  return std::make_unique<MpiPointToPoint>(max_chunk_bytes, yielding_waits);
}

}  // namespace ccscope
