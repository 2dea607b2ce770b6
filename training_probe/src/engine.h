#pragma once
// The training engine, written once for every strategy: the step loop (the
// batch's forward and backward, the gradients' reduction, fp16's overflow
// check and clipping, the optimizer, the figures, the loss, the consistency
// check) over the state every strategy shares (data, loss scaler, optimizer,
// communication thread). What a strategy changes is a StrategyHooks object,
// chosen once when the run starts:
//
//   trainer.cpp           Replicated (single, DDP), Zero1, Zero2, Zero3
//   parallel_trainer.cpp  Grid (tensor x pipeline x data; GridZero1 with ZeRO-1 over
//                         the data group), Expert
//
// The layers' forward and backward are layers.h's, written once too; a
// strategy's LayerHooks say where each layer's parameters and gradients are.
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/training_probe/comm_worker.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/loss_scaler.h"
#include "ccscope/training_probe/optimizer.h"
#include "ccscope/training_probe/trainer.h"
#include "layers.h"
#include "wire.h"

namespace ccscope::training_probe {

// The communication thread (comm_worker.h), absent in the single-rank
// reference: operations queued to overlap (submit), or run one at a time
// over a group's communicator with the run's timeout (run).
class Communication {
 public:
  Communication(Communicator* world, const TrainOptions& options, bool asynchronous);
  bool active() const { return worker_ != nullptr; }
  // Queues `operation` on the world communicator; returns its ticket.
  size_t submit(CommWorker::Operation operation, double bytes) {
    return worker_->submit(std::move(operation), bytes);
  }
  void wait(size_t ticket) { worker_->wait(ticket); }
  void wait_all() {
    if (worker_) worker_->wait_all();
  }
  // Runs `operation` over `group`, counting `bytes` into `counter`; returns
  // the seconds the caller waited.
  double run(Communicator* group, double bytes, double* counter,
             std::function<void(Communicator&)> operation);
  // A scalar reduced over `group` (the value itself without one).
  double reduce(Communicator* group, double value, ReduceOp op);
  // Counters since the last take (once per step).
  CommCounters take() { return worker_ ? worker_->take_counters() : CommCounters{}; }
  // Ends the thread: before the buffers its operations write into go.
  void stop() { worker_.reset(); }

 private:
  std::unique_ptr<CommWorker> worker_;
};

// What every strategy shares.
struct EngineState {
  EngineState(const TrainOptions& options, Communicator* world, bool asynchronous);
  bool mixed() const { return precision != Precision::kFloat32; }
  // The world's rank count and this rank (1 and 0 without a communicator).
  size_t world_ranks() const { return world ? static_cast<size_t>(world->size()) : 1; }
  size_t world_rank() const { return world ? static_cast<size_t>(world->rank()) : 0; }
  double reduce(double value, ReduceOp op) { return comm.reduce(world, value, op); }
  // This step's samples on data-parallel replica `replica` of `replicas`.
  std::vector<size_t> step_samples(size_t step, size_t replicas, size_t replica,
                                   size_t per_replica) const;

  const TrainOptions& options;
  Communicator* world;
  Precision precision;
  size_t element;  // bytes per element in the compute format
  size_t samples;  // the data set's
  // The data: the MLP's, or the transformer's.
  SyntheticDataset data;
  TokenDataset tokens;
  LossScaler scaler;
  ScratchPool pool;
  std::unique_ptr<Optimizer> optimizer;  // sized by the strategy over what it steps
  std::vector<float> inputs, targets;    // the micro-batch being trained
  Communication comm;
};

// A strategy's gradients after its reduction, as the step's end sees them:
// `unique` weighs each element's square in the global norm (0 for a copy
// another rank counts; empty: all 1); `disjoint` when ranks hold different
// parts, whose squares then sum over ranks.
struct ReducedGradients {
  std::span<float> values;
  std::span<const float> unique;
  bool disjoint = false;
  // The GPU path's gradients, in device memory (values is then empty): the
  // step's end works through it.
  GradientArithmetic* device = nullptr;
};

// What every data-parallel strategy answers alike, host or device: the
// global batch's mean loss from this rank's share of `replicas`, and whether
// every rank holds the same `parameters` (a hash compared over the world).
inline double mean_loss_over_replicas(EngineState& s, double local_loss, size_t replicas) {
  return s.reduce(local_loss, ReduceOp::kSum) / static_cast<double>(replicas);
}
inline bool same_on_every_rank(EngineState& s, std::span<const float> parameters) {
  const double hash = static_cast<double>(fnv1a(parameters));
  return s.reduce(hash, ReduceOp::kMin) == s.reduce(hash, ReduceOp::kMax);
}

// What a strategy changes in the step. Every rank calls the hooks in the
// same order, so collectives inside them match.
class StrategyHooks {
 public:
  virtual ~StrategyHooks() = default;
  virtual size_t parameters() const = 0;    // Psi
  virtual size_t communicated() const = 0;  // Psi padded as the strategy pads it
  // Forward and backward over this step's batch, every micro-batch, into the
  // gradients; returns this rank's share of the loss.
  virtual double forward_backward(size_t step, StepFigures& f) = 0;
  // After backward: the gradients averaged over the data-parallel ranks.
  virtual ReducedGradients reduce_gradients(StepFigures& f) = 0;
  // The optimizer over `gradients` (reduce_gradients' values, unscaled and
  // clipped), then whatever brings the parameters back together.
  virtual void apply(std::span<const float> gradients, size_t step, StepFigures& f) = 0;
  // The bytes this step sent per rank.
  virtual double bytes_sent(const StepFigures& f, const CommCounters& counters) const = 0;
  // The global batch's mean loss from this rank's share.
  virtual double global_loss(double local_loss) = 0;
  // Figures a strategy adds after the step (expert routing).
  virtual void add_figures(StepFigures&) {}
  // Communication the strategy timed itself, not on the communication thread
  // (the GPU path's: on its communication stream, by CUDA events).
  virtual void add_own_communication(CommCounters&) {}
  // What a strategy adds to the run's result at its end (the GPU path's measured memory).
  virtual void add_results(TrainResult&) const {}
  // Whether the ranks that should hold the same parameters do.
  virtual bool consistent() = 0;
  virtual MemoryFootprint memory() const = 0;
  // The full parameters on every rank (empty where the strategy does not gather them).
  virtual std::vector<float> final_parameters() { return {}; }
  // `reduced` (reduce_gradients' values, as the optimizer took them) whole on
  // every rank: a collective where they are sharded; empty where the strategy
  // does not gather them.
  virtual std::vector<float> gathered_gradients(std::span<const float> /*reduced*/) { return {}; }
};

// What most strategies hold: this rank's parameters in the compute format at
// each local layer's offset, their gradients and (mixed precision, or a
// shard) the float32 master weights. The layer hooks read and write them.
class LocalModel : public StrategyHooks, public LayerHooks {
 public:
  explicit LocalModel(EngineState& state) : s_(state), o_(state.options) {}
  const float* forward_parameters(const LocalLayer& layer) override {
    return params_.data() + layer.offset;
  }
  const float* backward_parameters(const LocalLayer& layer) override {
    return params_.data() + layer.offset;
  }
  float* gradients(const LocalLayer& layer) override { return grads_.data() + layer.offset; }
  // What this rank keeps between steps, in the bytes of the formats the
  // strategy holds them in (the CPU path stores 16-bit values in floats).
  MemoryFootprint memory() const override {
    return held_bytes(s_.element, held_parameters(), held_gradients(), *s_.optimizer,
                      master_.size(), s_.mixed());
  }

 protected:
  // The step's batch, split over `replicas` data-parallel ranks (this one
  // `replica`), through `layers` one micro-batch after another: forward,
  // loss, backward. Returns this rank's share of the loss.
  double train_micro_batches(std::span<const LocalLayer> layers, size_t step, size_t replicas,
                             size_t replica, StepFigures& f);
  // Rows `samples` of the data set into s_.inputs and s_.targets; returns the
  // input rounded to the compute format.
  std::vector<float> load_batch(std::span<const size_t> samples);
  // The loss of `output` against s_.targets (`batch` rows of a batch of
  // `batch_total`) and its gradient, times fp16's loss scale.
  double batch_loss(std::span<const float> output, size_t batch, size_t batch_total,
                    const StepFigures& f, std::vector<float>& grad) const;
  // Before each micro-batch's forward, and before its backward (the
  // transformer's: before its forward too, which runs with its backward).
  virtual void begin_micro_batch() {}
  virtual void begin_backward(bool /*last_micro_batch*/) {}
  virtual size_t held_parameters() const { return params_.size(); }
  virtual size_t held_gradients() const { return grads_.size(); }
  // The optimizer on unsharded parameters.
  void step_all(std::span<const float> gradients, size_t step) {
    step_parameters(*s_.optimizer, s_.precision, params_, master_, gradients, step);
  }

  EngineState& s_;
  const TrainOptions& o_;
  // --model transformer: the model train_micro_batches runs over `layers`
  // (its units, whole_unit's), and its tensor group (null: one rank).
  std::unique_ptr<Transformer> transformer_;
  TensorGroup* tensor_group_ = nullptr;
  std::vector<float> params_;  // this rank's parameters in the compute format
  std::vector<float> grads_;   // their gradients
  std::vector<float> master_;  // float32 master weights: of params_ (mixed precision) or a shard
};

// The model's units as ranges of its flat vector (the MLP's layers; the
// transformer's embeddings, blocks, final norm and head): DDP's buckets and
// ZeRO's shards cut along them. Its initial parameters. Unit `unit` whole, as
// the layer hooks see it (the transformer's: all of it the "weight").
std::vector<LayerSlice> model_units(const TrainOptions& options);
std::vector<float> initial_model_parameters(const TrainOptions& options);
LocalLayer whole_unit(const TrainOptions& options, size_t unit, const LayerSlice& slice);

using MakeStrategy = std::function<std::unique_ptr<StrategyHooks>(EngineState&)>;

// Runs the steps of the strategy `make` builds over `world` (null: the
// single-rank reference). `asynchronous`: communication on its own thread.
TrainResult run_engine(const TrainOptions& options, Communicator* world, bool asynchronous,
                       const MakeStrategy& make,
                       const std::function<void(const StepFigures&)>& on_step);

}  // namespace ccscope::training_probe
