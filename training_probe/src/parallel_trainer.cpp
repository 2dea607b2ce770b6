// The model-parallel strategies' hooks (engine.h): Grid for tensor, pipeline
// and data parallelism in any combination (tp and pp alone are the
// combinations with the other degrees 1; GridZero1 adds ZeRO-1 over the data
// group), and Expert for the mixture-of-experts model. They run in the one
// engine over layers.h's forward and backward and keep the probe's arithmetic
// (model.h's GEMMs and rounding, data.h's sampler, optimizer.h's element-wise
// steps), so that a loss difference from `single` can come only from how the
// model was cut and what was communicated.
#include "ccscope/training_probe/parallel_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>

#include "ccscope/collectives/error.h"
#include "ccscope/training_probe/comm_worker.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/layout.h"
#include "ccscope/training_probe/moe.h"
#include "ccscope/training_probe/pipeline.h"
#include "engine.h"
#include "grid_layers.h"
#include "layers.h"
#include "moe_layout.h"
#include "transformer_trainer.h"
#include "wire.h"

namespace ccscope::training_probe {

GridPosition grid_position(size_t rank, const ParallelOptions& l) {
  return {rank % l.tp, (rank / l.tp) % l.dp, rank / (l.tp * l.dp)};
}

size_t grid_rank(const GridPosition& p, const ParallelOptions& l) {
  return (p.pp * l.dp + p.dp) * l.tp + p.tp;
}

GroupColors group_colors(size_t rank, const ParallelOptions& l) {
  const GridPosition p = grid_position(rank, l);
  // A group is the ranks that agree on the other two coordinates.
  return {static_cast<int>(p.pp * l.dp + p.dp), static_cast<int>(p.dp * l.tp + p.tp),
          static_cast<int>(p.pp * l.tp + p.tp)};
}

namespace {

// Blocks a pipeline cuts between: Megatron pairs under tensor parallelism
// (a cut inside a pair would send a partial sum), layers otherwise.
std::vector<Range> model_blocks(size_t depth, size_t tp) {
  std::vector<Range> blocks;
  if (tp == 1) {
    for (size_t l = 0; l < depth; ++l) blocks.push_back({l, l + 1});
    return blocks;
  }
  for (size_t l = 0; l + 1 < depth; l += 2) blocks.push_back({l, l + 2});
  if (depth % 2 == 1) blocks.push_back({depth - 1, depth});
  return blocks;
}

// Which blocks each virtual stage holds.
std::vector<Range> virtual_stage_blocks(const TrainOptions& o) {
  const ParallelOptions& p = o.parallel;
  const std::vector<Range> blocks = model_blocks(o.shape.depth, p.tp);
  const size_t pieces = p.pp * p.chunks;
  if (!p.stage_blocks.empty()) {
    std::vector<Range> given;
    size_t begin = 0;
    for (size_t n : p.stage_blocks) {
      given.push_back({begin, begin + n});
      begin += n;
    }
    return given;
  }
  std::vector<size_t> weights;
  for (const Range& b : blocks)
    weights.push_back(b.size() * (o.shape.width * o.shape.width + o.shape.width));
  return balance_stages(weights, pieces);
}

}  // namespace

std::string validate_parallel(const TrainOptions& o, size_t ranks) {
  const ParallelOptions& p = o.parallel;
  if (o.strategy == Strategy::kExpert) {
    if (p.experts == 0) return "--strategy ep needs --experts (at least 1)";
    if (p.top_k == 0 || p.top_k > p.experts)
      return fmt::format("--top-k {} must be 1 to the expert count {}", p.top_k, p.experts);
    if (p.experts < ranks)
      return fmt::format("{} experts cannot spread over {} ranks; use at least {} experts",
                         p.experts, ranks, ranks);
    if (o.shape.depth < 3)
      return "--strategy ep needs --depth 3 or more (every odd layer but the last is a mixture "
             "of experts)";
    if (!(p.capacity_factor >= 0) || !std::isfinite(p.capacity_factor))
      return "--capacity-factor must be 0 (no limit) or a finite positive factor";
    if (p.experts > kMaxExperts)
      return fmt::format("--experts {}: at most {}", p.experts, kMaxExperts);
    if (o.global_batch % ranks != 0)
      return fmt::format("global batch {} does not divide over {} ranks", o.global_batch, ranks);
    return "";
  }
  if (p.tp == 0 || p.pp == 0 || p.dp == 0) return "--tp, --pp and --dp must be at least 1";
  if (p.tp > ranks || p.pp > ranks || p.dp > ranks)  // before the product can wrap
    return fmt::format("--tp {}, --pp {} and --dp {} cannot exceed the {} ranks", p.tp, p.pp, p.dp,
                       ranks);
  if (p.tp * p.pp * p.dp != ranks)
    return fmt::format(
        "--tp {} x --pp {} x --dp {} = {} ranks, but the job has {}; launch with mpiexec -n {} "
        "or change the degrees",
        p.tp, p.pp, p.dp, p.tp * p.pp * p.dp, ranks, p.tp * p.pp * p.dp);
  if (o.model == TrainedModel::kTransformer) {
    if (o.strategy != Strategy::kTensor || p.pp > 1 || p.dp > 1)
      return "--model transformer runs single, ddp, zero1, zero2, zero3 and tp; pp, ep and 3d "
             "are built for the MLP only";
    if (o.micro_batches > 1 && o.global_batch % o.micro_batches != 0)
      return fmt::format("global batch {} does not divide into {} micro-batches", o.global_batch,
                         o.micro_batches);
    return transformer_problem(o.transformer, p.tp, o.sequence_parallel);
  }
  if (p.tp > o.shape.width)
    return fmt::format("--tp {} is more than the width {}: a shard would be empty", p.tp,
                       o.shape.width);
  if (p.tp > 1 && o.shape.depth < 2)
    return "tensor parallel needs --depth 2 or more (a column-parallel and a row-parallel layer)";
  const std::string pipeline = validate_pipeline(p.schedule, p.pp, o.micro_batches, p.chunks);
  if (!pipeline.empty()) return pipeline;
  if (p.chunks > 1 && p.pp == 1)
    return "--chunks (interleaved virtual stages) needs a pipeline: --pp 2 or more";
  const size_t blocks = model_blocks(o.shape.depth, p.tp).size();
  const size_t pieces = p.pp * p.chunks;
  if (!p.stage_blocks.empty()) {
    if (p.stage_blocks.size() != pieces)
      return fmt::format("--stage-layers gives {} stages, the pipeline has {}",
                         p.stage_blocks.size(), pieces);
    size_t sum = 0;
    for (size_t n : p.stage_blocks) {
      if (n == 0) return "--stage-layers: every stage needs at least one block";
      if (n > blocks)  // before the sum can wrap
        return fmt::format("--stage-layers {}: the model has {} blocks", n, blocks);
      sum += n;
    }
    if (sum != blocks)
      return fmt::format("--stage-layers adds up to {} blocks; the model has {} ({})", sum, blocks,
                         p.tp > 1 ? "layer pairs under tensor parallelism" : "layers");
  } else if (blocks < pieces) {
    return fmt::format("{} {} cannot fill {} {}pipeline stages; use a deeper model or fewer stages",
                       blocks, p.tp > 1 ? "layer pairs" : "layers", pieces,
                       p.chunks > 1 ? "virtual " : "");
  }
  if (o.global_batch % p.dp != 0)
    return fmt::format("global batch {} does not divide over {} data-parallel replicas",
                       o.global_batch, p.dp);
  if ((o.global_batch / p.dp) % o.micro_batches != 0)
    return fmt::format("per-replica batch {} does not divide into {} micro-batches",
                       o.global_batch / p.dp, o.micro_batches);
  return "";
}

std::vector<std::vector<LocalLayer>> grid_layers(const TrainOptions& o, const GridPosition& at,
                                                 std::vector<float>& params,
                                                 std::vector<float>& unique) {
  const ParallelOptions& p = o.parallel;
  const size_t w = o.shape.width;
  const std::vector<Range> pieces = virtual_stage_blocks(o);
  const std::vector<Range> blocks = model_blocks(o.shape.depth, p.tp);
  const std::vector<LayerSlice> slices = layer_slices(o.shape);
  const std::vector<float> full = initial_parameters(o.shape, o.seed);
  const Range tp_shard = split_evenly(w, p.tp, at.tp);
  std::vector<std::vector<LocalLayer>> chunks(p.chunks);
  for (size_t c = 0; c < p.chunks; ++c) {
    const Range piece = pieces[c * p.pp + at.pp];
    for (size_t b = piece.begin; b < piece.end; ++b) {
      const Range layers = blocks[b];
      for (size_t l = layers.begin; l < layers.end; ++l) {
        LocalLayer x;
        x.layer = l;
        x.last = l + 1 == o.shape.depth;
        if (p.tp > 1 && layers.size() == 2)
          x.role = l == layers.begin ? LayerRole::kColumn : LayerRole::kRow;
        x.shard = x.role == LayerRole::kFull ? Range{0, w} : tp_shard;
        const size_t q = x.shard.size();
        x.in = x.role == LayerRole::kRow ? q : w;
        x.out = x.role == LayerRole::kColumn ? q : w;
        x.weight_count = x.in * x.out;
        x.bias_count = x.role == LayerRole::kColumn ? q : w;
        x.offset = params.size();
        const float* weight = full.data() + slices[l].weight_offset;
        const float* bias = full.data() + slices[l].bias_offset;
        for (size_t r = 0; r < x.out; ++r) {
          const size_t row = x.role == LayerRole::kColumn ? x.shard.begin + r : r;
          const size_t col = x.role == LayerRole::kRow ? x.shard.begin : 0;
          params.insert(params.end(), weight + row * w + col, weight + row * w + col + x.in);
        }
        const size_t bias_begin = x.role == LayerRole::kColumn ? x.shard.begin : 0;
        params.insert(params.end(), bias + bias_begin, bias + bias_begin + x.bias_count);
        // A replicated copy's gradient counts once in the global norm.
        const float weight_unique = x.role == LayerRole::kFull && at.tp != 0 ? 0.0f : 1.0f;
        const float bias_unique = x.role != LayerRole::kColumn && at.tp != 0 ? 0.0f : 1.0f;
        unique.insert(unique.end(), x.weight_count, weight_unique);
        unique.insert(unique.end(), x.bias_count, bias_unique);
        chunks[c].push_back(x);
      }
    }
  }
  return chunks;
}

namespace {

double sendrecv_bytes(size_t count, size_t element) { return static_cast<double>(count * element); }

// ===================================================================== dense
// tp x pp x dp (tp, pp and 3d are its cases): the model's layers cut into
// column/row-parallel pairs and pipeline stages, run as the stage's pipeline
// plan says; gradients averaged over the data group after the flush (or
// reduce-scattered, stepped per shard and all-gathered: ZeRO-1).
class Grid : public LocalModel {
 public:
  // The layers and their parameters, not yet rounded to the compute format
  // (the master copy is made from them first).
  Grid(EngineState& state, const ParallelGroups& g, size_t world_rank)
      : LocalModel(state),
        p_(o_.parallel),
        g_(g),
        at_(grid_position(world_rank, o_.parallel)),
        w_(o_.shape.width),
        precision_(o_.precision),
        element_(state.element) {
    chunks_ = grid_layers(o_, at_, params_, unique_);
    local_ = params_.size();
    grads_.assign(local_, 0.0f);
    plan_ = pipeline_plan(p_.schedule, p_.pp, at_.pp, o_.micro_batches, p_.chunks);
  }

  size_t parameters() const override { return parameter_count(o_.shape); }
  size_t communicated() const override { return parameters(); }

  double forward_backward(size_t step, StepFigures& f) override {
    per_replica_ = o_.global_batch / p_.dp;
    micro_ = per_replica_ / o_.micro_batches;
    samples_now_ = s_.step_samples(step, p_.dp, at_.dp, per_replica_);
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    local_loss_ = 0;
    run_pipeline(f);
    return local_loss_;
  }

  double bytes_sent(const StepFigures& f, const CommCounters&) const override {
    return f.tp_bytes + f.pp_bytes + f.dp_bytes;
  }

  // The loss: the last stage's, tensor rank 0's, averaged over replicas.
  double global_loss(double local_loss) override {
    const bool reporter = at_.pp + 1 == p_.pp && at_.tp == 0;
    return s_.reduce(reporter ? local_loss / static_cast<double>(p_.dp) : 0.0, ReduceOp::kSum);
  }

  // Data-parallel replicas hold the same parameters.
  bool consistent() override {
    const double hash = static_cast<double>(fnv1a(params_));
    const bool agree =
        s_.comm.reduce(g_.dp, hash, ReduceOp::kMin) == s_.comm.reduce(g_.dp, hash, ReduceOp::kMax);
    return s_.reduce(agree ? 1.0 : 0.0, ReduceOp::kMin) > 0;
  }

 protected:
  size_t last_chunk() const { return p_.chunks - 1; }
  bool first_virtual(size_t chunk) const { return chunk == 0 && at_.pp == 0; }
  bool last_virtual(size_t chunk) const { return chunk == last_chunk() && at_.pp + 1 == p_.pp; }

  // ------------------------------------------------------------ pipeline
  using Key = std::pair<size_t, size_t>;  // micro-batch, chunk

  void run_pipeline(StepFigures& f) {
    const auto start = Clock::now();
    size_t in_flight = 0;
    double held_bytes = 0;
    for (const PipelineStep& step : plan_) {
      if (!step.sends.empty() || !step.recvs.empty()) f.pipeline_wait_seconds += exchange(step, f);
      if (!step.pass) continue;
      const auto pass_start = Clock::now();
      const Key key{step.pass->micro_batch, step.pass->chunk};
      if (step.pass->kind == PipelinePass::Kind::kForward) {
        forward(key, f);
        ++in_flight;
        held_bytes += caches_[key].bytes(element_);
        f.peak_in_flight = std::max(f.peak_in_flight, in_flight);
        f.peak_activation_bytes = std::max(f.peak_activation_bytes, held_bytes);
      } else {
        held_bytes -= caches_[key].bytes(element_);
        backward(key, f);
        --in_flight;
      }
      f.pipeline_busy_seconds += seconds_between(pass_start, Clock::now());
    }
    // The flush: a stage that is done waits for the pipeline's last pass (the
    // textbook bubble counts that idle time too), so every stage's window is
    // the pipeline's makespan. A one-element all-reduce over the pipeline
    // group marks it; it moves no tensor, so it counts no bytes.
    if (g_.pp && p_.pp > 1) {
      double flag = 0;
      f.pipeline_wait_seconds += s_.comm.run(g_.pp, 0, nullptr, [&](Communicator& c) {
        c.all_reduce(&flag, &flag, 1, DataType::kFloat64, ReduceOp::kSum);
      });
    }
    f.pipeline_seconds = seconds_between(start, Clock::now());
  }

  // One batch of pipeline transfers, in the compute format.
  double exchange(const PipelineStep& step, StepFigures& f) {
    const size_t count = micro_ * w_;
    std::vector<std::unique_ptr<WireBuffer>> buffers;
    std::vector<PeerSend> sends;
    std::vector<PeerRecv> recvs;
    double bytes = 0;
    for (const PipelineTransfer& t : step.sends) {
      const Key key{t.micro_batch, t.chunk};
      std::vector<float>& values = t.kind == PipelineTransfer::Kind::kActivation
                                       ? activation_out_.at(key)
                                       : gradient_out_.at(key);
      buffers.push_back(std::make_unique<WireBuffer>(s_.pool, precision_, count));
      buffers.back()->pack(values);
      sends.push_back({static_cast<int>(t.peer), buffers.back()->data(), count});
      bytes += sendrecv_bytes(count, element_);
      if (t.kind == PipelineTransfer::Kind::kActivation)
        activation_out_.erase(key);
      else
        gradient_out_.erase(key);
    }
    const size_t first_recv = buffers.size();
    for (const PipelineTransfer& t : step.recvs) {
      buffers.push_back(std::make_unique<WireBuffer>(s_.pool, precision_, count));
      recvs.push_back({static_cast<int>(t.peer), buffers.back()->data(), count});
    }
    const DataType type = wire_type(precision_);
    const double waited = s_.comm.run(
        g_.pp, bytes, &f.pp_bytes, [&](Communicator& c) { c.batch_send_recv(sends, recvs, type); });
    for (size_t i = 0; i < step.recvs.size(); ++i) {
      const PipelineTransfer& t = step.recvs[i];
      const Key key{t.micro_batch, t.chunk};
      std::vector<float>& into =
          t.kind == PipelineTransfer::Kind::kActivation ? activation_in_[key] : gradient_in_[key];
      into.resize(count);
      buffers[first_recv + i]->unpack(into, false);
    }
    return waited;
  }

  void forward(const Key& key, StepFigures& f) {
    const auto [m, c] = key;
    LayerCache& cache = caches_[key];
    const std::span<const size_t> samples = std::span(samples_now_).subspan(m * micro_, micro_);
    std::vector<float> x;
    if (first_virtual(c)) {
      x = load_batch(samples);
    } else {
      x = std::move(activation_in_.at(key));
      activation_in_.erase(key);
    }
    x = forward_layers(chunks_[c], std::move(x), pass(), cache, *this, f);
    if (last_virtual(c)) {
      load_batch(samples);  // the targets
      std::vector<float> grad;
      local_loss_ += batch_loss(x, micro_, per_replica_, f, grad);
      if (o_.faults.dropped_micro_batch == m) std::fill(grad.begin(), grad.end(), 0.0f);
      gradient_in_[key] = std::move(grad);
    } else {
      activation_out_[key] = std::move(x);
    }
  }

  void backward(const Key& key, StepFigures& f) {
    const size_t c = key.second;
    const LayerCache& cache = caches_.at(key);
    std::vector<float> grad = std::move(gradient_in_.at(key));
    gradient_in_.erase(key);
    grad = backward_layers(chunks_[c], std::move(grad), pass(), cache, *this, f);
    caches_.erase(key);
    if (!first_virtual(c)) gradient_out_[key] = std::move(grad);
  }

  // -------------------------------------------------------- layer hooks
  LayerPass pass() const { return {o_.shape.activation, precision_, micro_}; }
  void tensor_all_reduce(std::vector<float>& values, bool backward, StepFigures& f) override {
    if (backward && o_.faults.skipped_tp_all_reduce) return;
    s_.comm.run(
        g_.tp, all_reduce_bytes(values.size(), p_.tp, element_), &f.tp_bytes,
        [&](Communicator& comm) { all_reduce_values(comm, s_.pool, precision_, values, 1.0f); });
  }

  // All-reduces (sum) `values` over the data group, each scaled by `scale` first.
  void data_all_reduce(std::span<float> values, float scale, StepFigures& f) {
    s_.comm.run(g_.dp, all_reduce_bytes(values.size(), p_.dp, element_), &f.dp_bytes,
                [&](Communicator& c) { all_reduce_values(c, s_.pool, precision_, values, scale); });
  }

  const ParallelOptions& p_;
  ParallelGroups g_;
  GridPosition at_;
  size_t w_;
  Precision precision_;
  size_t element_;
  std::vector<std::vector<LocalLayer>> chunks_;
  std::vector<float> unique_;        // each element's weight in the global norm
  std::vector<float> unique_shard_;  // of what this rank steps, where it differs
  size_t local_ = 0;
  std::vector<PipelineStep> plan_;

 private:
  size_t per_replica_ = 0, micro_ = 0;
  std::vector<size_t> samples_now_;
  double local_loss_ = 0;
  std::map<Key, LayerCache> caches_;
  std::map<Key, std::vector<float>> activation_in_, activation_out_, gradient_in_, gradient_out_;
};

// The data group's replicas all-reduce their gradients after the flush.
class GridReplicas final : public Grid {
 public:
  GridReplicas(EngineState& state, const ParallelGroups& g, size_t world_rank)
      : Grid(state, g, world_rank) {
    if (s_.mixed()) master_ = params_;
    s_.optimizer = std::make_unique<Optimizer>(o_.optimizer, local_);
    round_to(precision_, params_);
  }

  ReducedGradients reduce_gradients(StepFigures& f) override {
    if (p_.dp == 1) return {grads_, unique_, true};
    data_all_reduce(grads_, 1.0f / static_cast<float>(p_.dp), f);
    // Replicas hold equal gradients: the first counts them in the norm.
    if (at_.dp == 0) return {grads_, unique_, true};
    unique_shard_.assign(local_, 0.0f);
    return {grads_, unique_shard_, true};
  }

  void apply(std::span<const float> gradients, size_t step, StepFigures&) override {
    step_all(gradients, step);
  }
};

// ZeRO-1 over the data group (DeepSpeed's with Megatron's TP and PP): the
// gradients reduce-scattered, each replica steps its shard, the updated
// shards all-gathered.
class GridZero1 final : public Grid {
 public:
  GridZero1(EngineState& state, const ParallelGroups& g, size_t world_rank)
      : Grid(state, g, world_rank), shard_(shard_range({0, local_}, p_.dp)) {
    const Range mine = shard_.owned(at_.dp);
    master_.assign(shard_.chunk, 0.0f);
    std::copy(params_.begin() + static_cast<std::ptrdiff_t>(mine.begin),
              params_.begin() + static_cast<std::ptrdiff_t>(mine.end), master_.begin());
    grad_shard_.assign(shard_.chunk, 0.0f);
    s_.optimizer = std::make_unique<Optimizer>(o_.optimizer, shard_.chunk);
    round_to(precision_, params_);
  }

  ReducedGradients reduce_gradients(StepFigures& f) override {
    const float average = 1.0f / static_cast<float>(p_.dp);
    const Shard shard = shard_;
    float* out = grad_shard_.data();
    s_.comm.run(g_.dp, reduce_scatter_bytes(shard.padded_size(p_.dp), p_.dp, element_), &f.dp_bytes,
                [&](Communicator& c) {
                  reduce_scatter_values(c, s_.pool, precision_, grads_, average, p_.dp,
                                        {out, shard.chunk}, false);
                });
    const Range mine = shard.owned(at_.dp);
    std::fill(grad_shard_.begin() + static_cast<std::ptrdiff_t>(mine.size()), grad_shard_.end(),
              0.0f);
    unique_shard_.assign(shard.chunk, 0.0f);
    std::copy(unique_.begin() + static_cast<std::ptrdiff_t>(mine.begin),
              unique_.begin() + static_cast<std::ptrdiff_t>(mine.end), unique_shard_.begin());
    return {grad_shard_, unique_shard_, true};
  }

  void apply(std::span<const float> gradients, size_t step, StepFigures& f) override {
    s_.optimizer->step(master_, gradients, step);
    const Shard shard = shard_;
    s_.comm.run(g_.dp, all_gather_bytes(shard.padded_size(p_.dp), p_.dp, element_), &f.dp_bytes,
                [&](Communicator& c) {
                  all_gather_values(c, s_.pool, precision_, master_, p_.dp, params_);
                });
  }

 private:
  Shard shard_;
  std::vector<float> grad_shard_;  // this replica's reduced gradients
};

// ====================================================================== MoE
}  // namespace

size_t moe_parameter_count(const ModelShape& shape, size_t experts) {
  return moe_layout(shape, experts).total;
}

namespace {

// Expert parallel: the mixture-of-experts model, experts spread over every
// rank, tokens dispatched to them and combined back by all-to-all; the other
// parameters data-parallel over every rank.
class Expert final : public LocalModel {
 public:
  explicit Expert(EngineState& state)
      : LocalModel(state),
        world_(state.world),
        ranks_(state.world_ranks()),
        rank_(state.world_rank()),
        w_(o_.shape.width),
        precision_(o_.precision),
        element_(state.element),
        moe_{w_, o_.parallel.experts, o_.parallel.top_k, o_.parallel.capacity_factor},
        mine_(experts_of_rank(rank_, ranks_, o_.parallel.experts)) {
    const MoeLayout layout = moe_layout(o_.shape, moe_.experts);
    parameters_ = layout.total;
    const std::vector<float> full = moe_initial_parameters(layout.total, w_, o_.seed);
    // Replicated parameters first (data-parallel), then this rank's experts.
    for (const MoeLayout::Layer& l : layout.layers) {
      Local x;
      x.mixture = l.mixture;
      x.offset = params_.size();
      const size_t n = l.mixture ? moe_.experts * w_ : w_ * w_ + w_;
      params_.insert(params_.end(), full.begin() + static_cast<std::ptrdiff_t>(l.offset),
                     full.begin() + static_cast<std::ptrdiff_t>(l.offset + n));
      layers_.push_back(x);
    }
    replicated_ = params_.size();
    for (size_t l = 0; l < layers_.size(); ++l) {
      LocalLayer x = full_layer(l, w_, o_.shape.depth, layers_[l].offset);
      if (layers_[l].mixture) x.role = LayerRole::kMixture;
      stack_.push_back(x);
    }
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (!layers_[i].mixture) continue;
      for (size_t e = mine_.begin; e < mine_.end; ++e) {
        layers_[i].expert_offsets.push_back(params_.size());
        const size_t at = layout.layers[i].expert_offsets[e];
        params_.insert(params_.end(), full.begin() + static_cast<std::ptrdiff_t>(at),
                       full.begin() + static_cast<std::ptrdiff_t>(at + w_ * w_ + w_));
      }
    }
    round_to(precision_, params_);
    if (s_.mixed()) master_ = params_;
    grads_.assign(params_.size(), 0.0f);
    // Replicated parameters count once (rank 0) in the global norm; experts
    // are each held once.
    unique_.assign(params_.size(), 1.0f);
    if (rank_ != 0) std::fill(unique_.begin(), unique_.begin() + replicated_, 0.0f);
    s_.optimizer = std::make_unique<Optimizer>(o_.optimizer, params_.size());
  }

  size_t parameters() const override { return parameters_; }
  size_t communicated() const override { return parameters_; }

  double forward_backward(size_t step, StepFigures& f) override {
    micro_ = o_.global_batch / ranks_ / o_.micro_batches;
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    wanted_.assign(moe_.experts, 0.0);
    dropped_ = 0;
    return train_micro_batches(stack_, step, ranks_, rank_, f);
  }

  double bytes_sent(const StepFigures& f, const CommCounters&) const override {
    return f.ep_bytes + f.dp_bytes;
  }
  double global_loss(double local_loss) override {
    return s_.reduce(local_loss, ReduceOp::kSum) / static_cast<double>(ranks_);
  }

  // Routing figures over every rank.
  void add_figures(StepFigures& f) override { add_routing_figures(s_, wanted_, dropped_, f); }

  // The replicated parameters agree.
  bool consistent() override {
    const double hash = static_cast<double>(fnv1a({params_.data(), replicated_}));
    return s_.reduce(hash, ReduceOp::kMin) == s_.reduce(hash, ReduceOp::kMax);
  }

  ReducedGradients reduce_gradients(StepFigures& f) override {
    const float average = 1.0f / static_cast<float>(ranks_);
    if (world_ && ranks_ > 1)
      s_.comm.run(
          world_, all_reduce_bytes(replicated_, ranks_, element_), &f.dp_bytes,
          [&](Communicator& c) {
            all_reduce_values(c, s_.pool, precision_, {grads_.data(), replicated_}, average);
          });
    // An expert's gradient sums every rank's tokens, each rank's loss the
    // mean of its own batch: the global mean divides by the rank count.
    for (size_t i = replicated_; i < grads_.size(); ++i) grads_[i] *= average;
    return {grads_, unique_, true};
  }

  void apply(std::span<const float> gradients, size_t step, StepFigures&) override {
    step_all(gradients, step);
  }

 private:
  struct Local {
    bool mixture = false;
    size_t offset = 0;
    std::vector<size_t> expert_offsets;  // this rank's experts
  };
  // What a mixture layer's backward needs from its forward.
  struct MixtureCache {
    std::vector<float> x;
    GateOutput gate;
    std::vector<Assignment> order;                          // kept assignments in send order
    std::vector<uint32_t> routed;                           // the expert each was sent to
    std::vector<size_t> send_counts;                        // rows per peer
    std::vector<size_t> recv_counts;                        // rows from each peer
    std::vector<std::vector<size_t>> from_peer_per_expert;  // [peer][local expert] rows
    std::vector<float> returned;                            // expert outputs, in send order
    // Per local expert: its rows' inputs, pre-activations, outputs.
    std::vector<std::vector<float>> inputs, pre, outs;
  };
  // -------------------------------------------------------- layer hooks
  void begin_micro_batch() override { mixtures_.clear(); }
  std::vector<float> mixture_forward(const LocalLayer& layer, std::vector<float> x,
                                     StepFigures& f) override {
    return experts_forward(layer.layer, std::move(x), mixtures_[layer.layer], f);
  }
  std::vector<float> mixture_backward(const LocalLayer& layer, std::vector<float> dy,
                                      StepFigures& f) override {
    return experts_backward(layer.layer, dy, mixtures_.at(layer.layer), f);
  }

  // Rows of `values` [n x w] exchanged with every rank: `send_counts[p]` rows
  // to p (consecutive, in peer order), `recv_counts[q]` from q.
  std::vector<float> all_to_all_rows(const std::vector<float>& values,
                                     const std::vector<size_t>& send_counts,
                                     const std::vector<size_t>& recv_counts, StepFigures& f) {
    const size_t received = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0});
    std::vector<float> out(received * w_);
    if (!world_) {
      out = values;
      return out;
    }
    const size_t sent = values.size() / w_;
    WireBuffer send(s_.pool, precision_, sent * w_);
    send.pack(values);
    WireBuffer recv(s_.pool, precision_, received * w_);
    const size_t e = element_;
    std::vector<PeerSend> sends;
    std::vector<PeerRecv> recvs;
    size_t at = 0;
    double bytes = 0;
    for (size_t p = 0; p < ranks_; ++p) {
      sends.push_back({static_cast<int>(p), static_cast<unsigned char*>(send.data()) + at * w_ * e,
                       send_counts[p] * w_});
      if (p != rank_) bytes += static_cast<double>(send_counts[p] * w_ * e);
      at += send_counts[p];
    }
    at = 0;
    for (size_t q = 0; q < ranks_; ++q) {
      recvs.push_back({static_cast<int>(q), static_cast<unsigned char*>(recv.data()) + at * w_ * e,
                       recv_counts[q] * w_});
      at += recv_counts[q];
    }
    const DataType type = wire_type(precision_);
    f.all_to_all_seconds += s_.comm.run(world_, bytes, &f.ep_bytes, [&](Communicator& c) {
      c.batch_send_recv(sends, recvs, type);
    });
    recv.unpack(out, false);
    return out;
  }

  std::vector<float> experts_forward(size_t l, std::vector<float> x, MixtureCache& mc,
                                     StepFigures& f) {
    const size_t E = moe_.experts, K = moe_.top_k;
    const float* gate_weight = params_.data() + layers_[l].offset;
    mc.gate = gate_forward(x, micro_, moe_, gate_weight);
    const DispatchPlan plan = plan_dispatch(mc.gate, moe_);
    for (size_t e = 0; e < E; ++e) wanted_[e] += static_cast<double>(plan.wanted[e]);
    dropped_ += plan.dropped;
    // Send order: by the expert each assignment goes to (so by its owner).
    mc.order = plan.kept;
    mc.routed.clear();
    for (const Assignment& a : mc.order)
      mc.routed.push_back(o_.faults.wrong_expert && world_ ? (a.expert + 1) % E : a.expert);
    std::vector<size_t> index(mc.order.size());
    std::iota(index.begin(), index.end(), size_t{0});
    std::stable_sort(index.begin(), index.end(),
                     [&](size_t a, size_t b) { return mc.routed[a] < mc.routed[b]; });
    std::vector<Assignment> order;
    std::vector<uint32_t> routed;
    for (size_t i : index) {
      order.push_back(mc.order[i]);
      routed.push_back(mc.routed[i]);
    }
    mc.order = std::move(order);
    mc.routed = std::move(routed);
    // Counts first: rows per (peer, expert of that peer).
    std::vector<std::vector<uint64_t>> per_peer_expert(ranks_);
    for (size_t p = 0; p < ranks_; ++p)
      per_peer_expert[p].assign(experts_of_rank(p, ranks_, E).size(), 0);
    for (uint32_t e : mc.routed) {
      const size_t p = owner_of_expert(e, ranks_, E);
      ++per_peer_expert[p][e - experts_of_rank(p, ranks_, E).begin];
    }
    mc.from_peer_per_expert.assign(ranks_, std::vector<size_t>(mine_.size(), 0));
    if (world_) {
      std::vector<std::vector<uint64_t>> incoming(ranks_, std::vector<uint64_t>(mine_.size()));
      std::vector<PeerSend> sends;
      std::vector<PeerRecv> recvs;
      for (size_t p = 0; p < ranks_; ++p) {
        sends.push_back(
            {static_cast<int>(p), per_peer_expert[p].data(), per_peer_expert[p].size()});
        recvs.push_back({static_cast<int>(p), incoming[p].data(), incoming[p].size()});
      }
      double count_bytes = 0;
      for (size_t p = 0; p < ranks_; ++p)
        if (p != rank_) count_bytes += 8.0 * static_cast<double>(per_peer_expert[p].size());
      f.all_to_all_seconds += s_.comm.run(world_, count_bytes, &f.ep_bytes, [&](Communicator& c) {
        c.batch_send_recv(sends, recvs, DataType::kUInt64);
      });
      for (size_t q = 0; q < ranks_; ++q)
        for (size_t j = 0; j < mine_.size(); ++j) mc.from_peer_per_expert[q][j] = incoming[q][j];
    } else {
      for (size_t j = 0; j < mine_.size(); ++j)
        mc.from_peer_per_expert[0][j] = per_peer_expert[0][j];
    }
    mc.send_counts.assign(ranks_, 0);
    mc.recv_counts.assign(ranks_, 0);
    for (size_t p = 0; p < ranks_; ++p)
      for (uint64_t n : per_peer_expert[p]) mc.send_counts[p] += n;
    for (size_t q = 0; q < ranks_; ++q)
      for (size_t n : mc.from_peer_per_expert[q]) mc.recv_counts[q] += n;
    // Dispatch the tokens.
    std::vector<float> rows(mc.order.size() * w_);
    for (size_t i = 0; i < mc.order.size(); ++i)
      std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(mc.order[i].token * w_), w_,
                  rows.begin() + static_cast<std::ptrdiff_t>(i * w_));
    const std::vector<float> received = all_to_all_rows(rows, mc.send_counts, mc.recv_counts, f);
    // Each local expert on its rows (from every peer, in peer order).
    const std::vector<std::vector<size_t>> row_of = expert_rows(mc);
    mc.inputs.assign(mine_.size(), {});
    mc.pre.assign(mine_.size(), {});
    mc.outs.assign(mine_.size(), {});
    std::vector<float> results(received.size());
    for (size_t j = 0; j < mine_.size(); ++j) {
      const size_t n = row_of[j].size();
      std::vector<float>& in = mc.inputs[j];
      in.resize(n * w_);
      for (size_t r = 0; r < n; ++r)
        std::copy_n(received.begin() + static_cast<std::ptrdiff_t>(row_of[j][r] * w_), w_,
                    in.begin() + static_cast<std::ptrdiff_t>(r * w_));
      const float* weight = params_.data() + layers_[l].expert_offsets[j];
      std::vector<float>& pre = mc.pre[j];
      pre.resize(n * w_);
      if (n) linear_forward(in, n, w_, w_, weight, weight + w_ * w_, pre.data());
      round_to(precision_, pre);
      activate(o_.shape.activation, precision_, pre, mc.outs[j]);
      for (size_t r = 0; r < n; ++r)
        std::copy_n(mc.outs[j].begin() + static_cast<std::ptrdiff_t>(r * w_), w_,
                    results.begin() + static_cast<std::ptrdiff_t>(row_of[j][r] * w_));
    }
    // Combine: back to the tokens' ranks, weighted by the gate, plus the residual.
    mc.returned = all_to_all_rows(results, mc.recv_counts, mc.send_counts, f);
    std::vector<float> y = x;
    for (size_t i = 0; i < mc.order.size(); ++i) {
      const Assignment& a = mc.order[i];
      const float g = mc.gate.weight(a.token, a.slot, E, K);
      for (size_t k = 0; k < w_; ++k) y[a.token * w_ + k] += g * mc.returned[i * w_ + k];
    }
    round_to(precision_, y);
    mc.x = std::move(x);
    return y;
  }

  // For each local expert, the indices of its rows in a received buffer
  // (segments per peer, each ordered by expert).
  std::vector<std::vector<size_t>> expert_rows(const MixtureCache& mc) const {
    std::vector<std::vector<size_t>> row_of(mine_.size());
    size_t at = 0;
    for (size_t q = 0; q < ranks_; ++q)
      for (size_t j = 0; j < mine_.size(); ++j)
        for (size_t r = 0; r < mc.from_peer_per_expert[q][j]; ++r) row_of[j].push_back(at++);
    return row_of;
  }

  std::vector<float> experts_backward(size_t l, const std::vector<float>& dy, MixtureCache& mc,
                                      StepFigures& f) {
    const size_t E = moe_.experts, K = moe_.top_k;
    std::vector<float> dx = dy;  // the residual
    std::vector<float> d_weight(micro_ * K, 0.0f);
    std::vector<float> d_rows(mc.order.size() * w_);
    for (size_t i = 0; i < mc.order.size(); ++i) {
      const Assignment& a = mc.order[i];
      const float g = mc.gate.weight(a.token, a.slot, E, K);
      double dot = 0;
      for (size_t k = 0; k < w_; ++k) {
        const float d = dy[a.token * w_ + k];
        d_rows[i * w_ + k] = g * d;
        dot += static_cast<double>(d) * mc.returned[i * w_ + k];
      }
      d_weight[a.token * K + a.slot] = static_cast<float>(dot);
    }
    round_to(precision_, d_rows);
    const std::vector<float> received = all_to_all_rows(d_rows, mc.send_counts, mc.recv_counts, f);
    const std::vector<std::vector<size_t>> row_of = expert_rows(mc);
    std::vector<float> results(received.size());
    for (size_t j = 0; j < mine_.size(); ++j) {
      const size_t n = row_of[j].size();
      if (n == 0) continue;
      std::vector<float> d(n * w_);
      for (size_t r = 0; r < n; ++r)
        std::copy_n(received.begin() + static_cast<std::ptrdiff_t>(row_of[j][r] * w_), w_,
                    d.begin() + static_cast<std::ptrdiff_t>(r * w_));
      activation_backward(o_.shape.activation, precision_, mc.pre[j], mc.outs[j], d);
      const size_t offset = layers_[l].expert_offsets[j];
      std::vector<float> d_in(n * w_);
      linear_backward(mc.inputs[j], d, n, w_, w_, params_.data() + offset, grads_.data() + offset,
                      grads_.data() + offset + w_ * w_, d_in.data());
      round_to(precision_, {grads_.data() + offset, w_ * w_ + w_});
      round_to(precision_, d_in);
      for (size_t r = 0; r < n; ++r)
        std::copy_n(d_in.begin() + static_cast<std::ptrdiff_t>(r * w_), w_,
                    results.begin() + static_cast<std::ptrdiff_t>(row_of[j][r] * w_));
    }
    const std::vector<float> back = all_to_all_rows(results, mc.recv_counts, mc.send_counts, f);
    for (size_t i = 0; i < mc.order.size(); ++i)
      for (size_t k = 0; k < w_; ++k) dx[mc.order[i].token * w_ + k] += back[i * w_ + k];
    float* gate_grad = grads_.data() + layers_[l].offset;
    gate_backward(mc.x, mc.gate, moe_, params_.data() + layers_[l].offset, d_weight, gate_grad,
                  dx.data());
    round_to(precision_, {gate_grad, E * w_});
    round_to(precision_, dx);
    return dx;
  }

  Communicator* world_;
  size_t ranks_, rank_;
  size_t w_;
  Precision precision_;
  size_t element_;
  MoeShape moe_;
  Range mine_;
  size_t parameters_ = 0;
  std::vector<Local> layers_;
  std::vector<LocalLayer> stack_;            // the layers the forward and backward run through
  std::map<size_t, MixtureCache> mixtures_;  // this micro-batch's, by layer
  size_t replicated_ = 0;
  std::vector<float> unique_;  // each element's weight in the global norm
  size_t micro_ = 0;
  std::vector<double> wanted_;
  size_t dropped_ = 0;
};

std::unique_ptr<StrategyHooks> make_expert(EngineState& state) {
  return std::make_unique<Expert>(state);
}

// The tensor x pipeline x data strategy's hooks: ZeRO-1 over the data group or not.
MakeStrategy make_grid(const ParallelGroups& groups, size_t rank, const ParallelOptions& layout) {
  if (layout.zero1 && layout.dp > 1)
    return [&groups, rank](EngineState& state) {
      return std::make_unique<GridZero1>(state, groups, rank);
    };
  return [&groups, rank](EngineState& state) {
    return std::make_unique<GridReplicas>(state, groups, rank);
  };
}

void check_size(Communicator* c, size_t expected, const char* group) {
  if (expected > 1 && (!c || static_cast<size_t>(c->size()) != expected))
    throw UsageError(fmt::format("the {} group has {} ranks, the layout needs {}", group,
                                 c ? c->size() : 0, expected));
}

}  // namespace

TrainResult train_parallel(const ParallelGroups& groups, const TrainOptions& options,
                           const std::function<void(const StepFigures&)>& on_step) {
  if (!groups.world) throw UsageError("a model-parallel run needs a world communicator");
  if (groups.world->memory_kind() != MemoryKind::kHost)
    throw UsageError(
        "the training probe's GPU path (cuBLAS) is not built yet; run it over the mpi backend");
  const size_t ranks = static_cast<size_t>(groups.world->size());
  // The batch divides over the data-parallel replicas (every rank for ep).
  const size_t replicas = options.strategy == Strategy::kExpert ? ranks : options.parallel.dp;
  std::string problem = validate_parallel(options, ranks);
  if (problem.empty()) problem = validate(options, replicas);
  if (!problem.empty()) throw UsageError(problem);
  if (options.strategy == Strategy::kExpert)
    return run_engine(options, groups.world, true, make_expert, on_step);
  check_size(groups.tp, options.parallel.tp, "tensor-parallel");
  check_size(groups.pp, options.parallel.pp, "pipeline");
  check_size(groups.dp, options.parallel.dp, "data-parallel");
  const size_t rank = static_cast<size_t>(groups.world->rank());
  if (options.model == TrainedModel::kTransformer)
    return run_engine(options, groups.world, true, make_transformer_tensor(groups, rank), on_step);
  return run_engine(options, groups.world, true, make_grid(groups, rank, options.parallel),
                    on_step);
}

TrainResult train_parallel_single(const TrainOptions& options,
                                  const std::function<void(const StepFigures&)>& on_step) {
  TrainOptions single = options;
  single.faults = Faults{};
  single.micro_batches = options.reference_micro_batches;
  single.parallel.tp = single.parallel.pp = single.parallel.dp = 1;
  single.parallel.chunks = 1;
  single.parallel.stage_blocks.clear();
  single.parallel.zero1 = false;
  single.parallel.schedule = PipelineSchedule::kGpipe;
  std::string problem = validate(single, 1);
  if (problem.empty()) problem = validate_parallel(single, 1);
  if (!problem.empty()) throw UsageError(problem);
  if (options.strategy == Strategy::kExpert)
    return run_engine(single, nullptr, true, make_expert, on_step);
  const ParallelGroups none;
  if (options.model == TrainedModel::kTransformer)
    return run_engine(single, nullptr, true, make_transformer_tensor(none, 0), on_step);
  return run_engine(single, nullptr, true, make_grid(none, 0, single.parallel), on_step);
}

}  // namespace ccscope::training_probe
