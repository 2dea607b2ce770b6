#pragma once
// The mixture-of-experts model's flat parameters, written once for the host
// path's Expert (parallel_trainer.cpp) and the GPU path's
// (device/device_expert_trainer.cpp): which layers are mixtures, where each
// layer's parameters sit in the single-rank layout, and their initial values.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {

struct EngineState;

// Every odd layer but the last is a mixture of experts.
bool mixture_layer(size_t layer, size_t depth);

// Per layer, a dense layer's W, b, or a mixture's gate Wg [E x w] then each
// expert's W, b.
struct MoeLayout {
  struct Layer {
    bool mixture = false;
    size_t offset = 0;  // dense: W then b; mixture: Wg
    std::vector<size_t> expert_offsets;
  };
  std::vector<Layer> layers;
  size_t total = 0;
};
MoeLayout moe_layout(const ModelShape& shape, size_t experts);

// nn.Linear-like bounds, U(-1/sqrt(w), 1/sqrt(w)), from counter-based random
// numbers of a stream of its own.
std::vector<float> moe_initial_parameters(size_t total, size_t width, uint64_t seed);

// A step's routing figures over every rank (routed and dropped tokens, the load
// imbalance) from this rank's tokens wanted per expert and dropped, summed over
// the state's world.
void add_routing_figures(EngineState& state, std::vector<double> wanted, size_t dropped,
                         StepFigures& f);

}  // namespace ccscope::training_probe
