// The NCCL backend: one GPU per rank, device buffers, a CUDA stream per
// communicator, collectives enqueued on that stream (they return before they
// complete; wait() completes them with a timeout), CUDA-event timestamps.
//
// Compiled only when CUDA and NCCL were found (CCSCOPE_HAVE_NCCL); plain C++,
// no device code of our own.
//
// Follows nccl-tests 2.19 where it has a choice: buffers from ncclMemAlloc
// (NCCL >= 2.19), ncclAlltoAll (NCCL >= 2.28), the communicator config of its
// initComms (defaults, nvlinkCentricSched = 1 from 2.28), mulsum as
// ncclRedOpCreatePreMulSum with the rank's scalar, fp8 only from NCCL 2.24 on
// GPUs of compute capability >= 9.0, CUDA graphs captured thread-local. The
// decisions themselves are in nccl_choices.h (unit-tested without a GPU).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/types.h"
#include "ccscope/collectives/world.h"
#include "group_membership.h"
#include "nccl_choices.h"

#if !defined(NCCL_VERSION_CODE) || !defined(NCCL_VERSION)
#error "nccl.h without NCCL_VERSION_CODE; NCCL 2.x is required"
#endif

// Features by NCCL release (ncclBfloat16 also needs CUDA >= 11's cuda_bf16.h).
#define CCSCOPE_NCCL_HAS_AVG (NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0))
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0) && defined(__CUDA_BF16_TYPES_EXIST__)
#define CCSCOPE_NCCL_HAS_BF16 1
#else
#define CCSCOPE_NCCL_HAS_BF16 0
#endif
#define CCSCOPE_NCCL_HAS_PREMULSUM (NCCL_VERSION_CODE >= NCCL_VERSION(2, 11, 0))
#define CCSCOPE_NCCL_HAS_LAST_ERROR (NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0))
#define CCSCOPE_NCCL_HAS_FINALIZE (NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0))
// ncclConfig_t, ncclCommInitRankConfig and ncclInProgress (non-blocking mode).
#define CCSCOPE_NCCL_HAS_CONFIG (NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0))
#define CCSCOPE_NCCL_HAS_MEM_ALLOC (NCCL_VERSION_CODE >= NCCL_VERSION(2, 19, 0))
#define CCSCOPE_NCCL_HAS_FP8 (NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0))
#define CCSCOPE_NCCL_HAS_ALLTOALL (NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0))
#define CCSCOPE_NCCL_HAS_NVLINK_CENTRIC_SCHED (NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0))
// CUDA graphs as nccl-tests uses them (-G needs CUDA >= 11.3 there); ccscope
// instantiates with cudaGraphInstantiateWithFlags (CUDA >= 11.4).
#define CCSCOPE_CUDA_HAS_GRAPHS (CUDART_VERSION >= 11040)

namespace ccscope {
namespace {

using Clock = std::chrono::steady_clock;

// Pause between two polls of a non-blocking NCCL call's state (init,
// finalize, ncclInProgress); the stream itself is polled with a yield instead
// (poll_until_done), as nccl-tests does, for the first kSpinFor of a wait.
constexpr std::chrono::microseconds kPollInterval{50};
// A wait longer than this polls the stream every kLongWaitPoll instead of
// spinning: its time is not rounded up by more than 0.2 %, and a hang that
// runs into --timeout does not keep a core busy all that while.
constexpr std::chrono::milliseconds kSpinFor{10};
constexpr std::chrono::microseconds kLongWaitPoll{20};
// Host staging for copies: two pinned chunks of this size per communicator.
constexpr size_t kStagingChunkBytes = size_t{8} << 20;
// Bound on the wait for copies when wait() has not set one yet.
constexpr std::chrono::milliseconds kDefaultSyncTimeout{std::chrono::minutes(5)};
// How long the destructor lets queued work drain before it aborts instead.
constexpr std::chrono::milliseconds kDestructorDrain{std::chrono::seconds(10)};
// Bound on a non-blocking communicator's initialization (NCCL_COMM_BLOCKING=0).
constexpr std::chrono::milliseconds kInitTimeout{std::chrono::minutes(5)};

namespace choices = nccl_choices;
// The tested decisions and the compile-time guards say the same.
static_assert(choices::uses_init_rank_config(NCCL_VERSION_CODE) == CCSCOPE_NCCL_HAS_CONFIG);
static_assert(choices::sets_nvlink_centric_sched(NCCL_VERSION_CODE) ==
              CCSCOPE_NCCL_HAS_NVLINK_CENTRIC_SCHED);
static_assert((choices::choose_allocator(NCCL_VERSION_CODE, NCCL_VERSION_CODE) ==
               choices::Allocator::kNcclMemAlloc) == CCSCOPE_NCCL_HAS_MEM_ALLOC);
static_assert((choices::choose_all_to_all(NCCL_VERSION_CODE, NCCL_VERSION_CODE) ==
               choices::AllToAll::kNcclAlltoAll) == CCSCOPE_NCCL_HAS_ALLTOALL);

// True for NCCL's "still in progress" result of a non-blocking communicator.
bool in_progress(ncclResult_t result) {
#if CCSCOPE_NCCL_HAS_CONFIG
  return result == ncclInProgress;
#else
  (void)result;
  return false;
#endif
}

int nccl_library_code() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return 0;
  return code;
}

std::string cuda_text(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

std::string nccl_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
#if CCSCOPE_NCCL_HAS_LAST_ERROR
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') text += std::string(" (") + last + ")";
#else
  (void)comm;
#endif
  return text;
}

std::string rank_prefix(int rank) { return "rank " + std::to_string(rank) + ": "; }

void check_cuda(cudaError_t error, const char* call, int rank) {
  if (error == cudaSuccess) return;
  throw BackendError(rank_prefix(rank) + call + " failed: " + cuda_text(error));
}

void check_nccl(ncclResult_t result, const char* call, int rank, ncclComm_t comm) {
  if (result == ncclSuccess) return;
  throw BackendError(rank_prefix(rank) + call + " failed: " + nccl_text(result, comm));
}

std::string seconds_text(std::chrono::milliseconds timeout) {
  const double seconds = static_cast<double>(timeout.count()) / 1e3;
  std::string text = std::to_string(seconds);
  // "120.000000" -> "120", "0.500000" -> "0.5"
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text + " s";
}

ncclDataType_t to_nccl(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
#if CCSCOPE_NCCL_HAS_BF16
      return ncclBfloat16;
#else
      throw UsageError(
          "bfloat16 needs NCCL >= 2.10 and CUDA >= 11 at build time; use another -d/--datatype");
#endif
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUInt8:
      return ncclUint8;
    case DataType::kUInt32:
      return ncclUint32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kUInt64:
      return ncclUint64;
    // fp8 also needs GPUs of compute capability >= 9.0: NcclCommunicator::nccl_type
    // checks that before it gets here.
    case DataType::kFloat8E4M3:
#if CCSCOPE_NCCL_HAS_FP8
      return ncclFloat8e4m3;
#else
      throw UsageError(choices::fp8_unsupported_reason(NCCL_VERSION_CODE, 0, 0));
#endif
    case DataType::kFloat8E5M2:
#if CCSCOPE_NCCL_HAS_FP8
      return ncclFloat8e5m2;
#else
      throw UsageError(choices::fp8_unsupported_reason(NCCL_VERSION_CODE, 0, 0));
#endif
  }
  throw UsageError("unknown data type for the NCCL backend");
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kAvg:
#if CCSCOPE_NCCL_HAS_AVG
      return ncclAvg;
#else
      throw UsageError("reduce op avg needs NCCL >= 2.10; use sum");
#endif
    case ReduceOp::kMulSum:
      // Made per communicator and type: NcclCommunicator::nccl_op.
      break;
  }
  throw UsageError("unknown reduce op for the NCCL backend");
}

// ---- RAII handles -----------------------------------------------------------

class Stream {
 public:
  explicit Stream(int rank) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags", rank);
  }
  ~Stream() {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event(unsigned int flags, int rank) {
    check_cuda(cudaEventCreateWithFlags(&event_, flags), "cudaEventCreateWithFlags", rank);
  }
  ~Event() {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class PinnedHost {
 public:
  PinnedHost(size_t bytes, int rank) {
    check_cuda(cudaMallocHost(&data_, bytes), "cudaMallocHost (copy staging)", rank);
  }
  ~PinnedHost() {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
  }
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;
  char* get() const { return static_cast<char*>(data_); }

 private:
  void* data_ = nullptr;
};

// Device memory from ncclMemAlloc (NCCL >= 2.19, as nccl-tests allocates: memory
// NCCL can register for NVLS/CollNet/user-buffer paths) or cudaMalloc.
class DeviceBuffer : public Buffer {
 public:
  DeviceBuffer(size_t bytes, int device, int rank, cudaStream_t stream,
               choices::Allocator allocator)
      : bytes_(bytes), device_(device), allocator_(allocator) {
    if (bytes == 0) return;
    const std::string what = std::string(choices::name(allocator)) + " of " +
                             std::to_string(bytes) + " bytes on GPU " + std::to_string(device);
    if (allocator_ == choices::Allocator::kNcclMemAlloc) {
#if CCSCOPE_NCCL_HAS_MEM_ALLOC
      const ncclResult_t result = ncclMemAlloc(&data_, bytes);
      if (result != ncclSuccess || data_ == nullptr) {
        data_ = nullptr;
        (void)cudaGetLastError();  // a runtime error it may have left behind
        throw BackendError(rank_prefix(rank) + what + " failed: " +
                           (result != ncclSuccess ? nccl_text(result, nullptr)
                                                  : std::string("it returned a null pointer")));
      }
#else
      throw BackendError(rank_prefix(rank) + what + ": this build's NCCL has no ncclMemAlloc");
#endif
    } else {
      const cudaError_t error = cudaMalloc(&data_, bytes);
      if (error != cudaSuccess) {
        data_ = nullptr;
        (void)cudaGetLastError();  // clear the (non-sticky) allocation error
        throw BackendError(rank_prefix(rank) + what + " failed: " + cuda_text(error));
      }
    }
    // Stream-ordered, so every later operation on the communicator's stream
    // sees zeros; the stream is non-blocking, so a plain cudaMemset (legacy
    // default stream) would not be ordered before it.
    const cudaError_t set = cudaMemsetAsync(data_, 0, bytes, stream);
    if (set != cudaSuccess) {
      release();
      check_cuda(set, "cudaMemsetAsync", rank);
    }
  }
  ~DeviceBuffer() override {
    if (data_ == nullptr) return;
    (void)cudaSetDevice(device_);
    release();
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void release() noexcept {
    if (data_ == nullptr) return;
#if CCSCOPE_NCCL_HAS_MEM_ALLOC
    if (allocator_ == choices::Allocator::kNcclMemAlloc) {
      (void)ncclMemFree(data_);
      data_ = nullptr;
      return;
    }
#endif
    (void)cudaFree(data_);
    data_ = nullptr;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
  choices::Allocator allocator_ = choices::Allocator::kCudaMalloc;
};

// The CUDA graph of Communicator::capture(): graph and executable destroyed
// with it. Holds the stream (shared) and the communicator's liveness check, so
// a launch after the communicator went fails with a message instead of using a
// destroyed communicator's resources.
class CudaGraph : public CapturedOperations {
 public:
  CudaGraph(cudaGraph_t graph, cudaGraphExec_t exec, std::shared_ptr<Stream> stream, int device,
            int rank, std::shared_ptr<std::function<void()>> alive)
      : graph_(graph),
        exec_(exec),
        stream_(std::move(stream)),
        device_(device),
        rank_(rank),
        alive_(std::move(alive)) {}
  ~CudaGraph() override {
    (void)cudaSetDevice(device_);
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void launch() override {
    if (!alive_ || !*alive_) {
      throw UsageError(rank_prefix(rank_) +
                       "captured NCCL operations launched after their communicator was destroyed");
    }
    check_cuda(cudaSetDevice(device_), "cudaSetDevice", rank_);
    check_cuda(cudaGraphLaunch(exec_, stream_->get()), "cudaGraphLaunch", rank_);
  }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::shared_ptr<Stream> stream_;
  int device_ = 0;
  int rank_ = 0;
  std::shared_ptr<std::function<void()>> alive_;
};

// Checks NCCL's asynchronous error state; throws on an error. Shared with the
// clocks a communicator makes and emptied when the communicator goes.
using AsyncErrorCheck = std::shared_ptr<std::function<void()>>;

// Timestamps as CUDA events recorded on the communicator's stream. Holds the
// stream (shared) so a clock that outlives its communicator stays valid.
class EventClock : public StampClock {
 public:
  EventClock(size_t stamps, std::shared_ptr<Stream> stream, int device, int rank,
             AsyncErrorCheck async_error_check)
      : stream_(std::move(stream)),
        device_(device),
        rank_(rank),
        async_error_check_(std::move(async_error_check)),
        recorded_(stamps, false) {
    events_.reserve(stamps);
    for (size_t i = 0; i < stamps; ++i) events_.emplace_back(cudaEventDefault, rank);
  }

  void stamp(size_t index) override {
    check_index(index, "stamp");
    check_cuda(cudaEventRecord(events_[index].get(), stream_->get()), "cudaEventRecord", rank_);
    recorded_[index] = true;
  }

  double seconds_between(size_t first, size_t second) override {
    check_index(first, "seconds_between");
    check_index(second, "seconds_between");
    if (!recorded_[first] || !recorded_[second]) {
      throw UsageError(rank_prefix(rank_) + "seconds_between(" + std::to_string(first) + ", " +
                       std::to_string(second) + ") asks for a stamp that was never taken");
    }
    (void)cudaSetDevice(device_);
    float milliseconds = 0.0f;
    const cudaError_t error =
        cudaEventElapsedTime(&milliseconds, events_[first].get(), events_[second].get());
    if (error == cudaErrorNotReady) {
      throw UsageError(rank_prefix(rank_) +
                       "CUDA event stamps read before Communicator::wait() completed them");
    }
    check_cuda(error, "cudaEventElapsedTime", rank_);
    return static_cast<double>(milliseconds) / 1e3;
  }

  bool completed(size_t index) override {
    check_index(index, "completed");
    if (!recorded_[index]) return false;
    (void)cudaSetDevice(device_);
    const cudaError_t status = cudaEventQuery(events_[index].get());
    if (status == cudaErrorNotReady) {
      // A failed NCCL operation never completes its event: report NCCL's error
      // now instead of letting the caller wait for its timeout.
      if (async_error_check_ && *async_error_check_) (*async_error_check_)();
      return false;
    }
    check_cuda(status, "cudaEventQuery", rank_);
    return true;
  }

 private:
  void check_index(size_t index, const char* what) const {
    if (index >= events_.size()) {
      throw UsageError(rank_prefix(rank_) + what + ": stamp index " + std::to_string(index) +
                       " out of range (clock has " + std::to_string(events_.size()) + " stamps)");
    }
  }

  std::shared_ptr<Stream> stream_;
  int device_ = 0;
  int rank_ = 0;
  AsyncErrorCheck async_error_check_;
  std::vector<Event> events_;
  std::vector<bool> recorded_;
};

// ---- set-up helpers ---------------------------------------------------------

// What one rank found in the local part of set-up (GPU, stream, unique id),
// shared with every rank so that all of them fail together instead of some
// waiting forever for the ncclUniqueId broadcast.
struct SetupFailure {
  enum Kind : char { kNone = '0', kUsage = 'U', kBackend = 'B' };
  Kind kind = kNone;
  std::string message;
};

[[noreturn]] void throw_failure(const SetupFailure& failure) {
  if (failure.kind == SetupFailure::kUsage) throw UsageError(failure.message);
  throw BackendError(failure.message);
}

// Collective over the world: every rank calls it with its own outcome. Throws
// on every rank when any rank failed (a rank's own failure first, else the
// first failing rank's message).
void agree_on_setup(const World& world, const SetupFailure& mine) {
  if (world.size() <= 1) {
    if (mine.kind != SetupFailure::kNone) throw_failure(mine);
    return;
  }
  const std::string encoded = mine.kind == SetupFailure::kNone
                                  ? std::string()
                                  : static_cast<char>(mine.kind) + mine.message;
  const std::vector<std::string> all = world.all_gather(encoded);
  if (mine.kind != SetupFailure::kNone) throw_failure(mine);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    SetupFailure other;
    other.kind = all[r][0] == SetupFailure::kUsage ? SetupFailure::kUsage : SetupFailure::kBackend;
    other.message =
        "NCCL backend set-up failed on rank " + std::to_string(r) + ": " + all[r].substr(1);
    throw_failure(other);
  }
}

template <typename Fn>
SetupFailure failure_of(Fn&& fn) {
  SetupFailure failure;
  try {
    fn();
  } catch (const UsageError& e) {
    failure = {SetupFailure::kUsage, e.what()};
  } catch (const std::exception& e) {
    failure = {SetupFailure::kBackend, e.what()};
  }
  return failure;
}

// ---- the communicator -------------------------------------------------------

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const World& world, const NcclOptions& options) : world_rank_(world.rank()) {
    // This rank's group (the whole world unless options name a colour or the
    // first ranks): one gather tells every rank's colour.
    const int color = group_color(options.color, options.first_ranks, world.rank(), world.size());
    const GroupMembership group =
        world.size() > 1
            ? group_membership(parse_group_colors(world.all_gather(std::to_string(color))),
                               world.rank())
            : group_membership({color}, 0);
    rank_ = group.group_rank;
    size_ = static_cast<int>(group.members.size());
    if (options.isolate_ranks) {
      // Before any NCCL call that may look at the host identity: every rank
      // becomes its own "host", so NCCL connects ranks through its network
      // transport (and allows several ranks on one GPU). The variable stays
      // set for the rest of the process, as NCCL may read it at any init.
      const std::string host_id = "ccscope-rank-" + std::to_string(world_rank_);
      if (setenv("NCCL_HOSTID", host_id.c_str(), 1) != 0) {
        throw BackendError(rank_prefix(world_rank_) +
                           "setenv(NCCL_HOSTID) failed: " + std::strerror(errno));
      }
    }

    // Phase 1, local: pick the GPU, make the stream, each group's rank 0 makes
    // its id. Every rank of the world takes part in the agreements, also one
    // outside every group (it then makes no communicator).
    ncclUniqueId id{};
    int device_count = 0;
    agree_on_setup(
        world, failure_of([&] {
          select_device(world, device_count);
          stream_ = std::make_shared<Stream>(world_rank_);
          library_code_ = nccl_library_code();
          if (library_code_ <= 0) {
            throw BackendError(rank_prefix(world_rank_) +
                               "ncclGetVersion failed: cannot tell which NCCL is loaded");
          }
          if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", world_rank_, nullptr);
        }));
    decide(world, options);

    // Phase 2: every rank gets its group's id (from the group's first world
    // rank, in one gather of the world), then joins the communicator.
    if (world.size() > 1) {
      const std::vector<std::string> ids = world.all_gather(
          rank_ == 0 ? std::string(reinterpret_cast<const char*>(&id), sizeof(id)) : "");
      if (!group.inside()) return;
      const std::string& leader = ids[static_cast<size_t>(group.members.front())];
      if (leader.size() != sizeof(id)) {
        throw BackendError(rank_prefix(world_rank_) + "received an ncclUniqueId of " +
                           std::to_string(leader.size()) + " bytes from rank " +
                           std::to_string(group.members.front()) + ", expected " +
                           std::to_string(sizeof(id)));
      }
      std::memcpy(&id, leader.data(), sizeof(id));
    }
    if (!group.inside()) return;
      // No agreement round after this: a rank whose init failed must not wait
      // in an MPI collective while its peers may still wait for it inside NCCL's
      // bootstrap; it throws, and its peers see the broken bootstrap.
#if CCSCOPE_NCCL_HAS_CONFIG
    // As nccl-tests 2.19's initComms: NCCL's defaults (blocking included, so
    // NCCL_COMM_BLOCKING=0 still makes it non-blocking) and, from NCCL 2.28 on,
    // nvlinkCentricSched = 1.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
#if CCSCOPE_NCCL_HAS_NVLINK_CENTRIC_SCHED
    config.nvlinkCentricSched = 1;
#endif
    const char* init_call = "ncclCommInitRankConfig";
    ncclResult_t result = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
#else
    const char* init_call = "ncclCommInitRank";
    ncclResult_t result = ncclCommInitRank(&comm_, size_, id, rank_);
#endif
    if (in_progress(result) && comm_ != nullptr) {
      // Non-blocking communicator: initialization goes on in NCCL's threads.
      result = settle_init();
    }
    if (result != ncclSuccess) {
      // A non-blocking init hands out the communicator before it fails (it is
      // ours to abort); a failed blocking one leaves nothing to free.
      const ncclComm_t failed = blocking_ == 0 ? comm_ : nullptr;
      const std::string text = nccl_text(result, failed);
      if (failed != nullptr) (void)ncclCommAbort(failed);
      comm_ = nullptr;
      std::string message = rank_prefix(world_rank_) + init_call + " failed: " + text;
      if (result == ncclInvalidUsage && !options.isolate_ranks &&
          world.local_size() > device_count) {
        message += "; " + std::to_string(world.local_size()) + " ranks on host " +
                   world.hostname() + " share " + std::to_string(device_count) +
                   " GPU(s): run one rank per GPU, or use --isolate-ranks";
        // The launch, not the machine, is wrong: a usage error (exit 2).
        throw UsageError(message);
      }
      throw BackendError(message);
    }
  }

  ~NcclCommunicator() override {
    *async_error_check_ = nullptr;  // clocks and graphs that outlive this see it
    if (comm_ == nullptr) return;
    (void)cudaSetDevice(device_);
    // A group left open by an exception between group_start() and group_end():
    // close it, or every later NCCL call of this thread stays deferred.
    for (; group_depth_ > 0; --group_depth_) (void)ncclGroupEnd();
    if (drained_cleanly()) {
      destroy_premul_ops();
#if CCSCOPE_NCCL_HAS_FINALIZE
      ncclResult_t finalized = ncclCommFinalize(comm_);
      if (in_progress(finalized)) finalized = settle_quietly(kDestructorDrain);
      if (finalized == ncclSuccess) {
        (void)ncclCommDestroy(comm_);
      } else {
        (void)ncclCommAbort(comm_);
      }
#else
      (void)ncclCommDestroy(comm_);
#endif
    } else {
      (void)ncclCommAbort(comm_);
    }
    comm_ = nullptr;
    // Staging, stream and events go with their RAII members.
  }

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  std::optional<size_t> device_memory_available() const override {
    size_t free_bytes = 0, total = 0;
    if (cudaSetDevice(device_) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
    return free_bytes / static_cast<size_t>(std::max(ranks_on_device_, 1));
  }

  std::string unsupported_reason(DataType type) const override {
    const bool fp8 = type == DataType::kFloat8E4M3 || type == DataType::kFloat8E5M2;
    return fp8 ? fp8_unsupported_ : "";
  }

  std::string backend_name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MemoryKind memory_kind() const override { return MemoryKind::kDevice; }
  std::string device_name() const override { return device_name_; }
  int device_ordinal() const override { return device_; }
  void* device_stream() const override { return stream(); }

  std::unique_ptr<Buffer> allocate(size_t bytes) override {
    not_while_capturing("allocate");
    activate();
    return std::make_unique<DeviceBuffer>(bytes, device_, world_rank_, stream(), allocator_);
  }

  void copy_from_host(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) override {
    check_range(dst.bytes(), dst_offset, bytes, "copy_from_host");
    not_while_capturing("copy_from_host");
    if (bytes == 0) return;
    if (src == nullptr)
      throw UsageError(rank_prefix(world_rank_) + "copy_from_host from a null pointer");
    activate();
    ensure_staging();
    char* device = static_cast<char*>(dst.data()) + dst_offset;
    const char* host = static_cast<const char*>(src);
    // Double-buffered: fill one pinned chunk while the other one is in flight.
    size_t chunk_index = 0;
    for (size_t done = 0; done < bytes; ++chunk_index) {
      Staging& staging = *staging_[chunk_index % staging_.size()];
      if (staging.in_flight) sync_event(staging.done.get(), "copy_from_host");
      staging.in_flight = false;
      const size_t n = std::min(kStagingChunkBytes, bytes - done);
      std::memcpy(staging.host.get(), host + done, n);
      check_cuda(
          cudaMemcpyAsync(device + done, staging.host.get(), n, cudaMemcpyHostToDevice, stream()),
          "cudaMemcpyAsync (host to device)", world_rank_);
      check_cuda(cudaEventRecord(staging.done.get(), stream()), "cudaEventRecord", world_rank_);
      staging.in_flight = true;
      done += n;
    }
    for (auto& staging : staging_) {
      if (staging->in_flight) sync_event(staging->done.get(), "copy_from_host");
      staging->in_flight = false;
    }
  }

  void copy_to_host(void* dst, const Buffer& src, size_t src_offset, size_t bytes) override {
    check_range(src.bytes(), src_offset, bytes, "copy_to_host");
    not_while_capturing("copy_to_host");
    if (bytes == 0) return;
    if (dst == nullptr)
      throw UsageError(rank_prefix(world_rank_) + "copy_to_host into a null pointer");
    activate();
    ensure_staging();
    // Buffer::data() is non-const; the device memory is only read here.
    const char* device = static_cast<const char*>(const_cast<Buffer&>(src).data()) + src_offset;
    char* host = static_cast<char*>(dst);
    const size_t chunks = (bytes + kStagingChunkBytes - 1) / kStagingChunkBytes;
    auto chunk_bytes = [&](size_t i) {
      return std::min(kStagingChunkBytes, bytes - i * kStagingChunkBytes);
    };
    auto issue = [&](size_t i) {
      Staging& staging = *staging_[i % staging_.size()];
      check_cuda(cudaMemcpyAsync(staging.host.get(), device + i * kStagingChunkBytes,
                                 chunk_bytes(i), cudaMemcpyDeviceToHost, stream()),
                 "cudaMemcpyAsync (device to host)", world_rank_);
      check_cuda(cudaEventRecord(staging.done.get(), stream()), "cudaEventRecord", world_rank_);
      staging.in_flight = true;
    };
    // Chunk i+1 travels while chunk i is copied out of its pinned buffer.
    issue(0);
    for (size_t i = 0; i < chunks; ++i) {
      if (i + 1 < chunks) issue(i + 1);
      Staging& staging = *staging_[i % staging_.size()];
      sync_event(staging.done.get(), "copy_to_host");
      staging.in_flight = false;
      std::memcpy(host + i * kStagingChunkBytes, staging.host.get(), chunk_bytes(i));
    }
  }

  void all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    const ncclDataType_t nccl_type = nccl_type_of(type);
    ncclComm_t comm = live_comm();
    const ncclRedOp_t nccl_op = nccl_op_of(op, type);
    check_call(ncclAllReduce(send, recv, count, nccl_type, nccl_op, comm, stream()),
               "ncclAllReduce");
  }

  void all_gather(const void* send, void* recv, size_t send_count, DataType type) override {
    const ncclDataType_t nccl_type = nccl_type_of(type);
    check_call(ncclAllGather(send, recv, send_count, nccl_type, live_comm(), stream()),
               "ncclAllGather");
  }

  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                      ReduceOp op) override {
    const ncclDataType_t nccl_type = nccl_type_of(type);
    ncclComm_t comm = live_comm();
    const ncclRedOp_t nccl_op = nccl_op_of(op, type);
    check_call(ncclReduceScatter(send, recv, recv_count, nccl_type, nccl_op, comm, stream()),
               "ncclReduceScatter");
  }

  void broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    check_peer(root, "broadcast root");
    const ncclDataType_t nccl_type = nccl_type_of(type);
    check_call(ncclBroadcast(send, recv, count, nccl_type, root, live_comm(), stream()),
               "ncclBroadcast");
  }

  void all_to_all(const void* send, void* recv, size_t count_per_peer, DataType type) override {
    const ncclDataType_t nccl_type = nccl_type_of(type);
    ncclComm_t comm = live_comm();
#if CCSCOPE_NCCL_HAS_ALLTOALL
    if (all_to_all_ == choices::AllToAll::kNcclAlltoAll) {
      check_call(ncclAlltoAll(send, recv, count_per_peer, nccl_type, comm, stream()),
                 "ncclAlltoAll");
      return;
    }
#endif
    const size_t block = count_per_peer * element_size(type);
    const char* send_bytes = static_cast<const char*>(send);
    char* recv_bytes = static_cast<char*>(recv);
    check_nccl(ncclGroupStart(), "ncclGroupStart", world_rank_, comm);
    // Keep the first failure but always close the group.
    ncclResult_t first = ncclSuccess;
    const char* failed_call = "";
    for (int peer = 0; peer < size_ && first == ncclSuccess; ++peer) {
      const size_t offset = static_cast<size_t>(peer) * block;
      first = ncclSend(send_bytes + offset, count_per_peer, nccl_type, peer, comm, stream());
      if (first != ncclSuccess) {
        failed_call = "ncclSend (all_to_all)";
        break;
      }
      first = ncclRecv(recv_bytes + offset, count_per_peer, nccl_type, peer, comm, stream());
      if (first != ncclSuccess) failed_call = "ncclRecv (all_to_all)";
    }
    const ncclResult_t end = ncclGroupEnd();
    check_nccl(first, failed_call, world_rank_, comm);
    check_call(end, "ncclGroupEnd (all_to_all)");
  }

  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
              int root) override {
    check_peer(root, "reduce root");
    const ncclDataType_t nccl_type = nccl_type_of(type);
    ncclComm_t comm = live_comm();
    const ncclRedOp_t nccl_op = nccl_op_of(op, type);
    check_call(ncclReduce(send, recv, count, nccl_type, nccl_op, root, comm, stream()),
               "ncclReduce");
  }

  // Gather, scatter and all-to-all-v as nccl-tests runs them before NCCL 2.28:
  // ncclSend/ncclRecv in one group (batch_send_recv), a transfer per block.
  void gather(const void* send, void* recv, size_t send_count, DataType type, int root) override {
    check_peer(root, "gather root");
    if (send_count == 0) return;
    const size_t block = send_count * element_size(type);
    const PeerSend to_root{root, send, send_count};
    std::vector<PeerRecv> blocks;
    if (rank_ == root)
      for (int from = 0; from < size_; ++from)
        blocks.push_back(
            {from, static_cast<char*>(recv) + static_cast<size_t>(from) * block, send_count});
    batch_send_recv({&to_root, 1}, blocks, type);
  }

  void scatter(const void* send, void* recv, size_t recv_count, DataType type, int root) override {
    check_peer(root, "scatter root");
    if (recv_count == 0) return;
    const size_t block = recv_count * element_size(type);
    std::vector<PeerSend> blocks;
    if (rank_ == root)
      for (int to = 0; to < size_; ++to)
        blocks.push_back(
            {to, static_cast<const char*>(send) + static_cast<size_t>(to) * block, recv_count});
    const PeerRecv from_root{root, recv, recv_count};
    batch_send_recv(blocks, {&from_root, 1}, type);
  }

  void all_to_all_v(const void* send, std::span<const size_t> send_counts,
                    std::span<const size_t> send_displacements, void* recv,
                    std::span<const size_t> recv_counts, std::span<const size_t> recv_displacements,
                    DataType type) override {
    check_all_to_all_v_spans(*this, send_counts, send_displacements, recv_counts,
                             recv_displacements);
    const size_t n = static_cast<size_t>(size_);
    const size_t es = element_size(type);
    std::vector<PeerSend> sends;
    std::vector<PeerRecv> recvs;
    for (size_t p = 0; p < n; ++p) {  // empty blocks are not sent, as nccl-tests
      if (send_counts[p] > 0)
        sends.push_back({static_cast<int>(p),
                         static_cast<const char*>(send) + send_displacements[p] * es,
                         send_counts[p]});
      if (recv_counts[p] > 0)
        recvs.push_back({static_cast<int>(p), static_cast<char*>(recv) + recv_displacements[p] * es,
                         recv_counts[p]});
    }
    batch_send_recv(sends, recvs, type);
  }

  void send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count,
                 DataType type) override {
    check_peer(send_peer, "send_recv send peer");
    check_peer(recv_peer, "send_recv receive peer");
    const ncclDataType_t nccl_type = nccl_type_of(type);
    ncclComm_t comm = live_comm();
    check_nccl(ncclGroupStart(), "ncclGroupStart", world_rank_, comm);
    const ncclResult_t sent = ncclSend(send, count, nccl_type, send_peer, comm, stream());
    const ncclResult_t received = sent == ncclSuccess
                                      ? ncclRecv(recv, count, nccl_type, recv_peer, comm, stream())
                                      : ncclSuccess;
    const ncclResult_t end = ncclGroupEnd();
    check_nccl(sent, "ncclSend (send_recv)", world_rank_, comm);
    check_nccl(received, "ncclRecv (send_recv)", world_rank_, comm);
    check_call(end, "ncclGroupEnd (send_recv)");
  }

  // Every ncclSend and ncclRecv in one group (NCCL matches a pair's transfers
  // in the order issued); an empty batch issues nothing.
  void batch_send_recv(std::span<const PeerSend> sends, std::span<const PeerRecv> recvs,
                       DataType type) override {
    for (const PeerSend& s : sends) check_peer(s.peer, "batch_send_recv send peer");
    for (const PeerRecv& r : recvs) check_peer(r.peer, "batch_send_recv receive peer");
    const ncclDataType_t nccl_type = nccl_type_of(type);
    ncclComm_t comm = live_comm();
    if (sends.empty() && recvs.empty()) return;
    check_nccl(ncclGroupStart(), "ncclGroupStart", world_rank_, comm);
    // Keep the first failure but always close the group.
    ncclResult_t first = ncclSuccess;
    const char* failed_call = "";
    for (const PeerSend& s : sends) {
      first = ncclSend(s.data, s.count, nccl_type, s.peer, comm, stream());
      if (first != ncclSuccess) {
        failed_call = "ncclSend (batch_send_recv)";
        break;
      }
    }
    for (size_t i = 0; i < recvs.size() && first == ncclSuccess; ++i) {
      first = ncclRecv(recvs[i].data, recvs[i].count, nccl_type, recvs[i].peer, comm, stream());
      if (first != ncclSuccess) failed_call = "ncclRecv (batch_send_recv)";
    }
    const ncclResult_t end = ncclGroupEnd();
    check_nccl(first, failed_call, world_rank_, comm);
    check_call(end, "ncclGroupEnd (batch_send_recv)");
  }

  void wait(std::chrono::milliseconds timeout) override {
    live_comm();
    not_while_capturing("wait");
    sync_timeout_ = timeout;
    poll_until_done([this] { return cudaStreamQuery(stream()); }, "wait", timeout);
  }

  std::unique_ptr<StampClock> make_clock(size_t stamps) override {
    activate();
    return std::make_unique<EventClock>(stamps, stream_, device_, world_rank_, async_error_check_);
  }

  void group_start() override {
    live_comm();
    check_call(ncclGroupStart(), "ncclGroupStart");
    ++group_depth_;
  }

  void group_end() override {
    if (group_depth_ <= 0) {
      throw UsageError(rank_prefix(world_rank_) + "group_end() without a group_start()");
    }
    --group_depth_;
    // ncclGroupEnd launches what the group collected; with a non-blocking
    // communicator it may still be in progress when it returns.
    check_call(ncclGroupEnd(), "ncclGroupEnd");
  }

  // nccl-tests -G: the operations of one timed loop captured on the
  // communicator's stream in thread-local mode (as its BenchTime does: NCCL may
  // cudaMalloc while connecting peers during capture, which global mode forbids).
  std::unique_ptr<CapturedOperations> capture(const std::function<void()>& issue) override {
#if CCSCOPE_CUDA_HAS_GRAPHS
    live_comm();
    not_while_capturing("capture");
    activate();
    check_cuda(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal),
               "cudaStreamBeginCapture", world_rank_);
    capturing_ = true;
    cudaGraph_t graph = nullptr;
    try {
      issue();
    } catch (...) {
      // End the capture before anything else uses the stream; the partial
      // graph is discarded.
      capturing_ = false;
      if (cudaStreamEndCapture(stream(), &graph) == cudaSuccess && graph != nullptr) {
        (void)cudaGraphDestroy(graph);
      }
      (void)cudaGetLastError();  // an invalidated capture's error is not ours to keep
      throw;
    }
    capturing_ = false;
    const cudaError_t ended = cudaStreamEndCapture(stream(), &graph);
    if (ended != cudaSuccess || graph == nullptr) {
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      throw BackendError(rank_prefix(world_rank_) +
                         "cudaStreamEndCapture failed: " + cuda_text(ended) +
                         " (an operation in the captured loop cannot be captured)");
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiateWithFlags(&exec, graph, 0);
    if (instantiated != cudaSuccess) {
      (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      check_cuda(instantiated, "cudaGraphInstantiate", world_rank_);
    }
    return std::make_unique<CudaGraph>(graph, exec, stream_, device_, world_rank_,
                                       async_error_check_);
#else
    (void)issue;
    return nullptr;
#endif
  }

  std::string resources() const override {
    choices::Resources r;
    r.header_code = NCCL_VERSION_CODE;
    r.library_code = library_code_;
    r.allocator = allocator_;
    r.all_to_all = all_to_all_;
    r.init_rank_config = choices::uses_init_rank_config(NCCL_VERSION_CODE);
    r.nvlink_centric_sched = choices::sets_nvlink_centric_sched(NCCL_VERSION_CODE);
    r.blocking = blocking_;
    r.min_compute_capability = min_compute_capability_;
    r.fp8 = fp8_unsupported_.empty();
    r.isolate_ranks = isolate_ranks_;
    return choices::resources_text(r);
  }

 private:
  struct Staging {
    explicit Staging(int rank)
        : host(kStagingChunkBytes, rank), done(cudaEventDisableTiming, rank) {}
    PinnedHost host;
    Event done;
    bool in_flight = false;
  };

  void select_device(const World& world, int& device_count) {
    const cudaError_t error = cudaGetDeviceCount(&device_count);
    if (error != cudaSuccess || device_count <= 0) {
      const std::string reason =
          error != cudaSuccess ? cuda_text(error) : std::string("cudaGetDeviceCount returned 0");
      throw UsageError("no CUDA GPU visible to rank " + std::to_string(world_rank_) + ": " +
                       reason + "; use --backend mpi");
    }
    device_ = world.local_rank() % device_count;
    // Local ranks on this GPU (several with --isolate-ranks): they share its memory.
    ranks_on_device_ = 0;
    for (int local = 0; local < world.local_size(); ++local)
      ranks_on_device_ += local % device_count == device_ ? 1 : 0;
    check_cuda(cudaSetDevice(device_), "cudaSetDevice", world_rank_);
    cudaDeviceProp properties{};
    check_cuda(cudaGetDeviceProperties(&properties, device_), "cudaGetDeviceProperties",
               world_rank_);
    // prop.name is a fixed char array; bound the read by its size.
    device_name_.assign(properties.name, strnlen(properties.name, sizeof(properties.name)));
    compute_capability_ = properties.major * 10 + properties.minor;
  }

  // Collective (after phase 1 succeeded everywhere): the choices nccl_choices.h
  // makes. The all-to-all call and fp8 support must be the same on every rank,
  // so they follow the oldest NCCL library and the oldest GPU of the world (as
  // nccl-tests takes the minimum compute capability over its ranks).
  void decide(const World& world, const NcclOptions& options) {
    isolate_ranks_ = options.isolate_ranks;
    blocking_ = choices::effective_blocking(std::getenv("NCCL_COMM_BLOCKING"));
    allocator_ = choices::choose_allocator(NCCL_VERSION_CODE, library_code_);
    int min_library = library_code_;
    min_compute_capability_ = compute_capability_;
    if (world.size() > 1) {
      const std::vector<std::string> all = world.all_gather(std::to_string(compute_capability_) +
                                                            " " + std::to_string(library_code_));
      for (const std::string& text : all) {
        char* end = nullptr;
        const long cc = std::strtol(text.c_str(), &end, 10);
        const long code = std::strtol(end, nullptr, 10);
        if (cc > 0 && cc < INT_MAX)
          min_compute_capability_ = std::min(min_compute_capability_, static_cast<int>(cc));
        if (code > 0 && code < INT_MAX) min_library = std::min(min_library, static_cast<int>(code));
      }
    }
    all_to_all_ = choices::choose_all_to_all(NCCL_VERSION_CODE, min_library);
    fp8_unsupported_ =
        choices::fp8_unsupported_reason(NCCL_VERSION_CODE, min_library, min_compute_capability_);
  }

  ncclDataType_t nccl_type_of(DataType type) const {
    if ((type == DataType::kFloat8E4M3 || type == DataType::kFloat8E5M2) &&
        !fp8_unsupported_.empty()) {
      throw UsageError(rank_prefix(world_rank_) + fp8_unsupported_);
    }
    return to_nccl(type);
  }

  // NCCL's op for `op` on `type`; mulsum is ncclRedOpCreatePreMulSum with this
  // rank's scalar (premul_scalar) in the element type, made once per type and
  // destroyed before the communicator (destroy_premul_ops).
  ncclRedOp_t nccl_op_of(ReduceOp op, DataType type) {
    if (op != ReduceOp::kMulSum) return to_nccl(op);
#if CCSCOPE_NCCL_HAS_PREMULSUM
    for (const auto& [made_for, made] : premul_ops_) {
      if (made_for == type) return made;
    }
    const ncclDataType_t nccl_type = nccl_type_of(type);
    ncclComm_t comm = live_comm();
    uint64_t scalar[1] = {0};  // room and alignment for every element type
    store_element(scalar, type, 0, premul_scalar(rank_));
    ncclRedOp_t made{};
    // ncclScalarHostImmediate: NCCL reads the scalar before the call returns.
    check_call(ncclRedOpCreatePreMulSum(&made, scalar, nccl_type, ncclScalarHostImmediate, comm),
               "ncclRedOpCreatePreMulSum");
    premul_ops_.emplace_back(type, made);
    return made;
#else
    (void)type;
    throw UsageError("reduce op mulsum needs NCCL >= 2.11; use sum");
#endif
  }

  void destroy_premul_ops() noexcept {
#if CCSCOPE_NCCL_HAS_PREMULSUM
    if (comm_ != nullptr) {
      for (const auto& entry : premul_ops_) (void)ncclRedOpDestroy(entry.second, comm_);
    }
#endif
    premul_ops_.clear();
  }

  void not_while_capturing(const char* what) const {
    if (!capturing_) return;
    throw UsageError(rank_prefix(world_rank_) + what +
                     " called while capturing a CUDA graph: inside Communicator::capture() "
                     "issue only collectives (and group_start/group_end)");
  }

  // Waits (bounded) until a call that returned ncclInProgress - possible only
  // with a non-blocking communicator (NCCL_COMM_BLOCKING=0) - has finished;
  // returns its final result. Throws TimeoutError, aborting the communicator,
  // when it does not finish within `timeout`.
  ncclResult_t settle(ncclResult_t result, std::chrono::milliseconds timeout, const char* call) {
    if (!in_progress(result) || comm_ == nullptr) return result;
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
      if (queried != ncclSuccess) return queried;
      if (!in_progress(state)) return state;
      if (Clock::now() >= deadline) {
        abort_comm();
        throw TimeoutError(rank_prefix(world_rank_) + call + " was still in progress after " +
                           seconds_text(timeout) +
                           " (non-blocking NCCL communicator); the communicator was aborted. "
                           "A peer rank may have stopped; rerun with NCCL_DEBUG=WARN");
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  // check_nccl for calls on the live communicator, with ncclInProgress waited
  // for. An error that arrived while waiting is asynchronous: the communicator
  // is aborted, as check_async_error does.
  void check_call(ncclResult_t result, const char* call) {
    const bool was_in_progress = in_progress(result);
    result = settle(result, sync_timeout_, call);
    if (result == ncclSuccess) return;
    const std::string text = nccl_text(result, comm_);
    if (was_in_progress) {
      abort_comm();
      throw BackendError(rank_prefix(world_rank_) + call + " failed asynchronously: " + text +
                         "; the communicator was aborted");
    }
    throw BackendError(rank_prefix(world_rank_) + call + " failed: " + text);
  }

  // A non-blocking ncclCommInitRankConfig: polls its state (bounded).
  ncclResult_t settle_init() {
    const auto deadline = Clock::now() + kInitTimeout;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
      if (queried != ncclSuccess) return queried;
      if (!in_progress(state)) return state;
      if (Clock::now() >= deadline) {
        (void)ncclCommAbort(comm_);
        comm_ = nullptr;
        throw TimeoutError(rank_prefix(world_rank_) +
                           "ncclCommInitRankConfig (non-blocking) did not complete within " +
                           seconds_text(kInitTimeout) +
                           "; a peer rank may not have joined. Rerun with NCCL_DEBUG=WARN");
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  // For the destructor: the final state of an in-progress call within
  // `timeout`, or ncclInProgress when it did not finish.
  ncclResult_t settle_quietly(std::chrono::milliseconds timeout) noexcept {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return ncclInternalError;
      if (!in_progress(state) || Clock::now() >= deadline) return state;
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  cudaStream_t stream() const { return stream_->get(); }

  void activate() const { check_cuda(cudaSetDevice(device_), "cudaSetDevice", world_rank_); }

  ncclComm_t live_comm() const {
    if (comm_ == nullptr) {
      throw BackendError(rank_prefix(world_rank_) +
                         "the NCCL communicator was aborted after an earlier error or timeout; "
                         "create a new one");
    }
    return comm_;
  }

  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_) {
      throw UsageError(rank_prefix(world_rank_) + what + " " + std::to_string(peer) +
                       " is not a rank of this communicator (0.." + std::to_string(size_ - 1) +
                       ")");
    }
  }

  void check_range(size_t buffer_bytes, size_t offset, size_t bytes, const char* what) const {
    if (offset > buffer_bytes || bytes > buffer_bytes - offset) {
      throw UsageError(rank_prefix(world_rank_) + what + ": offset " + std::to_string(offset) +
                       " + " + std::to_string(bytes) + " bytes exceeds the buffer of " +
                       std::to_string(buffer_bytes) + " bytes");
    }
  }

  void ensure_staging() {
    if (!staging_.empty()) return;
    std::vector<std::unique_ptr<Staging>> staging;
    staging.push_back(std::make_unique<Staging>(world_rank_));
    staging.push_back(std::make_unique<Staging>(world_rank_));
    staging_ = std::move(staging);
  }

  void sync_event(cudaEvent_t event, const char* what) {
    poll_until_done([event] { return cudaEventQuery(event); }, what, sync_timeout_);
  }

  // Polls `query` (cudaStreamQuery / cudaEventQuery) until it reports
  // completion, checking NCCL's asynchronous error state between polls. On an
  // asynchronous error or a timeout the communicator is aborted. Between polls
  // the core is yielded, not slept: as nccl-tests' testStreamSynchronize, so a
  // small operation's time is not rounded up to a sleep (a 50 us sleep did that);
  // after kSpinFor it sleeps kLongWaitPoll between polls.
  template <typename Query>
  void poll_until_done(Query&& query, const char* what, std::chrono::milliseconds timeout) {
    const auto start = Clock::now();
    const auto deadline = start + timeout;
    for (;;) {
      const cudaError_t state = query();
      if (state == cudaSuccess) {
        check_async_error(what);
        return;
      }
      if (state != cudaErrorNotReady) {
        check_async_error(what);  // an NCCL failure explains a CUDA one better
        abort_comm();
        check_cuda(state, what, world_rank_);
      }
      check_async_error(what);
      if (Clock::now() >= deadline) {
        abort_comm();
        throw TimeoutError(rank_prefix(world_rank_) + "NCCL operations did not complete within " +
                           seconds_text(timeout) + " (" + what +
                           "); the communicator was aborted. A peer rank may have stopped or the "
                           "network path is too slow; rerun with NCCL_DEBUG=WARN");
      }
      if (Clock::now() - start < kSpinFor) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(kLongWaitPoll);
      }
    }
  }

  void check_async_error(const char* what) {
    if (comm_ == nullptr) return;
    ncclResult_t async = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(comm_, &async);
    if (result != ncclSuccess) {
      const std::string text = nccl_text(result, comm_);
      abort_comm();
      throw BackendError(rank_prefix(world_rank_) + "ncclCommGetAsyncError failed: " + text);
    }
    if (async == ncclSuccess || in_progress(async)) return;
    const std::string text = nccl_text(async, comm_);
    abort_comm();
    throw BackendError(rank_prefix(world_rank_) + "NCCL reported an asynchronous error during " +
                       what + ": " + text + "; the communicator was aborted");
  }

  void abort_comm() noexcept {
    if (comm_ == nullptr) return;
    (void)ncclCommAbort(comm_);
    comm_ = nullptr;
    premul_ops_.clear();  // went with the communicator
  }

  // True when the stream finished its work without NCCL errors within a short
  // bound; the destructor then finalizes, otherwise it aborts.
  bool drained_cleanly() noexcept {
    if (!stream_) return false;
    const auto deadline = Clock::now() + kDestructorDrain;
    for (;;) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess ||
          (async != ncclSuccess && !in_progress(async))) {
        return false;
      }
      const cudaError_t state = cudaStreamQuery(stream());
      if (state == cudaSuccess) return true;
      if (state != cudaErrorNotReady || Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  int world_rank_ = 0;  // what messages name
  int rank_ = 0;        // in this communicator's group (-1 outside every group)
  int size_ = 1;
  int device_ = 0;
  int ranks_on_device_ = 1;
  std::string device_name_;
  std::chrono::milliseconds sync_timeout_ = kDefaultSyncTimeout;
  // The destructor body finalizes or aborts comm_ before these members go.
  // Clocks share the stream, so it lives as long as the last of them.
  std::shared_ptr<Stream> stream_;
  AsyncErrorCheck async_error_check_ = std::make_shared<std::function<void()>>(
      [this] { check_async_error("a warm-up or timed loop"); });
  std::vector<std::unique_ptr<Staging>> staging_;
  // What nccl_choices decided in decide() (resources() reports them).
  int compute_capability_ = 0;      // this rank's GPU, major*10+minor
  int min_compute_capability_ = 0;  // over all ranks
  int library_code_ = 0;            // ncclGetVersion of the loaded library
  int blocking_ = 1;
  bool isolate_ranks_ = false;
  choices::Allocator allocator_ = choices::Allocator::kCudaMalloc;
  choices::AllToAll all_to_all_ = choices::AllToAll::kGroupedSendRecv;
  std::string fp8_unsupported_;  // "" when fp8 is usable
  std::vector<std::pair<DataType, ncclRedOp_t>> premul_ops_;
  int group_depth_ = 0;  // group_start() calls not yet closed by group_end()
  bool capturing_ = false;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const World& world,
                                                     const NcclOptions& options) {
  auto communicator = std::make_unique<NcclCommunicator>(world, options);
  if (communicator->rank() < 0) return nullptr;  // outside every group
  return communicator;
}

bool nccl_backend_compiled() { return true; }

int visible_gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

bool nccl_backend_usable() { return visible_gpu_count() > 0; }

std::string gpu_identity_for_local_rank(int local_rank) {
  const int count = visible_gpu_count();
  if (count <= 0) return "";
  std::string bus_id(64, '\0');  // "0000:00:06.0" needs 13 with the NUL
  if (cudaDeviceGetPCIBusId(bus_id.data(), static_cast<int>(bus_id.size()), local_rank % count) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  bus_id.resize(std::min(bus_id.find('\0'), bus_id.size()));
  return bus_id;
}

std::string nccl_version_string() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "";
  return nccl_choices::version_text(code);
}

std::string cuda_runtime_version_string() {
  int version = 0;
  if (cudaRuntimeGetVersion(&version) != cudaSuccess || version <= 0) return "";
  // 13000 -> "13.0", 12040 -> "12.4"
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace ccscope
