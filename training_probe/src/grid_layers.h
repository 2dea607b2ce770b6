#pragma once
// The tensor x pipeline grid's layers on one rank, written once for the host
// path's Grid (parallel_trainer.cpp) and the GPU path's tensor grid
// (device/device_grid_trainer.cpp): Megatron's column/row pairs on the
// rank's tensor shard, cut into the rank's pipeline chunks.
#include <cstddef>
#include <vector>

#include "ccscope/training_probe/parallel_trainer.h"
#include "ccscope/training_probe/trainer.h"
#include "layers.h"

namespace ccscope::training_probe {

// The layers of each of this rank's chunks (virtual stages; one without
// --interleave), in model order. Appends each layer's weight then bias, cut
// from the model's initial parameters, to `params` (LocalLayer::offset says
// where), and each element's weight in the global gradient norm to `unique`
// (0 for a copy tensor rank 0 counts: replicated layers, a row layer's bias).
std::vector<std::vector<LocalLayer>> grid_layers(const TrainOptions& options,
                                                 const GridPosition& at, std::vector<float>& params,
                                                 std::vector<float>& unique);

}  // namespace ccscope::training_probe
