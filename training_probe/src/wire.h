#pragma once
// What the training engines share below their strategies: the clock, the
// communicated number format, reusable scratch buffers and a parameter hash.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "ccscope/collectives/types.h"
#include "ccscope/training_probe/model.h"

namespace ccscope::training_probe {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

inline DataType wire_type(Precision precision) {
  switch (precision) {
    case Precision::kFloat32:
      return DataType::kFloat32;
    case Precision::kBFloat16:
      return DataType::kBFloat16;
    case Precision::kFloat16:
      return DataType::kFloat16;
  }
  return DataType::kFloat32;
}

// Communication scratch buffers, reused across steps: a fresh allocation of
// tens of MB is a fresh mapping that the kernel zeroes page by page on every
// step. Buffers of each size come back to the pool when an operation is done.
class ScratchPool {
 public:
  using Block = std::unique_ptr<unsigned char[]>;
  Block take(size_t bytes) {
    std::lock_guard lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return Block(new unsigned char[bytes ? bytes : 1]);
    Block block = std::move(it->second.back());
    it->second.pop_back();
    return block;
  }
  void give(size_t bytes, Block block) {
    std::lock_guard lock(mutex_);
    free_[bytes].push_back(std::move(block));
  }

 private:
  std::mutex mutex_;
  std::map<size_t, std::vector<Block>> free_;
};

// Values in the communicated format (float32, or 16-bit words), `count`
// elements. Only the padding beyond what pack() writes is zeroed (a
// reduce-scatter's padding must reduce to zero); float32 copies are memcpy.
class WireBuffer {
 public:
  WireBuffer(ScratchPool& pool, Precision precision, size_t count)
      : pool_(pool),
        precision_(precision),
        size_(count * element_bytes(precision)),
        bytes_(pool.take(size_)) {}
  ~WireBuffer() { pool_.give(size_, std::move(bytes_)); }
  WireBuffer(const WireBuffer&) = delete;
  WireBuffer& operator=(const WireBuffer&) = delete;
  void* data() { return bytes_.get(); }
  // Writes values at element 0 and zeroes the rest of the buffer.
  void pack(std::span<const float> values, float scale = 1.0f) {
    const size_t e = element_bytes(precision_);
    if (precision_ == Precision::kFloat32) {
      auto* out = reinterpret_cast<float*>(bytes_.get());
      if (scale == 1.0f)
        std::memcpy(out, values.data(), values.size() * 4);
      else
        for (size_t i = 0; i < values.size(); ++i) out[i] = values[i] * scale;
    } else {
      auto* words = reinterpret_cast<uint16_t*>(bytes_.get());
      for (size_t i = 0; i < values.size(); ++i) {
        const float v = values[i] * scale;
        words[i] = precision_ == Precision::kBFloat16 ? float_to_bfloat16(v) : float_to_half(v);
      }
    }
    std::memset(bytes_.get() + values.size() * e, 0, size_ - values.size() * e);
  }
  // out[i] = element(i), or out[i] += element(i) (a reduce-scatter accumulating
  // micro-batches into the shard).
  void unpack(std::span<float> out, bool accumulate) const {
    if (precision_ == Precision::kFloat32) {
      const auto* in = reinterpret_cast<const float*>(bytes_.get());
      if (accumulate)
        for (size_t i = 0; i < out.size(); ++i) out[i] += in[i];
      else
        std::memcpy(out.data(), in, out.size() * 4);
      return;
    }
    const auto* words = reinterpret_cast<const uint16_t*>(bytes_.get());
    for (size_t i = 0; i < out.size(); ++i) {
      const float v = precision_ == Precision::kBFloat16 ? bfloat16_to_float(words[i])
                                                         : half_to_float(words[i]);
      out[i] = accumulate ? out[i] + v : v;
    }
  }

 private:
  ScratchPool& pool_;
  Precision precision_;
  size_t size_;
  ScratchPool::Block bytes_;
};

inline uint64_t fnv1a(std::span<const float> values) {
  uint64_t hash = 1469598103934665603ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ULL;
  }
  return hash & ((1ULL << 52) - 1);  // exact in a double
}

}  // namespace ccscope::training_probe
