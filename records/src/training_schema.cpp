// The training probe's record kinds: every field of a `ccscope train --csv`
// step row and run row, once.
#include <limits>

#include "ccscope/records/training_record.h"
#include "record_table.h"

namespace ccscope::records {
namespace {

// Losses (and a final loss) may be below zero for some objectives.
constexpr long long kAnyValue = std::numeric_limits<long long>::min();

}  // namespace

const TrainStepKind& train_step_kind() {
  using R = TrainStepRecord;
  static const TrainStepKind kind{
      "ccscope.train_step",
      1,
      {
          TrainStepField{"schema", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                         "record kind and version (ccscope.train_step/1)",
                         [](const R&) { return schema_cell(train_step_kind().schema_id()); },
                         [](const R&) { return schema_cell(train_step_kind().schema_id()); },
                         [](R&, const Cell& c) { check_schema(train_step_kind(), c); }},
          member_field<R, &R::run_id>("run_id", "",
                                      "the run the step belongs to: <strategy>-n<ranks> (+ -weak)"),
          member_field<R, &R::strategy>("strategy", "", "single, ddp, zero1, zero2 or zero3"),
          member_field<R, &R::ranks, 1>("ranks", "", "ranks of the run"),
          member_field<R, &R::step>("step", "", "optimizer step, from 0 (warm-up steps included)"),
          member_field<R, &R::loss, kAnyValue>("loss", "",
                                               "loss of the step, mean over the global batch"),
          member_field<R, &R::step_s>("step_s", "s", "the step's time, max over ranks"),
          member_field<R, &R::compute_s>("compute_s", "s",
                                         "forward, backward and optimizer time, max over ranks"),
          member_field<R, &R::comm_s>(
              "comm_s", "s", "run time of the step's communication operations, max over ranks"),
          member_field<R, &R::exposed_comm_s>(
              "exposed_comm_s", "s",
              "time the training thread waited for communication (not overlapped), max over "
              "ranks"),
          member_field<R, &R::bytes_sent>("bytes_sent", "B",
                                          "per rank: nccl-tests' bytes of the step's operations"),
          member_field<R, &R::grad_norm>(
              "grad_norm", "", "global gradient norm before clipping; 0 when not clipping"),
          member_field<R, &R::loss_scale>("loss_scale", "",
                                          "fp16 loss scale of the step (1 otherwise)"),
          member_field<R, &R::skipped>(
              "skipped", "", "1 when an fp16 overflow skipped the step (update not applied)"),
      }};
  return kind;
}

const TrainRunKind& train_run_kind() {
  using R = TrainRunRecord;
  static const TrainRunKind kind{
      "ccscope.train_run",
      3,
      {
          TrainRunField{"schema", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                        "record kind and version (ccscope.train_run/3)",
                        [](const R&) { return schema_cell(train_run_kind().schema_id()); },
                        [](const R&) { return schema_cell(train_run_kind().schema_id()); },
                        [](R&, const Cell& c) { check_schema(train_run_kind(), c); }},
          member_field<R, &R::run_id>("run_id", "", "the run: <strategy>-n<ranks> (+ -weak)"),
          member_field<R, &R::strategy>("strategy", "", "single, ddp, zero1, zero2 or zero3"),
          member_field<R, &R::ranks, 1>("ranks", "", "ranks of the run"),
          member_field<R, &R::nodes, 1>("nodes", "", "nodes the ranks ran on"),
          member_field<R, &R::backend>("backend", "", "communication backend: mpi or nccl"),
          member_field<R, &R::precision>("precision", "", "fp32, bf16 or fp16"),
          member_field<R, &R::optimizer>("optimizer", "", "sgd, adam or adamw"),
          member_field<R, &R::width>("width", "", "the model's hidden width"),
          member_field<R, &R::depth>("depth", "", "the model's number of layers"),
          member_field<R, &R::parameters>("parameters", "", "the model's parameters (Psi)"),
          member_field<R, &R::global_batch>("global_batch", "", "samples per step over all ranks"),
          member_field<R, &R::micro_batches, 1>("micro_batches", "",
                                                "micro-batches per step (gradient accumulation)"),
          member_field<R, &R::steps>("steps", "", "optimizer steps run, warm-up included"),
          member_field<R, &R::warmup_steps>("warmup_steps", "",
                                            "first steps left out of the medians and p90"),
          member_field<R, &R::overlap>("overlap", "",
                                       "1 when communication overlapped the backward pass"),
          member_field<R, &R::prefetch>("prefetch", "",
                                        "1 when ZeRO-3 gathered the next layer's parameters ahead"),
          member_field<R, &R::bucket_bytes>("bucket_bytes", "B", "gradient bucket size"),
          member_field<R, &R::scaling>(
              "scaling", "",
              "strong (fixed global batch), weak (fixed per-rank batch) or "
              "empty"),
          member_field<R, &R::step_median_s>(
              "step_median_s", "s", "median step time after warm-up (per step: max over ranks)"),
          member_field<R, &R::step_p90_s>("step_p90_s", "s",
                                          "90th percentile step time after warm-up"),
          member_field<R, &R::compute_median_s>("compute_median_s", "s",
                                                "median compute time per step"),
          member_field<R, &R::comm_median_s>("comm_median_s", "s",
                                             "median communication run time per step"),
          member_field<R, &R::exposed_comm_median_s>(
              "exposed_comm_median_s", "s",
              "median time per step the training thread waited for communication"),
          member_field<R, &R::comm_share>("comm_share", "", "comm_median_s / step_median_s, 0..1"),
          member_field<R, &R::exposed_comm_share>("exposed_comm_share", "",
                                                  "exposed_comm_median_s / step_median_s, 0..1"),
          member_field<R, &R::samples_per_s>(
              "samples_per_s", "1/s", "global_batch / step_median_s: samples trained per second"),
          member_field<R, &R::bytes_per_step>("bytes_per_step", "B",
                                              "measured bytes sent per step, per rank"),
          member_field<R, &R::bytes_per_step_expected>(
              "bytes_per_step_expected", "B",
              "the formula's bytes per step per rank (DDP, ZeRO-1/2: 2 Psi, ZeRO-3: 3 Psi, with "
              "the ring factors)"),
          member_field<R, &R::memory_parameters_B>("memory_parameters_B", "B",
                                                   "parameter memory held per rank"),
          member_field<R, &R::memory_gradients_B>("memory_gradients_B", "B",
                                                  "gradient memory held per rank"),
          member_field<R, &R::memory_optimizer_B>("memory_optimizer_B", "B",
                                                  "optimizer state memory held per rank"),
          member_field<R, &R::memory_parameters_expected_B>(
              "memory_parameters_expected_B", "B",
              "parameter memory per rank by the ZeRO paper's accounting"),
          member_field<R, &R::memory_gradients_expected_B>(
              "memory_gradients_expected_B", "B",
              "gradient memory per rank by the ZeRO paper's accounting"),
          member_field<R, &R::memory_optimizer_expected_B>(
              "memory_optimizer_expected_B", "B",
              "optimizer state memory per rank by the ZeRO paper's accounting"),
          member_field<R, &R::final_loss, kAnyValue>("final_loss", "", "loss of the last step"),
          member_field<R, &R::loss_max_rel_diff>(
              "loss_max_rel_diff", "",
              "largest relative difference of a step's loss from single's; empty without a "
              "reference"),
          member_field<R, &R::loss_tolerance>("loss_tolerance", "",
                                              "the relative difference allowed for equivalence"),
          member_field<R, &R::loss_equivalent>(
              "loss_equivalent", "",
              "1 when loss_max_rel_diff and loss_f64_max_rel_diff are within loss_tolerance and "
              "grad_max_rel_diff within its own"),
          since_version(
              member_field<R, &R::loss_f64_max_rel_diff>(
                  "loss_f64_max_rel_diff", "",
                  "largest relative difference of a step's loss from the independent float64 "
                  "reference (reference64.h); empty without --check-loss or where it does not "
                  "apply"),
              2),
          since_version(
              member_field<R, &R::grad_max_rel_diff>(
                  "grad_max_rel_diff", "",
                  "the first applied step's gradients (reduced, unscaled, clipped) against "
                  "single's, "
                  "the largest layer's normwise relative difference; empty where the strategy does "
                  "not gather them (tp, pp, 3d, ep)"),
              2),
          since_version(
              member_field<R, &R::loss_f64_steps>(
                  "loss_f64_steps", "",
                  "steps compared with the float64 reference: all, or up to the first step whose "
                  "ReLU input lay within the format's rounding of 0"),
              2),
          since_version(
              member_field<R, &R::device_peak_B>(
                  "device_peak_B", "B",
                  "GPU path: the largest rank's device memory the probe allocated at its highest "
                  "(parameters, gradients, master weights, optimizer state, activations, scratch); "
                  "empty on the host path"),
              3),
          since_version(
              member_field<R, &R::device_used_B>(
                  "device_used_B", "B",
                  "GPU path: the largest rank's GPU memory in use (cudaMemGetInfo total - free) at "
                  "its highest, the CUDA context and NCCL's and cuBLAS's buffers included"),
              3),
          since_version(member_field<R, &R::offload_bytes_per_step>(
                            "offload_bytes_per_step", "B",
                            "GPU path with --offload optimizer: bytes copied between device and "
                            "host per step "
                            "(gradients down, parameters up), median, per rank"),
                        3),
          since_version(
              member_field<R, &R::offload_bytes_expected>(
                  "offload_bytes_expected", "B",
                  "the formula's: 2 x element bytes x the parameters this rank's optimizer steps"),
              3),
          since_version(
              member_field<R, &R::offload_copy_median_s>(
                  "offload_copy_median_s", "s",
                  "median time per step of those copies on the device (CUDA events), slowest rank"),
              3),
          since_version(member_field<R, &R::host_optimizer_median_s>(
                            "host_optimizer_median_s", "s",
                            "median time per step of the optimizer step on the host, slowest rank"),
                        3),
          member_field<R, &R::speedup>("speedup", "",
                                       "against one rank: T(1) / T(N) (strong) or N T(1) / T(N) in "
                                       "samples/s (weak); ideal N"),
          member_field<R, &R::efficiency>("efficiency", "",
                                          "speedup / N: T(1) / (N T(N)) strong, T(1) / T(N) weak; "
                                          "ideal 1"),
      }};
  return kind;
}

const TrainRankKind& train_rank_kind() {
  using R = TrainRankRecord;
  static const TrainRankKind kind{
      "ccscope.train_rank",
      1,
      {
          TrainRankField{"schema", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                         "record kind and version (ccscope.train_rank/1)",
                         [](const R&) { return schema_cell(train_rank_kind().schema_id()); },
                         [](const R&) { return schema_cell(train_rank_kind().schema_id()); },
                         [](R&, const Cell& c) { check_schema(train_rank_kind(), c); }},
          member_field<R, &R::run_id>("run_id", "", "the run (joins ccscope.train_run)"),
          member_field<R, &R::strategy>("strategy", "", "tp, pp, ep or 3d"),
          member_field<R, &R::rank>("rank", "", "world rank"),
          member_field<R, &R::host>("host", "", "the node the rank ran on"),
          member_field<R, &R::tp_rank>("tp_rank", "", "rank in its tensor-parallel group"),
          member_field<R, &R::dp_rank>("dp_rank", "", "rank in its data-parallel group"),
          member_field<R, &R::stage>("stage", "", "pipeline stage, from 0"),
          member_field<R, &R::tp, 1>("tp", "", "tensor-parallel degree"),
          member_field<R, &R::pp, 1>("pp", "", "pipeline stages"),
          member_field<R, &R::dp, 1>("dp", "", "data-parallel degree"),
          member_field<R, &R::schedule>("schedule", "", "gpipe, 1f1b or interleaved"),
          member_field<R, &R::chunks, 1>("chunks", "", "model chunks per stage (interleaved)"),
          member_field<R, &R::micro_batches, 1>("micro_batches", "", "micro-batches per step"),
          member_field<R, &R::step_median_s>("step_median_s", "s",
                                             "this rank's median step time after warm-up"),
          member_field<R, &R::tp_bytes>("tp_bytes", "B",
                                        "tensor-parallel bytes per step (median, nccl-tests')"),
          member_field<R, &R::pp_bytes>("pp_bytes", "B", "pipeline bytes sent per step (median)"),
          member_field<R, &R::dp_bytes>("dp_bytes", "B",
                                        "data-parallel gradient bytes per step (median)"),
          member_field<R, &R::ep_bytes>("ep_bytes", "B",
                                        "expert all-to-all bytes sent to other ranks per step"),
          member_field<R, &R::pipeline_s>(
              "pipeline_s", "s",
              "median time from the first pass to the flush (the pipeline's makespan)"),
          member_field<R, &R::pipeline_busy_s>("pipeline_busy_s", "s",
                                               "median time of it running passes"),
          member_field<R, &R::pipeline_idle_s>(
              "pipeline_idle_s", "s",
              "median time of it waiting for pipeline transfers and the flush"),
          member_field<R, &R::bubble>(
              "bubble", "",
              "1 - pipeline_busy_s / pipeline_s: the share of the pipeline's makespan not "
              "running passes, 0..1"),
          member_field<R, &R::bubble_textbook>("bubble_textbook", "",
                                               "(N - 1) / (v M + N - 1), 0..1"),
          member_field<R, &R::peak_in_flight>("peak_in_flight", "",
                                              "most micro-batches' activations held at once"),
          member_field<R, &R::peak_activation_B>("peak_activation_B", "B", "their bytes"),
          member_field<R, &R::memory_B>("memory_B", "B",
                                        "parameters, gradients and optimizer state held"),
          member_field<R, &R::all_to_all_s>("all_to_all_s", "s",
                                            "median expert dispatch and combine time per step"),
          member_field<R, &R::all_to_all_share>("all_to_all_share", "",
                                                "all_to_all_s / step_median_s, 0..1"),
          member_field<R, &R::dropped_share>(
              "dropped_share", "", "token assignments dropped for capacity, of those routed"),
          member_field<R, &R::load_imbalance>("load_imbalance", "",
                                              "max / mean tokens per expert (1 balanced)"),
      }};
  return kind;
}

std::vector<Cell> train_rank_cells(const TrainRankRecord& record) {
  return cells_of(train_rank_kind(), record);
}

std::vector<TrainRankRecord> read_train_rank_csv(std::string_view text) {
  return read_csv(train_rank_kind(), text);
}

std::vector<Cell> train_step_cells(const TrainStepRecord& record) {
  return cells_of(train_step_kind(), record);
}

std::vector<Cell> train_run_cells(const TrainRunRecord& record) {
  return cells_of(train_run_kind(), record);
}

std::vector<TrainStepRecord> read_train_step_csv(std::string_view text) {
  return read_csv(train_step_kind(), text);
}

std::vector<TrainRunRecord> read_train_run_csv(std::string_view text) {
  return read_csv(train_run_kind(), text);
}

}  // namespace ccscope::records
