#pragma once
// A mixture-of-experts layer's routing as pure functions: the learned top-k
// gate (forward and backward), the dispatch of tokens to experts under a
// capacity factor with dropped tokens counted, which rank holds which expert,
// and the load imbalance. The expert-parallel hooks (Expert, parallel_trainer.cpp)
// move the tokens with all-to-alls; these decide where they go.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ccscope/training_probe/layout.h"

namespace ccscope::training_probe {

struct MoeShape {
  size_t width = 0;    // token features
  size_t experts = 0;  // E
  size_t top_k = 1;    // experts per token, 1 <= k <= E
  // Capacity per expert = ceil(capacity_factor * tokens * top_k / experts)
  // (GShard, Switch); 0: no limit (nothing is dropped).
  double capacity_factor = 1.25;
};

// Gate: logits = x Wg^T (Wg [experts x width] row-major, no bias),
// probabilities = softmax(logits) per token; each token's top_k experts by
// probability, ties to the lower index. A chosen expert's combine weight is
// its probability, unnormalised (Switch Transformer, GShard), so that the
// gate learns through it even for k = 1.
struct GateOutput {
  size_t tokens = 0;
  std::vector<float> probabilities;  // [tokens x experts]
  std::vector<uint32_t> chosen;      // [tokens x top_k], decreasing probability
  float weight(size_t token, size_t slot, size_t experts, size_t top_k) const {
    return probabilities[token * experts + chosen[token * top_k + slot]];
  }
};
GateOutput gate_forward(std::span<const float> x, size_t tokens, const MoeShape& shape,
                        const float* gate_weight);

// Gate backward: `d_weight` [tokens x top_k] is d loss / d combine weight of
// each (token, slot) (0 for dropped ones). Adds d loss / d Wg into `gate_grad`
// [experts x width] and d loss / d x through the gate into `dx` [tokens x width].
void gate_backward(std::span<const float> x, const GateOutput& gate, const MoeShape& shape,
                   const float* gate_weight, std::span<const float> d_weight, float* gate_grad,
                   float* dx);

// One (token, slot) routed to an expert.
struct Assignment {
  uint32_t token = 0;
  uint32_t slot = 0;  // which of the token's top_k choices
  uint32_t expert = 0;
  bool operator==(const Assignment&) const = default;
};

// Dispatch under capacity, in GShard's priority: every token's first choice in
// token order, then every second choice, ...; an assignment to an expert that
// already holds `capacity` is dropped.
struct DispatchPlan {
  size_t capacity = 0;             // per expert
  std::vector<Assignment> kept;    // ordered by expert, then token, then slot
  std::vector<size_t> per_expert;  // kept assignments per expert
  std::vector<size_t> wanted;      // assignments each expert was chosen for, before capacity
  size_t dropped = 0;
};
DispatchPlan plan_dispatch(const GateOutput& gate, const MoeShape& shape);

// Experts over ranks: contiguous near-equal ranges (split_evenly).
Range experts_of_rank(size_t rank, size_t ranks, size_t experts);
size_t owner_of_expert(size_t expert, size_t ranks, size_t experts);

// Load imbalance of per-expert token counts: max / mean (1 = balanced; 0 when
// no tokens).
double load_imbalance(std::span<const size_t> per_expert);

}  // namespace ccscope::training_probe
