#pragma once
// What the GPU path's strategies share (device_trainer.cpp: single, DDP,
// ZeRO; device_grid_trainer.cpp: the tensor x data grid): the step's end over
// gradients in device memory, the device a strategy runs on, event timing.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/error.h"
#include "ccscope/training_probe/layout.h"
#include "ccscope/training_probe/trainer.h"
#include "device_ops.h"
#include "wire.h"

namespace ccscope::training_probe {

// The step's end over gradients in device memory (engine.h's GradientArithmetic).
// `counted`: the ranges whose squares count in the global norm (a copy another
// rank counts is left out); empty: all of them.
class DeviceGradients final : public GradientArithmetic {
 public:
  DeviceGradients(const device::Context& context, float* values, size_t n, int* flag,
                  std::vector<Range> counted = {})
      : c_(context), values_(values), n_(n), flag_(flag), counted_(std::move(counted)) {}
  bool any_nonfinite() override { return device::any_nonfinite(c_, values_, n_, flag_); }
  void scale(float factor) override { device::scale(c_, values_, n_, factor); }
  double squares() override {
    if (counted_.empty()) return square(device::norm(c_, values_, n_));
    double sum = 0;
    for (const Range& r : counted_)
      if (r.size() > 0) sum += square(device::norm(c_, values_ + r.begin, r.size()));
    return sum;
  }

 private:
  static double square(double x) { return x * x; }
  const device::Context& c_;
  float* values_;
  size_t n_;
  int* flag_;
  std::vector<Range> counted_;
};

// A group's device communicator, its stream and what runs on that stream
// around the collective (16-bit packing, scaling).
struct DeviceGroup {
  explicit DeviceGroup(Communicator* c) : comm(c) {
    if (comm == nullptr) return;
    stream = static_cast<cudaStream_t>(comm->device_stream());
    if (stream == nullptr)
      throw UsageError("the GPU path needs device communicators (nccl), not " +
                       comm->backend_name());
    blas = std::make_unique<device::BlasHandle>(stream);
    context = {stream, blas->get(), false};
  }
  Communicator* comm;
  cudaStream_t stream = nullptr;
  std::unique_ptr<device::BlasHandle> blas;
  device::Context context;
};

// One collective's span on its group's stream.
struct TimedCollective {
  device::Event start{true}, end{true};
};

// Contiguous runs of `unique`'s ones (transformer_unique, grid_layers'
// weights): the ranges a rank counts in the global norm (DeviceGradients'
// `counted`); {0, 0} when none (an empty list would count all).
inline std::vector<Range> counted_ranges(const std::vector<float>& unique) {
  std::vector<Range> ranges;
  for (size_t i = 0; i < unique.size(); ++i) {
    if (unique[i] == 0.0f) continue;
    if (!ranges.empty() && ranges.back().end == i)
      ranges.back().end = i + 1;
    else
      ranges.push_back({i, i + 1});
  }
  if (ranges.empty()) ranges.push_back({0, 0});
  return ranges;
}

// Selects the device communicator's GPU for this thread before anything is
// made on it (streams and memory belong to the device current when made).
inline int select_device(Communicator* comm) {
  int ordinal = 0;
  if (comm != nullptr && comm->device_ordinal() >= 0) ordinal = comm->device_ordinal();
  device::check(cudaSetDevice(ordinal), "cudaSetDevice");
  return ordinal;
}

// What the GPU has in use now (cudaMemGetInfo's total - free: the CUDA
// context's, NCCL's and cuBLAS's memory included): a strategy keeps the
// largest, seen at its step's fullest point.
inline double device_bytes_in_use() {
  const device::DeviceMemoryInfo info = device::device_memory_info();
  return static_cast<double>(info.total_bytes - info.free_bytes);
}

// Seconds between two recorded timing events.
inline double elapsed(const device::Event& from, const device::Event& to) {
  float ms = 0;
  device::check(cudaEventElapsedTime(&ms, from.get(), to.get()), "cudaEventElapsedTime");
  return ms / 1e3;
}

struct EngineState;
class StrategyHooks;
struct ParallelGroups;
// The transformer's tensor-parallel strategy on the GPU
// (device_transformer_tensor.cpp): `tensor` the tensor group's device
// communicator (NCCL), scalars over `host`'s groups.
std::unique_ptr<StrategyHooks> make_device_transformer_tensor(EngineState& state,
                                                              const ParallelGroups& host,
                                                              Communicator* tensor,
                                                              size_t world_rank);

}  // namespace ccscope::training_probe
