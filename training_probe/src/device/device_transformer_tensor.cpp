// The transformer's tensor-parallel strategy on the GPU (`--model transformer
// --strategy tp --backend nccl`, with --sequence-parallel and --recompute):
// transformer_trainer.cpp's TransformerTensor with parameters, gradients and
// activations in device memory. Each rank holds its heads' and MLP features'
// shard of every block and a copy of the rest (transformer.h); the model's
// partial sums cross the tensor group over NCCL on the group's stream, events
// ordering it against the compute stream both ways (Megatron's f and g sit on
// the critical path). Every rank computes the whole loss; tensor rank 0
// reports it. Under sequence parallelism the partial gradients (embeddings,
// layer norms, row-parallel biases) are all-reduced once per step.
#include <algorithm>
#include <memory>
#include <vector>

#include "ccscope/training_probe/accounting.h"
#include "ccscope/training_probe/parallel_trainer.h"
#include "ccscope/training_probe/transformer.h"
#include "device_ops.h"
#include "device_strategy.h"
#include "device_transformer.h"
#include "engine.h"
#include "host_offload.h"
#include "wire.h"

namespace ccscope::training_probe {
namespace {

namespace dev = device;

class DeviceTransformerTensor final : public StrategyHooks,
                                      private UnitHooks,
                                      private dev::DeviceTensorGroup {
 public:
  DeviceTransformerTensor(EngineState& state, Communicator* host_tensor, Communicator* tensor,
                          size_t world_rank)
      : s_(state),
        host_tensor_(host_tensor),
        o_(state.options),
        mixed_(state.mixed()),
        tp_(o_.parallel.tp),
        rank_(world_rank % o_.parallel.tp),
        device_(select_device(tensor)),
        group_(tp_ > 1 ? tensor : nullptr),
        blas_(compute_.get()),
        c_{compute_.get(), blas_.get(), o_.tf32},
        parallel_{tp_, rank_, o_.sequence_parallel, o_.recompute},
        layout_(transformer_layout(o_.transformer, tp_, rank_)) {
    const std::vector<float> initial =
        transformer_shard(o_.transformer, initial_model_parameters(o_), tp_, rank_);
    local_ = initial.size();
    counted_ = counted_ranges(transformer_unique(o_.transformer, tp_, rank_));
    replicated_ = transformer_unique(o_.transformer, tp_, tp_ > 1 ? 1 : 0);  // 0: replicated
    params_ = dev::DeviceBuffer<float>(allocator_, local_);
    params_.upload(initial, c_.stream);
    dev::round_to(c_, o_.precision, params_.data(), local_);
    grads_ = dev::DeviceBuffer<float>(allocator_, local_);
    flag_ = dev::DeviceBuffer<int>(allocator_, 1);
    if (o_.offload_optimizer) {
      // The fp32 master weights and the optimizer on the host; mixed, the
      // parameters come back up as 16-bit words.
      offload_ = std::make_unique<HostOffload>(o_.optimizer, o_.precision, initial);
      if (mixed_) params16_ = dev::DeviceBuffer<uint16_t>(allocator_, local_);
    } else {
      if (mixed_) {  // fp32 master weights, from the unrounded parameters
        master_ = dev::DeviceBuffer<float>(allocator_, local_);
        master_.upload(initial, c_.stream);
      }
      optimizer_ =
          std::make_unique<dev::DeviceOptimizer>(allocator_, o_.optimizer, local_, c_.stream);
    }
    micro_ = o_.global_batch / o_.micro_batches;
    // The tensor group's collectives in the compute format: activations of
    // every row (s x micro-batch x hidden), or a step's partial gradients.
    if (mixed_ && tp_ > 1)
      words_ = dev::DeviceBuffer<uint16_t>(
          allocator_, std::max(o_.transformer.seq_len * micro_ * o_.transformer.hidden, local_));
    dev::DeviceTensorGroup* group = nullptr;
    if (tp_ > 1) group = this;
    transformer_ = std::make_unique<dev::DeviceTransformer>(allocator_, o_.transformer, layout_,
                                                            parallel_, o_.precision, group, micro_);
    compute_.synchronize();  // `initial` goes out of scope
  }

  ~DeviceTransformerTensor() override {
    if (group_.stream != nullptr) (void)cudaStreamSynchronize(group_.stream);
    (void)cudaStreamSynchronize(compute_.get());
  }

  size_t parameters() const override { return transformer_parameter_count(o_.transformer); }
  size_t communicated() const override { return parameters(); }

  double forward_backward(size_t step, StepFigures& f) override {
    grads_.zero(c_.stream);
    figures_ = &f;
    const size_t per_replica = o_.global_batch;
    const std::vector<size_t> samples = s_.step_samples(step, 1, 0, per_replica);
    double local_loss = 0;
    for (size_t m = 0; m < o_.micro_batches; ++m) {
      const std::vector<uint32_t> sequences =
          gather_sequences(s_.tokens, std::span(samples).subspan(m * micro_, micro_));
      backward_ = false;
      local_loss += transformer_->micro_batch(c_, sequences, micro_, per_replica,
                                              static_cast<float>(f.loss_scale), *this);
      f.peak_activation_bytes =
          std::max(f.peak_activation_bytes, static_cast<double>(transformer_->held() * s_.element));
      device_used_peak_ = std::max(device_used_peak_, device_bytes_in_use());
    }
    return local_loss;
  }

  // Under sequence parallelism the embeddings', layer norms' and row-parallel
  // biases' gradients are partial sums over the ranks' positions (Megatron's
  // layer-norm gradient all-reduce).
  ReducedGradients reduce_gradients(StepFigures& f) override {
    if (o_.sequence_parallel && tp_ > 1 && !o_.faults.skipped_tp_all_reduce)
      for (const Range& r : sequence_parallel_partial(o_.transformer, tp_))
        if (r.size() > 0) {
          float* values = grads_.data() + r.begin;
          collective(values, values, r.size(), Kind::kAllReduce, f);
        }
    gradients_ =
        std::make_unique<DeviceGradients>(c_, grads_.data(), local_, flag_.data(), counted_);
    ReducedGradients g;
    g.device = gradients_.get();
    g.disjoint = true;  // each rank counts its shard, rank 0 the copies too
    return g;
  }

  void apply(std::span<const float>, size_t step, StepFigures& f) override {
    if (offload_) {
      offload_->step(c_, grads_.data(), params16_.data(), params_.data(), step, f);
      if (mixed_) dev::from_16(c_, o_.precision, params16_.data(), params_.data(), local_);
    } else if (mixed_) {
      optimizer_->step(c_, master_.data(), grads_.data(), step);
      dev::round_copy(c_, o_.precision, master_.data(), params_.data(), nullptr, local_);
    } else {
      optimizer_->step(c_, params_.data(), grads_.data(), step);
    }
    compute_.synchronize();  // the step's time includes the device's work
  }

  void add_own_communication(CommCounters& counters) override {
    compute_.synchronize();
    for (size_t i = 0; i < timed_used_; ++i) {
      const double seconds = elapsed(timed_[i]->start, timed_[i]->end);
      counters.busy_seconds += seconds;
      counters.exposed_seconds += seconds;  // on the critical path
    }
    counters.operations += timed_used_;
    timed_used_ = 0;
  }

  double bytes_sent(const StepFigures& f, const CommCounters&) const override { return f.tp_bytes; }

  // Every rank's reduced gradients gathered into the whole vector over the
  // host group (the first-gradient check, unit by unit against one GPU's).
  std::vector<float> gathered_gradients(std::span<const float>) override {
    std::vector<float> mine(local_);
    grads_.download(mine, c_.stream);
    compute_.synchronize();
    if (tp_ == 1) return mine;
    std::vector<float> ranks(local_ * tp_);
    s_.comm.run(host_tensor_, 0, nullptr, [&](Communicator& c) {
      c.all_gather(mine.data(), ranks.data(), local_, DataType::kFloat32);
    });
    return transformer_unshard(o_.transformer, ranks, tp_);
  }

  double global_loss(double local_loss) override {
    return s_.reduce(rank_ == 0 ? local_loss : 0.0, ReduceOp::kSum);
  }

  // The replicated parameters agree over the tensor group.
  bool consistent() override {
    std::vector<float> host(local_), copies;
    params_.download(host, c_.stream);
    compute_.synchronize();
    for (size_t i = 0; i < local_; ++i)
      if (replicated_[i] == 0.0f) copies.push_back(host[i]);
    const double hash = static_cast<double>(fnv1a(copies));
    return s_.reduce(hash, ReduceOp::kMin) == s_.reduce(hash, ReduceOp::kMax);
  }

  MemoryFootprint memory() const override {
    const double e = static_cast<double>(s_.element), n = static_cast<double>(local_);
    MemoryFootprint m;
    m.parameters = e * n;
    m.gradients = e * n;
    m.optimizer =
        static_cast<double>(offload_ ? offload_->state_bytes() : optimizer_->state_bytes()) +
        (mixed_ ? 4.0 * n : 0.0);  // the fp32 master weights
    return m;
  }

  void add_results(TrainResult& result) const override {
    result.device_peak_bytes = static_cast<double>(allocator_.peak_bytes());
    result.device_used_bytes = device_used_peak_;
  }

 private:
  // UnitHooks: the rank's flat vector; the backward starts at the head's
  // gradients (--fault tp-allreduce skips the tensor group's reductions from there on).
  const float* forward_parameters(size_t unit) override {
    return params_.data() + layout_.units[unit].begin;
  }
  const float* backward_parameters(size_t unit) override { return forward_parameters(unit); }
  float* gradients(size_t unit) override {
    backward_ = true;
    return grads_.data() + layout_.units[unit].begin;
  }

  // DeviceTensorGroup: NCCL over the tensor group on its stream.
  enum class Kind { kAllReduce, kAllGather, kReduceScatter };
  void all_reduce(float* values, size_t n) override {
    if (skipping()) return;
    collective(values, values, n, Kind::kAllReduce, *figures_);
  }
  void all_gather(const float* mine, float* full, size_t n_mine) override {
    collective(mine, full, n_mine, Kind::kAllGather, *figures_);
  }
  void reduce_scatter(const float* full, float* mine, size_t n_mine) override {
    if (skipping()) {  // this rank's partial sums, unreduced
      dev::check(cudaMemcpyAsync(mine, full + rank_ * n_mine, n_mine * sizeof(float),
                                 cudaMemcpyDeviceToDevice, c_.stream),
                 "cudaMemcpyAsync device to device");
      return;
    }
    collective(full, mine, n_mine, Kind::kReduceScatter, *figures_);
  }
  bool skipping() const { return backward_ && o_.faults.skipped_tp_all_reduce; }

  // One collective over the tensor group after the compute stream's work so
  // far, in the compute format (16-bit words on the wire for bf16/fp16, as
  // the host path's wire.h); the compute stream's later work waits for it.
  // `n`: the all-reduce's values, the all-gather's and reduce-scatter's chunk.
  void collective(const float* in, float* out, size_t n, Kind kind, StepFigures& f) {
    ready_.record(c_.stream);
    ready_.wait_on(group_.stream);
    TimedCollective& timed = next_timed();
    timed.start.record(group_.stream);
    Communicator& comm = *group_.comm;
    const dev::Context& gc = group_.context;
    const Precision p = o_.precision;
    const DataType type = mixed_ ? wire_type(p) : DataType::kFloat32;
    const size_t sent = kind == Kind::kReduceScatter ? n * tp_ : n;  // the values going in
    const size_t received = kind == Kind::kAllGather ? n * tp_ : n;  // and coming out
    const void* send = in;
    void* recv = out;
    // In place in words_ (NCCL's in-place layouts): the all-gather's chunk and
    // the reduce-scatter's result at this rank's offset.
    uint16_t* result = words_.data() + (kind == Kind::kReduceScatter ? rank_ * n : 0);
    if (mixed_) {
      uint16_t* mine = words_.data() + (kind == Kind::kAllGather ? rank_ * n : 0);
      dev::to_16(gc, p, in, mine, sent);
      send = mine;
      recv = result;
    }
    switch (kind) {
      case Kind::kAllReduce:
        comm.all_reduce(send, recv, n, type, ReduceOp::kSum);
        f.tp_bytes += all_reduce_bytes(n, tp_, s_.element);
        break;
      case Kind::kAllGather:
        comm.all_gather(send, recv, n, type);
        f.tp_bytes += all_gather_bytes(n * tp_, tp_, s_.element);
        break;
      case Kind::kReduceScatter:
        comm.reduce_scatter(send, recv, n, type, ReduceOp::kSum);
        f.tp_bytes += reduce_scatter_bytes(n * tp_, tp_, s_.element);
        break;
    }
    if (mixed_) dev::from_16(gc, p, result, out, received);
    timed.end.record(group_.stream);
    timed.end.wait_on(c_.stream);
  }

  TimedCollective& next_timed() {
    if (timed_used_ == timed_.size()) timed_.push_back(std::make_unique<TimedCollective>());
    return *timed_[timed_used_++];
  }

  EngineState& s_;
  Communicator* host_tensor_;  // the tensor group over host memory (scalars, the gradient check)
  const TrainOptions& o_;
  bool mixed_;
  size_t tp_, rank_;
  int device_;  // selected before the streams and memory below are made on it
  DeviceGroup group_;
  dev::DeviceAllocator allocator_;
  dev::Stream compute_;
  dev::BlasHandle blas_;
  dev::Context c_;
  TransformerParallel parallel_;
  TransformerLayout layout_;
  size_t local_ = 0, micro_ = 0;
  std::vector<Range> counted_;
  std::vector<float> replicated_;
  dev::DeviceBuffer<float> params_, grads_, master_;  // master_: mixed, on the device
  dev::DeviceBuffer<uint16_t> params16_, words_;      // offloaded mixed; the wire (mixed)
  dev::DeviceBuffer<int> flag_;
  std::unique_ptr<dev::DeviceOptimizer> optimizer_;  // null when offloaded
  std::unique_ptr<HostOffload> offload_;
  std::unique_ptr<DeviceGradients> gradients_;
  std::unique_ptr<dev::DeviceTransformer> transformer_;
  StepFigures* figures_ = nullptr;
  bool backward_ = false;
  dev::Event ready_;
  std::vector<std::unique_ptr<TimedCollective>> timed_;
  size_t timed_used_ = 0;
  double device_used_peak_ = 0;
};

}  // namespace

std::unique_ptr<StrategyHooks> make_device_transformer_tensor(EngineState& state,
                                                              const ParallelGroups& host,
                                                              Communicator* tensor,
                                                              size_t world_rank) {
  return std::make_unique<DeviceTransformerTensor>(state, host.tp, tensor, world_rank);
}

}  // namespace ccscope::training_probe
