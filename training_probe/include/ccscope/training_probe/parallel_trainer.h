#pragma once
// The model-parallel strategies (Megatron-LM's and DeepSpeed-MoE's layouts on
// the probe's MLP), over one communicator per group:
//
//   tp  tensor parallel: consecutive layers form Megatron pairs, a
//       column-parallel layer (weight split by output features; backward
//       all-reduces its input gradient) then a row-parallel one (weight split
//       by input features; forward all-reduces the partial outputs); an odd
//       last layer is replicated. One all-reduce forward and one backward per
//       pair (a transformer layer has two pairs: attention and MLP), none
//       backward for the model's first pair, whose input gradient nobody needs.
//   pp  pipeline parallel: blocks (layers, or pairs under tp) cut into stages,
//       activations sent forward and gradients back with batch_send_recv as
//       the stage's plan says (pipeline.h: GPipe, 1F1B, interleaved);
//       gradients accumulated over the micro-batches, one optimizer step.
//   3d  tp x pp x dp: each rank in one tensor, one pipeline and one data
//       group; each stage's gradients averaged over its data group after the
//       flush (or reduce-scattered, stepped and all-gathered: ZeRO-1).
//   ep  expert parallel: every odd layer but the last is a mixture of experts
//       (top-k gate, residual); experts spread over the ranks, tokens
//       dispatched to them with an all-to-all of counts then one of tokens,
//       combined back with a second; the other parameters data-parallel.
//
// The sharded model is exactly the single-rank model cut up (every rank
// builds the full initial parameters from the seed and keeps its part), so a
// run's losses equal `single`'s within the precision's tolerance.
#include <cstddef>
#include <functional>

#include "ccscope/collectives/communicator.h"
#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {

// A rank's place in the tp x dp x pp grid (ParallelOptions' order).
struct GridPosition {
  size_t tp = 0;
  size_t dp = 0;
  size_t pp = 0;  // the pipeline stage
  bool operator==(const GridPosition&) const = default;
};
GridPosition grid_position(size_t rank, const ParallelOptions& layout);
size_t grid_rank(const GridPosition& position, const ParallelOptions& layout);
// Colours whose equal values form each group (MPI_Comm_split): the ranks
// sharing a colour share that group; rank order inside a group follows the
// grid coordinate of that group.
struct GroupColors {
  int tp = 0;
  int pp = 0;
  int dp = 0;
};
GroupColors group_colors(size_t rank, const ParallelOptions& layout);

// The communicators a rank trains over; the groups' sizes are the layout's.
// `world` spans every rank (loss, checks). A group of size 1 may be null.
struct ParallelGroups {
  Communicator* world = nullptr;
  Communicator* tp = nullptr;
  Communicator* pp = nullptr;
  Communicator* dp = nullptr;
};

// The mixture-of-experts model's parameters (ep): dense layers, and per
// mixture layer a gate [E x width] and E experts of width x width + bias.
size_t moe_parameter_count(const ModelShape& shape, size_t experts);
// Expert indices travel as 32-bit words; far more than any model has.
inline constexpr size_t kMaxExperts = 1u << 20;

// Why a model-parallel layout cannot run on `ranks` ("" when it can).
std::string validate_parallel(const TrainOptions& options, size_t ranks);

// Runs the strategy; every rank calls it with the same options. Throws
// UsageError for options that cannot run.
TrainResult train_parallel(const ParallelGroups& groups, const TrainOptions& options,
                           const std::function<void(const StepFigures&)>& on_step = {});

// The single-rank reference of a model-parallel run: the same model (for ep
// the mixture-of-experts model with every expert), data and optimizer.
TrainResult train_parallel_single(const TrainOptions& options,
                                  const std::function<void(const StepFigures&)>& on_step = {});

}  // namespace ccscope::training_probe
