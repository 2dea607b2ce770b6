#pragma once
// An independent float64 reference of the dense model's training, for the
// loss check (`--check-loss`): the single-rank reference is the same engine as
// the strategy it checks, so a bug they share (an optimizer, accumulation or
// clipping mistake) would pass unseen. This one is written apart from the
// engine, in double, from the definitions: the whole global batch at once (the
// micro-batches and the ranks' shards only split a mean), MSE over batch and
// features, torch.nn.utils.clip_grad_norm_ over the global norm, and
// torch.optim.SGD/Adam/AdamW. It shares only the inputs: the data set, the
// sampler's sample order and the initial parameters. The transformer's loss
// and gradient come from its own float64 arithmetic (transformer.h, the same
// template as the engine's float32 model, over the whole batch); the
// clipping and optimizers around it are this reference's.
//
// Where the run's format cannot follow it: a ReLU whose input lies within the
// format's rounding of 0 sends float32 and float64 down different branches,
// after which the curves part by chance and not by a bug (a 1e-8 pre-activation
// at step 4 gives a 7e-3 loss difference by step 79). The reference marks the
// first such step; the comparison stops before it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ccscope/training_probe/equivalence.h"
#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {

struct Reference64 {
  std::vector<double> losses;  // the global batch's mean loss before each step
  // The first step whose forward put a ReLU input within the run's format's
  // rounding of 0 (its loss is still comparable; the next ones are not).
  std::optional<size_t> first_kink_step;
  double kink_margin = 0;                  // that input's |value| relative to its layer's rms
  Precision format = Precision::kFloat32;  // the run's, which set the kink margin
};

// Why the reference does not model `options` ("" when it does): expert
// parallelism's mixture layers are another model.
std::string reference64_unsupported(const TrainOptions& options);

// The reference over options.steps steps. `skipped` (optional, one flag per
// step) marks the steps fp16's loss scaler skipped in the run: the reference
// skips them too (no update, Adam's step count not advanced, as torch's
// GradScaler does).
Reference64 reference64_losses(const TrainOptions& options, const std::vector<bool>& skipped = {});

// The run's curve against the reference up to its first kink (included), with
// `tolerance` relative, and over `horizon` steps at most (a 16-bit run's
// rounding_horizon, equivalence.h); the result names the reference and says
// where a kink stopped it.
EquivalenceResult compare_with_reference64(std::span<const double> curve,
                                           const Reference64& reference, double tolerance,
                                           size_t horizon = SIZE_MAX);

}  // namespace ccscope::training_probe
