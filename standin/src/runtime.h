#pragma once
// What the CUDA runtime stand-in (cuda_runtime_standin.cpp, libcudart.so.N)
// offers the NCCL stand-in: device memory that the host cannot address, and
// work queued on a stream's worker thread. Exported from libcudart's stand-in
// under the version node of the real library's soname.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>

namespace ccscope::standin {

// Where a pointer range lies.
struct Resolved {
  enum Kind { kNone, kDevice, kPinnedHost } kind = kNone;
  char* shadow = nullptr;  // device memory: the stand-in's own mapping of the range's start
  int device = -1;
  size_t bytes_after = 0;  // bytes of the allocation from the pointer on
};

// What `pointer` is; [pointer, pointer + bytes) must lie in one allocation for
// kDevice/kPinnedHost, else kNone.
Resolved resolve(const void* pointer, size_t bytes);

// Device memory on `device` (NCCL's ncclMemAlloc uses it too).
cudaError_t allocate_device(void** pointer, size_t bytes, int device);
cudaError_t free_device(void* pointer);

int current_device();
// Every stand-in GPU's compute capability, major * 10 + minor.
int compute_capability();
int device_count();

// Queues `work` on `stream` (0 = the device's default stream): it runs on the
// stream's worker thread after everything queued before it, later than this
// call returns. While the stream is being captured the work goes into the
// graph instead. Returns cudaErrorInvalidResourceHandle for a stream that is
// not one.
using Work = std::function<void()>;
cudaError_t enqueue(cudaStream_t stream, Work work);
// As enqueue, but `make` runs on the calling thread each time the work is
// queued: once now, or at every launch of the graph it was captured into.
cudaError_t enqueue_node(cudaStream_t stream, std::function<Work()> make);

// Remembers `error` as the calling thread's last error (cudaGetLastError)
// unless it is cudaSuccess; returns it.
cudaError_t record_error(cudaError_t error);

// The host name, process id and thread id prefix of NCCL-style log lines.
std::string log_prefix(int device);

}  // namespace ccscope::standin
