#pragma once
// One measured training run over MPI, its records built here where the figures
// are made: the communicators (the run's ranks, and for model-parallel
// strategies one per group), the steps with the slowest rank's figures, the
// summary, bytes and memory against the formulas, the loss against one rank's,
// and the step, run and rank records. The command layer (app/src/train_verb.cpp)
// prints and writes them.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/world.h"
#include "ccscope/records/training_record.h"
#include "ccscope/training_probe/accounting.h"
#include "ccscope/training_probe/equivalence.h"
#include "ccscope/training_probe/parallel_trainer.h"
#include "ccscope/training_probe/summary.h"
#include "ccscope/training_probe/train_setup.h"
#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {

// The first applied step's gradients of `run` against `single`'s (options'
// precision's tolerance, layer by layer for the MLP), and clipping's norm on
// every rank against single's; nullopt where either did not gather them.
std::optional<GradientCheck> check_first_gradients(const TrainOptions& options,
                                                   const TrainResult& run,
                                                   const TrainResult& single);

struct RunRequest {
  TrainOptions options;
  size_t ranks = 1;  // the world's first `ranks` ranks (model-parallel: the whole world)
  bool weak = false;
  bool yielding_waits = true;
  std::string run_id;
  std::optional<std::vector<double>> reference;  // rank 0: one rank's loss curve
  // rank 0, 16-bit runs: the same one-rank run with more micro-batches (another
  // summation order), and their count: the loss checks' horizon (rounding_horizon)
  std::optional<std::vector<double>> reordered;
  size_t reordered_micro_batches = 0;
  bool check_reference64 = false;  // rank 0: also against the float64 reference (reference64.h)
  // rank 0: the one-rank run (its first gradients, TrainResult::first_gradients)
  std::shared_ptr<const TrainResult> single;
  double one_rank_step_s = 0;  // rank 0: the 1-rank run's median step; 0 when none ran
};

// One step as every rank of the run sees it: its own figures, and the step
// record, whose times and bytes are the slowest rank's (the maximum over
// ranks of each).
struct StepReport {
  const StepFigures& own;
  const records::TrainStepRecord& record;
};

struct RunHooks {
  // Every rank of the run, its communicators up, before the first step.
  std::function<void(const Communicator& run)> started;
  std::function<void(const StepReport&)> step;
};

struct RunMeasurement {
  bool ran = false;     // false: this rank sat the run out (nothing below is set)
  bool leader = false;  // rank 0 of the run: the fields marked "rank 0" are set
  size_t warmup = 0;
  RunSummary summary;                           // over the slowest rank's steps after warm-up
  std::vector<records::TrainStepRecord> steps;  // times and bytes the slowest rank's
  MemoryFootprint memory;                       // the largest over ranks
  // Data-parallel runs: the formulas, and whether the measured figures agree.
  double bytes_expected = 0;
  MemoryFootprint memory_expected;
  bool bytes_ok = true, memory_ok = true;
  // The GPU path with --offload optimizer: the copies per step against 2 x
  // element x the parameters this rank's optimizer steps (ZeRO: its shard,
  // with the buckets' padding allowed).
  bool offload_ok = true;
  std::optional<size_t> inconsistent_after_step;   // --check-consistency: parameters differed
  std::optional<EquivalenceResult> equivalence;    // rank 0, with a reference
  std::optional<EquivalenceResult> equivalence64;  // rank 0, against the float64 reference
  std::optional<GradientCheck> gradient_check;     // rank 0, with reference gradients
  std::optional<Scaling> scaling;                  // rank 0, against the 1-rank run
  // Model-parallel runs: token assignments over the run (warm-up included),
  // all ranks' (ep; every rank holds the sums).
  double routed_tokens = 0, dropped_tokens = 0;
  // Rank 0, model-parallel runs: the largest bytes per step of any rank per
  // group, and (ep) the slowest rank's all-to-all median after warm-up.
  double largest_tp_bytes = 0, largest_pp_bytes = 0, largest_dp_bytes = 0, largest_ep_bytes = 0;
  double all_to_all_median_s = 0;
  // Rank 0, data-parallel runs: bytes_expected in units of Psi (n-1)/n
  // elements (2 for DDP's all-reduce); 0 at one rank.
  double bytes_formula_factor = 0;
  records::TrainRunRecord run;  // rank 0
  // Rank 0, model-parallel runs: every rank's figures (medians over its steps
  // after warm-up), gathered by the train_rank kind's table.
  std::vector<records::TrainRankRecord> rank_records;
  bool checks_pass = true;  // rank 0
};

// Runs `request` on every rank of the world (ranks outside the run return at
// once with ran == false). Throws what the trainers throw.
RunMeasurement measure_run(const World& world, const RunRequest& request, const RunHooks& hooks);

// A step as the slowest rank saw it, on every rank (collective over `comm`):
// the train_step kind's fields in seconds and bytes are the maximum over
// ranks of each (the slowest rank sets the step); the others are the same on
// every rank and stay `step`'s. `all_to_all_s`, which has no field, travels
// beside them (in: this rank's; out: the maximum).
records::TrainStepRecord slowest_over_ranks(Communicator& comm, records::TrainStepRecord step,
                                            double& all_to_all_s);

// Every rank's record of a model-parallel run, on rank 0 (collective over
// `comm`; the other ranks get none): the numeric fields of the train_rank
// kind's table travel, exactly (a cell's text reads back to the same value);
// the texts are `own`'s, the host each rank's from `hosts`.
std::vector<records::TrainRankRecord> gather_rank_records(Communicator& comm,
                                                          const records::TrainRankRecord& own,
                                                          const std::vector<std::string>& hosts);

// What the caller sees of every run of a plan (the command layer prints,
// writes and keeps its watchdog from them).
struct PlanHooks {
  std::function<void(const RunRequest&, const Communicator& run)> started;
  std::function<void(const RunRequest&, const StepReport&)> step;
  // Every rank that ran, after the run.
  std::function<void(const RunRequest&, const RunMeasurement&)> finished;
};

// Every run of `plan` in turn, on every rank of the world: rank 0 first trains
// the single-rank references when the plan checks the loss (the others wait
// asleep); the 1-rank run's median step is the later runs' scaling baseline.
// Returns false on rank 0 when a run's checks failed. Throws what the
// trainers throw.
bool run_plan(const World& world, const TrainPlan& plan, const PlanHooks& hooks);

}  // namespace ccscope::training_probe
