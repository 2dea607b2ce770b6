#pragma once
// The transformer's tensor-parallel strategy (`--model transformer --strategy
// tp`, with `--sequence-parallel` and `--recompute`): Megatron-LM's split of
// its attention and MLP over the tensor group, run by the one engine. The
// data-parallel strategies run the transformer through trainer.cpp's hooks.
#include <cstddef>

#include "ccscope/training_probe/parallel_trainer.h"
#include "engine.h"

namespace ccscope::training_probe {

// The strategy over `groups` (its tensor group; null groups: the one-rank
// reference) for world rank `rank`.
MakeStrategy make_transformer_tensor(const ParallelGroups& groups, size_t rank);

}  // namespace ccscope::training_probe
