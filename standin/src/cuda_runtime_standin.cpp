// The CUDA runtime stand-in (tests only; docs/standin.md): the subset of
// libcudart that ccscope and the NCCL stand-in call, over host memory, with the
// rules a program can get wrong on a real GPU made observable:
//  - device memory is not host memory: cudaMalloc hands out a PROT_NONE
//    mapping of a memfd (a host dereference faults); the stand-in reads and
//    writes through a second mapping of the same memfd;
//  - streams are asynchronous: every queued operation runs on the stream's
//    worker thread, after the call returned; cudaStreamQuery and events say
//    "not ready" until the worker got there;
//  - cudaMemcpy kinds are checked against where the pointers came from;
//  - capture records a stream's work into a graph that launches replay.
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime.h"

using Clock = std::chrono::steady_clock;

// The opaque handle types of the runtime's API, defined here.
struct CUstream_st {
  int device = 0;
  // CCSCOPE_STANDIN_STREAM_DELAY_US: the worker waits this long before each
  // operation, so that a missing synchronisation reads stale data every time.
  std::chrono::microseconds delay{0};
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<ccscope::standin::Work> queue;
  size_t unfinished = 0;  // queued or running
  bool stopping = false;
  bool detached = false;
  // Capture (thread-local mode is all the stand-in knows).
  bool capturing = false;
  bool capture_invalid = false;
  // A graph node makes, at each launch (on the launching thread), the work it queues.
  std::vector<std::function<ccscope::standin::Work()>> captured;
  std::thread worker;
};

struct CUevent_st {
  std::mutex mutex;
  bool timing = true;
  uint64_t recorded = 0;  // generation of the last cudaEventRecord
  uint64_t reached = 0;   // generation the stream reached
  Clock::time_point when{};
};

struct CUgraph_st {
  std::vector<std::function<ccscope::standin::Work()>> nodes;
};
struct CUgraphExec_st {
  std::vector<std::function<ccscope::standin::Work()>> nodes;
};

namespace ccscope::standin {
namespace {

size_t env_size(const char* name, size_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text) return fallback;
  switch (*end) {
    case 'G': case 'g': return static_cast<size_t>(value) << 30;
    case 'M': case 'm': return static_cast<size_t>(value) << 20;
    case 'K': case 'k': return static_cast<size_t>(value) << 10;
    default: return static_cast<size_t>(value);
  }
}

struct Allocation {
  char* device = nullptr;  // the PROT_NONE mapping handed out
  char* shadow = nullptr;  // the stand-in's readable/writable mapping
  size_t bytes = 0;
  size_t mapped = 0;
  int device_index = 0;
  bool pinned_host = false;
};

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations;  // by start address
  std::vector<size_t> used;                     // device bytes in use per device
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  // Destroyed events: queued work may still record them, so they are kept
  // (a few bytes each) instead of freed under a worker's feet.
  std::vector<std::unique_ptr<CUevent_st>> destroyed_events;
  std::vector<CUstream_st*> default_streams;
  int devices = 1;
  size_t memory_per_device = size_t{4} << 30;

  State() {
    devices = static_cast<int>(env_size("CCSCOPE_STANDIN_GPUS", 1));
    memory_per_device = env_size("CCSCOPE_STANDIN_GPU_MEMORY", memory_per_device);
    used.assign(static_cast<size_t>(std::max(devices, 0)), 0);
  }
};

State& state() {
  static State* s = new State();  // never destroyed: worker threads may outlive main
  return *s;
}

thread_local int tls_device = 0;
thread_local cudaError_t tls_last_error = cudaSuccess;

cudaError_t fail(cudaError_t error) {
  if (error != cudaSuccess) tls_last_error = error;
  return error;
}

void worker_loop(CUstream_st* stream) {
  std::unique_lock<std::mutex> lock(stream->mutex);
  for (;;) {
    stream->changed.wait(lock, [&] { return stream->stopping || !stream->queue.empty(); });
    if (stream->queue.empty()) break;  // stopping and drained
    Work work = std::move(stream->queue.front());
    stream->queue.pop_front();
    lock.unlock();
    if (stream->delay.count() > 0) std::this_thread::sleep_for(stream->delay);
    work();
    lock.lock();
    --stream->unfinished;
    stream->changed.notify_all();
  }
  const bool detached = stream->detached;
  lock.unlock();
  if (detached) delete stream;
}

CUstream_st* make_stream(int device) {
  auto* stream = new CUstream_st();
  stream->device = device;
  stream->delay = std::chrono::microseconds(env_size("CCSCOPE_STANDIN_STREAM_DELAY_US", 0));
  stream->worker = std::thread(worker_loop, stream);
  return stream;
}

// The stream a handle names, or nullptr; 0 (and the legacy/per-thread
// handles) mean the current device's default stream.
CUstream_st* stream_of(cudaStream_t handle) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
    if (s.default_streams.empty()) s.default_streams.assign(static_cast<size_t>(s.devices), nullptr);
    CUstream_st*& d = s.default_streams[static_cast<size_t>(tls_device)];
    if (d == nullptr) d = make_stream(tls_device);
    return d;
  }
  return s.streams.count(handle) ? handle : nullptr;
}

bool event_valid(cudaEvent_t event) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.events.count(event) != 0;
}

// Allocation containing [p, p + bytes) (device or pinned host), or nullptr.
const Allocation* find_allocation(const void* p, size_t bytes) {
  State& s = state();
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = s.allocations.upper_bound(address);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(a.device);
  if (address < begin || address - begin > a.bytes || bytes > a.bytes - (address - begin)) return nullptr;
  if (bytes == 0 && address - begin == a.bytes && a.bytes != 0) return nullptr;
  return &a;
}

bool device_count_valid(int device) { return device >= 0 && device < state().devices; }

// The PCI bus id of a stand-in GPU: CCSCOPE_STANDIN_PCI_BUS_IDS (comma-separated,
// e.g. the bus ids of the NVML stand-in's machine file), else 0000:18:00.0,
// 0000:28:00.0, ...
std::string bus_id_of(int device) {
  if (const char* list = std::getenv("CCSCOPE_STANDIN_PCI_BUS_IDS"); list != nullptr) {
    std::string text(list);
    size_t start = 0;
    for (int i = 0; i < device && start != std::string::npos; ++i) {
      start = text.find(',', start);
      if (start != std::string::npos) ++start;
    }
    if (start != std::string::npos && start < text.size()) return text.substr(start, text.find(',', start) - start);
  }
  char id[32];
  std::snprintf(id, sizeof(id), "0000:%02x:00.0", 0x18 + 0x10 * device);
  return id;
}

}  // namespace

Resolved resolve(const void* pointer, size_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Allocation* a = find_allocation(pointer, bytes);
  Resolved r;
  if (a == nullptr) return r;
  const size_t offset = static_cast<size_t>(static_cast<const char*>(pointer) - a->device);
  r.kind = a->pinned_host ? Resolved::kPinnedHost : Resolved::kDevice;
  r.shadow = a->shadow + offset;
  r.device = a->device_index;
  r.bytes_after = a->bytes - offset;
  return r;
}

cudaError_t allocate_device(void** pointer, size_t bytes, int device) {
  if (pointer == nullptr) return cudaErrorInvalidValue;
  *pointer = nullptr;
  if (!device_count_valid(device)) return cudaErrorInvalidDevice;
  if (bytes == 0) return cudaSuccess;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    size_t& used = s.used[static_cast<size_t>(device)];
    if (bytes > s.memory_per_device - used) return cudaErrorMemoryAllocation;
    used += bytes;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (bytes + page - 1) / page * page;
  const int fd = static_cast<int>(syscall(SYS_memfd_create, "ccscope-standin-device", 1u /*MFD_CLOEXEC*/));
  void* device_view = MAP_FAILED;
  void* shadow = MAP_FAILED;
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(mapped)) == 0) {
    device_view = mmap(nullptr, mapped, PROT_NONE, MAP_SHARED, fd, 0);
    shadow = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (fd >= 0) close(fd);
  if (device_view == MAP_FAILED || shadow == MAP_FAILED) {
    if (device_view != MAP_FAILED) munmap(device_view, mapped);
    if (shadow != MAP_FAILED) munmap(shadow, mapped);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.used[static_cast<size_t>(device)] -= bytes;
    return cudaErrorMemoryAllocation;
  }
  Allocation a;
  a.device = static_cast<char*>(device_view);
  a.shadow = static_cast<char*>(shadow);
  a.bytes = bytes;
  a.mapped = mapped;
  a.device_index = device;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations[reinterpret_cast<uintptr_t>(a.device)] = a;
  *pointer = a.device;
  return cudaSuccess;
}

cudaError_t free_device(void* pointer) {
  if (pointer == nullptr) return cudaSuccess;
  State& s = state();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.allocations.find(reinterpret_cast<uintptr_t>(pointer));
    if (it == s.allocations.end() || it->second.pinned_host) return cudaErrorInvalidValue;
    a = it->second;
    s.allocations.erase(it);
    s.used[static_cast<size_t>(a.device_index)] -= a.bytes;
  }
  munmap(a.device, a.mapped);
  munmap(a.shadow, a.mapped);
  return cudaSuccess;
}

int current_device() { return tls_device; }

int compute_capability() {
  // CCSCOPE_STANDIN_COMPUTE_CAPABILITY: "8.0" or "80" (default 9.0, the H200's).
  const char* text = std::getenv("CCSCOPE_STANDIN_COMPUTE_CAPABILITY");
  if (text == nullptr || *text == '\0') return 90;
  const double value = std::strtod(text, nullptr);
  return value < 10 ? static_cast<int>(value * 10 + 0.5) : static_cast<int>(value);
}
int device_count() { return state().devices; }

cudaError_t enqueue(cudaStream_t handle, Work work) {
  return enqueue_node(handle, [work = std::move(work)] { return work; });
}

cudaError_t enqueue_node(cudaStream_t handle, std::function<Work()> make) {
  CUstream_st* stream = stream_of(handle);
  if (stream == nullptr) return cudaErrorInvalidResourceHandle;
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (stream->capturing) {
    stream->captured.push_back(std::move(make));
    return cudaSuccess;
  }
  stream->queue.push_back(make());
  ++stream->unfinished;
  stream->changed.notify_all();
  return cudaSuccess;
}

cudaError_t record_error(cudaError_t error) { return fail(error); }

std::string log_prefix(int device) {
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + ":" + std::to_string(getpid()) + ":" +
         std::to_string(static_cast<long>(syscall(SYS_gettid))) + " [" + std::to_string(device) + "]";
}

namespace {

// Where a pointer of a copy lies: device memory (shadow address), host memory.
struct Place {
  bool device = false;
  char* address = nullptr;  // what the worker reads or writes
};

cudaError_t place_of(const void* pointer, size_t bytes, Place& place) {
  const Resolved r = resolve(pointer, bytes);
  if (r.kind == Resolved::kDevice) {
    place = {true, r.shadow};
    return cudaSuccess;
  }
  // A pointer into device memory whose range runs past its allocation.
  if (resolve(pointer, 1).kind == Resolved::kDevice) return cudaErrorInvalidValue;
  place = {false, static_cast<char*>(const_cast<void*>(pointer))};
  return cudaSuccess;
}

// Until the stream that records `event` reached record `generation`.
void wait_reached(CUevent_st* event, uint64_t generation) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(event->mutex);
      if (event->reached >= generation) return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

cudaError_t sync_stream(CUstream_st* stream) {
  std::unique_lock<std::mutex> lock(stream->mutex);
  if (stream->capturing) return cudaErrorStreamCaptureUnsupported;
  stream->changed.wait(lock, [&] { return stream->unfinished == 0; });
  return cudaSuccess;
}

cudaError_t copy_async(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                       cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  Place to, from;
  if (place_of(dst, count, to) != cudaSuccess || place_of(src, count, from) != cudaSuccess) {
    return cudaErrorInvalidValue;
  }
  bool kind_ok = false;
  switch (kind) {
    case cudaMemcpyHostToHost: kind_ok = !to.device && !from.device; break;
    case cudaMemcpyHostToDevice: kind_ok = to.device && !from.device; break;
    case cudaMemcpyDeviceToHost: kind_ok = !to.device && from.device; break;
    case cudaMemcpyDeviceToDevice: kind_ok = to.device && from.device; break;
    case cudaMemcpyDefault: kind_ok = true; break;
    default: kind_ok = false;
  }
  if (!kind_ok) return cudaErrorInvalidMemcpyDirection;
  char* d = to.address;
  const char* s = from.address;
  return enqueue(stream, [d, s, count] { std::memmove(d, s, count); });
}

}  // namespace
}  // namespace ccscope::standin

using namespace ccscope::standin;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = 0;
  if (device_count() <= 0) return fail(cudaErrorNoDevice);
  *count = device_count();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device_count() <= 0) return fail(cudaErrorNoDevice);
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  tls_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  if (device_count() <= 0) return fail(cudaErrorNoDevice);
  *device = tls_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "ccscope stand-in GPU %d", device);
  prop->totalGlobalMem = state().memory_per_device;
  const int capability = compute_capability();
  prop->major = capability / 10;
  prop->minor = capability % 10;
  prop->multiProcessorCount = 132;
  prop->warpSize = 32;
  unsigned domain = 0, bus = 0, dev = 0, function = 0;
  std::sscanf(bus_id_of(device).c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &function);
  prop->pciDomainID = static_cast<int>(domain);
  prop->pciBusID = static_cast<int>(bus);
  prop->pciDeviceID = static_cast<int>(dev);
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  if (pciBusId == nullptr || len <= 0) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  std::snprintf(pciBusId, static_cast<size_t>(len), "%s", bus_id_of(device).c_str());
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return fail(cudaErrorInvalidValue);
  *version = device_count() > 0 ? CUDART_VERSION : 0;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t error = tls_last_error;
  tls_last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError(void) { return tls_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorMissingConfiguration: return "cudaErrorMissingConfiguration";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorIllegalState: return "the operation is not permitted in the current state";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorMissingConfiguration: return "__global__ function call is not configured";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    default: return "unknown error";
  }
}

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  return fail(allocate_device(devPtr, size, tls_device));
}

cudaError_t cudaFree(void* devPtr) { return fail(free_device(devPtr)); }

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  void* p = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation);
  Allocation a;
  a.device = a.shadow = static_cast<char*>(p);
  a.bytes = a.mapped = size;
  a.pinned_host = true;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations[reinterpret_cast<uintptr_t>(p)] = a;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == s.allocations.end() || !it->second.pinned_host) return fail(cudaErrorInvalidValue);
    s.allocations.erase(it);
  }
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  if (free_bytes == nullptr || total == nullptr) return fail(cudaErrorInvalidValue);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *total = s.memory_per_device;
  *free_bytes = s.memory_per_device - s.used[static_cast<size_t>(tls_device)];
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return fail(cudaErrorInvalidValue);
  std::memset(attributes, 0, sizeof(*attributes));
  const Resolved r = resolve(ptr, 0);
  attributes->type = r.kind == Resolved::kDevice       ? cudaMemoryTypeDevice
                     : r.kind == Resolved::kPinnedHost ? cudaMemoryTypeHost
                                                       : cudaMemoryTypeUnregistered;
  attributes->device = r.kind == Resolved::kDevice ? r.device : -1;
  attributes->devicePointer = r.kind == Resolved::kNone ? nullptr : const_cast<void*>(ptr);
  attributes->hostPointer = r.kind == Resolved::kDevice ? nullptr : const_cast<void*>(ptr);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  (void)flags;  // every stand-in stream is non-blocking towards the others
  if (pStream == nullptr) return fail(cudaErrorInvalidValue);
  if (device_count() <= 0) return fail(cudaErrorNoDevice);
  CUstream_st* stream = make_stream(tls_device);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.streams.insert(stream);
  *pStream = stream;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t handle) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (handle == nullptr || s.streams.erase(handle) == 0) return fail(cudaErrorInvalidResourceHandle);
  }
  // As CUDA: the call returns at once; queued work still completes, then the
  // stream's resources go. The worker frees a stream that still has work.
  std::unique_lock<std::mutex> lock(handle->mutex);
  handle->stopping = true;
  handle->changed.notify_all();
  if (handle->unfinished > 0) {
    handle->detached = true;
    handle->worker.detach();
    return cudaSuccess;
  }
  lock.unlock();
  handle->worker.join();
  delete handle;
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t handle) {
  CUstream_st* stream = stream_of(handle);
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (stream->capturing) {
    stream->capture_invalid = true;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  return stream->unfinished == 0 ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t handle) {
  CUstream_st* stream = stream_of(handle);
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
  return fail(sync_stream(stream));
}

cudaError_t cudaDeviceSynchronize(void) {
  std::vector<CUstream_st*> streams;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (CUstream_st* stream : s.streams)
      if (stream->device == tls_device) streams.push_back(stream);
    if (!s.default_streams.empty() && s.default_streams[static_cast<size_t>(tls_device)])
      streams.push_back(s.default_streams[static_cast<size_t>(tls_device)]);
  }
  for (CUstream_st* stream : streams) {
    const cudaError_t error = sync_stream(stream);
    if (error != cudaSuccess) return fail(error);
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return fail(copy_async(dst, src, count, kind, stream));
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  const cudaError_t queued = copy_async(dst, src, count, kind, nullptr);
  if (queued != cudaSuccess || count == 0) return fail(queued);
  return cudaStreamSynchronize(nullptr);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const Resolved r = resolve(devPtr, count);
  if (r.kind != Resolved::kDevice) return fail(cudaErrorInvalidValue);
  char* shadow = r.shadow;
  return fail(enqueue(stream, [shadow, value, count] { std::memset(shadow, value, count); }));
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  const cudaError_t queued = cudaMemsetAsync(devPtr, value, count, nullptr);
  if (queued != cudaSuccess || count == 0) return queued;
  return cudaStreamSynchronize(nullptr);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr) return fail(cudaErrorInvalidValue);
  auto* e = new CUevent_st();
  e->timing = (flags & cudaEventDisableTiming) == 0;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.events.insert(e);
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (event == nullptr || s.events.erase(event) == 0) return fail(cudaErrorInvalidResourceHandle);
    s.destroyed_events.emplace_back(event);
  }
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event_valid(event)) return fail(cudaErrorInvalidResourceHandle);
  // The generation is taken when the record is queued (at each launch of a
  // graph it was captured into); the worker marks it reached.
  return fail(enqueue_node(stream, [event]() -> Work {
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(event->mutex);
      generation = ++event->recorded;
    }
    return [event, generation] {
      std::lock_guard<std::mutex> lock(event->mutex);
      if (event->reached < generation) {
        event->reached = generation;
        event->when = Clock::now();
      }
    };
  }));
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event_valid(event)) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(event->mutex);
  return event->reached >= event->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event_valid(event)) return fail(cudaErrorInvalidResourceHandle);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    generation = event->recorded;
  }
  wait_reached(event, generation);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return fail(cudaErrorInvalidValue);
  if (!event_valid(start) || !event_valid(end)) return fail(cudaErrorInvalidResourceHandle);
  std::scoped_lock lock(start->mutex, end->mutex);
  if (!start->timing || !end->timing || start->recorded == 0 || end->recorded == 0) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  if (start->reached < start->recorded || end->reached < end->recorded) return fail(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  (void)flags;
  if (!event_valid(event)) return fail(cudaErrorInvalidResourceHandle);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    generation = event->recorded;
  }
  return fail(enqueue(stream, [event, generation] { wait_reached(event, generation); }));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t handle, cudaStreamCaptureMode mode) {
  (void)mode;
  if (handle == nullptr) return fail(cudaErrorStreamCaptureUnsupported);  // legacy stream
  CUstream_st* stream = stream_of(handle);
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (stream->capturing) return fail(cudaErrorIllegalState);
  stream->capturing = true;
  stream->capture_invalid = false;
  stream->captured.clear();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t handle, cudaGraph_t* graph) {
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  *graph = nullptr;
  CUstream_st* stream = stream_of(handle);
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (!stream->capturing) return fail(cudaErrorIllegalState);
  stream->capturing = false;
  if (stream->capture_invalid) {
    stream->captured.clear();
    return fail(cudaErrorStreamCaptureInvalidated);
  }
  auto* g = new CUgraph_st();
  g->nodes = std::move(stream->captured);
  stream->captured.clear();
  *graph = g;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t handle, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  CUstream_st* stream = stream_of(handle);
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(stream->mutex);
  *status = !stream->capturing        ? cudaStreamCaptureStatusNone
            : stream->capture_invalid ? cudaStreamCaptureStatusInvalidated
                                      : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long flags) {
  (void)flags;
  if (exec == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  auto* e = new CUgraphExec_st();
  e->nodes = graph->nodes;
  *exec = e;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  for (const auto& node : exec->nodes) {
    const cudaError_t error = enqueue(stream, node());
    if (error != cudaSuccess) return fail(error);
  }
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  delete exec;
  return cudaSuccess;
}

}  // extern "C"
