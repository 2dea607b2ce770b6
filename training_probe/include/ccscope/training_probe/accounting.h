#pragma once
// What a strategy should move and hold, from the formulas (ZeRO paper, Rajbhandari
// et al. 2020, sections 5 and 7), to check what it actually moved and held.
#include <cstddef>
#include <string_view>

#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/optimizer.h"

namespace ccscope::training_probe {

enum class Strategy { kSingle, kDdp, kZero1, kZero2, kZero3 };
std::string_view name(Strategy strategy);

// Bytes one rank sends per optimizer step with ring algorithms (nccl-tests'
// bus factors): DDP and ZeRO-1/2 2 Psi (n-1)/n, ZeRO-3 3 Psi (n-1)/n, in
// bytes of the communicated type; 0 for one rank. `psi` counts elements.
double expected_bytes_per_step(Strategy strategy, size_t psi, size_t ranks, size_t element_bytes);

// Memory per rank for parameters, gradients and optimizer state (bytes), in
// the paper's accounting: mixed precision holds 16-bit parameters and
// gradients (2 Psi each) and K Psi of float32 optimizer state (master weights
// plus the optimizer's words: K = 12 for Adam, 8 for SGD with momentum);
// float32 holds 4 Psi, 4 Psi and the optimizer's words only. ZeRO-1 divides
// the optimizer state by N, ZeRO-2 also the gradients, ZeRO-3 all three.
struct MemoryFootprint {
  double parameters = 0;
  double gradients = 0;
  double optimizer = 0;
  double total() const { return parameters + gradients + optimizer; }
};
MemoryFootprint expected_memory(Strategy strategy, size_t psi, size_t ranks, Precision precision,
                                OptimizerKind optimizer);

// nccl-tests' bytes per rank of one operation (what bytes-moved counts).
double all_reduce_bytes(size_t count, size_t ranks, size_t element_bytes);
double all_gather_bytes(size_t total_count, size_t ranks, size_t element_bytes);
double reduce_scatter_bytes(size_t total_count, size_t ranks, size_t element_bytes);

}  // namespace ccscope::training_probe
