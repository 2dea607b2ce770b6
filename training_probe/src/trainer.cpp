// The training loop: one engine for every strategy, because they differ only
// in where gradients and parameters are reduced, sharded and gathered; the
// model, data, loss and optimizer arithmetic are shared so that a loss
// difference between strategies can only come from their communication.
#include "ccscope/training_probe/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "ccscope/collectives/error.h"
#include "ccscope/collectives/types.h"
#include "ccscope/training_probe/comm_worker.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/layout.h"
#include "wire.h"

namespace ccscope::training_probe {
namespace {

class Engine {
 public:
  Engine(const TrainOptions& options, Communicator* communicator)
      : o_(options),
        ranks_(communicator ? static_cast<size_t>(communicator->size()) : 1),
        rank_(communicator ? static_cast<size_t>(communicator->rank()) : 0),
        model_(options.shape, options.precision),
        slices_(model_.slices()),
        psi_(model_.parameter_count()),
        precision_(options.precision),
        element_(element_bytes(options.precision)),
        samples_(dataset_size(options)),
        data_(make_teacher_dataset(samples_, options.shape.width, options.seed)),
        scaler_(options.loss_scaler) {
    if (communicator) {
      worker_ = std::make_unique<CommWorker>(*communicator, o_.timeout, o_.overlap);
      worker_->on_timeout(o_.on_timeout);
    }
    const std::vector<float> initial = initial_parameters(o_.shape, o_.seed);
    const Strategy s = o_.strategy;
    if (s == Strategy::kDdp || s == Strategy::kZero1 || s == Strategy::kZero2)
      buckets_ = assign_buckets(slices_, element_, o_.bucket_bytes, o_.first_bucket_bytes);
    if (s == Strategy::kSingle || s == Strategy::kDdp) {
      params_ = initial;
      round_to(precision_, params_);
      grads_.assign(psi_, 0.0f);
      if (mixed()) master_ = initial;
      optimizer_ = std::make_unique<Optimizer>(o_.optimizer, psi_);
      communicated_ = psi_;
      return;
    }
    // ZeRO: shard units (buckets for stages 1-2, layers for stage 3).
    if (s == Strategy::kZero3)
      for (const LayerSlice& l : slices_)
        units_.push_back(shard_range({l.begin(), l.end()}, ranks_));
    else
      for (const Bucket& b : buckets_) units_.push_back(shard_range(b.range, ranks_));
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
    optimizer_ = std::make_unique<Optimizer>(o_.optimizer, shard_elements);
    if (s == Strategy::kZero3) {
      param_shard_ = master_;
      round_to(precision_, param_shard_);
      gathered_.resize(slices_.size());
      gather_ticket_.assign(slices_.size(), 0);
    } else {
      params_ = initial;
      round_to(precision_, params_);
      if (s == Strategy::kZero1) grads_.assign(psi_, 0.0f);
    }
  }

  TrainResult run(const std::function<void(const StepFigures&)>& on_step) {
    TrainResult result = run_steps(
        o_.steps, psi_, communicated_, [this](size_t step) { return one_step(step); }, on_step);
    result.memory = held_memory();
    result.final_parameters = full_parameters();
    return result;
  }

 private:
  bool mixed() const { return precision_ != Precision::kFloat32; }
  bool zero() const {
    return o_.strategy == Strategy::kZero1 || o_.strategy == Strategy::kZero2 ||
           o_.strategy == Strategy::kZero3;
  }
  float average_scale() const {
    return o_.faults.sum_not_average ? 1.0f : 1.0f / static_cast<float>(ranks_);
  }

  // ---------------------------------------------------------------- a step
  StepFigures one_step(size_t step) {
    StepFigures f;
    f.step = step;
    f.loss_scale = precision_ == Precision::kFloat16 ? scaler_.scale() : 1.0;
    const auto start = Clock::now();
    const size_t per_rank = o_.global_batch / ranks_;
    const size_t micro = per_rank / o_.micro_batches;
    const std::vector<size_t> samples = batch_samples(samples_, ranks_, rank_, per_rank, o_.seed,
                                                      step, !o_.faults.sampler_not_reseeded);
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    std::fill(grad_shard_.begin(), grad_shard_.end(), 0.0f);
    double local_loss = 0;
    for (size_t m = 0; m < o_.micro_batches; ++m) {
      const bool last = m + 1 == o_.micro_batches;
      gather_batch(data_, std::span(samples).subspan(m * micro, micro), inputs_, targets_);
      forward(micro);
      local_loss += mse_loss(cache_.output, targets_, micro, o_.shape.width, per_rank,
                             static_cast<float>(f.loss_scale), grad_output_);
      backward(last);
    }
    if (worker_) worker_->wait_all();
    finish_step(f);
    const auto end = Clock::now();
    f.step_seconds = seconds_between(start, end);
    if (worker_) {
      const CommCounters c = worker_->take_counters();
      f.comm_seconds = c.busy_seconds;
      f.exposed_comm_seconds = c.exposed_seconds;
      f.bytes_sent = c.bytes;
    }
    f.compute_seconds = f.step_seconds - f.exposed_comm_seconds;
    f.loss = reduce_sum(local_loss) / static_cast<double>(ranks_);
    if (o_.check_consistency) f.consistent = parameters_agree();
    if (worker_) worker_->take_counters();  // the loss and the check are not the step's
    return f;
  }

  void forward(size_t batch) {
    model_.begin_forward(inputs_, batch, cache_);
    if (o_.strategy != Strategy::kZero3) {
      for (size_t l = 0; l < slices_.size(); ++l)
        model_.forward_layer(l, params_.data() + slices_[l].begin(), cache_);
      return;
    }
    for (size_t l = 0; l < slices_.size(); ++l) {
      if (!gathered_[l]) submit_gather(l);
      if (o_.prefetch && l + 1 < slices_.size() && !gathered_[l + 1]) submit_gather(l + 1);
      worker_->wait(gather_ticket_[l]);
      model_.forward_layer(l, gathered_[l]->data(), cache_);
      gathered_[l].reset();  // FULL_SHARD: freed after forward
    }
  }

  void backward(bool last_micro) {
    const Strategy s = o_.strategy;
    next_bucket_ = 0;
    for (size_t l = slices_.size(); l-- > 0;) {
      const LayerSlice& slice = slices_[l];
      const float* layer_params = nullptr;
      if (s == Strategy::kZero3) {
        if (!gathered_[l]) submit_gather(l);
        if (o_.prefetch && l > 0 && !gathered_[l - 1]) submit_gather(l - 1);
        worker_->wait(gather_ticket_[l]);
        layer_params = gathered_[l]->data();
      } else {
        layer_params = params_.data() + slice.begin();
      }
      float* layer_grads = nullptr;
      if (s == Strategy::kZero2 || s == Strategy::kZero3) {
        layer_scratch_.assign(slice.end() - slice.begin(), 0.0f);
        layer_grads = layer_scratch_.data();
      } else {
        layer_grads = grads_.data() + slice.begin();
      }
      model_.backward_layer(l, layer_params, cache_, grad_output_, layer_grads);
      if (s == Strategy::kZero3) {
        submit_layer_reduce_scatter(l);
        gathered_[l].reset();
      } else if (s == Strategy::kZero2) {
        stage_layer_gradients(l);
        submit_ready_buckets(l);
      } else if (last_micro && (s == Strategy::kDdp || s == Strategy::kZero1)) {
        submit_ready_buckets(l);  // no_sync on the other micro-batches
      }
    }
  }

  // ------------------------------------------------- DDP and ZeRO-1/2 buckets
  // Buckets whose lowest layer's backward is done, in fill order.
  void submit_ready_buckets(size_t layer) {
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].first_layer >= layer) {
      const size_t k = next_bucket_++;
      if (o_.faults.unreduced_bucket == k) {
        staging_.erase(k);
        continue;
      }
      if (o_.strategy == Strategy::kDdp)
        submit_bucket_all_reduce(k);
      else
        submit_bucket_reduce_scatter(k);
    }
  }

  void submit_bucket_all_reduce(size_t k) {
    const Range r = buckets_[k].range;
    float* grads = grads_.data() + r.begin;
    const Precision p = precision_;
    const float scale = average_scale();
    worker_->submit(
        [grads, r, p, scale, &pool = pool_](Communicator& c) {
          // Divided by the world size before the sum, as DDP's reducer does
          // (the sum of 16-bit values then stays within the range of one).
          if (p == Precision::kFloat32) {
            for (size_t i = 0; i < r.size(); ++i) grads[i] *= scale;
            c.all_reduce(grads, grads, r.size(), DataType::kFloat32, ReduceOp::kSum);
            return;
          }
          WireBuffer wire(pool, p, r.size());
          wire.pack({grads, r.size()}, scale);
          c.all_reduce(wire.data(), wire.data(), r.size(), wire_type(p), ReduceOp::kSum);
          wire.unpack({grads, r.size()}, false);
        },
        all_reduce_bytes(r.size(), ranks_, element_));
  }

  // Reduce-scatters unit k's gradients (`values`, unpadded; `keep` owns them
  // when they are a staging copy) into this rank's chunk of grad_shard_,
  // accumulating over micro-batches.
  void submit_unit_reduce_scatter(size_t k, const float* values, std::shared_ptr<const void> keep) {
    const Shard unit = units_[k];
    float* shard = grad_shard_.data() + unit_offsets_[k];
    const Precision p = precision_;
    const float scale = average_scale();
    const size_t ranks = ranks_;
    worker_->submit(
        [values, keep, unit, shard, p, scale, ranks, &pool = pool_](Communicator& c) {
          WireBuffer send(pool, p, unit.padded_size(ranks));
          send.pack({values, unit.unit.size()}, scale);  // divided before the sum, as DDP
          WireBuffer recv(pool, p, unit.chunk);
          c.reduce_scatter(send.data(), recv.data(), unit.chunk, wire_type(p), ReduceOp::kSum);
          recv.unpack({shard, unit.chunk}, true);
        },
        reduce_scatter_bytes(unit.padded_size(ranks_), ranks_, element_));
  }

  void submit_bucket_reduce_scatter(size_t k) {
    if (o_.strategy == Strategy::kZero1) {
      // The full gradients stay put until the step ends: no copy.
      submit_unit_reduce_scatter(k, grads_.data() + buckets_[k].range.begin, nullptr);
      return;
    }
    auto it = staging_.find(k);
    std::shared_ptr<const std::vector<float>> staged = std::move(it->second);
    staging_.erase(it);  // the operation holds the only reference: freed after it runs
    const float* values = staged->data();
    submit_unit_reduce_scatter(k, values, std::move(staged));
  }

  // ZeRO-2: a layer's gradients (in layer_scratch_) into the staging buffers
  // of the buckets that hold them.
  void stage_layer_gradients(size_t layer) {
    const LayerSlice& slice = slices_[layer];
    for (size_t k = 0; k < buckets_.size(); ++k) {
      const Range r = buckets_[k].range;
      const size_t begin = std::max(r.begin, slice.begin());
      const size_t end = std::min(r.end, slice.end());
      if (begin >= end) continue;
      auto& buffer = staging_[k];
      if (!buffer) buffer = std::make_shared<std::vector<float>>(r.size(), 0.0f);
      std::copy(layer_scratch_.begin() + static_cast<std::ptrdiff_t>(begin - slice.begin()),
                layer_scratch_.begin() + static_cast<std::ptrdiff_t>(end - slice.begin()),
                buffer->begin() + static_cast<std::ptrdiff_t>(begin - r.begin));
    }
  }

  // ------------------------------------------------------------ ZeRO-3 layers
  void submit_gather(size_t layer) {
    const Shard unit = units_[layer];
    auto full = std::make_shared<std::vector<float>>(unit.unit.size());
    gathered_[layer] = full;
    const float* mine = param_shard_.data() + unit_offsets_[layer];
    const Precision p = precision_;
    const size_t ranks = ranks_;
    gather_ticket_[layer] = worker_->submit(
        [full, unit, mine, p, ranks, &pool = pool_](Communicator& c) {
          WireBuffer recv(pool, p, unit.padded_size(ranks));
          WireBuffer send(pool, p, unit.chunk);
          send.pack({mine, unit.chunk});
          c.all_gather(send.data(), recv.data(), unit.chunk, wire_type(p));
          recv.unpack(*full, false);
        },
        all_gather_bytes(unit.padded_size(ranks_), ranks_, element_));
  }

  void submit_layer_reduce_scatter(size_t layer) {
    if (o_.faults.unreduced_bucket == layer) return;
    auto copy = std::make_shared<const std::vector<float>>(layer_scratch_);
    const float* values = copy->data();
    submit_unit_reduce_scatter(layer, values, std::move(copy));
  }

  // ------------------------------------------------------- after backward
  void finish_step(StepFigures& f) {
    std::span<float> grads = zero() ? std::span<float>(grad_shard_) : std::span<float>(grads_);
    // ZeRO's shards are disjoint: their squares sum over ranks (unless the
    // fault clips each by its own); DDP's gradients are whole on every rank.
    const bool shards = zero() && !o_.faults.clip_per_shard;
    const StepEnd end{precision_, o_, scaler_,
                      [this, shards](double v) { return shards ? reduce_sum(v) : v; },
                      [this](double v) { return reduce_max(v); }};
    if (!end.prepare(grads, {}, f)) return;
    ++applied_steps_;
    if (!zero()) {
      step_parameters(*optimizer_, precision_, params_, master_, grads, applied_steps_);
      return;
    }
    optimizer_->step(master_, grads, applied_steps_);
    if (o_.strategy == Strategy::kZero3) {
      for (size_t i = 0; i < master_.size(); ++i)
        param_shard_[i] = round_to(precision_, master_[i]);
      return;
    }
    // ZeRO-1/2: every rank's updated shard, gathered into the full parameters.
    for (size_t k = 0; k < units_.size(); ++k) {
      const Shard unit = units_[k];
      float* full = params_.data() + unit.unit.begin;
      const float* mine = master_.data() + unit_offsets_[k];
      const Precision p = precision_;
      const size_t ranks = ranks_;
      worker_->submit(
          [unit, full, mine, p, ranks, &pool = pool_](Communicator& c) {
            WireBuffer send(pool, p, unit.chunk);
            send.pack({mine, unit.chunk});
            WireBuffer recv(pool, p, unit.padded_size(ranks));
            c.all_gather(send.data(), recv.data(), unit.chunk, wire_type(p));
            recv.unpack({full, unit.unit.size()}, false);
          },
          all_gather_bytes(unit.padded_size(ranks_), ranks_, element_));
    }
    worker_->wait_all();
  }

  // ------------------------------------------------- small reductions
  double reduce(double value, ReduceOp op) {
    if (!worker_) return value;
    double* cell = &scalar_;
    *cell = value;
    const size_t ticket = worker_->submit(
        [cell, op](Communicator& c) { c.all_reduce(cell, cell, 1, DataType::kFloat64, op); },
        all_reduce_bytes(1, ranks_, 8));
    worker_->wait(ticket);
    return *cell;
  }
  double reduce_sum(double value) { return reduce(value, ReduceOp::kSum); }
  double reduce_max(double value) { return reduce(value, ReduceOp::kMax); }

  std::vector<float> full_parameters() {
    if (o_.strategy != Strategy::kZero3) return params_;
    std::vector<float> full(psi_);
    for (size_t l = 0; l < slices_.size(); ++l) {
      submit_gather(l);
      worker_->wait(gather_ticket_[l]);
      std::copy(gathered_[l]->begin(), gathered_[l]->end(),
                full.begin() + static_cast<std::ptrdiff_t>(slices_[l].begin()));
      gathered_[l].reset();
    }
    return full;
  }

  bool parameters_agree() {
    const double hash = static_cast<double>(fnv1a(full_parameters()));
    return reduce(hash, ReduceOp::kMin) == reduce(hash, ReduceOp::kMax);
  }

  // What this rank keeps between steps, in the bytes of the formats the
  // strategy holds them in (the CPU path stores 16-bit values in floats).
  MemoryFootprint held_memory() const {
    return held_bytes(
        element_, o_.strategy == Strategy::kZero3 ? param_shard_.size() : params_.size(),
        zero() && o_.strategy != Strategy::kZero1 ? grad_shard_.size() : grads_.size(), *optimizer_,
        master_.size(), mixed());
  }

  const TrainOptions& o_;
  size_t ranks_;
  size_t rank_;
  Model model_;
  std::vector<LayerSlice> slices_;
  size_t psi_;
  Precision precision_;
  size_t element_;
  size_t samples_;
  SyntheticDataset data_;
  LossScaler scaler_;
  ScratchPool pool_;
  std::unique_ptr<Optimizer> optimizer_;
  size_t applied_steps_ = 0;
  size_t communicated_ = 0;

  std::vector<float> params_;       // full parameters in the compute format (all but ZeRO-3)
  std::vector<float> grads_;        // full gradients (single, DDP, ZeRO-1)
  std::vector<float> master_;       // float32 master weights: full (mixed DDP) or this rank's shard
  std::vector<float> grad_shard_;   // ZeRO: this rank's reduced gradients
  std::vector<float> param_shard_;  // ZeRO-3: this rank's parameters in the compute format
  std::vector<Bucket> buckets_;
  std::vector<Shard> units_;
  std::vector<size_t> unit_offsets_;  // where each unit's chunk sits in the shard arrays
  size_t next_bucket_ = 0;
  std::map<size_t, std::shared_ptr<std::vector<float>>> staging_;  // ZeRO-2 buckets being filled
  std::vector<std::shared_ptr<std::vector<float>>> gathered_;      // ZeRO-3 layers gathered
  std::vector<size_t> gather_ticket_;
  std::vector<float> layer_scratch_;
  double scalar_ = 0;

  ForwardCache cache_;
  std::vector<float> inputs_, targets_, grad_output_;
  // Last: destroyed first, so that no queued operation outlives the buffers
  // and the pool it writes into.
  std::unique_ptr<CommWorker> worker_;
};

}  // namespace

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
        "the training probe's GPU path (cuBLAS) is not built yet; run it over the mpi backend");
  if (is_model_parallel(options.strategy))
    throw UsageError(fmt::format("strategy {} runs through train_parallel (parallel_trainer.h)",
                                 name(options.strategy)));
  const std::string problem = validate(options, static_cast<size_t>(communicator.size()));
  if (!problem.empty()) throw UsageError(problem);
  if (options.strategy == Strategy::kSingle) return train_single(options, on_step);
  Engine engine(options, &communicator);
  return engine.run(on_step);
}

TrainResult train_single(const TrainOptions& options,
                         const std::function<void(const StepFigures&)>& on_step) {
  TrainOptions single = options;
  single.strategy = Strategy::kSingle;
  single.faults = Faults{};
  const std::string problem = validate(single, 1);
  if (!problem.empty()) throw UsageError(problem);
  Engine engine(single, nullptr);
  return engine.run(on_step);
}

}  // namespace ccscope::training_probe
