// The NCCL stand-in (tests only; docs/standin.md): NCCL's API over the CUDA
// runtime stand-in, with ranks in one or several processes of one host talking
// through a shared-memory segment named after the ncclUniqueId. What it keeps
// of the real library, so that a caller's mistakes show:
//  - operations run on the stream's worker, later than the call returns;
//  - NCCL's argument rules, and stricter ones where NCCL's result would be
//    undefined: buffers must be device memory of the communicator's GPU and
//    hold count elements, in-place means exactly NCCL's in-place layout, the
//    ranks of one operation must issue the same collective with the same
//    count, type, op and root, a send's size must match its receive;
//  - results as NCCL computes them (reductions in rank order, avg as a
//    pre-multiplied sum for floating types), error codes and strings;
//  - group semantics, non-blocking communicators (ncclInProgress), async
//    errors, abort, a vanished or failed peer reported as ncclRemoteError;
//  - faults injected from CCSCOPE_STANDIN_FAULTS (faults.h).
#include <fcntl.h>
#include <nccl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "elements.h"
#include "faults.h"
#include "ras_stub.h"
#include "runtime.h"

namespace ccscope::standin {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kIdMagic[16] = "ccscope-standin";
constexpr uint64_t kSegmentMagic = 0x63637363'6f70654eULL;
constexpr uint64_t kMessageMagic = 0x6d657373'61676521ULL;
constexpr int kMaxRanks = 64;
constexpr size_t kChannelBytes = size_t{256} << 10;
constexpr size_t kChunkBytes = size_t{64} << 10;

// ---- the shared segment -------------------------------------------------------

struct RankSlot {
  std::atomic<int32_t> pid;
  std::atomic<int32_t> device;
  std::atomic<uint64_t> host;
  std::atomic<int32_t> failed;  // its communicator failed or was aborted
  // ncclCommSplit: this rank's color and key for its split number `split`
  // (published last), and the last split whose slots it has read.
  std::atomic<int32_t> split_color;
  std::atomic<int32_t> split_key;
  std::atomic<uint64_t> split;
  std::atomic<uint64_t> split_read;
  // What the RAS stub reports (ras_stub.h): operations launched by Kind, and
  // the rank's hostname (written before it counts as joined).
  std::atomic<uint64_t> launched[8];
  char hostname[64];
};

struct Header {
  std::atomic<uint64_t> magic;
  std::atomic<int32_t> nranks;
  std::atomic<int32_t> joined;
  RankSlot slots[kMaxRanks];
};

// One direction between two ranks: a single-producer single-consumer ring.
struct Channel {
  alignas(64) std::atomic<uint64_t> head;  // bytes written, by the sender
  alignas(64) std::atomic<uint64_t> tail;  // bytes read, by the receiver
  alignas(64) char data[kChannelBytes];
};

size_t header_bytes() { return (sizeof(Header) + 4095) / 4096 * 4096; }
size_t segment_bytes(int nranks) {
  return header_bytes() + static_cast<size_t>(nranks) * static_cast<size_t>(nranks) * sizeof(Channel);
}

// What leads every message: who sent what, so that a mismatch is named.
struct MessageHeader {
  uint64_t magic = kMessageMagic;
  uint64_t signature = 0;
  uint64_t bytes = 0;
  double scalar = 0;  // premulsum: the sender's factor
  char what[96] = {};
};

// ---- premulsum ops -------------------------------------------------------------

struct PreMulOp {
  ncclDataType_t type = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  double value = 0;
  const char* device_scalar = nullptr;  // shadow address, ncclScalarDevice
  bool live = false;
};

// ---- communicator state --------------------------------------------------------

struct CommState {
  int rank = 0;
  int nranks = 0;
  int device = 0;
  int blocking = 1;
  std::string shm_name;
  Header* header = nullptr;
  char* segment = nullptr;
  size_t segment_size = 0;
  std::atomic<bool> aborted{false};
  std::atomic<int> init_state{ncclInProgress};
  std::atomic<int> async_error{ncclSuccess};
  std::atomic<int> in_flight{0};
  std::atomic<bool> finalizing{false};
  // Non-blocking communicator: operations issued whose launch (the worker
  // starting them) has not happened yet; ncclCommGetAsyncError says
  // ncclInProgress meanwhile, as NCCL does while its launch is pending.
  std::atomic<int> launches_pending{0};
  std::mutex mutex;
  std::string last_error;
  std::vector<PreMulOp> premul;
  std::thread init_thread;
  uint64_t splits = 0;  // ncclCommSplit calls made on this communicator

  Channel& channel(int from, int to) {
    return reinterpret_cast<Channel*>(segment + header_bytes())[from * nranks + to];
  }
  ~CommState() {
    if (segment != nullptr) munmap(segment, segment_size);
  }
};

}  // namespace
}  // namespace ccscope::standin

struct ncclComm {
  std::shared_ptr<ccscope::standin::CommState> state;
};

namespace ccscope::standin {
namespace {

std::mutex g_mutex;
std::set<ncclComm*> g_live;  // handles not yet destroyed or aborted
std::string g_last_error;

const std::vector<Fault>& faults() {
  static const std::vector<Fault>* parsed = [] {
    const char* text = std::getenv("CCSCOPE_STANDIN_FAULTS");
    FaultParse p = parse_faults(text ? text : "");
    if (!p.error.empty()) {
      std::fprintf(stderr, "ccscope stand-in: CCSCOPE_STANDIN_FAULTS: %s\n", p.error.c_str());
      std::_Exit(2);
    }
    return new std::vector<Fault>(std::move(p.faults));
  }();
  return *parsed;
}

std::atomic<uint64_t> g_operations{0};  // executed in this process, for faults

bool debug_at_least(const char* level) {
  const char* set = std::getenv("NCCL_DEBUG");
  if (set == nullptr) return false;
  auto rank_of = [](const char* l) {
    const std::string s(l);
    return s == "TRACE" ? 3 : s == "INFO" ? 2 : s == "WARN" ? 1 : 0;
  };
  return rank_of(set) >= rank_of(level);
}

// NCCL_DEBUG_FILE as NCCL reads it: %h the host name, %p the process id.
FILE* log_stream() {
  static FILE* stream = [] {
    const char* pattern = std::getenv("NCCL_DEBUG_FILE");
    if (pattern == nullptr || *pattern == '\0') return stderr;
    std::string path;
    for (const char* c = pattern; *c != '\0'; ++c) {
      if (c[0] == '%' && c[1] == 'h') {
        char host[256] = {};
        gethostname(host, sizeof(host) - 1);
        path += host;
        ++c;
      } else if (c[0] == '%' && c[1] == 'p') {
        path += std::to_string(getpid());
        ++c;
      } else {
        path += *c;
      }
    }
    FILE* file = std::fopen(path.c_str(), "w");
    return file != nullptr ? file : stderr;
  }();
  return stream;
}

void log(int device, const char* level, const std::string& text) {
  if (!debug_at_least(level)) return;
  static std::mutex log_mutex;
  std::lock_guard<std::mutex> lock(log_mutex);
  std::fprintf(log_stream(), "%s NCCL %s %s\n", log_prefix(device).c_str(), level, text.c_str());
  std::fflush(log_stream());
}

ncclResult_t error(CommState* state, ncclResult_t code, const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_last_error = text;
  }
  if (state != nullptr) {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->last_error = text;
  }
  log(state ? state->device : current_device(), "WARN", text);
  return code;
}

std::shared_ptr<CommState> live(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (comm == nullptr || g_live.count(comm) == 0) return nullptr;
  return comm->state;
}

uint64_t host_identity() {
  const char* host_id = std::getenv("NCCL_HOSTID");
  std::string text;
  if (host_id != nullptr && *host_id != '\0') {
    text = host_id;
  } else {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    text = name;
  }
  return std::hash<std::string>{}(text) | 1;  // never 0 (0 = slot unset)
}

bool process_gone(int32_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

// The RAS stub's view: every live communicator of this process, once each.
std::vector<RasCommView> ras_snapshot() {
  std::vector<std::shared_ptr<CommState>> states;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (ncclComm* comm : g_live)
      if (comm->state->init_state.load() == ncclSuccess && comm->state->header != nullptr)
        states.push_back(comm->state);
  }
  std::vector<RasCommView> comms;
  std::set<std::string> seen;
  for (const auto& state : states) {
    if (!seen.insert(state->shm_name).second) continue;
    RasCommView view;
    view.id = state->shm_name.substr(17, 16);
    for (int r = 0; r < state->nranks; ++r) {
      const RankSlot& slot = state->header->slots[r];
      RasRankView rank;
      rank.rank = r;
      rank.pid = slot.pid.load();
      rank.host.assign(slot.hostname, strnlen(slot.hostname, sizeof slot.hostname));
      rank.gpu = slot.device.load();
      rank.gone = process_gone(slot.pid.load());
      for (const auto& count : slot.launched) rank.launched.push_back(count.load());
      view.ranks.push_back(std::move(rank));
    }
    comms.push_back(std::move(view));
  }
  return comms;
}

// ---- joining ---------------------------------------------------------------

std::string id_name(const ncclUniqueId& id) {
  static const char* hex = "0123456789abcdef";
  std::string name = "/ccscope-standin-";
  for (int i = 16; i < 32; ++i) {
    const auto byte = static_cast<unsigned char>(id.internal[i]);
    name += hex[byte >> 4];
    name += hex[byte & 15];
  }
  return name;
}

// Waits while `keep_waiting` says so, politely (the host may have fewer cores
// than ranks); false when the communicator was aborted meanwhile.
template <typename Pred>
bool wait_while(CommState& state, Pred keep_waiting) {
  for (int idle = 0; keep_waiting(); ++idle) {
    if (state.aborted.load()) return false;
    if (idle < 64) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(idle < 2000 ? 20 : 1000));
  }
  return true;
}

ncclResult_t join(CommState& state, const ncclUniqueId& id) {
  if (find_fault(faults(), FaultKind::kInitHang, state.rank, 0)) {
    wait_while(state, [] { return true; });  // never joins; an abort ends it
    return error(&state, ncclInternalError, "init aborted (injected init_hang)");
  }
  state.shm_name = id_name(id);
  const int fd = shm_open(state.shm_name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) {
    return error(&state, ncclSystemError,
                 "shm_open " + state.shm_name + " failed: " + std::strerror(errno));
  }
  state.segment_size = segment_bytes(state.nranks);
  struct stat st {};
  if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) < state.segment_size &&
      ftruncate(fd, static_cast<off_t>(state.segment_size)) != 0) {
    close(fd);
    return error(&state, ncclSystemError, std::string("ftruncate failed: ") + std::strerror(errno));
  }
  void* mapped = mmap(nullptr, state.segment_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) {
    return error(&state, ncclSystemError, std::string("mmap failed: ") + std::strerror(errno));
  }
  state.segment = static_cast<char*>(mapped);
  state.header = reinterpret_cast<Header*>(state.segment);
  Header& h = *state.header;
  uint64_t no_magic = 0;
  h.magic.compare_exchange_strong(no_magic, kSegmentMagic);
  int32_t unset = 0;
  if (!h.nranks.compare_exchange_strong(unset, state.nranks) && unset != state.nranks) {
    return error(&state, ncclInvalidUsage,
                 "rank " + std::to_string(state.rank) + " called ncclCommInitRank with nranks " +
                     std::to_string(state.nranks) + " but another rank with nranks " +
                     std::to_string(unset));
  }
  RankSlot& mine = h.slots[state.rank];
  int32_t no_pid = 0;
  if (!mine.pid.compare_exchange_strong(no_pid, static_cast<int32_t>(getpid()))) {
    return error(&state, ncclInvalidUsage,
                 "rank " + std::to_string(state.rank) + " joined twice (the first time from pid " +
                     std::to_string(no_pid) + ")");
  }
  mine.device.store(state.device);
  mine.host.store(host_identity());
  gethostname(mine.hostname, sizeof(mine.hostname) - 1);
  h.joined.fetch_add(1);
  const bool all_joined = wait_while(state, [&] {
    for (int r = 0; r < state.nranks; ++r) {
      if (process_gone(h.slots[r].pid.load())) return false;
    }
    return h.joined.load() < state.nranks;
  });
  if (!all_joined) return error(&state, ncclInternalError, "init aborted");
  for (int r = 0; r < state.nranks; ++r) {
    if (h.slots[r].pid.load() == 0 || process_gone(h.slots[r].pid.load())) {
      return error(&state, ncclRemoteError,
                   "rank " + std::to_string(r) + " exited during init (pid " +
                       std::to_string(h.slots[r].pid.load()) + ")");
    }
  }
  shm_unlink(state.shm_name.c_str());  // every rank has it open; nothing left behind
  for (int r = 0; r < state.nranks; ++r) {
    if (r == state.rank) continue;
    if (h.slots[r].host.load() == mine.host.load() && h.slots[r].device.load() == state.device) {
      return error(&state, ncclInvalidUsage,
                   "Duplicate GPU detected : rank " + std::to_string(state.rank) + " and rank " +
                       std::to_string(r) + " both on CUDA device " + std::to_string(state.device));
    }
  }
  // The lines of a real init that log readers (ccscope diag nccl-log) key on.
  char comm_text[64];
  std::snprintf(comm_text, sizeof(comm_text), "comm %p rank %d", static_cast<void*>(&state), state.rank);
  int local_ranks = 0, local_rank = 0;
  for (int r = 0; r < state.nranks; ++r) {
    if (h.slots[r].host.load() != mine.host.load()) continue;
    if (r < state.rank) ++local_rank;
    ++local_ranks;
  }
  const int nodes = [&] {
    std::set<uint64_t> hosts;
    for (int r = 0; r < state.nranks; ++r) hosts.insert(h.slots[r].host.load());
    return static_cast<int>(hosts.size());
  }();
  log(state.device, "INFO",
      "NCCL version " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
          std::to_string(NCCL_PATCH) + "+cuda" + std::to_string(CUDART_VERSION / 1000) + "." +
          std::to_string(CUDART_VERSION % 1000 / 10) + " (ccscope stand-in, shared memory)");
  log(state.device, "INFO",
      std::string(comm_text) + " nRanks " + std::to_string(state.nranks) + " nNodes " +
          std::to_string(nodes) + " localRanks " + std::to_string(local_ranks) + " localRank " +
          std::to_string(local_rank) + " MNNVL 0");
  log(state.device, "INFO",
      "ncclCommInitRankConfig " + std::string(comm_text) + " nranks " + std::to_string(state.nranks) +
          " cudaDev " + std::to_string(state.device) + " nvmlDev " + std::to_string(state.device) +
          " busId " + std::to_string(0x18 + 0x10 * state.device) + "000 commId 0x" + state.shm_name.substr(17, 16) +
          " - Init COMPLETE");
  start_ras_service_once(ras_snapshot);
  return ncclSuccess;
}

// ---- transfers ---------------------------------------------------------------

struct Outgoing {
  int peer = 0;
  MessageHeader header;
  const char* payload = nullptr;
  size_t done = 0;  // of sizeof(header) + header.bytes
};

struct Incoming {
  int peer = 0;
  uint64_t signature = 0;
  std::string what;  // ours, for a mismatch
  char* dest = nullptr;
  size_t bytes = 0;
  MessageHeader header;  // the sender's, once read
  size_t done = 0;
};

size_t ring_write(Channel& c, const char* data, size_t bytes) {
  const uint64_t head = c.head.load(std::memory_order_relaxed);
  const uint64_t tail = c.tail.load(std::memory_order_acquire);
  const size_t n = std::min<size_t>(bytes, kChannelBytes - static_cast<size_t>(head - tail));
  const size_t at = static_cast<size_t>(head % kChannelBytes);
  const size_t first = std::min(n, kChannelBytes - at);
  std::memcpy(c.data + at, data, first);
  std::memcpy(c.data, data + first, n - first);
  c.head.store(head + n, std::memory_order_release);
  return n;
}

size_t ring_read(Channel& c, char* out, size_t bytes) {
  const uint64_t tail = c.tail.load(std::memory_order_relaxed);
  const uint64_t head = c.head.load(std::memory_order_acquire);
  const size_t n = std::min<size_t>(bytes, static_cast<size_t>(head - tail));
  const size_t at = static_cast<size_t>(tail % kChannelBytes);
  const size_t first = std::min(n, kChannelBytes - at);
  std::memcpy(out, c.data + at, first);
  std::memcpy(out + first, c.data, n - first);
  c.tail.store(tail + n, std::memory_order_release);
  return n;
}

enum class Outcome { kDone, kAborted, kFailed };

// Moves every message until all are through. A peer whose process is gone or
// whose communicator failed makes it fail (ncclRemoteError), a mismatched
// message too (ncclInvalidUsage); an abort of this communicator stops it.
Outcome progress(CommState& state, std::vector<Outgoing>& sends, std::vector<Incoming>& recvs) {
  auto last_check = Clock::now();
  for (int idle = 0;;) {
    bool moved = false;
    bool all_done = true;
    // A channel carries one message at a time: the first unfinished one to or
    // from a peer goes on, later ones to the same peer wait their turn.
    std::vector<char> busy(static_cast<size_t>(state.nranks), 0);
    for (Outgoing& s : sends) {
      const size_t total = sizeof(MessageHeader) + s.header.bytes;
      if (s.done == total) continue;
      if (busy[static_cast<size_t>(s.peer)]) {
        all_done = false;
        continue;
      }
      busy[static_cast<size_t>(s.peer)] = 1;
      Channel& c = state.channel(state.rank, s.peer);
      if (s.done < sizeof(MessageHeader)) {
        const size_t n = ring_write(c, reinterpret_cast<const char*>(&s.header) + s.done,
                                    sizeof(MessageHeader) - s.done);
        s.done += n;
        moved |= n > 0;
      }
      if (s.done >= sizeof(MessageHeader) && s.done < total) {
        const size_t offset = s.done - sizeof(MessageHeader);
        const size_t n = ring_write(c, s.payload + offset, s.header.bytes - offset);
        s.done += n;
        moved |= n > 0;
      }
      all_done &= s.done == total;
    }
    std::fill(busy.begin(), busy.end(), 0);
    for (Incoming& r : recvs) {
      if (r.done == sizeof(MessageHeader) + r.bytes) continue;
      if (busy[static_cast<size_t>(r.peer)]) {
        all_done = false;
        continue;
      }
      busy[static_cast<size_t>(r.peer)] = 1;
      Channel& c = state.channel(r.peer, state.rank);
      if (r.done < sizeof(MessageHeader)) {
        const size_t n = ring_read(c, reinterpret_cast<char*>(&r.header) + r.done,
                                   sizeof(MessageHeader) - r.done);
        r.done += n;
        moved |= n > 0;
        if (r.done == sizeof(MessageHeader)) {
          const MessageHeader& h = r.header;
          if (h.magic != kMessageMagic || h.signature != r.signature || h.bytes != r.bytes) {
            const std::string theirs(h.what, strnlen(h.what, sizeof(h.what)));
            error(&state, ncclInvalidUsage,
                  "rank " + std::to_string(state.rank) + " issued " + r.what + " while rank " +
                      std::to_string(r.peer) + " issued " + theirs +
                      " (operations of one communicator must match across ranks)");
            state.async_error.store(ncclInvalidUsage);
            return Outcome::kFailed;
          }
        }
      }
      if (r.done >= sizeof(MessageHeader) && r.done < sizeof(MessageHeader) + r.bytes) {
        const size_t offset = r.done - sizeof(MessageHeader);
        const size_t n = ring_read(c, r.dest + offset, r.bytes - offset);
        r.done += n;
        moved |= n > 0;
      }
      all_done &= r.done == sizeof(MessageHeader) + r.bytes;
    }
    if (all_done) return Outcome::kDone;
    if (moved) {
      idle = 0;
      continue;
    }
    if (state.aborted.load()) return Outcome::kAborted;
    if (++idle < 64) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(idle < 5000 ? 20 : 500));
    if (Clock::now() - last_check < std::chrono::milliseconds(50)) continue;
    last_check = Clock::now();
    auto check_peer = [&](int peer) {
      const RankSlot& slot = state.header->slots[peer];
      if (slot.failed.load() != 0) {
        error(&state, ncclRemoteError,
              "rank " + std::to_string(peer) +
                  "'s communicator failed or was aborted: remote process exited or there was a network error");
        return false;
      }
      if (process_gone(slot.pid.load())) {
        error(&state, ncclRemoteError,
              "rank " + std::to_string(peer) + " (pid " + std::to_string(slot.pid.load()) +
                  ") exited: remote process exited or there was a network error");
        return false;
      }
      return true;
    };
    for (const Outgoing& s : sends) {
      if (s.done != sizeof(MessageHeader) + s.header.bytes && !check_peer(s.peer)) {
        state.async_error.store(ncclRemoteError);
        return Outcome::kFailed;
      }
    }
    for (const Incoming& r : recvs) {
      if (r.done != sizeof(MessageHeader) + r.bytes && !check_peer(r.peer)) {
        state.async_error.store(ncclRemoteError);
        return Outcome::kFailed;
      }
    }
  }
}

// ---- operations ---------------------------------------------------------------

enum class Kind { kAllReduce, kReduce, kBroadcast, kAllGather, kReduceScatter, kAllToAll, kSend, kRecv };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kAllReduce: return "ncclAllReduce";
    case Kind::kReduce: return "ncclReduce";
    case Kind::kBroadcast: return "ncclBroadcast";
    case Kind::kAllGather: return "ncclAllGather";
    case Kind::kReduceScatter: return "ncclReduceScatter";
    case Kind::kAllToAll: return "ncclAlltoAll";
    case Kind::kSend: return "ncclSend";
    case Kind::kRecv: return "ncclRecv";
  }
  return "?";
}

struct Operation {
  Kind kind = Kind::kAllReduce;
  const char* send = nullptr;  // shadow addresses
  char* recv = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  Reduction reduction = Reduction::kSum;
  PreMulOp premul;  // reduction == kPreMulSum
  int root = 0;     // or the peer of a send/recv
  std::string what; // "ncclAllReduce(count 1024, ncclFloat32, sum)"
  uint64_t signature = 0;
};

bool is_collective(Kind kind) { return kind != Kind::kSend && kind != Kind::kRecv; }

// Elements of each rank's input (the range the chunks walk over).
size_t input_elements(const Operation& op, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  return op.kind == Kind::kReduceScatter || op.kind == Kind::kAllToAll ? op.count * n : op.count;
}

// The part of input range [a, b) that rank `dst` needs from every rank.
std::pair<size_t, size_t> needed(const Operation& op, int dst, size_t a, size_t b) {
  if (op.kind == Kind::kReduceScatter || op.kind == Kind::kAllToAll) {
    const size_t lo = std::max(a, static_cast<size_t>(dst) * op.count);
    const size_t hi = std::min(b, static_cast<size_t>(dst + 1) * op.count);
    return lo < hi ? std::make_pair(lo, hi) : std::make_pair(a, a);
  }
  return {a, b};
}

bool sends_to(const Operation& op, int from, int to) {
  if (op.kind == Kind::kBroadcast) return from == op.root;
  if (op.kind == Kind::kReduce) return to == op.root;
  return true;
}

double scalar_of(const Operation& op) {
  if (op.reduction != Reduction::kPreMulSum) return 0;
  if (op.premul.residence == ncclScalarDevice) return load(op.premul.device_scalar, op.type, 0);
  return op.premul.value;
}

Outcome run_collective(CommState& state, const Operation& op) {
  const int n = state.nranks;
  const int me = state.rank;
  const size_t es = element_bytes(op.type);
  const size_t unit = input_elements(op, n);
  const size_t chunk = std::max<size_t>(1, kChunkBytes / es);
  std::vector<std::vector<char>> got(static_cast<size_t>(n));
  std::vector<double> scalars(static_cast<size_t>(n), 0);
  const double my_scalar = scalar_of(op);
  for (size_t a = 0; a < unit; a += chunk) {
    const size_t b = std::min(unit, a + chunk);
    std::vector<Outgoing> sends;
    std::vector<Incoming> recvs;
    for (int peer = 0; peer < n; ++peer) {
      const auto [lo, hi] = needed(op, peer, a, b);
      if (lo == hi) continue;
      if (sends_to(op, me, peer)) {
        Outgoing s;
        s.peer = peer;
        s.header.signature = op.signature;
        s.header.bytes = (hi - lo) * es;
        s.header.scalar = my_scalar;
        std::snprintf(s.header.what, sizeof(s.header.what), "%s", op.what.c_str());
        s.payload = op.send + lo * es;
        sends.push_back(s);
      }
    }
    const auto [my_lo, my_hi] = needed(op, me, a, b);
    for (int peer = 0; peer < n && my_lo < my_hi; ++peer) {
      if (!sends_to(op, peer, me)) continue;
      got[static_cast<size_t>(peer)].resize((my_hi - my_lo) * es);
      Incoming r;
      r.peer = peer;
      r.signature = op.signature;
      r.what = op.what;
      r.dest = got[static_cast<size_t>(peer)].data();
      r.bytes = (my_hi - my_lo) * es;
      recvs.push_back(r);
    }
    const Outcome outcome = progress(state, sends, recvs);
    if (outcome != Outcome::kDone) return outcome;
    if (my_lo == my_hi || (op.kind == Kind::kReduce && me != op.root)) continue;
    for (const Incoming& r : recvs) scalars[static_cast<size_t>(r.peer)] = r.header.scalar;
    const size_t len = my_hi - my_lo;
    auto reduce_into = [&](char* out) {
      std::vector<const void*> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(got[static_cast<size_t>(r)].data());
      ReduceArgs args{op.reduction, op.type, scalars};
      reduce(args, inputs, out, len);
    };
    const size_t count = op.count;
    switch (op.kind) {
      case Kind::kAllReduce:
      case Kind::kReduce:
        reduce_into(op.recv + my_lo * es);
        break;
      case Kind::kBroadcast:
        std::memcpy(op.recv + my_lo * es, got[static_cast<size_t>(op.root)].data(), len * es);
        break;
      case Kind::kAllGather:
        for (int r = 0; r < n; ++r)
          std::memcpy(op.recv + (static_cast<size_t>(r) * count + my_lo) * es,
                      got[static_cast<size_t>(r)].data(), len * es);
        break;
      case Kind::kReduceScatter:
        reduce_into(op.recv + (my_lo - static_cast<size_t>(me) * count) * es);
        break;
      case Kind::kAllToAll:
        for (int r = 0; r < n; ++r)
          std::memcpy(op.recv + (static_cast<size_t>(r) * count + my_lo - static_cast<size_t>(me) * count) * es,
                      got[static_cast<size_t>(r)].data(), len * es);
        break;
      default:
        break;
    }
  }
  return Outcome::kDone;
}

// Elements an operation writes into its receive buffer on this rank.
size_t output_elements(const Operation& op, int rank, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  switch (op.kind) {
    case Kind::kAllGather:
    case Kind::kAllToAll: return op.count * n;
    case Kind::kReduce: return rank == op.root ? op.count : 0;
    case Kind::kSend: return 0;
    default: return op.count;
  }
}

// Waits until the communicator is aborted (what a failed or hung NCCL kernel
// does), so that the stream does not complete.
void stall_until_aborted(CommState& state) {
  wait_while(state, [] { return true; });
}

// Runs one group of operations of one communicator on the stream's worker:
// collectives in issue order, then every send and receive together.
void execute(const std::shared_ptr<CommState>& shared, const std::vector<Operation>& ops) {
  CommState& state = *shared;
  if (state.aborted.load() || state.async_error.load() != ncclSuccess) {
    stall_until_aborted(state);
    return;
  }
  std::vector<Outgoing> sends;
  std::vector<Incoming> recvs;
  std::vector<const Operation*> corrupt_after;
  std::vector<size_t> corrupt_element;
  auto begin_operation = [&](const Operation& op) -> bool {
    const uint64_t number = ++g_operations;
    if (find_fault(faults(), FaultKind::kVanish, state.rank, number)) raise(SIGKILL);
    if (find_fault(faults(), FaultKind::kHang, state.rank, number)) return false;
    if (find_fault(faults(), FaultKind::kAsyncError, state.rank, number)) {
      error(&state, ncclSystemError,
            std::string(kind_name(op.kind)) + " failed (injected async_error at operation " +
                std::to_string(number) + ")");
      state.async_error.store(ncclSystemError);
      return false;
    }
    if (auto f = find_fault(faults(), FaultKind::kCorrupt, state.rank, number)) {
      corrupt_after.push_back(&op);
      corrupt_element.push_back(f->element);
    }
    return true;
  };
  for (const Operation& op : ops) {
    if (!begin_operation(op)) return stall_until_aborted(state);
    if (is_collective(op.kind)) {
      if (run_collective(state, op) != Outcome::kDone) return stall_until_aborted(state);
    } else if (op.kind == Kind::kSend) {
      Outgoing s;
      s.peer = op.root;
      s.header.signature = op.signature;
      s.header.bytes = op.count * element_bytes(op.type);
      std::snprintf(s.header.what, sizeof(s.header.what), "%s", op.what.c_str());
      s.payload = op.send;
      sends.push_back(s);
    } else {
      Incoming r;
      r.peer = op.root;
      r.signature = op.signature;
      r.what = op.what;
      r.dest = op.recv;
      r.bytes = op.count * element_bytes(op.type);
      recvs.push_back(r);
    }
  }
  if ((!sends.empty() || !recvs.empty()) && progress(state, sends, recvs) != Outcome::kDone) {
    return stall_until_aborted(state);
  }
  for (size_t i = 0; i < corrupt_after.size(); ++i) {
    const Operation& op = *corrupt_after[i];
    const size_t elements = output_elements(op, state.rank, state.nranks);
    if (corrupt_element[i] >= elements) continue;
    const size_t es = element_bytes(op.type);
    op.recv[corrupt_element[i] * es + es - 1] ^= 0x10;  // a high bit: far from any rounding
  }
}

// ---- groups -------------------------------------------------------------------

struct Pending {
  std::shared_ptr<CommState> state;
  cudaStream_t stream = nullptr;
  Operation op;
};

thread_local int tls_group_depth = 0;
thread_local std::vector<Pending> tls_pending;
thread_local ncclResult_t tls_group_error = ncclSuccess;

ncclResult_t launch(const std::shared_ptr<CommState>& state, cudaStream_t stream,
                    std::vector<Operation> ops) {
  auto shared_ops = std::make_shared<const std::vector<Operation>>(std::move(ops));
  const cudaError_t queued = enqueue_node(stream, [state, shared_ops]() -> Work {
    state->in_flight.fetch_add(1);
    const bool pending_launch = state->blocking == 0;
    if (pending_launch) state->launches_pending.fetch_add(1);
    return [state, shared_ops, pending_launch] {
      if (pending_launch) state->launches_pending.fetch_sub(1);
      execute(state, *shared_ops);
      state->in_flight.fetch_sub(1);
    };
  });
  if (queued != cudaSuccess) {
    return error(state.get(), ncclInvalidArgument, "invalid CUDA stream (" +
                                                       std::string(cudaGetErrorString(queued)) + ")");
  }
  return ncclSuccess;
}

ncclResult_t flush_group() {
  std::vector<Pending> pending;
  pending.swap(tls_pending);
  const ncclResult_t group_error = tls_group_error;
  tls_group_error = ncclSuccess;
  if (group_error != ncclSuccess) return group_error;
  // One launch per (communicator, stream), in the order they first appear.
  std::vector<std::pair<std::pair<CommState*, cudaStream_t>, std::vector<Operation>>> batches;
  std::vector<std::shared_ptr<CommState>> owners;
  for (Pending& p : pending) {
    auto key = std::make_pair(p.state.get(), p.stream);
    auto it = std::find_if(batches.begin(), batches.end(), [&](const auto& b) { return b.first == key; });
    if (it == batches.end()) {
      batches.push_back({key, {}});
      owners.push_back(p.state);
      it = batches.end() - 1;
    }
    it->second.push_back(std::move(p.op));
  }
  bool non_blocking = false;
  for (size_t i = 0; i < batches.size(); ++i) {
    const ncclResult_t r = launch(owners[i], batches[i].first.second, std::move(batches[i].second));
    if (r != ncclSuccess) return r;
    non_blocking |= owners[i]->blocking == 0;
  }
  return non_blocking ? ncclInProgress : ncclSuccess;
}

// ---- argument checks ---------------------------------------------------------

std::string reduction_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "premulsum";
  }
}

ncclResult_t check_buffer(CommState& state, const char* call, const char* name, const void* pointer,
                          size_t bytes, const char*& shadow) {
  const Resolved r = resolve(pointer, bytes);
  if (r.kind == Resolved::kDevice && r.device == state.device) {
    shadow = r.shadow;
    return ncclSuccess;
  }
  std::string why;
  const Resolved start = resolve(pointer, 0);
  if (start.kind == Resolved::kDevice && start.device != state.device) {
    why = "device memory of GPU " + std::to_string(start.device) + ", but the communicator is on GPU " +
          std::to_string(state.device);
  } else if (start.kind == Resolved::kDevice) {
    why = "device memory with only " + std::to_string(start.bytes_after) + " bytes from it, " +
          std::to_string(bytes) + " needed";
  } else {
    why = "not device memory (host pointer or freed)";
  }
  return error(&state, ncclInvalidArgument,
               std::string(call) + " : " + name + " " +
                   std::to_string(reinterpret_cast<uintptr_t>(pointer)) + " is " + why);
}

ncclResult_t enqueue_operation(ncclComm_t comm, cudaStream_t stream, Operation op,
                               const void* sendbuff, void* recvbuff) {
  const char* call = kind_name(op.kind);
  std::shared_ptr<CommState> state = live(comm);
  if (!state) {
    return error(nullptr, ncclInvalidArgument,
                 std::string(call) + " : comm is not a live communicator (destroyed, aborted or never made)");
  }
  if (state->init_state.load() != ncclSuccess) {
    return error(state.get(), ncclInvalidUsage,
                 std::string(call) + " : communicator initialization has not completed");
  }
  const size_t es = element_bytes(op.type);
  if (es == 0) {
    return error(state.get(), ncclInvalidArgument,
                 std::string(call) + " : invalid type " + std::to_string(static_cast<int>(op.type)));
  }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
  if ((op.type == ncclFloat8e4m3 || op.type == ncclFloat8e5m2) && compute_capability() < 90) {
    return error(state.get(), ncclInvalidArgument,
                 std::string(call) + " : fp8 types need compute capability 9.0 or newer (this GPU: " +
                     std::to_string(compute_capability() / 10) + "." +
                     std::to_string(compute_capability() % 10) + ")");
  }
#endif
  const int n = state->nranks;
  const int me = state->rank;
  const bool reduces = op.kind == Kind::kAllReduce || op.kind == Kind::kReduce ||
                       op.kind == Kind::kReduceScatter;
  if (reduces) {
    if (op.op < ncclNumOps) {
      static const Reduction map[] = {Reduction::kSum, Reduction::kProd, Reduction::kMax,
                                      Reduction::kMin, Reduction::kAvg};
      if (op.op < 0) return error(state.get(), ncclInvalidArgument, std::string(call) + " : invalid op");
      op.reduction = map[op.op];
    } else {
      std::lock_guard<std::mutex> lock(state->mutex);
      const size_t index = static_cast<size_t>(op.op) - ncclNumOps;
      if (index >= state->premul.size() || !state->premul[index].live) {
        return error(nullptr, ncclInvalidArgument,
                     std::string(call) + " : invalid op " + std::to_string(static_cast<int>(op.op)) +
                         " (not made by ncclRedOpCreatePreMulSum on this communicator, or destroyed)");
      }
      if (state->premul[index].type != op.type) {
        return error(nullptr, ncclInvalidArgument,
                     std::string(call) + " : op was made for " + type_name(state->premul[index].type) +
                         ", used with " + type_name(op.type));
      }
      op.reduction = Reduction::kPreMulSum;
      op.premul = state->premul[index];
    }
  }
  const bool rooted = op.kind == Kind::kReduce || op.kind == Kind::kBroadcast;
  const bool p2p = !is_collective(op.kind);
  if ((rooted || p2p) && (op.root < 0 || op.root >= n)) {
    return error(state.get(), ncclInvalidArgument,
                 std::string(call) + " : " + (p2p ? "peer " : "root ") + std::to_string(op.root) +
                     " is not a rank of this communicator (0.." + std::to_string(n - 1) + ")");
  }
  // What each buffer must hold on this rank.
  size_t send_elements = input_elements(op, n);
  if (op.kind == Kind::kBroadcast && me != op.root) send_elements = 0;
  if (op.kind == Kind::kRecv) send_elements = 0;
  const size_t recv_elements = output_elements(op, me, n);
  if (send_elements > 0 &&
      check_buffer(*state, call, "sendbuff", sendbuff, send_elements * es, op.send) != ncclSuccess) {
    return ncclInvalidArgument;
  }
  const char* recv_shadow = nullptr;
  if (recv_elements > 0 &&
      check_buffer(*state, call, "recvbuff", recvbuff, recv_elements * es, recv_shadow) != ncclSuccess) {
    return ncclInvalidArgument;
  }
  op.recv = const_cast<char*>(recv_shadow);
  // Overlap: only NCCL's in-place layouts.
  if (send_elements > 0 && recv_elements > 0) {
    const auto s = reinterpret_cast<uintptr_t>(sendbuff);
    const auto r = reinterpret_cast<uintptr_t>(recvbuff);
    const uintptr_t s_end = s + send_elements * es;
    const uintptr_t r_end = r + recv_elements * es;
    if (s < r_end && r < s_end) {
      uintptr_t in_place = r;
      if (op.kind == Kind::kAllGather) in_place = r + static_cast<size_t>(me) * op.count * es;
      const bool ok = op.kind == Kind::kReduceScatter
                          ? r == s + static_cast<size_t>(me) * op.count * es
                          : s == in_place;
      if (!ok) {
        return error(state.get(), ncclInvalidArgument,
                     std::string(call) + " : sendbuff and recvbuff overlap but are not NCCL's in-place layout");
      }
    }
  }
  char what[96];
  if (p2p) {
    std::snprintf(what, sizeof(what), "%s(count %zu, %s) %s rank %d", call, op.count, type_name(op.type),
                  op.kind == Kind::kSend ? "to" : "from", op.root);
    // The sender describes itself; the receiver expects "a send of this size".
    op.what = what;
    op.signature = 0x5e4d'0000'0000'0000ULL ^ (op.count * es);
  } else {
    std::snprintf(what, sizeof(what), "%s(count %zu, %s%s%s%s)", call, op.count, type_name(op.type),
                  reduces ? ", " : "", reduces ? reduction_name(op.op).c_str() : "",
                  rooted ? (", root " + std::to_string(op.root)).c_str() : "");
    op.what = what;
    op.signature = std::hash<std::string>{}(op.what);
  }
  static std::atomic<uint64_t> calls{0};
  if (find_fault(faults(), FaultKind::kCallHang, me, ++calls)) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // never returns
  }
  state->header->slots[me].launched[static_cast<int>(op.kind)].fetch_add(1, std::memory_order_relaxed);
  if (tls_group_depth > 0) {
    tls_pending.push_back({state, stream, std::move(op)});
    return ncclSuccess;
  }
  std::vector<Operation> ops;
  ops.push_back(std::move(op));
  const ncclResult_t launched = launch(state, stream, std::move(ops));
  if (launched != ncclSuccess) return launched;
  return state->blocking == 0 ? ncclInProgress : ncclSuccess;
}

ncclResult_t group_checked(ncclResult_t result) {
  // Inside a group a failed call also fails the group's end, as NCCL does.
  if (result != ncclSuccess && result != ncclInProgress && tls_group_depth > 0 &&
      tls_group_error == ncclSuccess) {
    tls_group_error = result;
  }
  return result;
}

Operation make_op(Kind kind, size_t count, ncclDataType_t type, ncclRedOp_t op, int root) {
  Operation o;
  o.kind = kind;
  o.count = count;
  o.type = type;
  o.op = op;
  o.root = root;
  return o;
}

// ---- making communicators ------------------------------------------------------

int blocking_of(const ncclConfig_t* config) {
  if (config != nullptr && config->blocking != NCCL_CONFIG_UNDEF_INT) return config->blocking != 0;
  const char* env = std::getenv("NCCL_COMM_BLOCKING");
  return env != nullptr && std::string(env) == "0" ? 0 : 1;
}

ncclResult_t init_rank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank,
                       const ncclConfig_t* config) {
  if (comm == nullptr) return error(nullptr, ncclInvalidArgument, "ncclCommInitRank : comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) {
    return error(nullptr, ncclInvalidArgument,
                 "ncclCommInitRank : rank " + std::to_string(rank) + " / nranks " +
                     std::to_string(nranks) + " out of range (the stand-in takes up to " +
                     std::to_string(kMaxRanks) + " ranks)");
  }
  if (std::memcmp(id.internal, kIdMagic, sizeof(kIdMagic)) != 0) {
    return error(nullptr, ncclInvalidArgument,
                 "ncclCommInitRank : the ncclUniqueId was not made by ncclGetUniqueId");
  }
  if (config != nullptr && (config->magic != 0xcafebeef || config->size != sizeof(ncclConfig_t))) {
    return error(nullptr, ncclInvalidArgument,
                 "ncclCommInitRankConfig : config not initialized with NCCL_CONFIG_INITIALIZER");
  }
  if (device_count() <= 0) {
    return error(nullptr, ncclUnhandledCudaError, "Cuda failure 'no CUDA-capable device is detected'");
  }
  auto state = std::make_shared<CommState>();
  state->rank = rank;
  state->nranks = nranks;
  state->device = current_device();
  state->blocking = blocking_of(config);
  auto* handle = new ncclComm{state};
  if (state->blocking) {
    const ncclResult_t result = join(*state, id);
    if (result != ncclSuccess) {
      if (!state->shm_name.empty()) shm_unlink(state->shm_name.c_str());
      delete handle;
      return result;
    }
    state->init_state.store(ncclSuccess);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_live.insert(handle);
    *comm = handle;
    return ncclSuccess;
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_live.insert(handle);
  }
  *comm = handle;
  state->init_thread = std::thread([state, id] {
    const ncclResult_t result = join(*state, id);
    state->init_state.store(result);
  });
  return ncclInProgress;
}

void release(ncclComm_t comm, bool abort) {
  std::shared_ptr<CommState> state = comm->state;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_live.erase(comm);
  }
  if (abort) {
    state->aborted.store(true);
    if (state->header != nullptr) state->header->slots[state->rank].failed.store(1);
  }
  // Operations already queued end (an abort makes them stop); then go.
  while (state->in_flight.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (state->init_thread.joinable()) state->init_thread.join();
  if (!state->shm_name.empty()) shm_unlink(state->shm_name.c_str());
  delete comm;
}

}  // namespace
}  // namespace ccscope::standin

using namespace ccscope::standin;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  // CCSCOPE_STANDIN_NCCL_VERSION=22703: answer as an older library would (a
  // caller then takes its fallbacks: cudaMalloc, grouped send/recv all-to-all).
  const char* older = std::getenv("CCSCOPE_STANDIN_NCCL_VERSION");
  *version = older != nullptr && *older != '\0' ? std::atoi(older) : NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return error(nullptr, ncclInvalidArgument, "ncclGetUniqueId : uniqueId is NULL");
  std::memset(uniqueId->internal, 0, sizeof(uniqueId->internal));
  std::memcpy(uniqueId->internal, kIdMagic, sizeof(kIdMagic));
  char random[16];
  if (getrandom(random, sizeof(random), 0) != static_cast<ssize_t>(sizeof(random))) {
    return error(nullptr, ncclSystemError, std::string("getrandom failed: ") + std::strerror(errno));
  }
  std::memcpy(uniqueId->internal + 16, random, sizeof(random));
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  static thread_local std::string copy;
  std::shared_ptr<CommState> state = live(comm);
  if (state) {
    std::lock_guard<std::mutex> lock(state->mutex);
    copy = state->last_error;
  } else {
    std::lock_guard<std::mutex> lock(g_mutex);
    copy = g_last_error;
  }
  return copy.c_str();
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return init_rank(comm, nranks, commId, rank, config);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return init_rank(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1) return error(nullptr, ncclInvalidArgument, "ncclCommInitAll : bad arguments");
  ncclUniqueId id;
  if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return r;
  std::vector<ncclResult_t> results(static_cast<size_t>(ndev), ncclSuccess);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      const int device = devlist ? devlist[i] : i;
      if (cudaSetDevice(device) != cudaSuccess) {
        results[static_cast<size_t>(i)] = error(nullptr, ncclInvalidArgument,
                                                "ncclCommInitAll : invalid device " + std::to_string(device));
        return;
      }
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 1;
      results[static_cast<size_t>(i)] = init_rank(&comms[i], ndev, id, i, &config);
    });
  }
  for (std::thread& t : threads) t.join();
  for (ncclResult_t r : results)
    if (r != ncclSuccess) return r;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  std::shared_ptr<CommState> state = live(comm);
  if (!state || asyncError == nullptr) {
    return error(nullptr, ncclInvalidArgument, "ncclCommGetAsyncError : invalid communicator or argument");
  }
  const auto async = static_cast<ncclResult_t>(state->async_error.load());
  const auto init = static_cast<ncclResult_t>(state->init_state.load());
  if (async != ncclSuccess) *asyncError = async;
  else if (init != ncclSuccess) *asyncError = init;
  else if (state->finalizing.load() && state->in_flight.load() > 0) *asyncError = ncclInProgress;
  else if (state->launches_pending.load() > 0) *asyncError = ncclInProgress;
  else *asyncError = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  std::shared_ptr<CommState> state = live(comm);
  if (!state || count == nullptr) return ncclInvalidArgument;
  *count = state->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  std::shared_ptr<CommState> state = live(comm);
  if (!state || device == nullptr) return ncclInvalidArgument;
  *device = state->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  std::shared_ptr<CommState> state = live(comm);
  if (!state || rank == nullptr) return ncclInvalidArgument;
  *rank = state->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  std::shared_ptr<CommState> state = live(comm);
  if (!state) return error(nullptr, ncclInvalidArgument, "ncclCommFinalize : invalid communicator");
  state->finalizing.store(true);
  if (state->blocking == 0) return ncclInProgress;
  wait_while(*state, [&] { return state->in_flight.load() > 0; });
  return static_cast<ncclResult_t>(state->async_error.load());
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  std::shared_ptr<CommState> state = live(comm);
  if (!state || newcomm == nullptr || (color < 0 && color != NCCL_SPLIT_NOCOLOR)) {
    return error(state.get(), ncclInvalidArgument, "ncclCommSplit : invalid argument");
  }
  *newcomm = nullptr;
  if (state->init_state.load() != ncclSuccess) {
    return error(state.get(), ncclInvalidUsage, "ncclCommSplit : communicator initialization has not completed");
  }
  // Collective over the parent, through its segment (NCCL uses its bootstrap
  // network, not the data path): publish (color, key), wait for every rank's,
  // then join the new communicator of this color.
  Header& h = *state->header;
  const uint64_t split = ++state->splits;
  const int n = state->nranks;
  // The previous split's slots must have been read by every rank before they change.
  if (!wait_while(*state, [&] {
        for (int r = 0; r < n; ++r)
          if (h.slots[r].split_read.load() + 1 < split) return true;
        return false;
      })) {
    return error(state.get(), ncclInternalError, "ncclCommSplit : aborted");
  }
  RankSlot& mine = h.slots[state->rank];
  mine.split_color.store(color);
  mine.split_key.store(key);
  mine.split.store(split);
  const bool all_there = wait_while(*state, [&] {
    for (int r = 0; r < n; ++r) {
      if (h.slots[r].split.load() < split) {
        if (h.slots[r].failed.load() != 0 || process_gone(h.slots[r].pid.load())) return false;
        return true;
      }
    }
    return false;
  });
  std::vector<std::pair<int, int>> members;  // (key, parent rank) of this color
  for (int r = 0; r < n && all_there; ++r) {
    if (h.slots[r].split.load() < split) {
      mine.split_read.store(split);
      return error(state.get(), ncclRemoteError,
                   "ncclCommSplit : rank " + std::to_string(r) + " failed or exited before joining the split");
    }
    if (h.slots[r].split_color.load() == color) members.emplace_back(h.slots[r].split_key.load(), r);
  }
  mine.split_read.store(split);
  if (!all_there) return error(state.get(), ncclInternalError, "ncclCommSplit : aborted");
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  while (members[static_cast<size_t>(new_rank)].second != state->rank) ++new_rank;
  // The new communicator's id: the parent's segment, the split and the color.
  ncclUniqueId id{};
  std::memcpy(id.internal, kIdMagic, sizeof(kIdMagic));
  const std::string seed = state->shm_name + "/" + std::to_string(split) + "/" + std::to_string(color);
  const uint64_t a = std::hash<std::string>{}(seed), b = std::hash<std::string>{}(seed + "#");
  std::memcpy(id.internal + 16, &a, sizeof(a));
  std::memcpy(id.internal + 24, &b, sizeof(b));
  ncclConfig_t inherited = NCCL_CONFIG_INITIALIZER;
  inherited.blocking = state->blocking;
  const int device = current_device();
  cudaSetDevice(state->device);
  const ncclResult_t result = init_rank(newcomm, static_cast<int>(members.size()), id, new_rank,
                                        config != nullptr ? config : &inherited);
  cudaSetDevice(device);
  return result;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!live(comm)) return error(nullptr, ncclInvalidArgument, "ncclCommDestroy : invalid communicator");
  release(comm, false);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!live(comm)) return error(nullptr, ncclInvalidArgument, "ncclCommAbort : invalid communicator");
  release(comm, true);
  return ncclSuccess;
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  const cudaError_t e = allocate_device(ptr, size, current_device());
  if (e != cudaSuccess) {
    return error(nullptr, ncclUnhandledCudaError,
                 std::string("ncclMemAlloc : Cuda failure '") + cudaGetErrorString(e) + "'");
  }
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* ptr) {
  const cudaError_t e = free_device(ptr);
  if (e != cudaSuccess) return error(nullptr, ncclInvalidArgument, "ncclMemFree : not memory from ncclMemAlloc");
  return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  std::shared_ptr<CommState> state = live(comm);
  if (!state || op == nullptr || scalar == nullptr || element_bytes(datatype) == 0) {
    return error(state.get(), ncclInvalidArgument, "ncclRedOpCreatePreMulSum : invalid argument");
  }
  PreMulOp made;
  made.type = datatype;
  made.residence = residence;
  made.live = true;
  const Resolved where = resolve(scalar, element_bytes(datatype));
  if (residence == ncclScalarHostImmediate) {
    if (where.kind == Resolved::kDevice) {
      return error(state.get(), ncclInvalidArgument,
                   "ncclRedOpCreatePreMulSum : ncclScalarHostImmediate with a device pointer");
    }
    made.value = load(scalar, datatype, 0);
  } else {
    if (where.kind != Resolved::kDevice) {
      return error(state.get(), ncclInvalidArgument,
                   "ncclRedOpCreatePreMulSum : ncclScalarDevice with a pointer that is not device memory");
    }
    made.device_scalar = where.shadow;
  }
  std::lock_guard<std::mutex> lock(state->mutex);
  state->premul.push_back(made);
  *op = static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(state->premul.size()) - 1);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  std::shared_ptr<CommState> state = live(comm);
  if (!state) return error(nullptr, ncclInvalidArgument, "ncclRedOpDestroy : invalid communicator");
  std::lock_guard<std::mutex> lock(state->mutex);
  const long index = static_cast<long>(op) - ncclNumOps;
  if (index < 0 || static_cast<size_t>(index) >= state->premul.size() ||
      !state->premul[static_cast<size_t>(index)].live) {
    return error(nullptr, ncclInvalidArgument,
                 "ncclRedOpDestroy : op " + std::to_string(static_cast<int>(op)) +
                     " was not made by ncclRedOpCreatePreMulSum on this communicator (or was destroyed)");
  }
  state->premul[static_cast<size_t>(index)].live = false;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++tls_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (tls_group_depth <= 0) {
    return error(nullptr, ncclInvalidUsage, "ncclGroupEnd: not in a group call.");
  }
  if (--tls_group_depth > 0) return ncclSuccess;
  return flush_group();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return group_checked(enqueue_operation(comm, stream, make_op(Kind::kAllReduce, count, datatype, op, 0),
                                         sendbuff, recvbuff));
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return group_checked(enqueue_operation(comm, stream, make_op(Kind::kReduce, count, datatype, op, root),
                                         sendbuff, recvbuff));
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  return group_checked(enqueue_operation(
      comm, stream, make_op(Kind::kBroadcast, count, datatype, ncclSum, root), sendbuff, recvbuff));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return group_checked(enqueue_operation(
      comm, stream, make_op(Kind::kAllGather, sendcount, datatype, ncclSum, 0), sendbuff, recvbuff));
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return group_checked(enqueue_operation(
      comm, stream, make_op(Kind::kReduceScatter, recvcount, datatype, op, 0), sendbuff, recvbuff));
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) {
  return group_checked(enqueue_operation(
      comm, stream, make_op(Kind::kAllToAll, count, datatype, ncclSum, 0), sendbuff, recvbuff));
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return group_checked(enqueue_operation(comm, stream, make_op(Kind::kSend, count, datatype, ncclSum, peer),
                                         sendbuff, nullptr));
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return group_checked(enqueue_operation(comm, stream, make_op(Kind::kRecv, count, datatype, ncclSum, peer),
                                         nullptr, recvbuff));
}

}  // extern "C"
