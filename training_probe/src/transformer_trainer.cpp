// The transformer's tensor-parallel strategy: see transformer_trainer.h.
#include "transformer_trainer.h"

#include <memory>

#include "ccscope/training_probe/accounting.h"
#include "wire.h"

namespace ccscope::training_probe {
namespace {

// Each rank holds its heads' and MLP features' shard of every block and a
// copy of the rest (transformer.h); the model's activations cross the
// tensor group by all-reduce (or all-gather and reduce-scatter under sequence
// parallelism) on the engine's communication thread. Every rank computes the
// whole loss; tensor rank 0 reports it.
class TransformerTensor final : public LocalModel {
 public:
  TransformerTensor(EngineState& state, const ParallelGroups& groups, size_t world_rank)
      : LocalModel(state),
        groups_(groups),
        tp_(o_.parallel.tp),
        rank_(world_rank % o_.parallel.tp),
        group_(*this) {
    const TransformerShape& shape = o_.transformer;
    transformer_ = std::make_unique<Transformer>(
        shape, s_.precision, TransformerParallel{tp_, rank_, o_.sequence_parallel, o_.recompute});
    const TransformerLayout& layout = transformer_->layout();
    for (size_t u = 0; u < layout.units.size(); ++u) {
      LocalLayer x;
      x.layer = u;
      x.offset = layout.units[u].begin;
      x.weight_count = layout.units[u].size();
      units_.push_back(x);
    }
    params_ = transformer_shard(shape, initial_model_parameters(o_), tp_, rank_);
    if (s_.mixed()) master_ = params_;
    round_to(s_.precision, params_);
    grads_.assign(params_.size(), 0.0f);
    unique_ = transformer_unique(shape, tp_, rank_);
    replicated_ = transformer_unique(shape, tp_, tp_ > 1 ? 1 : 0);  // 0: replicated
    s_.optimizer = std::make_unique<Optimizer>(o_.optimizer, params_.size());
    if (tp_ > 1) tensor_group_ = &group_;
  }

  size_t parameters() const override { return transformer_parameter_count(o_.transformer); }
  size_t communicated() const override { return parameters(); }

  double forward_backward(size_t step, StepFigures& f) override {
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    figures_ = &f;
    return train_micro_batches(units_, step, 1, 0, f);
  }

  // Under sequence parallelism the embeddings', layer norms' and row-parallel
  // biases' gradients are partial sums over the ranks' positions (Megatron's
  // layer-norm gradient all-reduce).
  ReducedGradients reduce_gradients(StepFigures& f) override {
    if (o_.sequence_parallel && tp_ > 1 && !o_.faults.skipped_tp_all_reduce)
      for (const Range& r : sequence_parallel_partial(o_.transformer, tp_)) {
        std::span<float> values(grads_.data() + r.begin, r.size());
        run(all_reduce_bytes(r.size(), tp_, s_.element), f,
            [&](Communicator& c) { all_reduce_values(c, s_.pool, s_.precision, values, 1.0f); });
      }
    return {grads_, unique_, true};
  }

  void apply(std::span<const float> gradients, size_t step, StepFigures&) override {
    step_all(gradients, step);
  }

  double bytes_sent(const StepFigures& f, const CommCounters&) const override { return f.tp_bytes; }

  // Every rank's reduced gradients gathered into the whole vector (the
  // first-gradient check, unit by unit against one rank's).
  std::vector<float> gathered_gradients(std::span<const float> reduced) override {
    if (tp_ == 1) return {reduced.begin(), reduced.end()};
    std::vector<float> ranks(reduced.size() * tp_);
    s_.comm.run(groups_.tp, 0, nullptr, [&](Communicator& c) {
      c.all_gather(reduced.data(), ranks.data(), reduced.size(), DataType::kFloat32);
    });
    return transformer_unshard(o_.transformer, ranks, tp_);
  }

  double global_loss(double local_loss) override {
    return s_.reduce(rank_ == 0 ? local_loss : 0.0, ReduceOp::kSum);
  }

  // The replicated parameters agree over the tensor group.
  bool consistent() override {
    std::vector<float> copies;
    for (size_t i = 0; i < params_.size(); ++i)
      if (replicated_[i] == 0.0f) copies.push_back(params_[i]);
    const double hash = static_cast<double>(fnv1a(copies));
    return s_.reduce(hash, ReduceOp::kMin) == s_.reduce(hash, ReduceOp::kMax);
  }

 private:
  // The backward starts at the head's gradients (--fault tp-allreduce skips
  // the tensor group's reductions from there on).
  void begin_micro_batch() override { backward_ = false; }
  float* gradients(const LocalLayer& layer) override {
    backward_ = true;
    return LocalModel::gradients(layer);
  }

  void run(double bytes, StepFigures& f, std::function<void(Communicator&)> operation) {
    s_.comm.run(groups_.tp, bytes, &f.tp_bytes, std::move(operation));
  }

  // The model's collectives over the tensor group, in the compute format.
  class Group final : public TensorGroup {
   public:
    explicit Group(TransformerTensor& owner) : owner_(owner) {}
    void all_reduce(std::vector<float>& values) override {
      if (owner_.skipping()) return;
      owner_.run(all_reduce_bytes(values.size(), owner_.tp_, owner_.s_.element), *owner_.figures_,
                 [&](Communicator& c) {
                   all_reduce_values(c, owner_.s_.pool, owner_.s_.precision, values, 1.0f);
                 });
    }
    void all_gather(std::span<const float> mine, std::vector<float>& full) override {
      full.resize(mine.size() * owner_.tp_);
      owner_.run(all_gather_bytes(full.size(), owner_.tp_, owner_.s_.element), *owner_.figures_,
                 [&](Communicator& c) {
                   all_gather_values(c, owner_.s_.pool, owner_.s_.precision, mine, owner_.tp_,
                                     full);
                 });
    }
    void reduce_scatter(std::span<const float> full, std::vector<float>& mine) override {
      const size_t chunk = full.size() / owner_.tp_;
      mine.assign(chunk, 0.0f);
      if (owner_.skipping()) {  // this rank's partial sums, unreduced
        std::copy_n(full.begin() + static_cast<std::ptrdiff_t>(owner_.rank_ * chunk), chunk,
                    mine.begin());
        return;
      }
      owner_.run(reduce_scatter_bytes(full.size(), owner_.tp_, owner_.s_.element), *owner_.figures_,
                 [&](Communicator& c) {
                   reduce_scatter_values(c, owner_.s_.pool, owner_.s_.precision, full, 1.0f,
                                         owner_.tp_, mine, false);
                 });
    }

   private:
    TransformerTensor& owner_;
  };
  bool skipping() const { return backward_ && o_.faults.skipped_tp_all_reduce; }

  ParallelGroups groups_;
  size_t tp_, rank_;
  Group group_;
  std::vector<LocalLayer> units_;
  std::vector<float> unique_;      // each element's weight in the global norm
  std::vector<float> replicated_;  // 0 where the tensor group holds copies
  StepFigures* figures_ = nullptr;
  bool backward_ = false;
};

}  // namespace

MakeStrategy make_transformer_tensor(const ParallelGroups& groups, size_t rank) {
  return [&groups, rank](EngineState& state) {
    return std::make_unique<TransformerTensor>(state, groups, rank);
  };
}

}  // namespace ccscope::training_probe
