// The training engine's GPU path (trainer.h: train_on_device): single and
// DDP over the MLP with everything a step touches in device memory. The
// engine (engine.h) runs the step loop as for the host path; this file is the
// strategy's hooks: the layers' forward and backward through device_ops.h
// (cuBLAS GEMMs, kernels) on a compute stream, DDP's gradient buckets
// all-reduced on the device communicator's stream as backward completes them
// (an event per bucket orders the two streams, as DDP's reducer does), the
// step's end (fp16's overflow check, unscaling, clipping) on the device, the
// optimizer as kernels or, offloaded, on the host (DeepSpeed's CPU Adam).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/layout.h"
#include "ccscope/training_probe/trainer.h"
#include "cublas_library.h"
#include "device_ops.h"
#include "device_strategy.h"
#include "device_transformer.h"
#include "engine.h"
#include "host_offload.h"
#include "wire.h"

namespace ccscope::training_probe {
namespace {

namespace dev = device;

// One micro-batch's activations: each layer's input (x[l], x[depth] the
// output), pre-activation, and their 16-bit copies for the GEMMs.
struct DeviceActivations {
  std::vector<dev::DeviceBuffer<float>> x, pre;
  std::vector<dev::DeviceBuffer<uint16_t>> x16;
};

// ZeRO-3: one gather of a layer's parameters, timed on the communication
// stream (start, end) and by the compute stream's stall waiting for it.
struct LayerGather {
  size_t layer = 0;
  std::unique_ptr<dev::Event> start, end, before_wait, after_wait;
};

// single, DDP, and ZeRO-1/2 (`zero_stage`): every rank runs the whole model
// over its part of the batch; the strategies differ in what each bucket's
// gradients meet on the communication stream (an all-reduce, or a
// reduce-scatter into this rank's shard whose optimizer step is followed by an
// all-gather of the parameters) and when (ZeRO-1: after the last backward, as
// DeepSpeed's stage 1; ZeRO-2: every micro-batch as backward fills a bucket).
//
// The model is the MLP (its layers here) or the transformer (DeviceTransformer,
// which asks this class for each unit's parameters and gradients through
// UnitHooks, as the host model asks the host strategies).
class DeviceDataParallel final : public StrategyHooks, private UnitHooks {
 public:
  DeviceDataParallel(EngineState& state, Communicator* data)
      : s_(state),
        o_(state.options),
        device_(select_device(data)),
        data_(data),
        ranks_(data ? static_cast<size_t>(data->size()) : 1),
        rank_(data ? static_cast<size_t>(data->rank()) : 0),
        mixed_(state.mixed()),
        zero_stage_(o_.strategy == Strategy::kZero1   ? 1
                    : o_.strategy == Strategy::kZero2 ? 2
                    : o_.strategy == Strategy::kZero3 ? 3
                                                      : 0),
        slices_(model_units(o_)),
        psi_(slices_.back().end()),
        blas_(compute_.get()),
        c_{compute_.get(), blas_.get(), o_.tf32} {
    std::vector<float> initial = initial_model_parameters(o_);
    grads_ = dev::DeviceBuffer<float>(allocator_, psi_);
    flag_ = dev::DeviceBuffer<int>(allocator_, 1);
    if (zero_stage_ < 3) {  // ZeRO-3 holds its shard only; layers are gathered for use
      params_ = dev::DeviceBuffer<float>(allocator_, psi_);
      params_.upload(initial, c_.stream);
      dev::round_to(c_, o_.precision, params_.data(), psi_);
      if (mixed_) {
        params16_ = dev::DeviceBuffer<uint16_t>(allocator_, psi_);
        dev::to_16(c_, o_.precision, params_.data(), params16_.data(), psi_);
      }
    }
    if (data_ != nullptr) {
      if (zero_stage_ == 3) {
        // ZeRO-3's units are the layers, in backward's order.
        for (size_t l = slices_.size(); l-- > 0;)
          buckets_.push_back({{slices_[l].begin(), slices_[l].end()}, l});
      } else {
        buckets_ = assign_buckets(slices_, s_.element, o_.bucket_bytes, o_.first_bucket_bytes);
      }
      if (zero_stage_ > 0) shard_buckets(initial);
      if (zero_stage_ == 3) {
        for (size_t slot = 0; slot < 2; ++slot) {
          slot_params_[slot] = dev::DeviceBuffer<float>(allocator_, largest_padded_);
          slot_words_[slot] = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ ? largest_padded_ : 0);
        }
        if (mixed_)
          dev::to_16(c_, o_.precision, master_.data(), shard_words_.data(), shard_elements_);
      }
    }
    if (o_.offload_optimizer) {
      // Master weights (all, or this rank's shard) and optimizer state on the
      // host; the copies' staging pinned.
      offload_ = std::make_unique<HostOffload>(
          o_.optimizer, o_.precision,
          zero_stage_ > 0 ? std::move(shard_master_) : initial);  // (shard_buckets set the shard's)
    } else if (zero_stage_ > 0) {
      // The optimizer over this rank's shard, in fp32 (master weights).
      optimizer_ = std::make_unique<dev::DeviceOptimizer>(allocator_, o_.optimizer, shard_elements_,
                                                          c_.stream);
    } else {
      if (mixed_) {
        master_ = dev::DeviceBuffer<float>(allocator_, psi_);
        master_.upload(initial, c_.stream);
      }
      optimizer_ =
          std::make_unique<dev::DeviceOptimizer>(allocator_, o_.optimizer, psi_, c_.stream);
    }
    if (data_ != nullptr) {
      comm_stream_ = static_cast<cudaStream_t>(data_->device_stream());
      if (comm_stream_ == nullptr)
        throw UsageError("the GPU path needs a device communicator (nccl), not " +
                         data_->backend_name());
      comm_blas_ = std::make_unique<dev::BlasHandle>(comm_stream_);
      comm_c_ = {comm_stream_, comm_blas_->get(), false};
      if (mixed_ && zero_stage_ == 0) wire16_ = dev::DeviceBuffer<uint16_t>(allocator_, psi_);
      for (size_t k = 0; k < buckets_.size(); ++k) {
        ready_.push_back(std::make_unique<dev::Event>());
        started_.push_back(std::make_unique<dev::Event>(true));
        finished_.push_back(std::make_unique<dev::Event>(true));
      }
    }
    allocate_activations();
    compute_.synchronize();  // the uploads' host vectors go out of scope
  }

  ~DeviceDataParallel() override {
    // Nothing queued may outlive the buffers it reads and writes.
    if (comm_stream_ != nullptr) (void)cudaStreamSynchronize(comm_stream_);
    (void)cudaStreamSynchronize(compute_.get());
  }

  size_t parameters() const override { return psi_; }
  size_t communicated() const override { return zero_stage_ > 0 ? padded_elements_ : psi_; }

  double forward_backward(size_t step, StepFigures& f) override {
    grads_.zero(c_.stream);
    if (zero_stage_ > 0) grad_shard_.zero(c_.stream);
    const size_t per_replica = o_.global_batch / ranks_;
    const size_t micro = micro_;
    const std::vector<size_t> samples = s_.step_samples(step, ranks_, rank_, per_replica);
    step_bytes_ = 0;
    double local_loss = 0;
    for (size_t m = 0; m < o_.micro_batches; ++m) {
      const bool last = m + 1 == o_.micro_batches;
      // ZeRO-2 reduces every micro-batch's gradients (its shard accumulates
      // them), the others the sum over micro-batches after the last one.
      const bool reduce = zero_stage_ >= 2 || last;
      if (transformer_) {
        local_loss += transformer_micro_batch(std::span(samples).subspan(m * micro, micro),
                                              per_replica, reduce, last, f);
        continue;
      }
      gather_batch(s_.data, std::span(samples).subspan(m * micro, micro), s_.inputs, s_.targets);
      forward();
      // The loss synchronizes the compute stream: the host's inputs and targets
      // are free again afterwards.
      target_.upload(s_.targets, c_.stream);
      local_loss +=
          dev::mse_loss(c_, a_.x.back().data(), target_.data(), diff_.data(), dy_.data(), micro,
                        o_.shape.width, per_replica, static_cast<float>(f.loss_scale));
      // (ZeRO-1's default is after backward: DeepSpeed's stage 1 without overlap_comm.)
      const bool during = reduce && o_.overlap;
      backward(during);
      end_micro_batch(reduce && !during, last);
    }
    if (data_ != nullptr) {
      // The optimizer waits for the last bucket (DDP's finalize_backward).
      backward_done_.record(c_.stream);
      finished_.back()->wait_on(c_.stream);
    }
    return local_loss;
  }

  ReducedGradients reduce_gradients(StepFigures&) override {
    ReducedGradients g;
    if (zero_stage_ > 0) {
      // The shards are disjoint (their padding zero): their squares sum over ranks.
      gradients_ =
          std::make_unique<DeviceGradients>(c_, grad_shard_.data(), shard_elements_, flag_.data());
      g.disjoint = true;
    } else {
      gradients_ = std::make_unique<DeviceGradients>(c_, grads_.data(), psi_, flag_.data());
    }
    g.device = gradients_.get();
    return g;
  }

  void apply(std::span<const float>, size_t step, StepFigures& f) override {
    if (o_.offload_optimizer) {
      apply_on_host(step, f);
      return;
    }
    if (zero_stage_ > 0) {
      optimizer_->step(c_, master_.data(), grad_shard_.data(), step);
      if (zero_stage_ < 3)
        gather_parameters();
      else if (mixed_)  // the next step's gathers read the shard in the compute format
        dev::to_16(c_, o_.precision, master_.data(), shard_words_.data(), shard_elements_);
      compute_.synchronize();
      return;
    }
    if (mixed_) {
      optimizer_->step(c_, master_.data(), grads_.data(), step);
      dev::round_copy(c_, o_.precision, master_.data(), params_.data(), params16_.data(), psi_);
    } else {
      optimizer_->step(c_, params_.data(), grads_.data(), step);
    }
    compute_.synchronize();  // the step's time includes the device's work
  }

  void add_own_communication(CommCounters& counters) override {
    if (data_ == nullptr) return;
    compute_.synchronize();  // the step's events have all been reached
    for (size_t k = 0; k < buckets_.size(); ++k)
      counters.busy_seconds += elapsed(*started_[k], *finished_[k]);
    // Exposed: how long after backward's last kernel the last bucket finished
    // (what the optimizer waited for).
    counters.exposed_seconds += std::max(0.0, elapsed(backward_done_, *finished_.back()));
    // ZeRO's parameter all-gather: the next forward waits for all of it.
    counters.busy_seconds += gather_seconds_;
    counters.exposed_seconds += gather_seconds_;
    gather_seconds_ = 0;
    // ZeRO-3's layer gathers: their time on the comm stream, and how long the
    // compute stream stalled waiting for them.
    for (const LayerGather& g : layer_gathers_) {
      counters.busy_seconds += elapsed(*g.start, *g.end);
      counters.exposed_seconds += elapsed(*g.before_wait, *g.after_wait);
    }
    layer_gathers_.clear();
    counters.bytes += step_bytes_;
    counters.operations += buckets_.size();
  }

  double bytes_sent(const StepFigures&, const CommCounters& counters) const override {
    return counters.bytes;
  }
  double global_loss(double local_loss) override {
    return mean_loss_over_replicas(s_, local_loss, ranks_);
  }
  bool consistent() override { return same_on_every_rank(s_, final_parameters()); }
  // What the formulas count, in the formats frameworks hold them in: the
  // compute-format parameters and gradients, the optimizer state (on the host
  // when offloaded) and fp32 master weights. What the GPU really held is
  // TrainResult's device_peak_bytes.
  MemoryFootprint memory() const override {
    const double e = static_cast<double>(s_.element), psi = static_cast<double>(psi_);
    const double shard = static_cast<double>(shard_elements_);
    MemoryFootprint m;
    m.parameters = e * (zero_stage_ == 3 ? shard : psi);
    // ZeRO-2 holds the gradient shard between steps (its full-size buffer is
    // backward's workspace here, in device_peak_B).
    m.gradients = e * (zero_stage_ >= 2 ? shard : psi);
    m.optimizer = static_cast<double>(o_.offload_optimizer ? offload_->state_bytes()
                                                           : optimizer_->state_bytes());
    if (mixed_) m.optimizer += 4.0 * (zero_stage_ > 0 ? shard : psi);
    return m;
  }
  std::vector<float> final_parameters() override {
    if (zero_stage_ == 3) return gathered_parameters_on_host();
    std::vector<float> host(psi_);
    params_.download(host, c_.stream);
    compute_.synchronize();
    return host;
  }
  std::vector<float> gathered_gradients(std::span<const float>) override {
    if (zero_stage_ > 0) return gathered_shards();
    std::vector<float> host(psi_);
    grads_.download(host, c_.stream);
    compute_.synchronize();
    return host;
  }
  void add_results(TrainResult& result) const override {
    result.device_peak_bytes = static_cast<double>(allocator_.peak_bytes());
    result.device_used_bytes = device_used_peak_;
  }

 private:
  // The transformer's micro-batch of `samples`: forward and backward through
  // the unit hooks below, then what forward_backward does after the MLP's
  // backward (the buckets not reduced during it; ZeRO-2's gradients restarted).
  double transformer_micro_batch(std::span<const size_t> samples, size_t per_replica, bool reduce,
                                 bool last, StepFigures& f) {
    const std::vector<uint32_t> sequences = gather_sequences(s_.tokens, samples);
    reduce_during_ = reduce && o_.overlap && data_ != nullptr;
    next_bucket_ = 0;
    const double loss = transformer_->micro_batch(c_, sequences, samples.size(), per_replica,
                                                  static_cast<float>(f.loss_scale), *this);
    f.peak_activation_bytes =
        std::max(f.peak_activation_bytes, static_cast<double>(transformer_->held() * s_.element));
    end_micro_batch(reduce && !reduce_during_, last);
    return loss;
  }

  // After a micro-batch's backward (the MLP's and the transformer's): the
  // buckets not reduced during it (`reduce_now`), and under ZeRO-2 the next
  // micro-batch's gradients restarted from zero once these are reduced.
  void end_micro_batch(bool reduce_now, bool last) {
    note_device_memory();
    if (data_ != nullptr && reduce_now)
      for (size_t k = 0; k < buckets_.size(); ++k) reduce_bucket(k);
    if (zero_stage_ >= 2 && !last) {
      finished_.back()->wait_on(c_.stream);
      grads_.zero(c_.stream);
    }
  }

  // UnitHooks (the transformer's units, slices_): ZeRO-3 gathers a unit into
  // a slot before its forward and its backward and prefetches the next (the
  // head's backward, run with its forward, gathers it again); DDP/ZeRO-1/2
  // reduce the buckets a unit's backward completed.
  const float* forward_parameters(size_t u) override {
    if (zero_stage_ != 3) return params_.data() + slices_[u].begin();
    if (u == 0) gather_layer(0);
    use_layer(u);
    if (u + 1 < slices_.size()) gather_layer(u + 1);
    return slot_params_[u % 2].data();
  }
  void after_forward(size_t u) override {
    if (zero_stage_ == 3) release_layer(u);
  }
  const float* backward_parameters(size_t u) override {
    if (zero_stage_ != 3) return params_.data() + slices_[u].begin();
    if (u + 1 == slices_.size()) gather_layer(u);
    use_layer(u);
    if (u > 0) gather_layer(u - 1);
    return slot_params_[u % 2].data();
  }
  float* gradients(size_t u) override { return grads_.data() + slices_[u].begin(); }
  void after_backward(size_t u) override {
    if (zero_stage_ == 3) release_layer(u);
    if (reduce_during_)
      while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].first_layer >= u)
        reduce_bucket(next_bucket_++);
  }

  // One micro-batch's activations and the loss's scratch, held across steps
  // (as a caching allocator would: no cudaMalloc, which synchronizes the
  // device, inside a step).
  void allocate_activations() {
    const size_t width = o_.shape.width, depth = o_.shape.depth;
    micro_ = o_.global_batch / ranks_ / o_.micro_batches;
    if (o_.model == TrainedModel::kTransformer) {
      layout_ = transformer_layout(o_.transformer);
      transformer_ =
          std::make_unique<dev::DeviceTransformer>(allocator_, o_.transformer, layout_,
                                                   TransformerParallel{1, 0, false, o_.recompute},
                                                   o_.precision, nullptr, micro_);
      return;
    }
    const size_t n = micro_ * width;
    for (size_t l = 0; l <= depth; ++l) {
      a_.x.emplace_back(allocator_, n);
      a_.x16.emplace_back(allocator_, mixed_ ? n : 0);
      if (l < depth) a_.pre.emplace_back(allocator_, n);
    }
    target_ = dev::DeviceBuffer<float>(allocator_, n);
    diff_ = dev::DeviceBuffer<float>(allocator_, n);
    dy_ = dev::DeviceBuffer<float>(allocator_, n);
    dx_ = dev::DeviceBuffer<float>(allocator_, n);
    dy16_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ ? n : 0);
  }

  void forward() {
    const size_t width = o_.shape.width, depth = o_.shape.depth, micro = micro_;
    DeviceActivations& a = a_;
    a.x[0].upload(s_.inputs, c_.stream);
    dev::round_to(c_, o_.precision, a.x[0].data(), micro * width);
    if (mixed_) dev::to_16(c_, o_.precision, a.x[0].data(), a.x16[0].data(), micro * width);
    if (zero_stage_ == 3) gather_layer(0);
    for (size_t l = 0; l < depth; ++l) {
      if (zero_stage_ == 3) {
        use_layer(l);
        if (l + 1 < depth) gather_layer(l + 1);  // the prefetch, behind this layer's compute
      }
      dev::linear_forward(c_, o_.precision, gemm_input(a, l), weights(l), a.pre[l].data(), micro,
                          width, width);
      const bool last = l + 1 == depth;
      dev::bias_activation(c_, o_.precision,
                           last ? std::nullopt : std::optional<Activation>(o_.shape.activation),
                           a.pre[l].data(), bias(l), a.x[l + 1].data(),
                           mixed_ ? a.x16[l + 1].data() : nullptr, micro, width);
      if (zero_stage_ == 3) release_layer(l);
    }
  }

  void backward(bool reduce_buckets) {
    const size_t width = o_.shape.width, depth = o_.shape.depth, micro = micro_;
    const DeviceActivations& a = a_;
    float* dy = dy_.data();
    float* dx = dx_.data();
    next_bucket_ = 0;
    if (zero_stage_ == 3) gather_layer(depth - 1);
    for (size_t l = depth; l-- > 0;) {
      if (zero_stage_ == 3) {
        use_layer(l);
        if (l > 0) gather_layer(l - 1);
      }
      if (l + 1 < depth)
        dev::activation_backward(c_, o_.precision, o_.shape.activation, dy, a.pre[l].data(),
                                 a.x[l + 1].data(), micro * width);
      dev::linear_backward(c_, o_.precision, gemm_input(a, l), dy, dy16_.data(), weights(l),
                           grads_.data() + slices_[l].weight_offset,
                           grads_.data() + slices_[l].bias_offset, l > 0 ? dx : nullptr, micro,
                           width, width);
      if (zero_stage_ == 3) release_layer(l);
      std::swap(dy, dx);
      // DDP: the buckets this layer completed go to the communication stream
      // now, behind an event; backward goes on meanwhile.
      if (reduce_buckets && data_ != nullptr)
        while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].first_layer >= l)
          reduce_bucket(next_bucket_++);
    }
  }

  // Bucket k's gradients averaged over the ranks, on the communication stream
  // once the compute stream has produced them: divided by the ranks first and
  // summed in the compute format, as the host path's all_reduce_values.
  void reduce_bucket(size_t k) {
    const Range r = buckets_[k].range;
    ready_[k]->record(c_.stream);
    ready_[k]->wait_on(comm_stream_);
    started_[k]->record(comm_stream_);
    float* grads = grads_.data() + r.begin;
    dev::scale(comm_c_, grads, r.size(), 1.0f / static_cast<float>(ranks_));
    if (zero_stage_ > 0) {
      reduce_scatter_bucket(k, grads);
      finished_[k]->record(comm_stream_);
      return;
    }
    if (mixed_) {
      uint16_t* words = wire16_.data() + r.begin;
      dev::to_16(comm_c_, o_.precision, grads, words, r.size());
      data_->all_reduce(words, words, r.size(), wire_type(o_.precision), ReduceOp::kSum);
      dev::from_16(comm_c_, o_.precision, words, grads, r.size());
    } else {
      data_->all_reduce(grads, grads, r.size(), DataType::kFloat32, ReduceOp::kSum);
    }
    finished_[k]->record(comm_stream_);
    step_bytes_ += all_reduce_bytes(r.size(), ranks_, s_.element);
  }

  // ZeRO: bucket k's shards (Shard over the ranks, padded), each rank's chunk
  // of every bucket one after another in the shard arrays; the master shard
  // from the initial parameters (padding 0).
  void shard_buckets(const std::vector<float>& initial) {
    for (const Bucket& b : buckets_) {
      shards_.push_back(shard_range(b.range, ranks_));
      shard_offsets_.push_back(shard_elements_);
      shard_elements_ += shards_.back().chunk;
      padded_elements_ += shards_.back().padded_size(ranks_);
      largest_padded_ = std::max(largest_padded_, shards_.back().padded_size(ranks_));
    }
    std::vector<float> master(shard_elements_, 0.0f);
    for (size_t k = 0; k < shards_.size(); ++k) {
      const Range mine = shards_[k].owned(rank_);
      std::copy(initial.begin() + static_cast<std::ptrdiff_t>(mine.begin),
                initial.begin() + static_cast<std::ptrdiff_t>(mine.end),
                master.begin() + static_cast<std::ptrdiff_t>(shard_offsets_[k]));
    }
    master_ = dev::DeviceBuffer<float>(allocator_, shard_elements_);
    master_.upload(master, c_.stream);
    if (o_.offload_optimizer) shard_master_ = master;
    grad_shard_ = dev::DeviceBuffer<float>(allocator_, shard_elements_);
    shard_words_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ ? shard_elements_ : 0);
    received_ = dev::DeviceBuffer<float>(allocator_, largest_padded_ / ranks_);
    padded_ = dev::DeviceBuffer<float>(allocator_, largest_padded_);
    padded16_ = dev::DeviceBuffer<uint16_t>(allocator_, mixed_ ? largest_padded_ : 0);
    gathered_ = dev::DeviceBuffer<float>(allocator_, mixed_ ? 0 : largest_padded_);
    compute_.synchronize();  // `master` goes out of scope
  }

  // Bucket k's gradients (already divided by the ranks), padded with zeros,
  // reduce-scattered in the compute format; this rank's chunk added to its
  // shard (micro-batches accumulate). On the communication stream.
  void reduce_scatter_bucket(size_t k, const float* grads) {
    const Shard& shard = shards_[k];
    const size_t size = shard.unit.size(), padded = shard.padded_size(ranks_);
    const size_t chunk = shard.chunk;
    dev::check(cudaMemsetAsync(padded_.data(), 0, padded * sizeof(float), comm_stream_),
               "cudaMemsetAsync");
    dev::check(cudaMemcpyAsync(padded_.data(), grads, size * sizeof(float),
                               cudaMemcpyDeviceToDevice, comm_stream_),
               "cudaMemcpyAsync");
    if (mixed_) {
      dev::to_16(comm_c_, o_.precision, padded_.data(), padded16_.data(), padded);
      data_->reduce_scatter(padded16_.data(), padded16_.data() + rank_ * chunk, chunk,
                            wire_type(o_.precision), ReduceOp::kSum);
      dev::from_16(comm_c_, o_.precision, padded16_.data() + rank_ * chunk, received_.data(),
                   chunk);
    } else {
      data_->reduce_scatter(padded_.data(), received_.data(), chunk, DataType::kFloat32,
                            ReduceOp::kSum);
    }
    // shard += received (cublasSaxpy on the communication stream).
    const float one = 1.0f;
    dev::check(dev::cublas().saxpy(comm_c_.blas, static_cast<int>(chunk), &one, received_.data(), 1,
                                   grad_shard_.data() + shard_offsets_[k], 1),
               "cublasSaxpy");
    step_bytes_ += reduce_scatter_bytes(padded, ranks_, s_.element);
  }

  // After the optimizer stepped the master shard: each bucket's parameters,
  // rounded to the compute format, all-gathered into the full parameters.
  // On the compute stream (the next forward reads them), timed as communication.
  // `words_ready`: the 16-bit shard was uploaded (offload), not rounded here.
  void gather_parameters(bool words_ready = false) {
    const Precision p = o_.precision;
    if (mixed_ && !words_ready)
      dev::to_16(c_, p, master_.data(), shard_words_.data(), shard_elements_);
    dev::Event stepped, start(true), end(true);
    stepped.record(c_.stream);
    stepped.wait_on(comm_stream_);
    start.record(comm_stream_);
    for (size_t k = 0; k < shards_.size(); ++k) {
      const Shard& shard = shards_[k];
      const size_t chunk = shard.chunk, begin = shard.unit.begin, size = shard.unit.size();
      if (mixed_) {
        data_->all_gather(shard_words_.data() + shard_offsets_[k], padded16_.data(), chunk,
                          wire_type(p));
        dev::check(cudaMemcpyAsync(params16_.data() + begin, padded16_.data(), size * 2,
                                   cudaMemcpyDeviceToDevice, comm_stream_),
                   "cudaMemcpyAsync");
        dev::from_16(comm_c_, p, params16_.data() + begin, params_.data() + begin, size);
      } else {
        data_->all_gather(master_.data() + shard_offsets_[k], gathered_.data(), chunk,
                          DataType::kFloat32);
        dev::check(cudaMemcpyAsync(params_.data() + begin, gathered_.data(), size * 4,
                                   cudaMemcpyDeviceToDevice, comm_stream_),
                   "cudaMemcpyAsync");
      }
      step_bytes_ += all_gather_bytes(shard.padded_size(ranks_), ranks_, s_.element);
    }
    end.record(comm_stream_);
    end.wait_on(c_.stream);  // the next forward reads them
    end.synchronize();
    gather_seconds_ = elapsed(start, end);
  }

  // The shards' gradients whole on every rank (--check-loss's gradient
  // check): downloaded, then all-gathered bucket by bucket over the host communicator.
  std::vector<float> gathered_shards() {
    std::vector<float> shard(shard_elements_);
    grad_shard_.download(shard, c_.stream);
    compute_.synchronize();
    return whole_from_shards(shard);
  }

  // Every rank's `shard` (this rank's chunk of each unit, as the shard arrays
  // hold them) whole, unit by unit over the host communicator (collective).
  std::vector<float> whole_from_shards(const std::vector<float>& shard) {
    std::vector<float> whole(psi_), chunk_all(largest_padded_);
    for (size_t k = 0; k < shards_.size(); ++k) {
      const Shard& unit = shards_[k];
      s_.world->all_gather(shard.data() + shard_offsets_[k], chunk_all.data(), unit.chunk,
                           DataType::kFloat32);
      std::copy_n(chunk_all.begin(), unit.unit.size(),
                  whole.begin() + static_cast<std::ptrdiff_t>(unit.unit.begin));
    }
    return whole;
  }

  // DeepSpeed's CPU offload (host_offload.h) of what this rank's optimizer
  // steps: all the parameters, or under ZeRO its shard (then all-gathered).
  void apply_on_host(size_t step, StepFigures& f) {
    const bool sharded = zero_stage_ > 0;
    // 16-bit staging on the device: the shard's words (ZeRO's gather reads
    // them), else the 16-bit parameters; fp32: where the parameters land.
    offload_->step(c_, sharded ? grad_shard_.data() : grads_.data(),
                   sharded ? shard_words_.data() : params16_.data(),
                   sharded ? master_.data() : params_.data(), step, f);
    if (mixed_ && !sharded) dev::from_16(c_, o_.precision, params16_.data(), params_.data(), psi_);
    if (sharded && zero_stage_ < 3) gather_parameters(/*words_ready=*/true);
  }

  // ZeRO-3: layer l's parameters all-gathered into slot l % 2 on the
  // communication stream once the compute stream is done with that slot's
  // previous layer (release_layer's event); use_layer makes the compute
  // stream wait for it.
  void gather_layer(size_t l) {
    const size_t slot = l % 2;
    const size_t k = buckets_.size() - 1 - l;  // the units are in backward's order
    const Shard& shard = shards_[k];
    if (slot_used_[slot]) slot_free_[slot].wait_on(comm_stream_);
    LayerGather g;
    g.layer = l;
    g.start = std::make_unique<dev::Event>(true);
    g.end = std::make_unique<dev::Event>(true);
    g.before_wait = std::make_unique<dev::Event>(true);
    g.after_wait = std::make_unique<dev::Event>(true);
    g.start->record(comm_stream_);
    if (mixed_) {
      data_->all_gather(shard_words_.data() + shard_offsets_[k], slot_words_[slot].data(),
                        shard.chunk, wire_type(o_.precision));
      dev::from_16(comm_c_, o_.precision, slot_words_[slot].data(), slot_params_[slot].data(),
                   shard.unit.size());
    } else {
      data_->all_gather(master_.data() + shard_offsets_[k], slot_params_[slot].data(), shard.chunk,
                        DataType::kFloat32);
    }
    g.end->record(comm_stream_);
    slot_ready_[slot].record(comm_stream_);
    slot_layer_[slot] = l;
    step_bytes_ += all_gather_bytes(shard.padded_size(ranks_), ranks_, s_.element);
    layer_gathers_.push_back(std::move(g));
  }
  void use_layer(size_t l) {
    const size_t slot = l % 2;
    if (slot_layer_[slot] != l) throw std::logic_error("ZeRO-3: layer used before its gather");
    LayerGather& g = gather_of(l);
    g.before_wait->record(c_.stream);
    slot_ready_[slot].wait_on(c_.stream);
    g.after_wait->record(c_.stream);
  }
  void release_layer(size_t l) {
    slot_free_[l % 2].record(c_.stream);
    slot_used_[l % 2] = true;
  }
  // The gather of layer l issued last (the latest with its slot).
  LayerGather& gather_of(size_t l) {
    for (size_t i = layer_gathers_.size(); i-- > 0;)
      if (layer_gathers_[i].layer == l) return layer_gathers_[i];
    throw std::logic_error("ZeRO-3: no gather of the layer");
  }

  // ZeRO-3's parameters whole on the host (the consistency check and the
  // final parameters): the master shards rounded to the compute format,
  // all-gathered over the host communicator.
  std::vector<float> gathered_parameters_on_host() {
    std::vector<float> shard(shard_elements_);
    master_.download(shard, c_.stream);
    compute_.synchronize();
    for (float& v : shard) v = round_to(o_.precision, v);
    return whole_from_shards(shard);
  }

  const float* bias(size_t l) const {
    if (zero_stage_ == 3) return slot_params_[l % 2].data() + slices_[l].weight_count;
    return params_.data() + slices_[l].bias_offset;
  }
  const void* weights(size_t l) const {
    if (zero_stage_ == 3)
      return mixed_ ? static_cast<const void*>(slot_words_[l % 2].data())
                    : slot_params_[l % 2].data();
    return mixed_ ? static_cast<const void*>(params16_.data() + slices_[l].weight_offset)
                  : params_.data() + slices_[l].weight_offset;
  }
  const void* gemm_input(const DeviceActivations& a, size_t l) const {
    return mixed_ ? static_cast<const void*>(a.x16[l].data()) : a.x[l].data();
  }

  // What the GPU has in use at the step's fullest point (activations held).
  void note_device_memory() {
    device_used_peak_ = std::max(device_used_peak_, device_bytes_in_use());
  }

  EngineState& s_;
  const TrainOptions& o_;
  int device_;
  Communicator* data_;  // the gradients' (NCCL); null: one GPU
  size_t ranks_, rank_;
  bool mixed_;
  int zero_stage_;  // 0: single, DDP
  std::vector<LayerSlice> slices_;
  size_t psi_;
  dev::DeviceAllocator allocator_;
  dev::Stream compute_;
  dev::BlasHandle blas_;
  dev::Context c_;
  dev::DeviceBuffer<float> params_, grads_, master_;
  dev::DeviceBuffer<uint16_t> params16_, wire16_;
  dev::DeviceBuffer<int> flag_;
  size_t micro_ = 0;  // rows of a micro-batch on this rank
  DeviceActivations a_;
  // --model transformer: the model, its layout, and whether its backward
  // reduces buckets as it completes them.
  TransformerLayout layout_;
  std::unique_ptr<dev::DeviceTransformer> transformer_;
  bool reduce_during_ = false;
  dev::DeviceBuffer<float> target_, diff_, dy_, dx_;
  dev::DeviceBuffer<uint16_t> dy16_;
  std::unique_ptr<dev::DeviceOptimizer> optimizer_;
  std::unique_ptr<DeviceGradients> gradients_;
  // Offload: the optimizer's side on the host (ZeRO: the shard's master
  // weights until it is made).
  std::unique_ptr<HostOffload> offload_;
  std::vector<float> shard_master_;
  // DDP: the communication stream (the communicator's) and the buckets' events.
  cudaStream_t comm_stream_ = nullptr;
  std::unique_ptr<dev::BlasHandle> comm_blas_;
  dev::Context comm_c_;
  std::vector<Bucket> buckets_;
  std::vector<std::unique_ptr<dev::Event>> ready_, started_, finished_;
  // ZeRO-1/2: the buckets' shards, this rank's part of each (master weights,
  // reduced gradients), the padded staging of a bucket.
  std::vector<Shard> shards_;
  std::vector<size_t> shard_offsets_;
  size_t shard_elements_ = 0, padded_elements_ = 0, largest_padded_ = 0;
  dev::DeviceBuffer<float> grad_shard_, received_, padded_, gathered_;
  dev::DeviceBuffer<uint16_t> shard_words_, padded16_;
  double gather_seconds_ = 0;
  // ZeRO-3: two slots a layer's gathered parameters land in (this layer's and
  // the prefetched next one's), their events, and the step's gathers' timing.
  dev::DeviceBuffer<float> slot_params_[2];
  dev::DeviceBuffer<uint16_t> slot_words_[2];
  dev::Event slot_ready_[2], slot_free_[2];
  bool slot_used_[2] = {false, false};
  size_t slot_layer_[2] = {SIZE_MAX, SIZE_MAX};
  std::vector<LayerGather> layer_gathers_;
  dev::Event backward_done_{true};
  size_t next_bucket_ = 0;
  double step_bytes_ = 0;
  double device_used_peak_ = 0;
};

}  // namespace

bool device_training_built() { return true; }

std::string device_training_unsupported(const TrainOptions& o) {
  if (o.model == TrainedModel::kTransformer) {
    const bool built = o.strategy == Strategy::kSingle || o.strategy == Strategy::kDdp ||
                       o.strategy == Strategy::kZero1 || o.strategy == Strategy::kZero2 ||
                       o.strategy == Strategy::kZero3 || o.strategy == Strategy::kTensor;
    if (!built)
      return "the GPU path trains the transformer under single, ddp, zero1-3 and tp only so far; "
             "use --backend mpi";
  }
  const Faults& f = o.faults;
  if (f.sum_not_average || f.sampler_not_reseeded || f.unreduced_bucket || f.clip_per_shard)
    return "the injected faults run on the host path only; use --backend mpi";
  return "";
}

TrainResult train_single_on_device(const TrainOptions& options,
                                   const std::function<void(const StepFigures&)>& on_step) {
  if (options.strategy == Strategy::kExpert) {
    // The mixture-of-experts model on one GPU with every expert (the host
    // path's train_parallel_single).
    TrainOptions single = options;
    single.faults = Faults{};
    single.micro_batches = options.reference_micro_batches;
    const std::string unsupported = device_training_unsupported(single);
    if (!unsupported.empty()) throw UsageError(unsupported);
    return train_expert_on_device(nullptr, nullptr, single, on_step);
  }
  TrainOptions single = options;
  single.strategy = Strategy::kSingle;
  // The plain run: an offloaded run is then held against the device's optimizer.
  single.offload_optimizer = false;
  const std::string unsupported = device_training_unsupported(single);
  if (!unsupported.empty()) throw UsageError(unsupported);
  const std::string problem = validate(single, 1);
  if (!problem.empty()) throw UsageError(problem);
  return run_engine(
      single, nullptr, false,
      [](EngineState& state) { return std::make_unique<DeviceDataParallel>(state, nullptr); },
      on_step);
}

TrainResult train_on_device(Communicator& control, Communicator& device,
                            const TrainOptions& options,
                            const std::function<void(const StepFigures&)>& on_step) {
  const std::string unsupported = device_training_unsupported(options);
  if (!unsupported.empty()) throw UsageError(unsupported);
  if (device.memory_kind() != MemoryKind::kDevice)
    throw UsageError("train_on_device needs a device communicator, not " + device.backend_name());
  if (control.size() != device.size() || control.rank() != device.rank())
    throw UsageError("train_on_device: the control and device communicators span other ranks");
  const std::string problem = validate(options, static_cast<size_t>(device.size()));
  if (!problem.empty()) throw UsageError(problem);
  const bool single = options.strategy == Strategy::kSingle;
  TrainResult result = run_engine(
      options, single ? nullptr : &control, false,
      [&](EngineState& state) {
        return std::make_unique<DeviceDataParallel>(state, single ? nullptr : &device);
      },
      on_step);
  return result;
}

}  // namespace ccscope::training_probe
