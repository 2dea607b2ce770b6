#pragma once
// The training probe's record kinds (`ccscope train --csv/--json`):
//   ccscope.train_step/1  one row per optimizer step of one run: its loss and
//                         where the time went (slowest rank's figures);
//   ccscope.train_run/3   one row per run (strategy x rank count): medians and
//                         p90 over the steps after warm-up, bytes moved and
//                         memory against the formulas, loss equivalence
//                         against single, and scaling against one rank;
//   ccscope.train_rank/1  one row per rank of a model-parallel run (tp, pp,
//                         ep, 3d): its place in the grid, bytes per group,
//                         the pipeline's busy and idle time against the
//                         textbook bubble, activations held, memory, and the
//                         expert all-to-all's share and routing.
// Times are seconds; each per-step time is the maximum over ranks of that
// rank's time (the slowest rank sets the step); bytes are per rank.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/records/schema.h"

namespace ccscope::records {

struct TrainStepRecord {
  std::string run_id;    // joins steps to their run: "<strategy>-n<ranks>" (+ "-weak")
  std::string strategy;  // single, ddp, zero1, zero2, zero3
  int64_t ranks = 1;
  int64_t step = 0;  // from 0
  double loss = 0;   // mean over the global batch
  double step_s = 0;
  double compute_s = 0;
  double comm_s = 0;          // communication operations' run time
  double exposed_comm_s = 0;  // time the training thread waited for communication
  double bytes_sent = 0;      // per rank, nccl-tests' bytes of the step's operations
  double grad_norm = 0;       // global norm before clipping; 0 when not clipping
  double loss_scale = 1;      // fp16
  bool skipped = false;       // fp16 overflow: not applied
};

struct TrainRunRecord {
  std::string run_id;
  std::string strategy;
  int64_t ranks = 1;
  int64_t nodes = 1;
  std::string backend;    // mpi, nccl
  std::string precision;  // fp32, bf16, fp16
  std::string optimizer;  // sgd, adam, adamw
  int64_t width = 0;
  int64_t depth = 0;
  int64_t parameters = 0;  // Psi
  int64_t global_batch = 0;
  int64_t micro_batches = 1;
  int64_t steps = 0;
  int64_t warmup_steps = 0;
  bool overlap = true;
  bool prefetch = true;
  int64_t bucket_bytes = 0;
  std::string scaling;  // "", "strong", "weak"
  double step_median_s = 0;
  double step_p90_s = 0;
  double compute_median_s = 0;
  double comm_median_s = 0;
  double exposed_comm_median_s = 0;
  double comm_share = 0;               // comm / step, medians, 0..1
  double exposed_comm_share = 0;       // exposed / step
  double samples_per_s = 0;            // global batch / step median
  double bytes_per_step = 0;           // measured, per rank
  double bytes_per_step_expected = 0;  // formula (DDP/ZeRO-1/2 2 Psi, ZeRO-3 3 Psi; ring factors)
  double memory_parameters_B = 0;      // held per rank
  double memory_gradients_B = 0;
  double memory_optimizer_B = 0;
  double memory_parameters_expected_B = 0;  // ZeRO paper's accounting
  double memory_gradients_expected_B = 0;
  double memory_optimizer_expected_B = 0;
  double final_loss = 0;
  std::optional<double> loss_max_rel_diff;  // against single; empty without a reference
  std::optional<double> loss_tolerance;
  std::optional<bool> loss_equivalent;
  std::optional<double> loss_f64_max_rel_diff;  // against the float64 reference
  std::optional<int64_t> loss_f64_steps;        // steps compared with it (up to a ReLU kink)
  std::optional<double> grad_max_rel_diff;      // the first step's gradients against single's
  // The GPU path (since version 3; empty on the host path): device memory
  // measured per rank (the largest rank's), and with --offload optimizer the
  // host<->device copies per step (medians after warm-up) against the formula.
  std::optional<double> device_peak_B;  // the probe's allocator high-water mark
  std::optional<double> device_used_B;  // cudaMemGetInfo total - free, at its highest
  std::optional<double> offload_bytes_per_step;
  std::optional<double> offload_bytes_expected;   // 2 x element x Psi (grads down, params up)
  std::optional<double> offload_copy_median_s;    // the copies on the device (CUDA events)
  std::optional<double> host_optimizer_median_s;  // the optimizer step on the CPU
  std::optional<double> speedup;     // T(1) / T(N) (strong) or N T(1) / T(N) in samples/s (weak)
  std::optional<double> efficiency;  // T(1) / (N T(N)) strong, T(1) / T(N) weak
};

struct TrainRankRecord {
  std::string run_id;
  std::string strategy;  // tp, pp, ep, 3d
  int64_t rank = 0;
  std::string host;  // the node it ran on
  int64_t tp_rank = 0;
  int64_t dp_rank = 0;
  int64_t stage = 0;  // pipeline stage
  int64_t tp = 1, pp = 1, dp = 1;
  std::string schedule;  // gpipe, 1f1b, interleaved
  int64_t chunks = 1;
  int64_t micro_batches = 1;
  // Medians over the steps after warm-up, this rank's own:
  double step_median_s = 0;
  double tp_bytes = 0;  // per step, per group (nccl-tests' bytes)
  double pp_bytes = 0;
  double dp_bytes = 0;
  double ep_bytes = 0;
  double pipeline_s = 0;       // first pass to flush (the pipeline's makespan)
  double pipeline_busy_s = 0;  // running passes
  double pipeline_idle_s = 0;  // waiting for pipeline transfers and the flush
  double bubble = 0;           // 1 - busy / pipeline
  double bubble_textbook = 0;  // (N - 1) / (v M + N - 1)
  int64_t peak_in_flight = 0;
  double peak_activation_B = 0;
  double memory_B = 0;  // parameters, gradients, optimizer state held
  double all_to_all_s = 0;
  double all_to_all_share = 0;  // of the step
  double dropped_share = 0;     // dropped / routed token assignments, all ranks
  double load_imbalance = 0;    // max / mean tokens per expert, all ranks
};

using TrainStepField = Field<TrainStepRecord, TrainStepRecord>;
using TrainStepKind = RecordKind<TrainStepRecord, TrainStepRecord>;
const TrainStepKind& train_step_kind();
using TrainRunField = Field<TrainRunRecord, TrainRunRecord>;
using TrainRunKind = RecordKind<TrainRunRecord, TrainRunRecord>;
const TrainRunKind& train_run_kind();

using TrainRankField = Field<TrainRankRecord, TrainRankRecord>;
using TrainRankKind = RecordKind<TrainRankRecord, TrainRankRecord>;
const TrainRankKind& train_rank_kind();

std::vector<Cell> train_step_cells(const TrainStepRecord& record);
std::vector<Cell> train_rank_cells(const TrainRankRecord& record);
std::vector<TrainRankRecord> read_train_rank_csv(std::string_view text);
std::vector<Cell> train_run_cells(const TrainRunRecord& record);
// Reads CSVs written with the kinds' columns (FieldError / CsvError on bad input).
std::vector<TrainStepRecord> read_train_step_csv(std::string_view text);
std::vector<TrainRunRecord> read_train_run_csv(std::string_view text);

}  // namespace ccscope::records
