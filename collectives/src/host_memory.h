#pragma once
// Host-memory pieces shared by the blocking host backends (mpi, gloo, ring): a
// page-aligned, zeroed buffer, a steady-clock StampClock, and the base class
// with their memory calls.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/error.h"

namespace ccscope::detail {

class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) : bytes_(bytes) {
    // Page alignment, as pinned/registered memory would have.
    const size_t rounded = ((bytes == 0 ? 1 : bytes) + 4095) / 4096 * 4096;
    data_ = std::aligned_alloc(4096, rounded);
    if (data_ == nullptr)
      throw BackendError("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    std::memset(data_, 0, rounded);
  }
  ~HostBuffer() override { std::free(data_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class HostStampClock : public StampClock {
 public:
  explicit HostStampClock(size_t stamps) : stamps_(stamps) {}
  void stamp(size_t index) override { stamps_.at(index) = std::chrono::steady_clock::now(); }
  double seconds_between(size_t first, size_t second) override {
    return std::chrono::duration<double>(stamps_.at(second) - stamps_.at(first)).count();
  }
  // Blocking backends: every stamp is taken after its operations completed.
  bool completed(size_t) override { return true; }

 private:
  std::vector<std::chrono::steady_clock::time_point> stamps_;
};

// A communicator on host memory: buffers are HostBuffers, copies are memcpy.
class HostMemoryCommunicator : public Communicator {
 public:
  MemoryKind memory_kind() const override { return MemoryKind::kHost; }
  std::string device_name() const override { return "cpu"; }
  std::unique_ptr<Buffer> allocate(size_t bytes) override {
    return std::make_unique<HostBuffer>(bytes);
  }
  void copy_from_host(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) override {
    std::memcpy(static_cast<char*>(dst.data()) + dst_offset, src, bytes);
  }
  void copy_to_host(void* dst, const Buffer& src, size_t src_offset, size_t bytes) override {
    std::memcpy(dst, static_cast<const char*>(const_cast<Buffer&>(src).data()) + src_offset, bytes);
  }
};

}  // namespace ccscope::detail
