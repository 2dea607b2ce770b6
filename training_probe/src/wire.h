#pragma once
// What the training engine (engine.h) and its strategies share below them:
// the clock, the communicated number format, reusable scratch buffers, a
// parameter hash, the end of a step (fp16 overflow, clipping, the optimizer).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/types.h"
#include "ccscope/training_probe/loss_scaler.h"
#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/optimizer.h"
#include "ccscope/training_probe/trainer.h"

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
      if (scale != 1.0f)
        for (size_t i = 0; i < values.size(); ++i) out[i] = values[i] * scale;
      else if (!values.empty())  // an empty span's data() may be null
        std::memcpy(out, values.data(), values.size() * 4);
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
      else if (!out.empty())  // an empty span's data() may be null
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

// The collectives every strategy runs on float values in the compute format,
// travelling in the communicated format. Values are multiplied by `scale`
// before the sum (divided by the ranks first, as DDP's reducer does, so that
// a sum of 16-bit values stays within the range of one).

// All-reduce (sum) in place.
inline void all_reduce_values(Communicator& c, ScratchPool& pool, Precision p,
                              std::span<float> values, float scale) {
  if (p == Precision::kFloat32) {
    if (scale != 1.0f)
      for (float& v : values) v *= scale;
    c.all_reduce(values.data(), values.data(), values.size(), DataType::kFloat32, ReduceOp::kSum);
    return;
  }
  WireBuffer wire(pool, p, values.size());
  wire.pack(values, scale);
  c.all_reduce(wire.data(), wire.data(), values.size(), wire_type(p), ReduceOp::kSum);
  wire.unpack(values, false);
}

// Reduce-scatter (sum) of `values` (unpadded; padded with zeros to `ranks`
// chunks) into this rank's chunk `chunk`, or added to it (`accumulate`: a
// gradient shard over micro-batches).
inline void reduce_scatter_values(Communicator& c, ScratchPool& pool, Precision p,
                                  std::span<const float> values, float scale, size_t ranks,
                                  std::span<float> chunk, bool accumulate) {
  WireBuffer send(pool, p, chunk.size() * ranks);
  send.pack(values, scale);
  WireBuffer recv(pool, p, chunk.size());
  c.reduce_scatter(send.data(), recv.data(), chunk.size(), wire_type(p), ReduceOp::kSum);
  recv.unpack(chunk, accumulate);
}

// All-gather of every rank's chunk (this rank's `mine`) into `full` (the
// unpadded whole).
inline void all_gather_values(Communicator& c, ScratchPool& pool, Precision p,
                              std::span<const float> mine, size_t ranks, std::span<float> full) {
  WireBuffer send(pool, p, mine.size());
  send.pack(mine);
  WireBuffer recv(pool, p, mine.size() * ranks);
  c.all_gather(send.data(), recv.data(), mine.size(), wire_type(p));
  recv.unpack(full, false);
}

inline uint64_t fnv1a(std::span<const float> values) {
  uint64_t hash = 1469598103934665603ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ULL;
  }
  return hash & ((1ULL << 52) - 1);  // exact in a double
}

// The gradients the step's end works on, wherever they are (host floats, or
// device memory on the GPU path): fp16's overflow check and unscaling,
// clipping's sum of squares and its scaling.
class GradientArithmetic {
 public:
  virtual ~GradientArithmetic() = default;
  virtual bool any_nonfinite() = 0;
  virtual void scale(float factor) = 0;  // every element *= factor
  // The sum of each element's square weighted as ReducedGradients::unique says.
  virtual double squares() = 0;
};

// GradientArithmetic over host floats. `unique` weighs each element's square
// (0 for a copy another rank counts; empty: all 1).
class HostGradients final : public GradientArithmetic {
 public:
  HostGradients(std::span<float> values, std::span<const float> unique)
      : values_(values), unique_(unique) {}
  bool any_nonfinite() override {
    return std::any_of(values_.begin(), values_.end(), [](float g) { return !std::isfinite(g); });
  }
  void scale(float factor) override {
    for (float& g : values_) g *= factor;
  }
  double squares() override {
    double sum = 0;
    for (size_t i = 0; i < values_.size(); ++i)
      sum += (unique_.empty() ? 1.0 : static_cast<double>(unique_[i])) * values_[i] * values_[i];
    return sum;
  }

 private:
  std::span<float> values_;
  std::span<const float> unique_;
};

// Before the optimizer: fp16's overflow check (every rank skips together)
// and unscaling, then clipping by the global norm. `reduce_sum` sums the
// norm's squares over the ranks that hold disjoint parts (the identity when
// every rank holds all of them), `reduce_max` spans every rank. Returns false
// when fp16 overflowed and the step is skipped.
struct StepEnd {
  Precision precision;
  const TrainOptions& options;
  LossScaler& scaler;
  std::function<double(double)> reduce_sum;
  std::function<double(double)> reduce_max;

  bool prepare(GradientArithmetic& grads, StepFigures& f) const {
    if (precision == Precision::kFloat16) {
      const double overflow = reduce_max(grads.any_nonfinite() ? 1 : 0);
      grads.scale(static_cast<float>(1.0 / f.loss_scale));
      f.skipped = scaler.update(overflow > 0);
      if (f.skipped) return false;
    }
    if (options.grad_clip) {
      f.grad_norm = std::sqrt(reduce_sum(grads.squares()));
      // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when below 1.
      const double coefficient = *options.grad_clip / (f.grad_norm + 1e-6);
      if (coefficient < 1.0) grads.scale(static_cast<float>(coefficient));
    }
    return true;
  }
};

// The optimizer step on unsharded parameters: mixed precision steps the
// float32 master copy and rounds it back into the compute format.
inline void step_parameters(Optimizer& optimizer, Precision precision, std::vector<float>& params,
                            std::vector<float>& master, std::span<const float> grads, size_t step) {
  if (precision == Precision::kFloat32) {
    optimizer.step(params, grads, step);
    return;
  }
  optimizer.step(master, grads, step);
  for (size_t i = 0; i < params.size(); ++i) params[i] = round_to(precision, master[i]);
}

// Bytes a rank holds between steps, in the formats the strategy holds them
// in (the CPU path stores 16-bit values in floats).
inline MemoryFootprint held_bytes(size_t element_bytes, size_t parameters, size_t gradients,
                                  const Optimizer& optimizer, size_t master_words, bool mixed) {
  const double e = static_cast<double>(element_bytes);
  MemoryFootprint m;
  m.parameters = e * static_cast<double>(parameters);
  m.gradients = e * static_cast<double>(gradients);
  m.optimizer = static_cast<double>(optimizer.state_bytes());
  if (mixed) m.optimizer += 4.0 * static_cast<double>(master_words);
  return m;
}

}  // namespace ccscope::training_probe
