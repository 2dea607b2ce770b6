#pragma once
// The bring-up checklist as one staged run over the job's ranks:
//   1 rank     each rank alone: GEMM throughput and correctness, memory
//              bandwidth, host<->device copies (GPU), a 1-rank collective;
//   2 node     each node's ranks together: every collective checked element by
//              element, intra-node busbw against the other nodes (and topo's
//              expected figure where it has one);
//   3 cluster  across nodes: topology homogeneity, environment consistency,
//              clock offsets, node-pair bandwidth with slow-node localisation,
//              error counters before/after, inter-node busbw against topo's
//              expected figure;
//   4 scaling  the training probe: DDP's weak-scaling efficiency against what
//              the measured network allows, and its loss against one rank's.
// Each stage measures through bench, topo and training_probe and judges with
// diag's pure functions; the checklist stops after the first stage with a FAIL
// unless keep_going. Runs under the caller's hang watchdog (a hang ends the job
// with kTimeoutExitCode, naming the rank).
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ccscope/collectives/world.h"
#include "ccscope/diag/check.h"
#include "ccscope/diag/localize.h"
#include "ccscope/job/watchdog.h"

namespace ccscope::diag {

struct ChecklistOptions {
  std::vector<Stage> stages{Stage::kRank, Stage::kNode, Stage::kCluster, Stage::kScaling};
  bool keep_going = false;  // run every stage even after a FAIL
  std::string backend = "mpi";
  bool isolate_ranks = false;                // nccl: a NCCL_HOSTID per rank (ranks sharing a GPU)
  std::chrono::milliseconds timeout{60000};  // any one wait
  // Bandwidth against the expected figure (topo's): below warn_fraction WARN,
  // below fail_fraction FAIL.
  double warn_fraction = 0.5;
  double fail_fraction = 0.25;
  size_t node_bytes = size_t{4} << 20;     // stage 2: intra-node all-reduce busbw size
  size_t cluster_bytes = size_t{4} << 20;  // stage 3: inter-node all-reduce busbw size
  size_t pair_bytes = size_t{4} << 20;     // stage 3: node-pair messages
  int pair_repetitions = 3;
  // Stage 3's slow-node search: every node pair, or split-half first (kAuto: from 5 nodes).
  LocalizeMethod localize = LocalizeMethod::kAuto;
  double clock_warn_ms = 10;  // an offset surely above this WARNs
  // Stage 4: DDP's efficiency below min_efficiency x what the network allows WARNs.
  double min_efficiency = 0.7;
  size_t train_steps = 100;  // the loss is compared over these
  size_t train_width = 256;
  size_t train_depth = 4;
  size_t train_batch_per_rank = 32;
  double injected_clock_offset_s = 0;  // test-only (CCSCOPE_TEST_CLOCK_OFFSET)
  int corrupt_rank = -1;  // test-only: this rank corrupts one element of stage 2's results
  // Rank 0: each check as it is judged (rows flushed as measured).
  std::function<void(const Check&)> on_check;
  // Rank 0: a stage begins / ends (for the human summary).
  std::function<void(Stage)> on_stage_begin;
  std::function<void(Stage, Status)> on_stage_end;
  // Every rank: a signal received (SIGINT, SIGTERM), else 0; polled after each
  // stage and agreed over the world, so that every rank stops there.
  std::function<int()> pending_signal;
};

struct ChecklistResult {
  std::vector<Check> checks;  // rank 0's; empty elsewhere
  std::vector<Stage> stages_run;
  bool stopped_early = false;  // a stage FAILed and keep_going was off
  Stage stopped_after = Stage::kRank;
  Status worst = Status::kPass;  // the same on every rank
  int stopped_by_signal = 0;     // the signal that stopped it after stopped_after, else 0
};

// Collective over the world: every rank calls it with the same options.
ChecklistResult run_checklist(const World& world, HangWatchdog& watchdog,
                              const ChecklistOptions& options);

// Pure: a figure against its expected value, higher better. PASS at or above
// warn_fraction x expected, WARN down to fail_fraction, FAIL below; SKIP when
// the expected figure is unknown (0).
Status judge_against_expected(double measured, double expected, double warn_fraction,
                              double fail_fraction);

// Pure: the weak-scaling efficiency the network allows: one rank's step over
// that step plus the gradient all-reduce at the measured busbw, without overlap
// (bytes x 2(n-1)/n / busbw). 1 for one rank.
double allowed_efficiency(double single_step_s, double gradient_bytes, size_t ranks,
                          double busbw_GBps);

// Pure: stage 1's schedule. machine_of_rank[r] names rank r's machine (its kernel's boot id:
// hosts that are containers or network namespaces of one machine share it). Ranks of one
// machine measure one at a time, in rank order; ranks of different machines at once.
// Returns each rank's turn (0-based); the number of turns is the largest turn + 1.
std::vector<int> measurement_turns(const std::vector<std::string>& machine_of_rank);

}  // namespace ccscope::diag
