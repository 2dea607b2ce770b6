#pragma once
// Optimizers as PyTorch's torch.optim.SGD (momentum, dampening 0, no Nesterov)
// and torch.optim.AdamW compute them, element by element, so that a ZeRO shard
// steps its own range of the flat vector with the same arithmetic.
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace ccscope::training_probe {

enum class OptimizerKind { kSgd, kAdam, kAdamW };
std::string_view name(OptimizerKind kind);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;
  double momentum = 0.9;                          // SGD
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam, AdamW
  double weight_decay = 0.0;  // SGD/Adam: added to the gradient; AdamW: decoupled
};

// Float32 words of optimizer state per parameter: SGD 1 with momentum, 0
// without; Adam and AdamW 2.
size_t state_words_per_parameter(const OptimizerOptions& options);

// The state of one range of parameters (the whole vector, or a shard).
class Optimizer {
 public:
  Optimizer(OptimizerOptions options, size_t parameters);
  // One step over `parameters` with `gradients` (the same length as at
  // construction). `step` counts from 1 (Adam's bias correction).
  void step(std::span<float> parameters, std::span<const float> gradients, size_t step);
  size_t state_bytes() const;
  // Adam's second moment (v), for the tests that check torch's arithmetic.
  std::span<const float> second_moment() const { return second_; }
  const OptimizerOptions& options() const { return options_; }

 private:
  OptimizerOptions options_;
  std::vector<float> first_;   // SGD momentum buffer, Adam m
  std::vector<float> second_;  // Adam v
  bool started_ = false;       // SGD: the first step copies the gradient into the buffer
};

}  // namespace ccscope::training_probe
