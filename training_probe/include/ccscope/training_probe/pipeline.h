#pragma once
// Pipeline parallelism as pure functions: how layers are cut into stages, the
// order each stage runs its forward and backward passes under GPipe, 1F1B
// (PipeDream-Flush, Megatron-LM's default) and interleaved 1F1B (Megatron-LM's
// virtual pipeline), and which transfers each stage posts together between
// them. The executor (parallel_trainer.cpp) walks a stage's plan; a simulator
// runs every stage's plan together, to prove a plan cannot deadlock and to
// give the bubble a schedule should have.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/training_probe/layout.h"

namespace ccscope::training_probe {

enum class PipelineSchedule { kGpipe, kOneFOneB, kInterleaved };
std::string_view name(PipelineSchedule schedule);  // "gpipe", "1f1b", "interleaved"
std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view text);

// Contiguous pieces of a run of blocks (layers, or tensor-parallel layer
// pairs) with parameter counts `weights`: `pieces` non-empty ranges of block
// indices covering [0, weights.size()), minimising the largest piece's weight
// (ties: the earliest cuts, each cut as early as the optimum allows: 7 equal
// blocks in 3 pieces give 1, 3, 3). Needs weights.size() >= pieces >= 1,
// else throws std::invalid_argument.
std::vector<Range> balance_stages(std::span<const size_t> weights, size_t pieces);

// Why a pipeline cannot run ("" when it can): stages >= 1, micro_batches >= 1,
// chunks >= 1; chunks > 1 only for interleaved; interleaved needs
// micro_batches % stages == 0 (Megatron-LM's rule).
std::string validate_pipeline(PipelineSchedule schedule, size_t stages, size_t micro_batches,
                              size_t chunks);

// One pass of one micro-batch through one model chunk of this stage. With
// `chunks` v, stage s holds virtual stages s, s + N, ..., s + (v-1) N (chunk c
// is virtual stage c * N + s); otherwise chunk is 0.
struct PipelinePass {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  size_t micro_batch = 0;
  size_t chunk = 0;
  bool operator==(const PipelinePass&) const = default;
};

// The order stage `stage` of `stages` runs its passes:
//  GPipe: every forward (micro-batches in order), then every backward (in order).
//  1F1B: min(N - s - 1, M) warm-up forwards, then one forward and one backward
//        alternately, then the remaining backwards (Narayanan et al. 2021).
//  Interleaved: Megatron-LM's order (forward k runs chunk (k / N) % v of
//        micro-batch (k / (N v)) N + k % N; backwards mirror it from the last
//        chunk), with (N - s - 1) * 2 + (v - 1) * N warm-up forwards, capped
//        at M v.
// Every (micro-batch, chunk) appears once as a forward and once as a backward,
// the forward first.
std::vector<PipelinePass> pipeline_passes(PipelineSchedule schedule, size_t stages, size_t stage,
                                          size_t micro_batches, size_t chunks);

// Most activations held at once by a pass order: forwards whose backward has
// not run yet (GPipe: M v; 1F1B: at most N - s).
size_t peak_in_flight(std::span<const PipelinePass> passes);

// The textbook bubble, the fraction of a step a stage idles with equal stage
// times and free communication: (N - 1) / (v M + N - 1).
double textbook_bubble(size_t stages, size_t micro_batches, size_t chunks);

// A transfer of one micro-batch's boundary tensor between adjacent virtual
// stages: an activation forward (to virtual stage + 1) or a gradient backward
// (to virtual stage - 1). `peer` is a stage (rank in the pipeline group); with
// chunks, the last stage's chunk c sends forward to stage 0's chunk c + 1.
struct PipelineTransfer {
  enum class Kind { kActivation, kGradient };
  Kind kind = Kind::kActivation;
  size_t micro_batch = 0;
  size_t chunk = 0;  // the chunk on this stage the tensor leaves or enters
  size_t peer = 0;
  bool operator==(const PipelineTransfer&) const = default;
};

// A stage's plan: its passes in order, with the transfers posted together
// (one batch_send_recv) before each pass and after the last one. A pass's
// input (activation from the previous virtual stage, or gradient from the
// next) is received in a batch before it; its output is sent in the next
// batch after it. Batches pair a send with the receive that follows it, as
// Megatron-LM's send_forward_recv_backward does, so that no stage blocks in a
// send while its peer blocks in one towards it.
//  GPipe, 1F1B: before each pass, one batch: the previous pass's output and
//        this pass's input.
//  Interleaved: Megatron-LM's grouping (send_forward_backward_recv_forward_
//        backward): in the steady state a forward and the backward after it
//        run after one batch that sends both outputs of the previous pair and
//        receives both inputs of this pair; the backward's own step then has
//        an empty batch (nothing to post). Warm-up forwards and cool-down
//        backwards get one batch each, as above. (One batch per pass
//        deadlocks interleaved plans, e.g. N = 2, M = 4, v = 2 or N = 3,
//        M = 6, v = 2, and misses the textbook bubble where it does not.)
// Within a batch, transfers are listed in pass order (a forward's activation
// before a backward's gradient); between one pair of stages they match in
// that order (batch_send_recv's rule), which simulate_plans checks.
struct PipelineStep {
  std::vector<PipelineTransfer> sends;  // posted together with `recvs`
  std::vector<PipelineTransfer> recvs;
  std::optional<PipelinePass> pass;     // run after the batch completes; empty for the final batch
};
std::vector<PipelineStep> pipeline_plan(PipelineSchedule schedule, size_t stages, size_t stage,
                                        size_t micro_batches, size_t chunks);

// Every stage's plan run together with rendezvous semantics (a batch
// completes only when every transfer in it has its partner posted; a stage
// waits in one batch at a time; between a pair of stages the sends of one
// meet the receives of the other in posting order), each forward costing
// `forward_cost` and each backward `backward_cost` per pass (so per chunk),
// transfers free. `deadlocked` when no stage can proceed before all finish;
// a send that meets a receive of another tensor stops the run with
// `problem` set (not deadlocked). Invalid arguments throw
// std::invalid_argument, as pipeline_passes and pipeline_plan do.
struct PipelineSimulation {
  bool deadlocked = false;
  double makespan = 0;
  std::vector<double> idle;  // per stage: makespan minus its compute
  std::string problem;       // "" or what went wrong (a transfer with no partner, ...)
};
PipelineSimulation simulate_pipeline(PipelineSchedule schedule, size_t stages, size_t micro_batches,
                                     size_t chunks, double forward_cost, double backward_cost);
// The same for any plans, one per stage (plans[s] is stage s's): a hand-made
// or altered plan, to show what the simulator catches.
PipelineSimulation simulate_plans(const std::vector<std::vector<PipelineStep>>& plans,
                                  double forward_cost, double backward_cost);

}  // namespace ccscope::training_probe
