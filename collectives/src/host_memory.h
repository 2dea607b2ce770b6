#pragma once
// Host-memory pieces shared by the blocking host backends (mpi, ring): a
// page-aligned, zeroed buffer and a steady-clock StampClock.
#include <chrono>
#include <cstdlib>
#include <cstring>
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

}  // namespace ccscope::detail
