// The data-parallel strategies' hooks (engine.h): single, DDP, ZeRO-1/2/3.
// They differ only in where gradients and parameters are reduced, sharded and
// gathered; the model, data, loss and optimizer arithmetic are shared so that
// a loss difference between strategies can only come from their communication.
#include "ccscope/training_probe/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "ccscope/collectives/error.h"
#include "ccscope/collectives/types.h"
#include "ccscope/training_probe/comm_worker.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/layout.h"
#include "engine.h"
#include "layers.h"
#include "wire.h"

namespace ccscope::training_probe {
namespace {

// The data-parallel strategies' model: every rank runs every layer whole over
// its part of the batch. The layer hooks say where a layer's parameters and
// gradients are and what follows its backward.
class DataParallel : public LocalModel {
 public:
  explicit DataParallel(EngineState& state)
      : LocalModel(state),
        ranks_(state.world_ranks()),
        rank_(state.world_rank()),
        slices_(model_units(o_)),
        psi_(slices_.back().end()) {
    for (size_t l = 0; l < slices_.size(); ++l) layers_.push_back(whole_unit(o_, l, slices_[l]));
    if (o_.model == TrainedModel::kTransformer)
      transformer_ = std::make_unique<Transformer>(o_.transformer, s_.precision,
                                                   TransformerParallel{1, 0, false, o_.recompute});
  }

  size_t parameters() const override { return psi_; }

  double forward_backward(size_t step, StepFigures& f) override {
    zero_gradients();
    const double local_loss = train_micro_batches(layers_, step, ranks_, rank_, f);
    s_.comm.wait_all();
    return local_loss;
  }

  double bytes_sent(const StepFigures&, const CommCounters& counters) const override {
    return counters.bytes;
  }
  double global_loss(double local_loss) override {
    return mean_loss_over_replicas(s_, local_loss, ranks_);
  }
  bool consistent() override { return same_on_every_rank(s_, final_parameters()); }
  std::vector<float> final_parameters() override { return params_; }
  // Every rank holds them whole (single, DDP, ZeRO-1's full gradients are
  // reduced only in this rank's shard: Sharded gathers).
  std::vector<float> gathered_gradients(std::span<const float> reduced) override {
    return {reduced.begin(), reduced.end()};
  }

 protected:
  // Besides the layer hooks: the step's start.
  virtual void zero_gradients() = 0;
  void begin_backward(bool last_micro_batch) override { last_micro_batch_ = last_micro_batch; }

  float average_scale() const {
    return o_.faults.sum_not_average ? 1.0f : 1.0f / static_cast<float>(ranks_);
  }

  size_t ranks_;
  size_t rank_;
  std::vector<LayerSlice> slices_;
  std::vector<LocalLayer> layers_;  // the model's, whole
  size_t psi_;
  bool last_micro_batch_ = false;  // DDP's no_sync on the others
  // LocalModel's params_: full (all but ZeRO-3); grads_: full (single, DDP,
  // ZeRO-1); master_: full (mixed DDP) or this rank's shard (ZeRO).
};

// DDP's and ZeRO-1/2's buckets, filled in reverse layer order: each is
// reduced once the backward of its lowest layer is done.
class BucketQueue {
 public:
  BucketQueue() = default;
  BucketQueue(std::vector<Bucket> buckets, std::optional<size_t> unreduced)
      : buckets_(std::move(buckets)), unreduced_(unreduced) {}
  const std::vector<Bucket>& buckets() const { return buckets_; }
  void restart() { next_ = 0; }
  // The fault's bucket, never reduced.
  bool dropped(size_t bucket) const { return unreduced_ == bucket; }
  // Calls reduce(k) for the buckets now complete, in fill order.
  void submit_ready(size_t layer, const std::function<void(size_t)>& reduce) {
    while (next_ < buckets_.size() && buckets_[next_].first_layer >= layer) {
      const size_t k = next_++;
      if (!dropped(k)) reduce(k);
    }
  }

 private:
  std::vector<Bucket> buckets_;
  std::optional<size_t> unreduced_;
  size_t next_ = 0;
};

std::vector<Bucket> gradient_buckets(const EngineState& s) {
  return assign_buckets(model_units(s.options), s.element, s.options.bucket_bytes,
                        s.options.first_bucket_bytes);
}

// single and DDP: every rank holds everything; DDP all-reduces each bucket
// as backward completes it (no_sync on all but the last micro-batch).
class Replicated final : public DataParallel {
 public:
  Replicated(EngineState& state, const std::vector<float>& initial, bool reduce_buckets)
      : DataParallel(state) {
    if (reduce_buckets) queue_ = BucketQueue(gradient_buckets(s_), o_.faults.unreduced_bucket);
    params_ = initial;
    round_to(s_.precision, params_);
    grads_.assign(psi_, 0.0f);
    if (s_.mixed()) master_ = initial;
    s_.optimizer = std::make_unique<Optimizer>(o_.optimizer, psi_);
  }

  size_t communicated() const override { return psi_; }
  ReducedGradients reduce_gradients(StepFigures&) override { return {grads_, {}, false}; }
  void apply(std::span<const float> gradients, size_t step, StepFigures&) override {
    step_all(gradients, step);
  }

 private:
  void zero_gradients() override { std::fill(grads_.begin(), grads_.end(), 0.0f); }
  void begin_backward(bool last_micro_batch) override {
    DataParallel::begin_backward(last_micro_batch);
    queue_.restart();
  }
  void after_backward(const LocalLayer& layer) override {
    if (last_micro_batch_)
      queue_.submit_ready(layer.layer, [this](size_t k) { all_reduce_bucket(k); });
  }

  void all_reduce_bucket(size_t k) {
    const Range r = queue_.buckets()[k].range;
    float* grads = grads_.data() + r.begin;
    const Precision p = s_.precision;
    const float scale = average_scale();
    s_.comm.submit(
        [grads, r, p, scale, &pool = s_.pool](Communicator& c) {
          all_reduce_values(c, pool, p, {grads, r.size()}, scale);
        },
        all_reduce_bytes(r.size(), ranks_, s_.element));
  }

  BucketQueue queue_;
};

// ZeRO: the optimizer state sharded over units (buckets for stages 1-2,
// layers for stage 3); this rank steps its chunk of each unit.
class Sharded : public DataParallel {
 public:
  Sharded(EngineState& state, std::vector<Shard> units, const std::vector<float>& initial)
      : DataParallel(state), units_(std::move(units)) {
    size_t shard_elements = 0;
    for (const Shard& u : units_) {
      unit_offsets_.push_back(shard_elements);
      shard_elements += u.chunk;
      communicated_ += u.padded_size(ranks_);
    }
    master_.assign(shard_elements, 0.0f);
    for (size_t k = 0; k < units_.size(); ++k) {
      const Range mine = units_[k].owned(rank_);
      std::copy(initial.begin() + static_cast<std::ptrdiff_t>(mine.begin),
                initial.begin() + static_cast<std::ptrdiff_t>(mine.end),
                master_.begin() + static_cast<std::ptrdiff_t>(unit_offsets_[k]));
    }
    grad_shard_.assign(shard_elements, 0.0f);
    s_.optimizer = std::make_unique<Optimizer>(o_.optimizer, shard_elements);
  }

  size_t communicated() const override { return communicated_; }
  // The shards are disjoint: their squares sum over ranks (unless the fault
  // clips each by its own).
  ReducedGradients reduce_gradients(StepFigures&) override {
    return {grad_shard_, {}, !o_.faults.clip_per_shard};
  }
  void apply(std::span<const float> gradients, size_t step, StepFigures&) override {
    s_.optimizer->step(master_, gradients, step);
    after_optimizer();
  }
  // Each unit's reduced chunk all-gathered into the whole vector.
  std::vector<float> gathered_gradients(std::span<const float> reduced) override {
    std::vector<float> whole(psi_);
    for (size_t k = 0; k < units_.size(); ++k)
      all_gather_unit(k, reduced.data() + unit_offsets_[k], whole.data() + units_[k].unit.begin);
    s_.comm.wait_all();
    return whole;
  }

 protected:
  // Brings the updated shards to where the next forward reads them.
  virtual void after_optimizer() = 0;
  void zero_gradients() override {
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    std::fill(grad_shard_.begin(), grad_shard_.end(), 0.0f);
  }

  // Reduce-scatters unit k's gradients (`values`, unpadded; `keep` owns them
  // when they are a staging copy) into this rank's chunk of grad_shard_,
  // accumulating over micro-batches.
  void reduce_scatter_unit(size_t k, const float* values, std::shared_ptr<const void> keep) {
    const Shard unit = units_[k];
    float* shard = grad_shard_.data() + unit_offsets_[k];
    const Precision p = s_.precision;
    const float scale = average_scale();
    const size_t ranks = ranks_;
    s_.comm.submit(
        [values, keep, unit, shard, p, scale, ranks, &pool = s_.pool](Communicator& c) {
          reduce_scatter_values(c, pool, p, {values, unit.unit.size()}, scale, ranks,
                                {shard, unit.chunk}, true);
        },
        reduce_scatter_bytes(unit.padded_size(ranks_), ranks_, s_.element));
  }

  // All-gathers unit k: this rank's chunk `mine` into `full` (unpadded).
  size_t all_gather_unit(size_t k, const float* mine, float* full) {
    const Shard unit = units_[k];
    const Precision p = s_.precision;
    const size_t ranks = ranks_;
    return s_.comm.submit(
        [unit, full, mine, p, ranks, &pool = s_.pool](Communicator& c) {
          all_gather_values(c, pool, p, {mine, unit.chunk}, ranks, {full, unit.unit.size()});
        },
        all_gather_bytes(unit.padded_size(ranks_), ranks_, s_.element));
  }

  std::vector<Shard> units_;
  std::vector<size_t> unit_offsets_;  // where each unit's chunk sits in the shard arrays
  std::vector<float> grad_shard_;     // this rank's reduced gradients
  size_t communicated_ = 0;
};

std::vector<Shard> bucket_units(const std::vector<Bucket>& buckets, size_t ranks) {
  std::vector<Shard> units;
  for (const Bucket& b : buckets) units.push_back(shard_range(b.range, ranks));
  return units;
}

// ZeRO-1/2: full parameters, updated shards all-gathered after the step.
class BucketShards : public Sharded {
 public:
  BucketShards(EngineState& state, std::vector<Bucket> buckets, const std::vector<float>& initial)
      : Sharded(state, bucket_units(buckets, state.world_ranks()), initial),
        queue_(std::move(buckets), o_.faults.unreduced_bucket) {
    params_ = initial;
    round_to(s_.precision, params_);
  }

 protected:
  void begin_backward(bool last_micro_batch) override {
    DataParallel::begin_backward(last_micro_batch);
    queue_.restart();
  }
  void after_optimizer() override {
    for (size_t k = 0; k < units_.size(); ++k)
      all_gather_unit(k, master_.data() + unit_offsets_[k], params_.data() + units_[k].unit.begin);
    s_.comm.wait_all();
  }

  BucketQueue queue_;
};

// ZeRO-1: full gradients, reduce-scattered in buckets after the last
// micro-batch's backward (DeepSpeed's stage 1 without overlap_comm: its
// default), or with overlap as backward fills each bucket.
class Zero1 final : public BucketShards {
 public:
  Zero1(EngineState& state, const std::vector<float>& initial)
      : BucketShards(state, gradient_buckets(state), initial) {
    grads_.assign(psi_, 0.0f);
  }

 private:
  void after_backward(const LocalLayer& layer) override {
    // The full gradients stay put until the step ends: no copy.
    if (!last_micro_batch_ || (!o_.overlap && layer.layer != 0)) return;
    // Layer 0's backward is the last: without overlap every bucket goes then.
    queue_.submit_ready(o_.overlap ? layer.layer : 0, [this](size_t k) {
      reduce_scatter_unit(k, grads_.data() + queue_.buckets()[k].range.begin, nullptr);
    });
  }
};

// ZeRO-2: each bucket reduce-scattered as backward fills it; only the
// gradient shard kept.
class Zero2 final : public BucketShards {
 public:
  Zero2(EngineState& state, const std::vector<float>& initial)
      : BucketShards(state, gradient_buckets(state), initial) {}

 private:
  size_t held_gradients() const override { return grad_shard_.size(); }
  float* gradients(const LocalLayer& layer) override {
    layer_scratch_.assign(layer.weight_count + layer.bias_count, 0.0f);
    return layer_scratch_.data();
  }
  void after_backward(const LocalLayer& layer) override {
    stage_layer_gradients(layer.layer);
    queue_.submit_ready(layer.layer, [this](size_t k) {
      auto it = staging_.find(k);
      std::shared_ptr<const std::vector<float>> staged = std::move(it->second);
      staging_.erase(it);  // the operation holds the only reference: freed after it runs
      const float* values = staged->data();
      reduce_scatter_unit(k, values, std::move(staged));
    });
  }

  // A layer's gradients (in layer_scratch_) into the staging buffers of the
  // buckets that hold them.
  void stage_layer_gradients(size_t layer) {
    const LayerSlice& slice = slices_[layer];
    const std::vector<Bucket>& buckets = queue_.buckets();
    for (size_t k = 0; k < buckets.size(); ++k) {
      const Range r = buckets[k].range;
      const size_t begin = std::max(r.begin, slice.begin());
      const size_t end = std::min(r.end, slice.end());
      if (begin >= end || queue_.dropped(k)) continue;
      auto& buffer = staging_[k];
      if (!buffer) buffer = std::make_shared<std::vector<float>>(r.size(), 0.0f);
      std::copy(layer_scratch_.begin() + static_cast<std::ptrdiff_t>(begin - slice.begin()),
                layer_scratch_.begin() + static_cast<std::ptrdiff_t>(end - slice.begin()),
                buffer->begin() + static_cast<std::ptrdiff_t>(begin - r.begin));
    }
  }

  std::vector<float> layer_scratch_;
  std::map<size_t, std::shared_ptr<std::vector<float>>> staging_;  // buckets being filled
};

std::vector<Shard> layer_units(const TrainOptions& options, size_t ranks) {
  std::vector<Shard> units;
  for (const LayerSlice& l : model_units(options))
    units.push_back(shard_range({l.begin(), l.end()}, ranks));
  return units;
}

// ZeRO-3 (FSDP FULL_SHARD, one unit per layer): each layer all-gathered
// before its forward and again before its backward (the next one prefetched
// while this one computes), freed after use; its gradient reduce-scattered
// as soon as it is computed.
class Zero3 final : public Sharded {
 public:
  Zero3(EngineState& state, const std::vector<float>& initial)
      : Sharded(state, layer_units(state.options, state.world_ranks()), initial),
        param_shard_(master_),
        gathered_(slices_.size()),
        gather_ticket_(slices_.size(), 0) {
    round_to(s_.precision, param_shard_);
  }

  std::vector<float> final_parameters() override {
    std::vector<float> full(psi_);
    for (size_t l = 0; l < slices_.size(); ++l) {
      submit_gather(l);
      s_.comm.wait(gather_ticket_[l]);
      std::copy(gathered_[l]->begin(), gathered_[l]->end(),
                full.begin() + static_cast<std::ptrdiff_t>(slices_[l].begin()));
      gathered_[l].reset();
    }
    return full;
  }

 private:
  size_t held_parameters() const override { return param_shard_.size(); }
  size_t held_gradients() const override { return grad_shard_.size(); }
  const float* forward_parameters(const LocalLayer& layer) override {
    const size_t l = layer.layer;
    return gathered_parameters(l, l + 1 < slices_.size() ? l + 1 : l);
  }
  void after_forward(const LocalLayer& layer) override { gathered_[layer.layer].reset(); }
  const float* backward_parameters(const LocalLayer& layer) override {
    const size_t l = layer.layer;
    return gathered_parameters(l, l > 0 ? l - 1 : l);
  }
  float* gradients(const LocalLayer& layer) override {
    layer_scratch_.assign(layer.weight_count + layer.bias_count, 0.0f);
    return layer_scratch_.data();
  }
  void after_backward(const LocalLayer& layer) override {
    const size_t l = layer.layer;
    if (o_.faults.unreduced_bucket != l) {
      auto copy = std::make_shared<const std::vector<float>>(layer_scratch_);
      const float* values = copy->data();
      reduce_scatter_unit(l, values, std::move(copy));
    }
    gathered_[l].reset();
  }
  void after_optimizer() override {
    for (size_t i = 0; i < master_.size(); ++i)
      param_shard_[i] = round_to(s_.precision, master_[i]);
  }

  // Layer `layer` gathered (and `next` prefetched while it computes).
  const float* gathered_parameters(size_t layer, size_t next) {
    if (!gathered_[layer]) submit_gather(layer);
    if (o_.prefetch && next != layer && !gathered_[next]) submit_gather(next);
    s_.comm.wait(gather_ticket_[layer]);
    return gathered_[layer]->data();
  }

  void submit_gather(size_t layer) {
    gathered_[layer] = std::make_shared<std::vector<float>>(units_[layer].unit.size());
    gather_ticket_[layer] = all_gather_unit(layer, param_shard_.data() + unit_offsets_[layer],
                                            gathered_[layer]->data());
  }

  std::vector<float> param_shard_;  // this rank's parameters in the compute format
  std::vector<std::shared_ptr<std::vector<float>>> gathered_;  // layers gathered
  std::vector<size_t> gather_ticket_;
  std::vector<float> layer_scratch_;
};

// The data-parallel strategy's hooks, chosen once.
std::unique_ptr<StrategyHooks> make_data_parallel(EngineState& state) {
  const std::vector<float> initial = initial_model_parameters(state.options);
  switch (state.options.strategy) {
    case Strategy::kZero1:
      return std::make_unique<Zero1>(state, initial);
    case Strategy::kZero2:
      return std::make_unique<Zero2>(state, initial);
    case Strategy::kZero3:
      return std::make_unique<Zero3>(state, initial);
    case Strategy::kDdp:
      return std::make_unique<Replicated>(state, initial, true);
    default:
      return std::make_unique<Replicated>(state, initial, false);
  }
}

}  // namespace

std::vector<double> losses(const TrainResult& result) {
  std::vector<double> curve;
  curve.reserve(result.steps.size());
  for (const StepFigures& step : result.steps) curve.push_back(step.loss);
  return curve;
}

size_t default_global_batch(size_t preferred, size_t multiple) {
  if (preferred == 0 || multiple == 0)
    throw UsageError("default_global_batch: the batch and its multiple must be at least 1");
  return (preferred + multiple - 1) / multiple * multiple;
}

std::string validate(const TrainOptions& o, size_t ranks) {
  if (ranks == 0) return "no ranks";
  if (o.strategy == Strategy::kSingle && ranks != 1)
    return fmt::format("strategy single runs on one rank, not {}", ranks);
  if (o.shape.width == 0 || o.shape.depth == 0) return "--width and --depth must be at least 1";
  if (o.steps == 0) return "--steps must be at least 1";
  if (o.micro_batches == 0) return "--micro-batches must be at least 1";
  if (o.global_batch == 0 || o.global_batch % ranks != 0)
    return fmt::format(
        "global batch {} does not divide over {} ranks (every rank trains on the same number "
        "of samples, as DistributedSampler requires); choose a multiple of {}",
        o.global_batch, ranks, ranks);
  const size_t per_rank = o.global_batch / ranks;
  if (per_rank % o.micro_batches != 0)
    return fmt::format("per-rank batch {} does not divide into {} micro-batches", per_rank,
                       o.micro_batches);
  const size_t samples = dataset_size(o);
  if (samples % o.global_batch != 0)
    return fmt::format("data set size {} is not a multiple of the global batch {}", samples,
                       o.global_batch);
  if (o.bucket_bytes == 0 || o.first_bucket_bytes == 0) return "bucket sizes must be positive";
  if (o.grad_clip && !(*o.grad_clip > 0)) return "--grad-clip must be positive";
  return "";
}

TrainResult train(Communicator& communicator, const TrainOptions& options,
                  const std::function<void(const StepFigures&)>& on_step) {
  if (communicator.memory_kind() != MemoryKind::kHost)
    throw UsageError(
        "train() trains in host memory; a device communicator's run is train_on_device's");
  if (is_model_parallel(options.strategy))
    throw UsageError(fmt::format("strategy {} runs through train_parallel (parallel_trainer.h)",
                                 name(options.strategy)));
  const std::string problem = validate(options, static_cast<size_t>(communicator.size()));
  if (!problem.empty()) throw UsageError(problem);
  if (options.strategy == Strategy::kSingle) return train_single(options, on_step);
  return run_engine(options, &communicator, options.overlap, make_data_parallel, on_step);
}

TrainResult train_single(const TrainOptions& options,
                         const std::function<void(const StepFigures&)>& on_step) {
  TrainOptions single = options;
  single.strategy = Strategy::kSingle;
  single.faults = Faults{};
  const std::string problem = validate(single, 1);
  if (!problem.empty()) throw UsageError(problem);
  return run_engine(single, nullptr, single.overlap, make_data_parallel, on_step);
}

}  // namespace ccscope::training_probe
