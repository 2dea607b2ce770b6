// The GPU path's tensor x pipeline x data grid (trainer.h:
// train_grid_on_device): the host Grid's layers (grid_layers.h: Megatron's
// column/row pairs, pipeline chunks) with parameters, gradients and
// activations in device memory, GEMMs through cuBLAS on the compute stream.
// Each group has its own NCCL communicator and stream: the tensor group's
// all-reduces (forward after a row layer, backward after a column layer:
// Megatron's g and f), the pipeline's transfers (the stage's plan,
// pipeline.h: GPipe, 1F1B, interleaved, one batch_send_recv per batch), and
// after the flush the data group's all-reduce of the gradients; events order
// each against the compute stream both ways (they sit on the critical path,
// as in Megatron). Scalars (the loss, fp16's overflow, clipping's norm, the
// checks) go over the host groups.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/layout.h"
#include "ccscope/training_probe/parallel_trainer.h"
#include "ccscope/training_probe/pipeline.h"
#include "ccscope/training_probe/trainer.h"
#include "device_ops.h"
#include "device_strategy.h"
#include "engine.h"
#include "grid_layers.h"
#include "host_offload.h"
#include "wire.h"

namespace ccscope::training_probe {
namespace {

namespace dev = device;

// One micro-batch's pass through one chunk of this stage: each layer's input
// (x[i]; x.back() the chunk's output), pre-activation and 16-bit input, the
// output's gradient (from the loss, or received), the input's gradient (sent
// back), and a boundary tensor's 16-bit words on the wire. Kept in a pool per
// chunk across steps, as a caching allocator would keep them.
struct MicroBatchState {
  std::vector<dev::DeviceBuffer<float>> x, pre;
  std::vector<dev::DeviceBuffer<uint16_t>> x16;
  dev::DeviceBuffer<float> grad, grad_out;
  dev::DeviceBuffer<uint16_t> wire_out, wire_in;
  double bytes = 0;  // the activations' bytes in the compute format (peak_activation_bytes)
};

class DeviceGrid final : public StrategyHooks {
 public:
  DeviceGrid(EngineState& state, const ParallelGroups& host, const ParallelGroups& on_device,
             size_t world_rank)
      : s_(state),
        o_(state.options),
        p_(o_.parallel),
        host_(host),
        at_(grid_position(world_rank, p_)),
        ordinal_(select_device(first_of(on_device))),
        mixed_(state.mixed()),
        tp_(on_device.tp),
        pp_(on_device.pp),
        dp_(on_device.dp),
        blas_(compute_.get()),
        c_{compute_.get(), blas_.get(), o_.tf32} {
    std::vector<float> initial, unique;
    chunks_ = grid_layers(o_, at_, initial, unique);
    plan_ = pipeline_plan(p_.schedule, p_.pp, at_.pp, o_.micro_batches, p_.chunks);
    free_.resize(chunks_.size());
    local_ = initial.size();
    counted_ = counted_ranges(unique);
    // ZeRO-1 over the data group (DeepSpeed's with Megatron's TP and PP): the
    // stage's parameters padded to a multiple of the replicas; each steps its
    // chunk's fp32 master weights.
    shard_ = shard_range({0, local_}, zero1_ ? p_.dp : 1);
    const size_t padded = shard_.padded_size(zero1_ ? p_.dp : 1);
    params_ = dev::DeviceBuffer<float>(allocator_, padded);
    params_.zero(c_.stream);
    params_.upload(initial, c_.stream);
    if (zero1_) {
      const Range mine = shard_.owned(at_.dp);
      std::vector<float> master(shard_.chunk, 0.0f);
      std::copy(initial.begin() + static_cast<std::ptrdiff_t>(mine.begin),
                initial.begin() + static_cast<std::ptrdiff_t>(mine.end), master.begin());
      master_ = dev::DeviceBuffer<float>(allocator_, shard_.chunk);
      master_.upload(master, c_.stream);
      shard_counted_ = counted_ranges(
          std::vector<float>(unique.begin() + static_cast<std::ptrdiff_t>(mine.begin),
                             unique.begin() + static_cast<std::ptrdiff_t>(mine.end)));
      grad_shard_ = dev::DeviceBuffer<float>(allocator_, shard_.chunk);
      shard_words_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ ? shard_.chunk : 0);
      compute_.synchronize();  // `master` goes out of scope
      // Offloaded, the device's master_ is only the chunk's staging for the gather.
      if (o_.offload_optimizer)
        offload_ = std::make_unique<HostOffload>(o_.optimizer, o_.precision, std::move(master));
    } else if (o_.offload_optimizer) {
      // The rank's slice's master weights and optimizer on the host.
      offload_ = std::make_unique<HostOffload>(o_.optimizer, o_.precision, initial);
    } else if (mixed_) {
      // The master copy from the unrounded parameters, as the host Grid's.
      master_ = dev::DeviceBuffer<float>(allocator_, local_);
      master_.upload(initial, c_.stream);
    }
    if (mixed_) params16_ = dev::DeviceBuffer<uint16_t>(allocator_, padded);
    dev::round_to(c_, o_.precision, params_.data(), padded);
    if (mixed_) dev::to_16(c_, o_.precision, params_.data(), params16_.data(), padded);
    grads_ = dev::DeviceBuffer<float>(allocator_, padded);
    flag_ = dev::DeviceBuffer<int>(allocator_, 1);
    flush_ = dev::DeviceBuffer<float>(allocator_, 1);
    if (!offload_)
      optimizer_ = std::make_unique<dev::DeviceOptimizer>(
          allocator_, o_.optimizer, zero1_ ? shard_.chunk : local_, c_.stream);
    per_replica_ = o_.global_batch / p_.dp;
    micro_ = per_replica_ / o_.micro_batches;
    const size_t width = o_.shape.width, n = micro_ * width;
    batch_inputs_ = dev::DeviceBuffer<float>(allocator_, per_replica_ * width);
    batch_targets_ = dev::DeviceBuffer<float>(allocator_, per_replica_ * width);
    diff_ = dev::DeviceBuffer<float>(allocator_, n);
    dy_ = dev::DeviceBuffer<float>(allocator_, n);
    dx_ = dev::DeviceBuffer<float>(allocator_, n);
    dy16_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ ? n : 0);
    tp_words_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ && tp_.comm ? n : 0);
    dp_words_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ && dp_.comm ? padded : 0);
    compute_.synchronize();  // the uploads' host vectors go out of scope
  }

  ~DeviceGrid() override {
    // Nothing queued may outlive the buffers it reads and writes.
    for (const DeviceGroup* g : {&tp_, &pp_, &dp_})
      if (g->stream != nullptr) (void)cudaStreamSynchronize(g->stream);
    (void)cudaStreamSynchronize(compute_.get());
  }

  size_t parameters() const override { return parameter_count(o_.shape); }
  size_t communicated() const override { return parameters(); }

  double forward_backward(size_t step, StepFigures& f) override {
    grads_.zero(c_.stream);
    const std::vector<size_t> samples = s_.step_samples(step, p_.dp, at_.dp, per_replica_);
    if (first_stage() || last_stage()) {
      // The replica's whole batch once (the first stage's inputs, the last
      // one's targets); each micro-batch's rows are copied on the device.
      gather_batch(s_.data, samples, s_.inputs, s_.targets);
      batch_inputs_.upload(s_.inputs, c_.stream);
      dev::round_to(c_, o_.precision, batch_inputs_.data(), batch_inputs_.size());
      batch_targets_.upload(s_.targets, c_.stream);
      compute_.synchronize();  // the host's inputs and targets are free again
    }
    local_loss_ = 0;
    held_ = 0;
    in_flight_ = 0;
    pipeline_start_.record(c_.stream);
    for (const PipelineStep& pipeline_step : plan_) {
      exchange(pipeline_step, f);
      if (!pipeline_step.pass) continue;
      const PipelinePass& pass = *pipeline_step.pass;
      TimedCollective& span = next_span();
      span.start.record(c_.stream);
      const Key key{pass.micro_batch, pass.chunk};
      if (pass.kind == PipelinePass::Kind::kForward) {
        forward(key, f);
        f.peak_in_flight = std::max(f.peak_in_flight, ++in_flight_);
        held_ += live_.at(key)->bytes;
        f.peak_activation_bytes = std::max(f.peak_activation_bytes, held_);
      } else {
        held_ -= live_.at(key)->bytes;
        --in_flight_;
        backward(key, f);
      }
      span.end.record(c_.stream);
    }
    // The flush: every stage's window ends with the pipeline's last pass (the
    // textbook bubble counts a stage's idle end too), marked by a one-element
    // all-reduce over the pipeline group; it moves no tensor, counts no bytes.
    if (pp_.comm != nullptr && p_.pp > 1) {
      ready_.record(c_.stream);
      ready_.wait_on(pp_.stream);
      pp_.comm->all_reduce(flush_.data(), flush_.data(), 1, DataType::kFloat32, ReduceOp::kSum);
      flushed_.record(pp_.stream);
      flushed_.wait_on(c_.stream);
    }
    pipeline_end_.record(c_.stream);
    note_device_memory();
    return local_loss_;
  }

  // The data group's replicas average their gradients (as the host Grid's,
  // after the flush); tensor shards, stages and the replicas' copies count
  // once each in the global norm (counted_).
  ReducedGradients reduce_gradients(StepFigures& f) override {
    if (zero1_) return reduce_scatter_gradients(f);
    if (dp_.comm != nullptr && p_.dp > 1) {
      all_reduce_on(dp_, grads_.data(), local_, 1.0f / static_cast<float>(p_.dp), dp_words_.data());
      f.dp_bytes += all_reduce_bytes(local_, p_.dp, s_.element);
    }
    gradients_ = std::make_unique<DeviceGradients>(c_, grads_.data(), local_, flag_.data(),
                                                   at_.dp == 0 ? counted_ : nothing_counted());
    ReducedGradients g;
    g.device = gradients_.get();
    g.disjoint = true;
    return g;
  }

  void apply(std::span<const float>, size_t step, StepFigures& f) override {
    if (offload_ && zero1_) {
      // The chunk down, stepped on the host, up into the gather's staging.
      offload_->step(c_, grad_shard_.data(), shard_words_.data(), master_.data(), step, f);
      if (mixed_) dev::from_16(c_, o_.precision, shard_words_.data(), master_.data(), shard_.chunk);
      gather_parameters(f);
    } else if (offload_) {
      offload_->step(c_, grads_.data(), params16_.data(), params_.data(), step, f);
      if (mixed_) dev::from_16(c_, o_.precision, params16_.data(), params_.data(), local_);
    } else if (zero1_) {
      optimizer_->step(c_, master_.data(), grad_shard_.data(), step);
      gather_parameters(f);
    } else if (mixed_) {
      optimizer_->step(c_, master_.data(), grads_.data(), step);
      dev::round_copy(c_, o_.precision, master_.data(), params_.data(), params16_.data(), local_);
    } else {
      optimizer_->step(c_, params_.data(), grads_.data(), step);
    }
    compute_.synchronize();  // the step's time includes the device's work
    // The pipeline's figures on the device's timeline: the window from the
    // first pass to the flush, and the passes' time on the compute stream.
    f.pipeline_seconds = elapsed(pipeline_start_, pipeline_end_);
    for (size_t i = 0; i < spans_used_; ++i)
      f.pipeline_busy_seconds += elapsed(spans_[i]->start, spans_[i]->end);
    f.pipeline_wait_seconds = std::max(0.0, f.pipeline_seconds - f.pipeline_busy_seconds);
    spans_used_ = 0;
  }

  // The collectives' time on their streams; all of it exposed: the compute
  // stream waits for each (Megatron's tensor all-reduces and the pipeline's
  // transfers are on the critical path, and the data group's follows the
  // flush).
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
    return f.tp_bytes + f.pp_bytes + f.dp_bytes;
  }

  // The loss: the last stage's, tensor rank 0's, averaged over the replicas
  // (the host Grid's).
  double global_loss(double local_loss) override {
    const bool reporter = last_stage() && at_.tp == 0;
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
    // fp32 master weights where the compute format is 16-bit (the host path's
    // accounting; in fp32 the parameters are their own master copy).
    m.optimizer =
        static_cast<double>(offload_ ? offload_->state_bytes() : optimizer_->state_bytes()) +
        (mixed_ ? 4.0 * (zero1_ ? static_cast<double>(shard_.chunk) : n) : 0.0);
    return m;
  }

  void add_results(TrainResult& result) const override {
    result.device_peak_bytes = static_cast<double>(allocator_.peak_bytes());
    result.device_used_bytes = device_used_peak_;
  }

 private:
  using Key = std::pair<size_t, size_t>;  // micro-batch, chunk

  static Communicator* first_of(const ParallelGroups& g) {
    for (Communicator* c : {g.tp, g.pp, g.dp, g.world})
      if (c != nullptr) return c;
    return nullptr;
  }
  bool first_stage() const { return at_.pp == 0; }
  bool last_stage() const { return at_.pp + 1 == p_.pp; }
  bool first_virtual(size_t chunk) const { return chunk == 0 && first_stage(); }
  bool last_virtual(size_t chunk) const { return chunk + 1 == p_.chunks && last_stage(); }

  static std::vector<Range> nothing_counted() { return {Range{0, 0}}; }

  // The state of `key`, from its chunk's pool (allocated the first time a
  // pool runs dry: in the first step only).
  MicroBatchState& acquire(const Key& key) {
    std::vector<std::unique_ptr<MicroBatchState>>& pool = free_[key.second];
    std::unique_ptr<MicroBatchState> state;
    if (!pool.empty()) {
      state = std::move(pool.back());
      pool.pop_back();
    } else {
      state = make_state(chunks_[key.second]);
    }
    MicroBatchState& made = *state;
    live_[key] = std::move(state);
    return made;
  }
  void release(const Key& key) {
    auto it = live_.find(key);
    free_[key.second].push_back(std::move(it->second));
    live_.erase(it);
  }
  std::unique_ptr<MicroBatchState> make_state(const std::vector<LocalLayer>& layers) {
    auto state = std::make_unique<MicroBatchState>();
    const size_t n = micro_ * o_.shape.width;
    for (const LocalLayer& layer : layers) {
      state->x.emplace_back(allocator_, micro_ * layer.in);
      state->x16.emplace_back(allocator_, mixed_ ? micro_ * layer.in : 0);
      state->pre.emplace_back(allocator_, micro_ * layer.out);
      state->bytes += static_cast<double>(micro_ * (layer.in + 2 * layer.out) * s_.element);
    }
    state->x.emplace_back(allocator_, n);  // the chunk's output
    state->x16.emplace_back(allocator_, 0);
    state->grad = dev::DeviceBuffer<float>(allocator_, n);
    state->grad_out = dev::DeviceBuffer<float>(allocator_, n);
    state->wire_out = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ ? n : 0);
    state->wire_in = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ ? n : 0);
    return state;
  }

  void forward(const Key& key, StepFigures& f) {
    const auto [m, chunk] = key;
    const size_t width = o_.shape.width, n = micro_ * width;
    // A received activation's state exists already (exchange made it).
    MicroBatchState& st = live_.count(key) ? *live_.at(key) : acquire(key);
    if (first_virtual(chunk)) {
      copy_on_device(st.x[0].data(), batch_inputs_.data() + m * n, n);
      if (mixed_) dev::to_16(c_, o_.precision, st.x[0].data(), st.x16[0].data(), n);
    }
    const std::vector<LocalLayer>& layers = chunks_[chunk];
    for (size_t i = 0; i < layers.size(); ++i) {
      const LocalLayer& layer = layers[i];
      dev::linear_forward(c_, o_.precision, gemm_input(st, i), weights(layer), st.pre[i].data(),
                          micro_, layer.in, layer.out);
      // Row-parallel: partial sums over this rank's input features, summed
      // over the tensor group (Megatron's g), then the bias added once.
      if (layer.role == LayerRole::kRow) tensor_all_reduce(st.pre[i].data(), micro_ * layer.out, f);
      dev::bias_activation(
          c_, o_.precision, layer.last ? std::nullopt : std::optional(o_.shape.activation),
          st.pre[i].data(), bias(layer), st.x[i + 1].data(),
          mixed_ && i + 1 < layers.size() ? st.x16[i + 1].data() : nullptr, micro_, layer.out);
    }
    if (last_virtual(chunk)) {
      // The loss synchronizes the compute stream.
      local_loss_ += dev::mse_loss(c_, st.x.back().data(), batch_targets_.data() + m * n,
                                   diff_.data(), st.grad.data(), micro_, width, per_replica_,
                                   static_cast<float>(f.loss_scale));
      if (o_.faults.dropped_micro_batch == m) st.grad.zero(c_.stream);
    }
  }

  void backward(const Key& key, StepFigures& f) {
    const size_t chunk = key.second;
    MicroBatchState& st = *live_.at(key);
    const std::vector<LocalLayer>& layers = chunks_[chunk];
    // dy of layer i is dx of layer i + 1: the two scratch buffers alternate,
    // and the chunk's input gradient lands in grad_out (to be sent back).
    float* dy = st.grad.data();
    float* spare[2] = {dy_.data(), dx_.data()};
    size_t next = 0;
    for (size_t i = layers.size(); i-- > 0;) {
      const LocalLayer& layer = layers[i];
      if (!layer.last)
        dev::activation_backward(c_, o_.precision, o_.shape.activation, dy, st.pre[i].data(),
                                 st.x[i + 1].data(), micro_ * layer.out);
      const bool needs_input_grad = layer.layer > 0;  // nobody needs the data's gradient
      float* dx = i == 0 ? st.grad_out.data() : spare[next];
      next ^= 1;
      float* weight_grad = grads_.data() + layer.offset;
      dev::linear_backward(c_, o_.precision, gemm_input(st, i), dy, dy16_.data(), weights(layer),
                           weight_grad, weight_grad + layer.weight_count,
                           needs_input_grad ? dx : nullptr, micro_, layer.in, layer.out);
      // Column-parallel: the input gradient's partial sums over this rank's
      // output features, summed over the tensor group (Megatron's f backward).
      if (layer.role == LayerRole::kColumn && needs_input_grad && !o_.faults.skipped_tp_all_reduce)
        tensor_all_reduce(dx, micro_ * layer.in, f);
      dy = dx;
    }
    // The first virtual stage sends nothing back: its state is free now; the
    // others' once their gradient is sent (exchange).
    if (first_virtual(chunk)) release(key);
  }

  // One batch of the plan's transfers over the pipeline group, in the compute
  // format, on the group's stream behind the compute stream's work, which
  // waits for it in turn.
  void exchange(const PipelineStep& step, StepFigures& f) {
    if (step.sends.empty() && step.recvs.empty()) return;
    const size_t n = micro_ * o_.shape.width;
    ready_.record(c_.stream);
    ready_.wait_on(pp_.stream);
    TimedCollective& timed = next_timed();
    timed.start.record(pp_.stream);
    const dev::Context& pc = pp_.context;
    std::vector<PeerSend> sends;
    std::vector<PeerRecv> recvs;
    std::vector<Key> sent_back;  // gradients sent: their states are free afterwards
    for (const PipelineTransfer& t : step.sends) {
      const Key key{t.micro_batch, t.chunk};
      MicroBatchState& st = *live_.at(key);
      const bool activation = t.kind == PipelineTransfer::Kind::kActivation;
      const float* values = activation ? st.x.back().data() : st.grad_out.data();
      const void* data = values;
      if (mixed_) {
        dev::to_16(pc, o_.precision, values, st.wire_out.data(), n);
        data = st.wire_out.data();
      }
      sends.push_back({static_cast<int>(t.peer), data, n});
      f.pp_bytes += static_cast<double>(n * s_.element);
      if (!activation) sent_back.push_back(key);
    }
    for (const PipelineTransfer& t : step.recvs) {
      const Key key{t.micro_batch, t.chunk};
      const bool activation = t.kind == PipelineTransfer::Kind::kActivation;
      MicroBatchState& st = activation ? acquire(key) : *live_.at(key);
      // 16-bit activations land in the first layer's GEMM input directly.
      void* data = !mixed_      ? static_cast<void*>(activation ? st.x[0].data() : st.grad.data())
                   : activation ? static_cast<void*>(st.x16[0].data())
                                : static_cast<void*>(st.wire_in.data());
      recvs.push_back({static_cast<int>(t.peer), data, n});
    }
    pp_.comm->batch_send_recv(sends, recvs, mixed_ ? wire_type(o_.precision) : DataType::kFloat32);
    if (mixed_) {
      for (const PipelineTransfer& t : step.recvs) {
        MicroBatchState& st = *live_.at({t.micro_batch, t.chunk});
        if (t.kind == PipelineTransfer::Kind::kActivation)
          dev::from_16(pc, o_.precision, st.x16[0].data(), st.x[0].data(), n);
        else
          dev::from_16(pc, o_.precision, st.wire_in.data(), st.grad.data(), n);
      }
    }
    timed.end.record(pp_.stream);
    timed.end.wait_on(c_.stream);
    for (const Key& key : sent_back) release(key);
  }

  // ZeRO-1: the gradients averaged and reduce-scattered over the data group
  // into this replica's chunk (the padding's zeros stay zero); each replica
  // counts its own chunk in the global norm.
  ReducedGradients reduce_scatter_gradients(StepFigures& f) {
    const size_t chunk = shard_.chunk, padded = shard_.padded_size(p_.dp);
    const dev::Context& dc = dp_.context;
    ready_.record(c_.stream);
    ready_.wait_on(dp_.stream);
    TimedCollective& timed = next_timed();
    timed.start.record(dp_.stream);
    dev::scale(dc, grads_.data(), padded, 1.0f / static_cast<float>(p_.dp));
    if (mixed_) {
      dev::to_16(dc, o_.precision, grads_.data(), dp_words_.data(), padded);
      dp_.comm->reduce_scatter(dp_words_.data(), shard_words_.data(), chunk,
                               wire_type(o_.precision), ReduceOp::kSum);
      dev::from_16(dc, o_.precision, shard_words_.data(), grad_shard_.data(), chunk);
    } else {
      dp_.comm->reduce_scatter(grads_.data(), grad_shard_.data(), chunk, DataType::kFloat32,
                               ReduceOp::kSum);
    }
    timed.end.record(dp_.stream);
    timed.end.wait_on(c_.stream);
    f.dp_bytes += reduce_scatter_bytes(padded, p_.dp, s_.element);
    gradients_ = std::make_unique<DeviceGradients>(c_, grad_shard_.data(), chunk, flag_.data(),
                                                   shard_counted_);
    ReducedGradients g;
    g.device = gradients_.get();
    g.disjoint = true;
    return g;
  }

  // ZeRO-1: each replica's stepped chunk, rounded to the compute format,
  // all-gathered over the data group into the whole stage's parameters.
  void gather_parameters(StepFigures& f) {
    const size_t chunk = shard_.chunk, padded = shard_.padded_size(p_.dp);
    const size_t mine = at_.dp * chunk;
    // This replica's chunk of the parameters from its master weights.
    dev::round_copy(c_, o_.precision, master_.data(), params_.data() + mine,
                    mixed_ ? params16_.data() + mine : nullptr, chunk);
    ready_.record(c_.stream);
    ready_.wait_on(dp_.stream);
    TimedCollective& timed = next_timed();
    timed.start.record(dp_.stream);
    if (mixed_) {
      dp_.comm->all_gather(params16_.data() + mine, params16_.data(), chunk,
                           wire_type(o_.precision));
      dev::from_16(dp_.context, o_.precision, params16_.data(), params_.data(), padded);
    } else {
      dp_.comm->all_gather(params_.data() + mine, params_.data(), chunk, DataType::kFloat32);
    }
    timed.end.record(dp_.stream);
    timed.end.wait_on(c_.stream);
    f.dp_bytes += all_gather_bytes(padded, p_.dp, s_.element);
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

  void copy_on_device(float* to, const float* from, size_t n) {
    dev::check(cudaMemcpyAsync(to, from, n * sizeof(float), cudaMemcpyDeviceToDevice, c_.stream),
               "cudaMemcpyAsync device to device");
  }

  TimedCollective& next_timed() { return next_of(timed_, timed_used_); }
  TimedCollective& next_span() { return next_of(spans_, spans_used_); }
  static TimedCollective& next_of(std::vector<std::unique_ptr<TimedCollective>>& pool,
                                  size_t& used) {
    if (used == pool.size()) pool.push_back(std::make_unique<TimedCollective>());
    return *pool[used++];
  }

  const float* bias(const LocalLayer& layer) const {
    return params_.data() + layer.offset + layer.weight_count;
  }
  const void* weights(const LocalLayer& layer) const {
    return mixed_ ? static_cast<const void*>(params16_.data() + layer.offset)
                  : params_.data() + layer.offset;
  }
  const void* gemm_input(const MicroBatchState& st, size_t i) const {
    return mixed_ ? static_cast<const void*>(st.x16[i].data()) : st.x[i].data();
  }

  void note_device_memory() {
    device_used_peak_ = std::max(device_used_peak_, device_bytes_in_use());
  }

  EngineState& s_;
  const TrainOptions& o_;
  const ParallelOptions& p_;
  ParallelGroups host_;
  GridPosition at_;
  int ordinal_;  // selected before the streams and memory below are made on it
  bool mixed_;
  DeviceGroup tp_, pp_, dp_;
  dev::DeviceAllocator allocator_;
  dev::Stream compute_;
  dev::BlasHandle blas_;
  dev::Context c_;
  std::vector<std::vector<LocalLayer>> chunks_;
  std::vector<PipelineStep> plan_;
  size_t local_ = 0;
  std::vector<Range> counted_;
  const bool zero1_ = p_.zero1 && dp_.comm != nullptr && p_.dp > 1;
  Shard shard_;                       // ZeRO-1: the stage's parameters over the replicas
  std::vector<Range> shard_counted_;  // what this replica's chunk counts in the norm
  dev::DeviceBuffer<float> grad_shard_;
  dev::DeviceBuffer<uint16_t> shard_words_;
  dev::DeviceBuffer<float> params_, master_, grads_, flush_;
  dev::DeviceBuffer<uint16_t> params16_;
  dev::DeviceBuffer<int> flag_;
  std::unique_ptr<dev::DeviceOptimizer> optimizer_;  // null when offloaded
  std::unique_ptr<HostOffload> offload_;
  std::unique_ptr<DeviceGradients> gradients_;
  size_t per_replica_ = 0, micro_ = 0;
  dev::DeviceBuffer<float> batch_inputs_, batch_targets_, diff_, dy_, dx_;
  dev::DeviceBuffer<uint16_t> dy16_, tp_words_, dp_words_;
  std::map<Key, std::unique_ptr<MicroBatchState>> live_;
  std::vector<std::vector<std::unique_ptr<MicroBatchState>>> free_;  // per chunk
  double local_loss_ = 0, held_ = 0;
  size_t in_flight_ = 0;
  dev::Event ready_, flushed_;
  dev::Event pipeline_start_{true}, pipeline_end_{true};
  std::vector<std::unique_ptr<TimedCollective>> timed_, spans_;
  size_t timed_used_ = 0, spans_used_ = 0;
  double device_used_peak_ = 0;
};

}  // namespace

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
        std::tuple{on_device.pp, options.parallel.pp, "pipeline"},
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
      [&](EngineState& state) -> std::unique_ptr<StrategyHooks> {
        if (options.model == TrainedModel::kTransformer)
          return make_device_transformer_tensor(state, host, on_device.tp, rank);
        return std::make_unique<DeviceGrid>(state, host, on_device, rank);
      },
      on_step);
}

}  // namespace ccscope::training_probe
