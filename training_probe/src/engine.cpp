#include "engine.h"

#include <optional>
#include <stdexcept>

namespace ccscope::training_probe {

Communication::Communication(Communicator* world, const TrainOptions& options, bool asynchronous) {
  if (!world) return;
  worker_ = std::make_unique<CommWorker>(*world, options.timeout, asynchronous);
  worker_->on_timeout(options.on_timeout);
}

double Communication::run(Communicator* group, double bytes, double* counter,
                          std::function<void(Communicator&)> operation) {
  if (!worker_) return 0;  // the single-rank reference: nothing to communicate
  if (!group) throw std::logic_error("a model-parallel operation over a group not given");
  const auto start = Clock::now();
  const size_t ticket =
      worker_->submit([group, op = std::move(operation)](Communicator&) { op(*group); }, bytes);
  worker_->wait(ticket);
  if (counter) *counter += bytes;
  return seconds_between(start, Clock::now());
}

double Communication::reduce(Communicator* group, double value, ReduceOp op) {
  if (!group || !worker_) return value;
  double cell = value;
  run(group, all_reduce_bytes(1, static_cast<size_t>(group->size()), 8), nullptr,
      [&](Communicator& c) { c.all_reduce(&cell, &cell, 1, DataType::kFloat64, op); });
  return cell;
}

EngineState::EngineState(const TrainOptions& o, Communicator* world_communicator, bool asynchronous)
    : options(o),
      world(world_communicator),
      precision(o.precision),
      element(element_bytes(o.precision)),
      samples(dataset_size(o)),
      data(o.model == TrainedModel::kMlp ? make_teacher_dataset(samples, o.shape.width, o.seed)
                                         : SyntheticDataset{}),
      tokens(o.model == TrainedModel::kTransformer
                 ? make_token_dataset(samples, o.transformer, o.seed)
                 : TokenDataset{}),
      scaler(o.loss_scaler),
      comm(world_communicator, o, asynchronous) {}

std::vector<size_t> EngineState::step_samples(size_t step, size_t replicas, size_t replica,
                                              size_t per_replica) const {
  return batch_samples(samples, replicas, replica, per_replica, options.seed, step,
                       !options.faults.sampler_not_reseeded);
}

std::vector<float> LocalModel::load_batch(std::span<const size_t> samples) {
  gather_batch(s_.data, samples, s_.inputs, s_.targets);
  std::vector<float> x = s_.inputs;
  round_to(s_.precision, x);
  return x;
}

double LocalModel::batch_loss(std::span<const float> output, size_t batch, size_t batch_total,
                              const StepFigures& f, std::vector<float>& grad) const {
  return mse_loss(output, s_.targets, batch, o_.shape.width, batch_total,
                  static_cast<float>(f.loss_scale), grad);
}

std::vector<LayerSlice> model_units(const TrainOptions& o) {
  return o.model == TrainedModel::kTransformer ? transformer_slices(o.transformer)
                                               : layer_slices(o.shape);
}

std::vector<float> initial_model_parameters(const TrainOptions& o) {
  return o.model == TrainedModel::kTransformer
             ? transformer_initial_parameters(o.transformer, o.seed)
             : initial_parameters(o.shape, o.seed);
}

LocalLayer whole_unit(const TrainOptions& o, size_t unit, const LayerSlice& slice) {
  if (o.model == TrainedModel::kMlp)
    return full_layer(unit, o.shape.width, o.shape.depth, slice.begin());
  LocalLayer x;
  x.layer = unit;
  x.offset = slice.begin();
  x.weight_count = slice.end() - slice.begin();
  return x;
}

namespace {

// The transformer's units through a strategy's layer hooks.
class UnitsThroughLayers final : public UnitHooks {
 public:
  UnitsThroughLayers(std::span<const LocalLayer> units, LayerHooks& hooks)
      : units_(units), hooks_(hooks) {}
  const float* forward_parameters(size_t u) override {
    return hooks_.forward_parameters(units_[u]);
  }
  void after_forward(size_t u) override { hooks_.after_forward(units_[u]); }
  const float* backward_parameters(size_t u) override {
    return hooks_.backward_parameters(units_[u]);
  }
  float* gradients(size_t u) override { return hooks_.gradients(units_[u]); }
  void after_backward(size_t u) override { hooks_.after_backward(units_[u]); }

 private:
  std::span<const LocalLayer> units_;
  LayerHooks& hooks_;
};

}  // namespace

double LocalModel::train_micro_batches(std::span<const LocalLayer> layers, size_t step,
                                       size_t replicas, size_t replica, StepFigures& f) {
  const size_t per_replica = o_.global_batch / replicas;
  const size_t micro = per_replica / o_.micro_batches;
  const std::vector<size_t> samples = s_.step_samples(step, replicas, replica, per_replica);
  if (transformer_) {
    UnitsThroughLayers units(layers, *this);
    double local_loss = 0;
    for (size_t m = 0; m < o_.micro_batches; ++m) {
      const std::vector<uint32_t> sequences =
          gather_sequences(s_.tokens, std::span(samples).subspan(m * micro, micro));
      begin_micro_batch();
      begin_backward(m + 1 == o_.micro_batches);
      size_t held = 0;
      local_loss += transformer_->train_micro_batch(sequences, micro, per_replica,
                                                    static_cast<float>(f.loss_scale), units,
                                                    tensor_group_, &held);
      const double held_bytes = static_cast<double>(held * s_.element);
      if (held_bytes > f.peak_activation_bytes) f.peak_activation_bytes = held_bytes;
    }
    return local_loss;
  }
  const LayerPass pass{o_.shape.activation, s_.precision, micro};
  double local_loss = 0;
  for (size_t m = 0; m < o_.micro_batches; ++m) {
    std::vector<float> x = load_batch(std::span(samples).subspan(m * micro, micro));
    begin_micro_batch();
    LayerCache cache;
    const std::vector<float> y = forward_layers(layers, std::move(x), pass, cache, *this, f);
    std::vector<float> grad;
    local_loss += batch_loss(y, micro, per_replica, f, grad);
    begin_backward(m + 1 == o_.micro_batches);
    backward_layers(layers, std::move(grad), pass, cache, *this, f);
  }
  return local_loss;
}

namespace {

class Engine {
 public:
  Engine(const TrainOptions& options, Communicator* world, bool asynchronous,
         const MakeStrategy& make)
      : state_(options, world, asynchronous), strategy_(make(state_)) {}
  // The communication thread ends first: no queued operation outlives the
  // strategy's buffers it writes into.
  ~Engine() { state_.comm.stop(); }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  TrainResult run(const std::function<void(const StepFigures&)>& on_step) {
    TrainResult result;
    result.parameters = strategy_->parameters();
    result.communicated_elements = strategy_->communicated();
    for (size_t step = 0; step < state_.options.steps; ++step) {
      StepFigures f = one_step(step);
      if (on_step) on_step(f);
      result.steps.push_back(f);
    }
    result.memory = strategy_->memory();
    result.final_parameters = strategy_->final_parameters();
    result.first_gradients = std::move(first_gradients_);
    result.first_gradients_step = first_gradients_step_.value_or(0);
    result.first_grad_norms = first_norms_;
    strategy_->add_results(result);
    return result;
  }

 private:
  StepFigures one_step(size_t step) {
    StepFigures f;
    f.step = step;
    f.loss_scale = state_.precision == Precision::kFloat16 ? state_.scaler.scale() : 1.0;
    const auto start = Clock::now();
    const double local_loss = strategy_->forward_backward(step, f);
    const std::optional<std::span<const float>> applied = update(f);
    f.step_seconds = seconds_between(start, Clock::now());
    CommCounters c = state_.comm.take();
    strategy_->add_own_communication(c);
    f.comm_seconds = c.busy_seconds;
    f.exposed_comm_seconds = c.exposed_seconds;
    f.bytes_sent = strategy_->bytes_sent(f, c);
    f.compute_seconds = f.step_seconds - f.exposed_comm_seconds;
    f.loss = strategy_->global_loss(local_loss);
    strategy_->add_figures(f);
    if (state_.options.check_consistency) f.consistent = strategy_->consistent();
    if (state_.options.capture_first_gradients && applied && !first_gradients_step_) {
      first_gradients_ = strategy_->gathered_gradients(*applied);
      first_gradients_step_ = step;
      // The norm clipping scaled by, as each rank computed it.
      first_norms_ = {state_.reduce(f.grad_norm, ReduceOp::kMin),
                      state_.reduce(f.grad_norm, ReduceOp::kMax)};
    }
    state_.comm.take();  // the loss and the checks are not the step's
    return f;
  }

  // After backward: fp16's overflow check and unscaling, clipping, the
  // optimizer. Returns the gradients the optimizer took (held until the next
  // step zeroes them), none when fp16 skipped the step.
  std::optional<std::span<const float>> update(StepFigures& f) {
    const ReducedGradients g = strategy_->reduce_gradients(f);
    const StepEnd end{
        state_.precision, state_.options, state_.scaler,
        [this, &g](double v) { return g.disjoint ? state_.reduce(v, ReduceOp::kSum) : v; },
        [this](double v) { return state_.reduce(v, ReduceOp::kMax); }};
    HostGradients host(g.values, g.unique);
    if (!end.prepare(g.device ? *g.device : static_cast<GradientArithmetic&>(host), f))
      return std::nullopt;
    strategy_->apply(g.values, ++applied_steps_, f);
    return g.values;
  }

  EngineState state_;
  std::unique_ptr<StrategyHooks> strategy_;
  size_t applied_steps_ = 0;
  std::vector<float> first_gradients_;
  std::optional<size_t> first_gradients_step_;
  std::pair<double, double> first_norms_{0, 0};
};

}  // namespace

TrainResult run_engine(const TrainOptions& options, Communicator* world, bool asynchronous,
                       const MakeStrategy& make,
                       const std::function<void(const StepFigures&)>& on_step) {
  Engine engine(options, world, asynchronous, make);
  return engine.run(on_step);
}

}  // namespace ccscope::training_probe
