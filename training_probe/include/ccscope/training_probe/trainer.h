#pragma once
// The training loop under each strategy, over Communicator (one code path for
// every backend whose memory is host memory; the GPU path is not built yet).
// One engine runs them all (src/engine.h); each strategy is a set of hooks.
//
//   single  one rank, the whole global batch: the reference.
//   ddp     PyTorch DDP: gradients averaged by all-reduce in buckets filled in
//           reverse layer order, each launched as backward completes it
//           (overlap), gradient accumulation with no_sync on all but the last
//           micro-batch, clipping by global norm.
//   zero1   DeepSpeed ZeRO stage 1: full gradients kept, reduce-scattered per
//           bucket after backward; each rank steps its shard of the optimizer
//           state; updated shards all-gathered.
//   zero2   stage 2: each bucket reduce-scattered as backward fills it, only
//           the gradient shard kept.
//   zero3   stage 3 (FSDP FULL_SHARD, one unit per layer): parameters sharded;
//           each layer all-gathered before its forward and again before its
//           backward (the next one prefetched while this one computes), freed
//           after use; its gradient reduce-scattered as soon as it is computed.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/training_probe/accounting.h"
#include "ccscope/training_probe/loss_scaler.h"
#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/optimizer.h"
#include "ccscope/training_probe/pipeline.h"
#include "ccscope/training_probe/transformer.h"

namespace ccscope::training_probe {

// Deliberately broken variants, for the tests that prove the checks can fail.
struct Faults {
  bool sum_not_average = false;               // gradients summed across ranks, not averaged
  bool sampler_not_reseeded = false;          // set_epoch never called
  std::optional<size_t> unreduced_bucket;     // this bucket is never reduced
  bool clip_per_shard = false;                // ZeRO: clip each shard by its own norm
  std::optional<size_t> dropped_micro_batch;  // pipeline: this micro-batch's gradient is dropped
  bool skipped_tp_all_reduce = false;         // tensor parallel: the backward all-reduce skipped
  bool wrong_expert = false;                  // expert parallel: tokens sent to expert e + 1
};

// The model-parallel strategies' layout (parallel_trainer.h). Ranks form a
// tp x dp x pp grid, tensor-parallel fastest (rank = (pp_index * dp +
// dp_index) * tp + tp_index, Megatron-LM's order), so that with ranks placed
// node by node a tensor-parallel group stays inside a node and the pipeline
// runs across nodes.
struct ParallelOptions {
  size_t tp = 1;  // tensor-parallel degree (Megatron column/row pairs)
  size_t pp = 1;  // pipeline stages
  size_t dp = 1;  // data-parallel replicas of the tp x pp model
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  size_t chunks = 1;                 // interleaved: model chunks per stage (virtual stages)
  std::vector<size_t> stage_blocks;  // blocks per virtual stage; empty: balanced by parameters
  bool zero1 = false;                // ZeRO-1 over the data-parallel group
  // Expert parallel (every odd layer but the last is a mixture of experts;
  // experts spread over every rank, the rest data-parallel).
  size_t experts = 0;
  size_t top_k = 1;
  double capacity_factor = 1.25;  // 0: no limit
};

// The model trained: the MLP (`shape`) or the transformer (`transformer`).
enum class TrainedModel { kMlp, kTransformer };

struct TrainOptions {
  Strategy strategy = Strategy::kDdp;
  TrainedModel model = TrainedModel::kMlp;
  ModelShape shape;
  TransformerShape transformer;  // --model transformer
  // The transformer's tensor parallel: sequence parallelism; any strategy: recomputation.
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  Precision precision = Precision::kFloat32;
  OptimizerOptions optimizer;
  size_t global_batch = 128;  // samples per optimizer step, all ranks together
  size_t micro_batches = 1;   // gradient accumulation steps per optimizer step
  size_t steps = 100;
  size_t dataset_samples = 0;  // 0: 8 global batches (an epoch every 8 steps)
  uint64_t seed = 1;
  size_t bucket_bytes = 25u << 20;       // DDP bucket_cap_mb, ZeRO reduce_bucket_size
  size_t first_bucket_bytes = 1u << 20;  // DDP's first bucket
  bool overlap = true;              // communication on its own thread (DDP --no-overlap: false)
  bool prefetch = true;             // ZeRO-3: gather the next layer while this one computes
  std::optional<double> grad_clip;  // max global norm
  LossScalerOptions loss_scaler;    // fp16 only
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // any one wait
  bool check_consistency = false;  // after each step, compare parameters across ranks
  // The backend the run's communication travels over, as --backend names it:
  // "" the host default; a device backend (nccl) is the GPU path (train_on_device).
  std::string backend;
  // The GPU path: every rank its own NCCL_HOSTID (--isolate-ranks), so that
  // ranks of one node may share a GPU (NCCL then connects them as if remote).
  bool isolate_ranks = false;
  // The GPU path (train_on_device): the optimizer step on the host over
  // fp32 master weights and optimizer state there, gradients copied down and
  // parameters up each step (DeepSpeed's offload_optimizer.device "cpu").
  bool offload_optimizer = false;
  bool tf32 = false;  // the GPU path's fp32 GEMMs with TF32 inputs (off for the loss check)
  // --check-loss: keep the first applied step's gradients as the optimizer saw
  // them (reduced, unscaled, clipped), gathered whole on every rank, and the
  // global norm clipping used there, as the ranks computed it.
  bool capture_first_gradients = false;
  // The model-parallel single-rank reference's micro-batches (train_parallel_single,
  // the GPU path's ep reference): 1, or more for a 16-bit run's reordered
  // reference (equivalence.h: rounding_horizon).
  size_t reference_micro_batches = 1;
  // Called (from the training thread) when a communication wait times out,
  // before anything is unwound: the verb ends the job there (MPI_Abort), since
  // the communication thread is still inside the backend. Unset: TimeoutError.
  std::function<void(const std::string&)> on_timeout;
  Faults faults;
  ParallelOptions parallel;  // kTensor, kPipeline, kExpert, kHybrid
};

// The data set's size: dataset_samples, or 8 global batches when 0.
inline size_t dataset_size(const TrainOptions& options) {
  return options.dataset_samples ? options.dataset_samples : 8 * options.global_batch;
}

// Why options cannot run ("global batch 100 does not divide over 3 ranks");
// "" when they can.
std::string validate(const TrainOptions& options, size_t ranks);

// The global batch of a run that does not set one: `preferred` rounded up to a multiple of
// `multiple` (the ranks, or data-parallel replicas, times the micro-batches), so that the
// defaults run at any rank count. Both must be at least 1.
size_t default_global_batch(size_t preferred, size_t multiple);

// One optimizer step on this rank (times are this rank's; the caller reduces
// over ranks).
struct StepFigures {
  size_t step = 0;  // from 0
  double loss = 0;  // the global batch's mean loss (same on every rank)
  double step_seconds = 0;
  double compute_seconds = 0;       // step minus exposed communication
  double comm_seconds = 0;          // time communication operations ran
  double exposed_comm_seconds = 0;  // time the training thread waited for them
  double bytes_sent = 0;            // nccl-tests' bytes per rank of this step's operations
  double grad_norm = 0;             // global gradient norm before clipping (0 when not clipping)
  double loss_scale = 1;            // fp16's scale this step used
  bool skipped = false;             // fp16 overflow: the step was not applied
  bool consistent = true;           // check_consistency: parameters agreed across ranks
  // Model-parallel strategies, this rank's:
  double tp_bytes = 0, pp_bytes = 0, dp_bytes = 0, ep_bytes = 0;  // per group
  double pipeline_seconds = 0;       // from the first pass to the pipeline's flush
  double pipeline_wait_seconds = 0;  // of it, waiting for pipeline transfers and the flush
  double pipeline_busy_seconds = 0;  // of it, running passes
  size_t peak_in_flight = 0;         // most micro-batches' activations held at once
  double peak_activation_bytes = 0;  // their bytes
  double all_to_all_seconds = 0;     // expert parallel: dispatch and combine
  size_t routed_tokens = 0;   // expert parallel: (token, expert) assignments wanted, all ranks
  size_t dropped_tokens = 0;  //   of them dropped for capacity, all ranks
  double load_imbalance = 0;  //   max / mean tokens per expert, all ranks
  // The GPU path with offload_optimizer: bytes copied between device and host
  // this step (gradients down, parameters up), the copies' time on the device
  // (CUDA events) and the host optimizer step's.
  double offload_bytes = 0;
  double offload_copy_seconds = 0;
  double host_optimizer_seconds = 0;
};

struct TrainResult {
  std::vector<StepFigures> steps;
  size_t parameters = 0;                // Psi
  size_t communicated_elements = 0;     // Psi padded as the strategy pads it
  MemoryFootprint memory;               // bytes this rank held for the three
  std::vector<float> final_parameters;  // gathered, on every rank
  // capture_first_gradients: those gradients and their step (empty where the
  // strategy does not gather them: tp, pp, 3d, ep).
  std::vector<float> first_gradients;
  size_t first_gradients_step = 0;
  std::pair<double, double> first_grad_norms{0, 0};  // smallest and largest over ranks
  // The GPU path: this rank's device memory, measured: the high-water mark of
  // what the probe allocated (its allocator) and of what the GPU had in use
  // (cudaMemGetInfo's total - free, taken at each step's fullest point: the
  // CUDA context, NCCL's and cuBLAS's buffers included). 0 on the host path.
  double device_peak_bytes = 0;
  double device_used_bytes = 0;
};

// Each step's loss, in step order (the curve compare_losses takes).
std::vector<double> losses(const TrainResult& result);

// Runs the training loop. Every rank of `communicator` must call it with the
// same options. `on_step` (optional) sees each step as it completes, for rows
// flushed as measured. Throws UsageError for options that cannot run.
TrainResult train(Communicator& communicator, const TrainOptions& options,
                  const std::function<void(const StepFigures&)>& on_step = {});

// The GPU path (single or DDP, the MLP): parameters, gradients, activations
// and optimizer state in the device memory of `device`'s GPU, GEMMs through
// cuBLAS, the rest as kernels; gradient buckets all-reduced over `device` (a
// device communicator, NCCL) on its stream while backward runs; scalars (the
// loss, fp16's overflow, clipping's norm, the checks) over `control`, a host
// communicator over the same ranks. Throws UsageError for what the GPU path
// does not run (device_training_unsupported) or where it was not built.
TrainResult train_on_device(Communicator& control, Communicator& device,
                            const TrainOptions& options,
                            const std::function<void(const StepFigures&)>& on_step = {});
// The GPU path's single-rank reference of `options` on this process's GPU
// (the current CUDA device): the same kernels and GEMMs as the run it is
// compared with, as train_single is the host path's; the optimizer on the
// device (an offloaded run is held against it).
TrainResult train_single_on_device(const TrainOptions& options,
                                   const std::function<void(const StepFigures&)>& on_step = {});
// The GPU path of tp and 3d without a pipeline (the MLP's Megatron pairs over
// a tensor x data grid): the tensor group's all-reduces and the data group's
// over `on_device`'s device communicators (NCCL), scalars over `host`'s
// (parallel_trainer.h's ParallelGroups; a group of one may be null).
struct ParallelGroups;
TrainResult train_grid_on_device(const ParallelGroups& host, const ParallelGroups& on_device,
                                 const TrainOptions& options,
                                 const std::function<void(const StepFigures&)>& on_step = {});
// The GPU path of ep (the mixture-of-experts model): tokens to their experts
// and back by all-to-all over `device` (NCCL), the replicated gradients
// all-reduced over it, scalars and the split sizes over `control` (a host
// communicator over the same ranks). Both null: the single-GPU reference with
// every expert.
TrainResult train_expert_on_device(Communicator* control, Communicator* device,
                                   const TrainOptions& options,
                                   const std::function<void(const StepFigures&)>& on_step = {});
// Why `options` cannot run on the GPU path ("" when they can).
std::string device_training_unsupported(const TrainOptions& options);
// Whether this ccscope was built with the GPU path (CUDA and cuBLAS).
bool device_training_built();

// The single-rank reference of `options` (strategy single, same data, model,
// optimizer and precision) without a communicator.
TrainResult train_single(const TrainOptions& options,
                         const std::function<void(const StepFigures&)>& on_step = {});

}  // namespace ccscope::training_probe
