#pragma once
// The forward and backward over a rank's layers, written once for every
// strategy. A layer is the model's linear layer whole (data parallel, a
// pipeline stage's layers), split by output features (a tensor-parallel
// column layer) or by input features (a row layer), or a mixture of experts.
// The strategy's LayerHooks say where a layer's parameters and gradients are
// and do the communication a split or mixture layer needs.
#include <cstddef>
#include <span>
#include <vector>

#include "ccscope/training_probe/layout.h"
#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {

enum class LayerRole { kFull, kColumn, kRow, kMixture };

struct LocalLayer {
  size_t layer = 0;  // in the model
  LayerRole role = LayerRole::kFull;
  Range shard;        // column: output features held; row: input features held
  size_t offset = 0;  // weight, then bias, in the strategy's parameter vector
  size_t weight_count = 0;
  size_t bias_count = 0;
  size_t in = 0, out = 0;  // this rank's GEMM
  bool last = false;       // the model's last layer: no nonlinearity
};

// Layer `layer` of a model `width` wide and `depth` deep, whole, its weight at `offset`.
LocalLayer full_layer(size_t layer, size_t width, size_t depth, size_t offset);

// One micro-batch through some layers: what backward needs, per layer (empty
// for a mixture, whose strategy keeps its own).
struct LayerCache {
  std::vector<std::vector<float>> inputs, pre, outs;
  double bytes(size_t element) const;
};

class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  // The layer's weight, then its bias, for its forward and for its backward.
  virtual const float* forward_parameters(const LocalLayer& layer) = 0;
  virtual void after_forward(const LocalLayer& /*layer*/) {}
  virtual const float* backward_parameters(const LocalLayer& layer) = 0;
  // Where the layer's weight (then bias) gradient accumulates.
  virtual float* gradients(const LocalLayer& layer) = 0;
  virtual void after_backward(const LocalLayer& /*layer*/) {}
  // Tensor parallel: `values` summed over the tensor group (a row layer's
  // partial outputs forward, a column layer's input gradient backward).
  virtual void tensor_all_reduce(std::vector<float>& values, bool backward, StepFigures& f);
  // A mixture-of-experts layer: its output from `x`, its input gradient from `dy`.
  virtual std::vector<float> mixture_forward(const LocalLayer& layer, std::vector<float> x,
                                             StepFigures& f);
  virtual std::vector<float> mixture_backward(const LocalLayer& layer, std::vector<float> dy,
                                              StepFigures& f);
};

// The model's arithmetic every strategy shares.
struct LayerPass {
  Activation activation;
  Precision precision;
  size_t batch;  // rows of x
};

// `x` (rounded to the compute format) through `layers`; returns the output.
std::vector<float> forward_layers(std::span<const LocalLayer> layers, std::vector<float> x,
                                  const LayerPass& pass, LayerCache& cache, LayerHooks& hooks,
                                  StepFigures& f);
// `grad` (the output's gradient) back through `layers`, accumulating their
// gradients; returns the input's gradient (empty past the model's first layer).
std::vector<float> backward_layers(std::span<const LocalLayer> layers, std::vector<float> grad,
                                   const LayerPass& pass, const LayerCache& cache,
                                   LayerHooks& hooks, StepFigures& f);

}  // namespace ccscope::training_probe
