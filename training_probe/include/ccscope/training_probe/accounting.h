#pragma once
// What a strategy should move and hold, from the formulas (ZeRO paper, Rajbhandari
// et al. 2020, sections 5 and 7), to check what it actually moved and held.
#include <cstddef>
#include <string_view>

#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/optimizer.h"

namespace ccscope::training_probe {

// kTensor, kPipeline, kExpert and kHybrid (3D: tensor x pipeline x data) are
// the model-parallel strategies of parallel_trainer.h.
enum class Strategy { kSingle, kDdp, kZero1, kZero2, kZero3, kTensor, kPipeline, kExpert, kHybrid };
std::string_view name(Strategy strategy);
bool is_model_parallel(Strategy strategy);  // tp, pp, ep, 3d

// Bytes one rank sends per optimizer step with ring algorithms (nccl-tests'
// bus factors), in units of Psi (n-1)/n bytes of the communicated type: DDP
// and ZeRO-1/2 2, ZeRO-3 3 (the ZeRO paper's figures, one micro-batch). With
// `micro_batches` m > 1: DDP and ZeRO-1 still 2 (no_sync until the last),
// ZeRO-2 m + 1 (a reduce-scatter per micro-batch, as DeepSpeed's stage 2,
// then the all-gather), ZeRO-3 3m (two gathers and a reduce-scatter per
// micro-batch). 0 for one rank. `psi` counts elements.
double expected_bytes_per_step(Strategy strategy, size_t psi, size_t ranks, size_t element_bytes,
                               size_t micro_batches = 1);

// Memory per rank for parameters, gradients and optimizer state (bytes), in
// the paper's accounting: mixed precision holds 16-bit parameters and
// gradients (2 Psi each) and K Psi of float32 optimizer state (master weights
// plus `optimizer_words` (state_words_per_parameter): K = 12 for Adam, 8 for
// SGD with momentum);
// float32 holds 4 Psi, 4 Psi and the optimizer's words only. ZeRO-1 divides
// the optimizer state by N, ZeRO-2 also the gradients, ZeRO-3 all three.
struct MemoryFootprint {
  double parameters = 0;
  double gradients = 0;
  double optimizer = 0;
  double total() const { return parameters + gradients + optimizer; }
};
MemoryFootprint expected_memory(Strategy strategy, size_t psi, size_t ranks, Precision precision,
                                size_t optimizer_words);

// nccl-tests' bytes per rank of one operation (what bytes-moved counts).
double all_reduce_bytes(size_t count, size_t ranks, size_t element_bytes);
double all_gather_bytes(size_t total_count, size_t ranks, size_t element_bytes);
double reduce_scatter_bytes(size_t total_count, size_t ranks, size_t element_bytes);

}  // namespace ccscope::training_probe
