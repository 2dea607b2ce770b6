// The MPI backend: host memory, one MPI call per collective on MPI_COMM_WORLD
// (or a communicator of the world's first ranks, or of the ranks of one color).
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/reference_algorithms.h"
#include "host_memory.h"
#include "mpi_error.h"
#include "mpi_wait.h"

namespace ccscope {
namespace {

using detail::check_mpi;

// MPI has no 16-bit or 8-bit float types: each is carried as an opaque type of
// its size (contiguous bytes) and reduced by our own MPI_Ops. Distinct handles
// let the op tell the formats apart. They are shared by every MpiCommunicator
// alive (created with the first, freed with the last).
MPI_Datatype g_float16 = MPI_DATATYPE_NULL;
MPI_Datatype g_bfloat16 = MPI_DATATYPE_NULL;
MPI_Datatype g_fp8_e4m3 = MPI_DATATYPE_NULL;
MPI_Datatype g_fp8_e5m2 = MPI_DATATYPE_NULL;
int g_communicators = 0;

// The MPI user function: inout[i] = in[i] op inout[i], through the reference
// algorithms' local kernel (computes in float, rounds once per step).
void reduce_opaque(void* in, void* inout, int* length, MPI_Datatype* type, ReduceOp op) {
  DataType element;
  if (*type == g_float16) {
    element = DataType::kFloat16;
  } else if (*type == g_bfloat16) {
    element = DataType::kBFloat16;
  } else if (*type == g_fp8_e4m3) {
    element = DataType::kFloat8E4M3;
  } else if (*type == g_fp8_e5m2) {
    element = DataType::kFloat8E5M2;
  } else {
    // Only our own types are ever passed with these ops; an exception cannot
    // cross MPI's C frames.
    std::fputs("ccscope: MPI user reduction called with an unknown datatype\n", stderr);
    std::abort();
  }
  reduce_elements(inout, in, inout, static_cast<size_t>(*length), element, op);
}
void sum_opaque(void* in, void* inout, int* n, MPI_Datatype* t) {
  reduce_opaque(in, inout, n, t, ReduceOp::kSum);
}
void prod_opaque(void* in, void* inout, int* n, MPI_Datatype* t) {
  reduce_opaque(in, inout, n, t, ReduceOp::kProd);
}
void min_opaque(void* in, void* inout, int* n, MPI_Datatype* t) {
  reduce_opaque(in, inout, n, t, ReduceOp::kMin);
}
void max_opaque(void* in, void* inout, int* n, MPI_Datatype* t) {
  reduce_opaque(in, inout, n, t, ReduceOp::kMax);
}

bool is_opaque(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kBFloat16 ||
         type == DataType::kFloat8E4M3 || type == DataType::kFloat8E5M2;
}

// Whether the library is MPICH older than 4.2 (its "MPICH Version:" line).
bool mpich_before_4_2() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return false;
  const std::string version(text, static_cast<size_t>(length));
  const std::string key = "MPICH Version:";
  const size_t at = version.find(key);
  if (at == std::string::npos) return false;
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str() + at + key.size(), " %d.%d", &major, &minor) != 2) return false;
  return major < 4 || (major == 4 && minor < 2);
}

int to_int_count(size_t count) {
  if (count > static_cast<size_t>(INT_MAX))
    throw UsageError("MPI backend: " + std::to_string(count) +
                     " elements exceed MPI's int count limit (2^31-1); use a smaller -e");
  return static_cast<int>(count);
}

using detail::HostStampClock;

class MpiCommunicator : public detail::HostMemoryCommunicator {
 public:
  // `comm`: MPI_COMM_WORLD, or a communicator of the first ranks that this
  // object owns (and frees).
  MpiCommunicator(MPI_Comm comm, bool owned, bool yielding_waits)
      : comm_(comm), owned_(owned), yielding_waits_(yielding_waits) {
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    in_place_reduce_crashes_ = mpich_before_4_2();
    if (g_communicators == 0) {
      for (auto [handle, bytes] : {std::pair{&g_float16, 2}, std::pair{&g_bfloat16, 2},
                                   std::pair{&g_fp8_e4m3, 1}, std::pair{&g_fp8_e5m2, 1}}) {
        check_mpi(MPI_Type_contiguous(bytes, MPI_BYTE, handle), "MPI_Type_contiguous");
        check_mpi(MPI_Type_commit(handle), "MPI_Type_commit");
      }
    }
    ++g_communicators;
    check_mpi(MPI_Op_create(sum_opaque, 1, &op_sum_opaque_), "MPI_Op_create");
    check_mpi(MPI_Op_create(prod_opaque, 1, &op_prod_opaque_), "MPI_Op_create");
    check_mpi(MPI_Op_create(min_opaque, 1, &op_min_opaque_), "MPI_Op_create");
    check_mpi(MPI_Op_create(max_opaque, 1, &op_max_opaque_), "MPI_Op_create");
  }
  ~MpiCommunicator() override {
    for (MPI_Op* op : {&op_sum_opaque_, &op_prod_opaque_, &op_min_opaque_, &op_max_opaque_})
      if (*op != MPI_OP_NULL) MPI_Op_free(op);
    if (owned_) MPI_Comm_free(&comm_);
    if (--g_communicators == 0) {
      for (MPI_Datatype* type : {&g_float16, &g_bfloat16, &g_fp8_e4m3, &g_fp8_e5m2})
        if (*type != MPI_DATATYPE_NULL) MPI_Type_free(type);  // resets the handle to NULL
    }
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::string backend_name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // The record says how a rank waited: it changes what a small size measures.
  std::string resources() const override { return yielding_waits_ ? "waits=yielding" : ""; }

  size_t max_count() const override { return static_cast<size_t>(INT_MAX); }

  void all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    const int mpi_count = to_int_count(count);
    const void* source = send == recv ? MPI_IN_PLACE : send;
    if (op == ReduceOp::kMulSum) {
      // No MPI op for it: this rank's input times its scalar, made in recv (in
      // place recv is the input), then an in-place MPI sum.
      premultiply_elements(recv, send, count, type, premul_scalar(rank_));
      source = MPI_IN_PLACE;
    }
    collective(
        "MPI_Allreduce",
        [&] {
          return MPI_Allreduce(source, recv, mpi_count, mpi_type(type), mpi_op(type, op), comm_);
        },
        [&](MPI_Request* r) {
          return MPI_Iallreduce(source, recv, mpi_count, mpi_type(type), mpi_op(type, op), comm_,
                                r);
        });
    if (op == ReduceOp::kAvg) divide_by_size(recv, count, type);
  }

  void all_gather(const void* send, void* recv, size_t send_count, DataType type) override {
    const size_t block = send_count * element_size(type);
    const bool in_place =
        send == static_cast<const char*>(recv) + static_cast<size_t>(rank_) * block;
    const void* source = in_place ? MPI_IN_PLACE : send;
    const int count = to_int_count(send_count);
    collective(
        "MPI_Allgather",
        [&] {
          return MPI_Allgather(source, count, mpi_type(type), recv, count, mpi_type(type), comm_);
        },
        [&](MPI_Request* r) {
          return MPI_Iallgather(source, count, mpi_type(type), recv, count, mpi_type(type), comm_,
                                r);
        });
  }

  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                      ReduceOp op) override {
    const size_t block = recv_count * element_size(type);
    char* own_block =
        const_cast<char*>(static_cast<const char*>(send)) + static_cast<size_t>(rank_) * block;
    if (op == ReduceOp::kMulSum) {
      // No MPI op for it: the whole input times this rank's scalar, made in a
      // scratch buffer kept between calls (so the input, in place too, is not
      // modified), then an MPI sum from there.
      const int mpi_count = to_int_count(recv_count);
      const size_t total = recv_count * static_cast<size_t>(size_);
      if (scratch_.size() < total * element_size(type)) scratch_.resize(total * element_size(type));
      premultiply_elements(scratch_.data(), send, total, type, premul_scalar(rank_));
      reduce_scatter_block(scratch_.data(), recv, mpi_count, type, op);
    } else if (recv == own_block) {
      // MPI's in-place form leaves the result at the start of the buffer;
      // NCCL's convention (and ccscope's) wants it in the rank's own block.
      void* whole = const_cast<void*>(send);
      reduce_scatter_block(MPI_IN_PLACE, whole, to_int_count(recv_count), type, op);
      if (rank_ != 0) std::memmove(own_block, whole, block);
    } else {
      reduce_scatter_block(send, recv, to_int_count(recv_count), type, op);
    }
    if (op == ReduceOp::kAvg) divide_by_size(recv, recv_count, type);
  }

  void broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    // Out of place, the root's own output must also hold the data (NCCL semantics).
    if (rank_ == root && send != recv) std::memcpy(recv, send, count * element_size(type));
    check_mpi(MPI_Bcast(recv, to_int_count(count), mpi_type(type), root, comm_), "MPI_Bcast");
  }

  void all_to_all(const void* send, void* recv, size_t count_per_peer, DataType type) override {
    check_mpi(
        MPI_Alltoall(send == recv ? MPI_IN_PLACE : send, to_int_count(count_per_peer),
                     mpi_type(type), recv, to_int_count(count_per_peer), mpi_type(type), comm_),
        "MPI_Alltoall");
  }

  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
              int root) override {
    const int mpi_count = to_int_count(count);
    const bool on_root = rank_ == root;
    // MPI's in-place form is the root's alone; elsewhere recv is not used.
    const void* source = on_root && send == recv ? MPI_IN_PLACE : send;
    if (source == MPI_IN_PLACE && root != 0 && in_place_reduce_crashes_) {
      // MPICH 4.0.2-4.1.x crashes in MPI_Reduce(MPI_IN_PLACE) at a root other
      // than 0 from a few KiB (pmodels/mpich#6540): reduce from a copy.
      if (scratch_.size() < count * element_size(type)) scratch_.resize(count * element_size(type));
      std::memcpy(scratch_.data(), send, count * element_size(type));
      source = scratch_.data();
    }
    if (op == ReduceOp::kMulSum) {
      // No MPI op for it: this rank's input times its scalar in a scratch
      // buffer (a non-root's recv is not touched), then an MPI sum from there.
      if (scratch_.size() < count * element_size(type)) scratch_.resize(count * element_size(type));
      premultiply_elements(scratch_.data(), send, count, type, premul_scalar(rank_));
      source = scratch_.data();
    }
    collective(
        "MPI_Reduce",
        [&] {
          return MPI_Reduce(source, recv, mpi_count, mpi_type(type), mpi_op(type, op), root, comm_);
        },
        [&](MPI_Request* r) {
          return MPI_Ireduce(source, recv, mpi_count, mpi_type(type), mpi_op(type, op), root, comm_,
                             r);
        });
    if (op == ReduceOp::kAvg && on_root) divide_by_size(recv, count, type);
  }

  void gather(const void* send, void* recv, size_t send_count, DataType type, int root) override {
    const size_t block = send_count * element_size(type);
    const bool in_place = rank_ == root && send == static_cast<const char*>(recv) +
                                                       static_cast<size_t>(rank_) * block;
    const void* source = in_place ? MPI_IN_PLACE : send;
    const int count = to_int_count(send_count);
    collective(
        "MPI_Gather",
        [&] {
          return MPI_Gather(source, count, mpi_type(type), recv, count, mpi_type(type), root,
                            comm_);
        },
        [&](MPI_Request* r) {
          return MPI_Igather(source, count, mpi_type(type), recv, count, mpi_type(type), root,
                             comm_, r);
        });
  }

  void scatter(const void* send, void* recv, size_t recv_count, DataType type, int root) override {
    const size_t block = recv_count * element_size(type);
    const bool in_place = rank_ == root && recv == static_cast<const char*>(send) +
                                                       static_cast<size_t>(rank_) * block;
    void* target = in_place ? MPI_IN_PLACE : recv;
    const int count = to_int_count(recv_count);
    collective(
        "MPI_Scatter",
        [&] {
          return MPI_Scatter(send, count, mpi_type(type), target, count, mpi_type(type), root,
                             comm_);
        },
        [&](MPI_Request* r) {
          return MPI_Iscatter(send, count, mpi_type(type), target, count, mpi_type(type), root,
                              comm_, r);
        });
  }

  void all_to_all_v(const void* send, std::span<const size_t> send_counts,
                    std::span<const size_t> send_displacements, void* recv,
                    std::span<const size_t> recv_counts, std::span<const size_t> recv_displacements,
                    DataType type) override {
    check_all_to_all_v_spans(*this, send_counts, send_displacements, recv_counts,
                             recv_displacements);
    auto ints = [](std::span<const size_t> values) {
      std::vector<int> out;
      for (size_t v : values) out.push_back(to_int_count(v));
      return out;
    };
    const std::vector<int> sc = ints(send_counts), sd = ints(send_displacements),
                           rc = ints(recv_counts), rd = ints(recv_displacements);
    collective(
        "MPI_Alltoallv",
        [&] {
          return MPI_Alltoallv(send, sc.data(), sd.data(), mpi_type(type), recv, rc.data(),
                               rd.data(), mpi_type(type), comm_);
        },
        [&](MPI_Request* r) {
          return MPI_Ialltoallv(send, sc.data(), sd.data(), mpi_type(type), recv, rc.data(),
                                rd.data(), mpi_type(type), comm_, r);
        });
  }

  void send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count,
                 DataType type) override {
    constexpr int kTag = 7101;
    check_mpi(MPI_Sendrecv(send, to_int_count(count), mpi_type(type), send_peer, kTag, recv,
                           to_int_count(count), mpi_type(type), recv_peer, kTag, comm_,
                           MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
  }

  // Every receive posted (in the order listed, so MPI's non-overtaking rule
  // matches a pair's messages in that order), then every send, then all
  // completed together. A tag of its own keeps the batch apart from send_recv.
  void batch_send_recv(std::span<const PeerSend> sends, std::span<const PeerRecv> recvs,
                       DataType type) override {
    constexpr int kBatchTag = 7102;
    // Checked before anything is posted, so that nothing is left in flight.
    std::vector<int> send_counts, recv_counts;
    for (const PeerSend& s : sends) {
      check_peer(s.peer, "send");
      send_counts.push_back(to_int_count(s.count));
    }
    for (const PeerRecv& r : recvs) {
      check_peer(r.peer, "receive");
      recv_counts.push_back(to_int_count(r.count));
    }
    const MPI_Datatype mpi_element = mpi_type(type);
    std::vector<MPI_Request> requests;
    requests.reserve(recvs.size() + sends.size());
    auto post = [&](int code, const char* call) {
      if (code == MPI_SUCCESS) return;
      // Nothing may write into the caller's buffers after we throw: cancel the
      // posted receives; the posted sends complete (or fail) on their own.
      for (size_t i = 0; i < requests.size(); ++i) {
        if (i < recvs.size()) MPI_Cancel(&requests[i]);
        MPI_Request_free(&requests[i]);
      }
      check_mpi(code, call);
    };
    for (size_t i = 0; i < recvs.size(); ++i) {
      MPI_Request request = MPI_REQUEST_NULL;
      post(MPI_Irecv(recvs[i].data, recv_counts[i], mpi_element, recvs[i].peer, kBatchTag, comm_,
                     &request),
           "MPI_Irecv (batch_send_recv)");
      requests.push_back(request);
    }
    for (size_t i = 0; i < sends.size(); ++i) {
      MPI_Request request = MPI_REQUEST_NULL;
      post(MPI_Isend(sends[i].data, send_counts[i], mpi_element, sends[i].peer, kBatchTag, comm_,
                     &request),
           "MPI_Isend (batch_send_recv)");
      requests.push_back(request);
    }
    if (requests.empty()) return;
    std::vector<MPI_Status> statuses(requests.size());
    const int count = static_cast<int>(requests.size());
    const char* call =
        yielding_waits_ ? "MPI_Testall (batch_send_recv)" : "MPI_Waitall (batch_send_recv)";
    int code = MPI_SUCCESS;
    if (!yielding_waits_) {
      code = MPI_Waitall(count, requests.data(), statuses.data());
    } else {
      code = detail::test_yielding(
          [&](int* done) { return MPI_Testall(count, requests.data(), done, statuses.data()); });
    }
    if (code == MPI_ERR_IN_STATUS) {
      // The failed request's own error, not the generic "error in status".
      for (const MPI_Status& status : statuses) {
        if (status.MPI_ERROR != MPI_SUCCESS && status.MPI_ERROR != MPI_ERR_PENDING) {
          code = status.MPI_ERROR;
          break;
        }
      }
    }
    check_mpi(code, call);
    // MPI accepts a message shorter than the receive; the interface wants them equal.
    for (size_t i = 0; i < recvs.size(); ++i) {
      int received = 0;
      check_mpi(MPI_Get_count(&statuses[i], mpi_element, &received), "MPI_Get_count");
      if (received != recv_counts[i]) {
        throw BackendError("MPI backend: batch_send_recv received " + std::to_string(received) +
                           " elements from rank " + std::to_string(recvs[i].peer) + ", expected " +
                           std::to_string(recv_counts[i]) + " (the peer sent a different count)");
      }
    }
  }

  void wait(std::chrono::milliseconds) override {}  // every MPI call above is blocking

  std::unique_ptr<StampClock> make_clock(size_t stamps) override {
    return std::make_unique<HostStampClock>(stamps);
  }

 private:
  // The blocking call, or with yielding waits its nonblocking form tested
  // until done, yielding the core between tests, so that the rank's other
  // threads compute while the collective waits for peers, as gloo's waits
  // sleep in the kernel.
  template <typename Blocking, typename Nonblocking>
  void collective(const char* what, Blocking blocking, Nonblocking nonblocking) {
    detail::call_waiting(yielding_waits_, what, blocking, nonblocking);
  }

  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_) {
      throw UsageError("MPI backend: batch_send_recv " + std::string(what) + " peer " +
                       std::to_string(peer) + " is not a rank of this communicator (0.." +
                       std::to_string(size_ - 1) + ")");
    }
  }

  void reduce_scatter_block(const void* send, void* recv, int count, DataType type, ReduceOp op) {
    collective(
        "MPI_Reduce_scatter_block",
        [&] {
          return MPI_Reduce_scatter_block(send, recv, count, mpi_type(type), mpi_op(type, op),
                                          comm_);
        },
        [&](MPI_Request* r) {
          return MPI_Ireduce_scatter_block(send, recv, count, mpi_type(type), mpi_op(type, op),
                                           comm_, r);
        });
  }

  MPI_Datatype mpi_type(DataType type) const {
    switch (type) {
      case DataType::kFloat32:
        return MPI_FLOAT;
      case DataType::kFloat64:
        return MPI_DOUBLE;
      case DataType::kFloat16:
        return g_float16;
      case DataType::kBFloat16:
        return g_bfloat16;
      case DataType::kInt32:
        return MPI_INT32_T;
      case DataType::kInt8:
        return MPI_INT8_T;
      case DataType::kUInt8:
        return MPI_UINT8_T;
      case DataType::kUInt32:
        return MPI_UINT32_T;
      case DataType::kInt64:
        return MPI_INT64_T;
      case DataType::kUInt64:
        return MPI_UINT64_T;
      case DataType::kFloat8E4M3:
        return g_fp8_e4m3;
      case DataType::kFloat8E5M2:
        return g_fp8_e5m2;
    }
    throw UsageError("unsupported data type");
  }

  // MPI's own op wherever MPI has one, even where a library is known to get
  // it wrong (MPICH 4.0 compares unsigned integers as signed in MPI_MIN/MAX,
  // pmodels/mpich#6083): the bench measures and checks this MPI, and a wrong
  // result is reported, never replaced by ccscope's own arithmetic.
  MPI_Op mpi_op(DataType type, ReduceOp op) const {
    const bool opaque = is_opaque(type);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:     // sum, then divide_by_size
      case ReduceOp::kMulSum:  // premultiplied, then sum
        return opaque ? op_sum_opaque_ : MPI_SUM;
      case ReduceOp::kProd:
        return opaque ? op_prod_opaque_ : MPI_PROD;
      case ReduceOp::kMin:
        return opaque ? op_min_opaque_ : MPI_MIN;
      case ReduceOp::kMax:
        return opaque ? op_max_opaque_ : MPI_MAX;
    }
    throw UsageError("unsupported reduction");
  }

  // avg = sum / ranks, divided in the element type (integers truncate, as NCCL).
  void divide_by_size(void* data, size_t count, DataType type) const {
    divide_elements(data, count, type, size_);
  }

  MPI_Comm comm_;
  bool owned_;
  bool yielding_waits_;
  bool in_place_reduce_crashes_ = false;
  int rank_ = 0;
  int size_ = 1;
  MPI_Op op_sum_opaque_ = MPI_OP_NULL;
  MPI_Op op_prod_opaque_ = MPI_OP_NULL;
  MPI_Op op_min_opaque_ = MPI_OP_NULL;
  MPI_Op op_max_opaque_ = MPI_OP_NULL;
  std::vector<unsigned char> scratch_;  // kMulSum reduce_scatter's and reduce's premultiplied input
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const World& world) {
  return make_mpi_communicator(world, MpiOptions{});
}

std::unique_ptr<Communicator> make_mpi_communicator(const World& world, const MpiOptions& options) {
  if (options.color) {
    if (options.first_ranks != 0)
      throw UsageError("MpiOptions: first_ranks and color both set; a communicator takes one");
    // Collective over the world: every rank splits, also one that joins none.
    MPI_Comm sub = MPI_COMM_NULL;
    const int color = *options.color < 0 ? MPI_UNDEFINED : *options.color;
    check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color, world.rank(), &sub), "MPI_Comm_split");
    if (sub == MPI_COMM_NULL) return nullptr;
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    return std::make_unique<MpiCommunicator>(sub, true, options.yielding_waits);
  }
  if (options.first_ranks == 0 || options.first_ranks == world.size())
    return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, false, options.yielding_waits);
  if (options.first_ranks < 0 || options.first_ranks > world.size())
    throw UsageError("a communicator of the first " + std::to_string(options.first_ranks) +
                     " ranks needs 1 to " + std::to_string(world.size()) + " ranks");
  MPI_Comm sub = MPI_COMM_NULL;
  const int color = world.rank() < options.first_ranks ? 0 : MPI_UNDEFINED;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color, world.rank(), &sub), "MPI_Comm_split");
  if (sub == MPI_COMM_NULL) return nullptr;
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  return std::make_unique<MpiCommunicator>(sub, true, options.yielding_waits);
}

}  // namespace ccscope
