// The MPI backend: host memory, one MPI call per collective on MPI_COMM_WORLD.
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/reference_algorithms.h"
#include "host_memory.h"
#include "mpi_error.h"

namespace ccscope {
namespace {

using detail::check_mpi;

// MPI has no 16-bit float types: both are carried as 2-byte opaque types and
// reduced by our own MPI_Op. Two distinct handles let the op tell them apart.
MPI_Datatype g_float16 = MPI_DATATYPE_NULL;
MPI_Datatype g_bfloat16 = MPI_DATATYPE_NULL;

// The MPI user function: inout[i] = in[i] op inout[i], through the reference
// algorithms' local kernel (computes in float, rounds once per step).
void reduce_16bit(void* in, void* inout, int* length, MPI_Datatype* type, ReduceOp op) {
  const DataType element = *type == g_float16 ? DataType::kFloat16 : DataType::kBFloat16;
  reduce_elements(inout, in, inout, static_cast<size_t>(*length), element, op);
}
void sum_16bit(void* in, void* inout, int* n, MPI_Datatype* t) {
  reduce_16bit(in, inout, n, t, ReduceOp::kSum);
}
void prod_16bit(void* in, void* inout, int* n, MPI_Datatype* t) {
  reduce_16bit(in, inout, n, t, ReduceOp::kProd);
}
void min_16bit(void* in, void* inout, int* n, MPI_Datatype* t) {
  reduce_16bit(in, inout, n, t, ReduceOp::kMin);
}
void max_16bit(void* in, void* inout, int* n, MPI_Datatype* t) {
  reduce_16bit(in, inout, n, t, ReduceOp::kMax);
}

int to_int_count(size_t count) {
  if (count > static_cast<size_t>(INT_MAX))
    throw UsageError("MPI backend: " + std::to_string(count) +
                     " elements exceed MPI's int count limit (2^31-1); use a smaller -e");
  return static_cast<int>(count);
}

using detail::HostBuffer;
using detail::HostStampClock;

class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(const World& world) : rank_(world.rank()), size_(world.size()) {
    if (g_float16 == MPI_DATATYPE_NULL) {
      check_mpi(MPI_Type_contiguous(2, MPI_BYTE, &g_float16), "MPI_Type_contiguous");
      check_mpi(MPI_Type_commit(&g_float16), "MPI_Type_commit");
      check_mpi(MPI_Type_contiguous(2, MPI_BYTE, &g_bfloat16), "MPI_Type_contiguous");
      check_mpi(MPI_Type_commit(&g_bfloat16), "MPI_Type_commit");
    }
    check_mpi(MPI_Op_create(sum_16bit, 1, &op_sum_16_), "MPI_Op_create");
    check_mpi(MPI_Op_create(prod_16bit, 1, &op_prod_16_), "MPI_Op_create");
    check_mpi(MPI_Op_create(min_16bit, 1, &op_min_16_), "MPI_Op_create");
    check_mpi(MPI_Op_create(max_16bit, 1, &op_max_16_), "MPI_Op_create");
  }
  ~MpiCommunicator() override {
    for (MPI_Op* op : {&op_sum_16_, &op_prod_16_, &op_min_16_, &op_max_16_})
      if (*op != MPI_OP_NULL) MPI_Op_free(op);
    for (MPI_Datatype* type : {&g_float16, &g_bfloat16})
      if (*type != MPI_DATATYPE_NULL) MPI_Type_free(type);  // resets the handle to NULL
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::string backend_name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MemoryKind memory_kind() const override { return MemoryKind::kHost; }
  std::string device_name() const override { return "cpu"; }

  size_t max_count() const override { return static_cast<size_t>(INT_MAX); }
  std::unique_ptr<Buffer> allocate(size_t bytes) override {
    return std::make_unique<HostBuffer>(bytes);
  }
  void copy_from_host(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) override {
    std::memcpy(static_cast<char*>(dst.data()) + dst_offset, src, bytes);
  }
  void copy_to_host(void* dst, const Buffer& src, size_t src_offset, size_t bytes) override {
    std::memcpy(dst, static_cast<const char*>(const_cast<Buffer&>(src).data()) + src_offset, bytes);
  }

  void all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    const void* source = send == recv ? MPI_IN_PLACE : send;
    check_mpi(MPI_Allreduce(source, recv, to_int_count(count), mpi_type(type), mpi_op(type, op),
                            MPI_COMM_WORLD),
              "MPI_Allreduce");
    if (op == ReduceOp::kAvg) divide_by_size(recv, count, type);
  }

  void all_gather(const void* send, void* recv, size_t send_count, DataType type) override {
    const size_t block = send_count * element_size(type);
    const bool in_place =
        send == static_cast<const char*>(recv) + static_cast<size_t>(rank_) * block;
    check_mpi(
        MPI_Allgather(in_place ? MPI_IN_PLACE : send, to_int_count(send_count), mpi_type(type),
                      recv, to_int_count(send_count), mpi_type(type), MPI_COMM_WORLD),
        "MPI_Allgather");
  }

  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                      ReduceOp op) override {
    const size_t block = recv_count * element_size(type);
    char* own_block =
        const_cast<char*>(static_cast<const char*>(send)) + static_cast<size_t>(rank_) * block;
    if (recv == own_block) {
      // MPI's in-place form leaves the result at the start of the buffer;
      // NCCL's convention (and ccscope's) wants it in the rank's own block.
      void* whole = const_cast<void*>(send);
      check_mpi(MPI_Reduce_scatter_block(MPI_IN_PLACE, whole, to_int_count(recv_count),
                                         mpi_type(type), mpi_op(type, op), MPI_COMM_WORLD),
                "MPI_Reduce_scatter_block");
      if (rank_ != 0) std::memmove(own_block, whole, block);
    } else {
      check_mpi(MPI_Reduce_scatter_block(send, recv, to_int_count(recv_count), mpi_type(type),
                                         mpi_op(type, op), MPI_COMM_WORLD),
                "MPI_Reduce_scatter_block");
    }
    if (op == ReduceOp::kAvg) divide_by_size(recv, recv_count, type);
  }

  void broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    // Out of place, the root's own output must also hold the data (NCCL semantics).
    if (rank_ == root && send != recv) std::memcpy(recv, send, count * element_size(type));
    check_mpi(MPI_Bcast(recv, to_int_count(count), mpi_type(type), root, MPI_COMM_WORLD),
              "MPI_Bcast");
  }

  void all_to_all(const void* send, void* recv, size_t count_per_peer, DataType type) override {
    check_mpi(MPI_Alltoall(send == recv ? MPI_IN_PLACE : send, to_int_count(count_per_peer),
                           mpi_type(type), recv, to_int_count(count_per_peer), mpi_type(type),
                           MPI_COMM_WORLD),
              "MPI_Alltoall");
  }

  void send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count,
                 DataType type) override {
    constexpr int kTag = 7101;
    check_mpi(MPI_Sendrecv(send, to_int_count(count), mpi_type(type), send_peer, kTag, recv,
                           to_int_count(count), mpi_type(type), recv_peer, kTag, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
  }

  void wait(std::chrono::milliseconds) override {}  // every MPI call above is blocking

  std::unique_ptr<StampClock> make_clock(size_t stamps) override {
    return std::make_unique<HostStampClock>(stamps);
  }

 private:
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
    }
    throw UsageError("unsupported data type");
  }

  MPI_Op mpi_op(DataType type, ReduceOp op) const {
    const bool sixteen = type == DataType::kFloat16 || type == DataType::kBFloat16;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:  // sum, then divide_by_size
        return sixteen ? op_sum_16_ : MPI_SUM;
      case ReduceOp::kProd:
        return sixteen ? op_prod_16_ : MPI_PROD;
      case ReduceOp::kMin:
        return sixteen ? op_min_16_ : MPI_MIN;
      case ReduceOp::kMax:
        return sixteen ? op_max_16_ : MPI_MAX;
    }
    throw UsageError("unsupported reduction");
  }

  // avg = sum / ranks, divided in the element type (integers truncate, as NCCL).
  void divide_by_size(void* data, size_t count, DataType type) const {
    divide_elements(data, count, type, size_);
  }

  int rank_;
  int size_;
  MPI_Op op_sum_16_ = MPI_OP_NULL;
  MPI_Op op_prod_16_ = MPI_OP_NULL;
  MPI_Op op_min_16_ = MPI_OP_NULL;
  MPI_Op op_max_16_ = MPI_OP_NULL;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const World& world) {
  return std::make_unique<MpiCommunicator>(world);
}

}  // namespace ccscope
