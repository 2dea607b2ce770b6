// DeepSpeed's CPU offload of the optimizer (ZeRO-Offload), for every strategy
// of the GPU path: the gradients the optimizer steps go down to page-locked
// host memory in the compute format, the optimizer steps fp32 master weights
// on the host (as DeepSpeed's CPU Adam), the parameters go back up. What a
// rank offloads (all its parameters, its ZeRO shard, its tensor/pipeline
// slice) is the strategy's choice; the copies and their timing are here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ccscope/training_probe/optimizer.h"
#include "ccscope/training_probe/trainer.h"
#include "device_ops.h"
#include "device_strategy.h"
#include "wire.h"

namespace ccscope::training_probe {

// Page-locked host memory (cudaMallocHost): the offloaded copies run
// asynchronously from it at PCIe speed, as DeepSpeed pins its CPU buffers.
template <class T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t count) : count_(count) {
    void* p = nullptr;
    if (count > 0) device::check(cudaMallocHost(&p, count * sizeof(T)), "cudaMallocHost");
    data_ = static_cast<T*>(p);
  }
  ~PinnedBuffer() {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::span<T> span() { return {data_, count_}; }
  T* data() { return data_; }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

class HostOffload {
 public:
  // `master`: the fp32 master weights of the elements this rank steps.
  HostOffload(const OptimizerOptions& options, Precision precision, std::vector<float> master)
      : precision_(precision),
        mixed_(precision != Precision::kFloat32),
        master_(std::move(master)),
        optimizer_(options, master_.size()),
        grads_(master_.size()),
        words_(mixed_ ? master_.size() : 0) {}

  size_t size() const { return master_.size(); }
  size_t state_bytes() const { return optimizer_.state_bytes(); }

  // One optimizer step of `grads` (fp32, on the device, size() elements):
  // down (16-bit through `words` when mixed), stepped on the host, up into
  // `words` (mixed: the caller turns them into its parameters) or
  // `fp32_parameters`. Synchronous on `c.stream`; the copies' time and bytes
  // and the host step's time go into `f`.
  void step(const device::Context& c, const float* grads, uint16_t* words, float* fp32_parameters,
            size_t step, StepFigures& f) {
    const size_t n = master_.size();
    device::Event down_start(true), down_end(true);
    down_start.record(c.stream);
    if (mixed_) {
      device::to_16(c, precision_, grads, words, n);
      copy(c, words_.data(), words, n * 2, cudaMemcpyDeviceToHost, "gradients to the host");
    } else {
      copy(c, grads_.data(), grads, n * 4, cudaMemcpyDeviceToHost, "gradients to the host");
    }
    down_end.record(c.stream);
    down_end.synchronize();
    f.offload_copy_seconds += elapsed(down_start, down_end);

    const auto host_start = Clock::now();
    const std::span<float> host_grads = grads_.span();
    const bool bf16 = precision_ == Precision::kBFloat16;
    if (mixed_) {
      const std::span<const uint16_t> in = words_.span();
      for (size_t i = 0; i < n; ++i)
        host_grads[i] = bf16 ? bfloat16_to_float(in[i]) : half_to_float(in[i]);
    }
    optimizer_.step(master_, host_grads, step);
    if (mixed_) {
      const std::span<uint16_t> out = words_.span();
      for (size_t i = 0; i < n; ++i)
        out[i] = bf16 ? float_to_bfloat16(master_[i]) : float_to_half(master_[i]);
    } else {
      std::copy(master_.begin(), master_.end(), host_grads.begin());
    }
    f.host_optimizer_seconds += seconds_between(host_start, Clock::now());

    device::Event up_start(true), up_end(true);
    up_start.record(c.stream);
    if (mixed_)
      copy(c, words, words_.data(), n * 2, cudaMemcpyHostToDevice, "parameters to the device");
    else
      copy(c, fp32_parameters, grads_.data(), n * 4, cudaMemcpyHostToDevice,
           "parameters to the device");
    up_end.record(c.stream);
    up_end.synchronize();  // the pinned staging is reused next step
    f.offload_copy_seconds += elapsed(up_start, up_end);
    f.offload_bytes += 2.0 * (mixed_ ? 2.0 : 4.0) * static_cast<double>(n);
  }

 private:
  static void copy(const device::Context& c, void* to, const void* from, size_t bytes,
                   cudaMemcpyKind kind, const char* what) {
    device::check(cudaMemcpyAsync(to, from, bytes, kind, c.stream),
                  std::string("cudaMemcpyAsync ") + what);
  }

  Precision precision_;
  bool mixed_;
  std::vector<float> master_;
  Optimizer optimizer_;
  PinnedBuffer<float> grads_;     // the gradients down, then the fp32 parameters up
  PinnedBuffer<uint16_t> words_;  // mixed: the 16-bit gradients down, parameters up
};

}  // namespace ccscope::training_probe
