// The GPU path's tensor x data grid (trainer.h: train_grid_on_device):
// Megatron's column/row pairs of the MLP (grid_layers.h, the host Grid's
// layers) with parameters, gradients and activations in device memory, GEMMs
// through cuBLAS on the compute stream, and the tensor group's all-reduces
// (forward after a row layer, backward after a column layer: Megatron's g and
// f) over the tensor group's NCCL communicator on its stream, ordered by
// events both ways: they sit on the critical path, as in Megatron. After the
// last micro-batch the data group's replicas all-reduce their gradients over
// the data group's NCCL communicator. Scalars (the loss, fp16's overflow,
// clipping's norm, the checks) go over the host groups.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/layout.h"
#include "ccscope/training_probe/parallel_trainer.h"
#include "ccscope/training_probe/trainer.h"
#include "device_ops.h"
#include "device_strategy.h"
#include "engine.h"
#include "grid_layers.h"
#include "wire.h"

namespace ccscope::training_probe {
namespace {

namespace dev = device;

// A group's device communicator, its stream and what runs on that stream
// around the collective (16-bit packing, scaling).
struct DeviceGroup {
  explicit DeviceGroup(Communicator* c) : comm(c) {
    if (comm == nullptr) return;
    stream = static_cast<cudaStream_t>(comm->device_stream());
    if (stream == nullptr)
      throw UsageError("the GPU path needs device communicators (nccl), not " +
                       comm->backend_name());
    blas = std::make_unique<dev::BlasHandle>(stream);
    context = {stream, blas->get(), false};
  }
  Communicator* comm;
  cudaStream_t stream = nullptr;
  std::unique_ptr<dev::BlasHandle> blas;
  dev::Context context;
};

// One collective's span on its group's stream.
struct TimedCollective {
  dev::Event start{true}, end{true};
};

class DeviceTensorGrid final : public StrategyHooks {
 public:
  DeviceTensorGrid(EngineState& state, const ParallelGroups& host, const ParallelGroups& on_device,
                   size_t world_rank)
      : s_(state),
        o_(state.options),
        p_(o_.parallel),
        host_(host),
        at_(grid_position(world_rank, p_)),
        ordinal_(select_device(on_device.tp ? on_device.tp : on_device.dp)),
        mixed_(state.mixed()),
        tp_(on_device.tp),
        dp_(on_device.dp),
        blas_(compute_.get()),
        c_{compute_.get(), blas_.get(), o_.tf32} {
    std::vector<float> initial, unique;
    std::vector<std::vector<LocalLayer>> chunks = grid_layers(o_, at_, initial, unique);
    layers_ = std::move(chunks.front());  // no pipeline: one chunk, every layer
    local_ = initial.size();
    counted_ = counted_ranges(unique);
    params_ = dev::DeviceBuffer<float>(allocator_, local_);
    params_.upload(initial, c_.stream);
    if (mixed_) {
      // The master copy from the unrounded parameters, as the host Grid's.
      master_ = dev::DeviceBuffer<float>(allocator_, local_);
      master_.upload(initial, c_.stream);
      params16_ = dev::DeviceBuffer<uint16_t>(allocator_, local_);
    }
    dev::round_to(c_, o_.precision, params_.data(), local_);
    if (mixed_) dev::to_16(c_, o_.precision, params_.data(), params16_.data(), local_);
    grads_ = dev::DeviceBuffer<float>(allocator_, local_);
    flag_ = dev::DeviceBuffer<int>(allocator_, 1);
    optimizer_ =
        std::make_unique<dev::DeviceOptimizer>(allocator_, o_.optimizer, local_, c_.stream);
    micro_ = o_.global_batch / p_.dp / o_.micro_batches;
    const size_t width = o_.shape.width, n = micro_ * width;
    for (const LocalLayer& layer : layers_) {
      a_x_.emplace_back(allocator_, micro_ * layer.in);
      a_x16_.emplace_back(allocator_, mixed_ ? micro_ * layer.in : 0);
      a_pre_.emplace_back(allocator_, micro_ * layer.out);
    }
    a_x_.emplace_back(allocator_, n);  // the model's output
    a_x16_.emplace_back(allocator_, 0);
    target_ = dev::DeviceBuffer<float>(allocator_, n);
    diff_ = dev::DeviceBuffer<float>(allocator_, n);
    dy_ = dev::DeviceBuffer<float>(allocator_, n);
    dx_ = dev::DeviceBuffer<float>(allocator_, n);
    dy16_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ ? n : 0);
    tp_words_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ && tp_.comm ? n : 0);
    dp_words_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ && dp_.comm ? local_ : 0);
    compute_.synchronize();  // the uploads' host vectors go out of scope
  }

  ~DeviceTensorGrid() override {
    // Nothing queued may outlive the buffers it reads and writes.
    for (const DeviceGroup* g : {&tp_, &dp_})
      if (g->stream != nullptr) (void)cudaStreamSynchronize(g->stream);
    (void)cudaStreamSynchronize(compute_.get());
  }

  size_t parameters() const override { return parameter_count(o_.shape); }
  size_t communicated() const override { return parameters(); }

  double forward_backward(size_t step, StepFigures& f) override {
    grads_.zero(c_.stream);
    const size_t per_replica = o_.global_batch / p_.dp;
    const std::vector<size_t> samples = s_.step_samples(step, p_.dp, at_.dp, per_replica);
    double local_loss = 0;
    for (size_t m = 0; m < o_.micro_batches; ++m) {
      gather_batch(s_.data, std::span(samples).subspan(m * micro_, micro_), s_.inputs, s_.targets);
      forward(f);
      // The loss synchronizes the compute stream: the host's inputs and targets
      // are free again afterwards.
      target_.upload(s_.targets, c_.stream);
      local_loss +=
          dev::mse_loss(c_, a_x_.back().data(), target_.data(), diff_.data(), dy_.data(), micro_,
                        o_.shape.width, per_replica, static_cast<float>(f.loss_scale));
      backward(f);
      note_device_memory();
    }
    return local_loss;
  }

  // The data group's replicas average their gradients (as the host Grid's,
  // after the last micro-batch); tensor shards and the replicas' copies count
  // once each in the global norm (counted_).
  ReducedGradients reduce_gradients(StepFigures& f) override {
    if (dp_.comm != nullptr && p_.dp > 1) {
      float* grads = grads_.data();
      all_reduce_on(dp_, grads, local_, 1.0f / static_cast<float>(p_.dp), dp_words_.data());
      f.dp_bytes += all_reduce_bytes(local_, p_.dp, s_.element);
    }
    gradients_ = std::make_unique<DeviceGradients>(c_, grads_.data(), local_, flag_.data(),
                                                   at_.dp == 0 ? counted_ : nothing_counted());
    ReducedGradients g;
    g.device = gradients_.get();
    g.disjoint = true;
    return g;
  }

  void apply(std::span<const float>, size_t step, StepFigures&) override {
    if (mixed_) {
      optimizer_->step(c_, master_.data(), grads_.data(), step);
      dev::round_copy(c_, o_.precision, master_.data(), params_.data(), params16_.data(), local_);
    } else {
      optimizer_->step(c_, params_.data(), grads_.data(), step);
    }
    compute_.synchronize();  // the step's time includes the device's work
  }

  // The collectives' time on their streams; all of it exposed: the compute
  // stream waits for each (Megatron's tensor all-reduces are on the critical
  // path, and the data group's follows the last backward).
  void add_own_communication(CommCounters& counters) override {
    compute_.synchronize();
    for (size_t i = 0; i < timed_used_; ++i) {
      const double seconds = elapsed(timed_[i]->start, timed_[i]->end);
      counters.busy_seconds += seconds;
      counters.exposed_seconds += seconds;
    }
    counters.operations += timed_used_;
    timed_used_ = 0;
  }

  double bytes_sent(const StepFigures& f, const CommCounters&) const override {
    return f.tp_bytes + f.dp_bytes;
  }

  // The loss: tensor rank 0's, averaged over the replicas (the host Grid's).
  double global_loss(double local_loss) override {
    const bool reporter = at_.tp == 0;
    return s_.reduce(reporter ? local_loss / static_cast<double>(p_.dp) : 0.0, ReduceOp::kSum);
  }

  // Data-parallel replicas hold the same parameters.
  bool consistent() override {
    std::vector<float> host(local_);
    params_.download(host, c_.stream);
    compute_.synchronize();
    const double hash = static_cast<double>(fnv1a(host));
    const bool agree = s_.comm.reduce(host_.dp, hash, ReduceOp::kMin) ==
                       s_.comm.reduce(host_.dp, hash, ReduceOp::kMax);
    return s_.reduce(agree ? 1.0 : 0.0, ReduceOp::kMin) > 0;
  }

  MemoryFootprint memory() const override {
    const double e = static_cast<double>(s_.element), n = static_cast<double>(local_);
    MemoryFootprint m;
    m.parameters = e * n;
    m.gradients = e * n;
    m.optimizer = static_cast<double>(optimizer_->state_bytes()) + (mixed_ ? 4.0 * n : 0.0);
    return m;
  }

  void add_results(TrainResult& result) const override {
    result.device_peak_bytes = static_cast<double>(allocator_.peak_bytes());
    result.device_used_bytes = device_used_peak_;
  }

 private:
  // Contiguous runs of `unique`'s ones: what this rank counts in the norm.
  static std::vector<Range> counted_ranges(const std::vector<float>& unique) {
    std::vector<Range> ranges;
    for (size_t i = 0; i < unique.size(); ++i) {
      if (unique[i] == 0.0f) continue;
      if (!ranges.empty() && ranges.back().end == i)
        ranges.back().end = i + 1;
      else
        ranges.push_back({i, i + 1});
    }
    if (ranges.empty()) ranges.push_back({0, 0});  // none (an empty list counts all)
    return ranges;
  }
  static std::vector<Range> nothing_counted() { return {Range{0, 0}}; }

  void forward(StepFigures& f) {
    const size_t width = o_.shape.width, micro = micro_;
    a_x_[0].upload(s_.inputs, c_.stream);
    dev::round_to(c_, o_.precision, a_x_[0].data(), micro * width);
    if (mixed_) dev::to_16(c_, o_.precision, a_x_[0].data(), a_x16_[0].data(), micro * width);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const LocalLayer& layer = layers_[i];
      dev::linear_forward(c_, o_.precision, gemm_input(i), weights(layer), a_pre_[i].data(), micro,
                          layer.in, layer.out);
      // Row-parallel: partial sums over this rank's input features, summed
      // over the tensor group (Megatron's g), then the bias added once.
      if (layer.role == LayerRole::kRow) tensor_all_reduce(a_pre_[i].data(), micro * layer.out, f);
      dev::bias_activation(
          c_, o_.precision, layer.last ? std::nullopt : std::optional(o_.shape.activation),
          a_pre_[i].data(), bias(layer), a_x_[i + 1].data(),
          mixed_ && i + 1 < layers_.size() ? a_x16_[i + 1].data() : nullptr, micro, layer.out);
    }
  }

  void backward(StepFigures& f) {
    const size_t micro = micro_;
    float* dy = dy_.data();
    float* dx = dx_.data();
    for (size_t i = layers_.size(); i-- > 0;) {
      const LocalLayer& layer = layers_[i];
      if (!layer.last)
        dev::activation_backward(c_, o_.precision, o_.shape.activation, dy, a_pre_[i].data(),
                                 a_x_[i + 1].data(), micro * layer.out);
      const bool needs_input_grad = layer.layer > 0;  // nobody needs the data's gradient
      float* weight_grad = grads_.data() + layer.offset;
      dev::linear_backward(c_, o_.precision, gemm_input(i), dy, dy16_.data(), weights(layer),
                           weight_grad, weight_grad + layer.weight_count,
                           needs_input_grad ? dx : nullptr, micro, layer.in, layer.out);
      // Column-parallel: the input gradient's partial sums over this rank's
      // output features, summed over the tensor group (Megatron's f backward).
      if (layer.role == LayerRole::kColumn && needs_input_grad && !o_.faults.skipped_tp_all_reduce)
        tensor_all_reduce(dx, micro * layer.in, f);
      std::swap(dy, dx);
    }
  }

  void tensor_all_reduce(float* values, size_t n, StepFigures& f) {
    all_reduce_on(tp_, values, n, 1.0f, tp_words_.data());
    f.tp_bytes += all_reduce_bytes(n, p_.tp, s_.element);
  }

  // `values` (n, on the compute stream) times `scale`, summed over `group` in
  // the compute format on the group's stream; the compute stream waits for it.
  void all_reduce_on(DeviceGroup& group, float* values, size_t n, float scale, uint16_t* words) {
    ready_.record(c_.stream);
    ready_.wait_on(group.stream);
    TimedCollective& timed = next_timed();
    timed.start.record(group.stream);
    if (scale != 1.0f) dev::scale(group.context, values, n, scale);
    if (mixed_) {
      dev::to_16(group.context, o_.precision, values, words, n);
      group.comm->all_reduce(words, words, n, wire_type(o_.precision), ReduceOp::kSum);
      dev::from_16(group.context, o_.precision, words, values, n);
    } else {
      group.comm->all_reduce(values, values, n, DataType::kFloat32, ReduceOp::kSum);
    }
    timed.end.record(group.stream);
    timed.end.wait_on(c_.stream);
  }

  TimedCollective& next_timed() {
    if (timed_used_ == timed_.size()) timed_.push_back(std::make_unique<TimedCollective>());
    return *timed_[timed_used_++];
  }

  const float* bias(const LocalLayer& layer) const {
    return params_.data() + layer.offset + layer.weight_count;
  }
  const void* weights(const LocalLayer& layer) const {
    return mixed_ ? static_cast<const void*>(params16_.data() + layer.offset)
                  : params_.data() + layer.offset;
  }
  const void* gemm_input(size_t i) const {
    return mixed_ ? static_cast<const void*>(a_x16_[i].data()) : a_x_[i].data();
  }

  void note_device_memory() {
    const dev::DeviceMemoryInfo info = dev::device_memory_info();
    device_used_peak_ =
        std::max(device_used_peak_, static_cast<double>(info.total_bytes - info.free_bytes));
  }

  EngineState& s_;
  const TrainOptions& o_;
  const ParallelOptions& p_;
  ParallelGroups host_;
  GridPosition at_;
  int ordinal_;
  bool mixed_;
  DeviceGroup tp_, dp_;
  dev::DeviceAllocator allocator_;
  dev::Stream compute_;
  dev::BlasHandle blas_;
  dev::Context c_;
  std::vector<LocalLayer> layers_;
  size_t local_ = 0;
  std::vector<Range> counted_;
  dev::DeviceBuffer<float> params_, master_, grads_;
  dev::DeviceBuffer<uint16_t> params16_;
  dev::DeviceBuffer<int> flag_;
  std::unique_ptr<dev::DeviceOptimizer> optimizer_;
  std::unique_ptr<DeviceGradients> gradients_;
  size_t micro_ = 0;
  std::vector<dev::DeviceBuffer<float>> a_x_, a_pre_;  // each layer's input (and the output)
  std::vector<dev::DeviceBuffer<uint16_t>> a_x16_;
  dev::DeviceBuffer<float> target_, diff_, dy_, dx_;
  dev::DeviceBuffer<uint16_t> dy16_, tp_words_, dp_words_;
  dev::Event ready_;
  std::vector<std::unique_ptr<TimedCollective>> timed_;
  size_t timed_used_ = 0;
  double device_used_peak_ = 0;
};

}  // namespace

std::string device_grid_unsupported(const TrainOptions& o) {
  if (o.strategy != Strategy::kTensor && o.strategy != Strategy::kHybrid) return "";
  const ParallelOptions& p = o.parallel;
  if (p.pp > 1 || p.chunks > 1)
    return "the GPU path runs tp (and 3d with --pp 1) so far, not a pipeline; use --backend mpi "
           "for pp";
  if (p.zero1) return "the GPU path's tensor grid runs without ZeRO-1 so far; use --backend mpi";
  if (o.offload_optimizer)
    return "the GPU path offloads the optimizer of ddp and zero1-3 only so far, not of tp or 3d";
  if (o.faults.dropped_micro_batch)
    return "the injected faults run on the host path only; use --backend mpi";
  return "";
}

TrainResult train_grid_on_device(const ParallelGroups& host, const ParallelGroups& on_device,
                                 const TrainOptions& options,
                                 const std::function<void(const StepFigures&)>& on_step) {
  const std::string unsupported = device_training_unsupported(options);
  if (!unsupported.empty()) throw UsageError(unsupported);
  if (host.world == nullptr)
    throw UsageError("train_grid_on_device needs the world's communicator");
  std::string problem = validate_parallel(options, static_cast<size_t>(host.world->size()));
  if (problem.empty()) problem = validate(options, options.parallel.dp);
  if (!problem.empty()) throw UsageError(problem);
  for (const auto& [group, size, what] :
       {std::tuple{on_device.tp, options.parallel.tp, "tensor-parallel"},
        std::tuple{on_device.dp, options.parallel.dp, "data-parallel"}})
    if (size > 1 && (group == nullptr || static_cast<size_t>(group->size()) != size ||
                     group->memory_kind() != MemoryKind::kDevice))
      throw UsageError(
          fmt::format("train_grid_on_device: the {} group needs a device "
                      "communicator of {} ranks",
                      what, size));
  const size_t rank = static_cast<size_t>(host.world->rank());
  return run_engine(
      options, host.world, false,
      [&](EngineState& state) {
        return std::make_unique<DeviceTensorGrid>(state, host, on_device, rank);
      },
      on_step);
}

}  // namespace ccscope::training_probe
