#include "ccscope/training_probe/optimizer.h"

#include <cmath>
#include <stdexcept>

namespace ccscope::training_probe {

std::string_view name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
  }
  return "?";
}

size_t state_words_per_parameter(const OptimizerOptions& options) {
  if (options.kind != OptimizerKind::kSgd) return 2;
  return options.momentum != 0.0 ? 1 : 0;
}

Optimizer::Optimizer(OptimizerOptions options, size_t parameters) : options_(options) {
  const bool momentum = options.kind != OptimizerKind::kSgd || options.momentum != 0.0;
  if (momentum) first_.assign(parameters, 0.0f);
  if (options.kind != OptimizerKind::kSgd) second_.assign(parameters, 0.0f);
}

size_t Optimizer::state_bytes() const { return (first_.size() + second_.size()) * sizeof(float); }

void Optimizer::step(std::span<float> parameters, std::span<const float> gradients, size_t step) {
  if (parameters.size() != gradients.size())
    throw std::invalid_argument("optimizer step: parameters and gradients differ in length");
  const float lr = static_cast<float>(options_.lr);
  const float wd = static_cast<float>(options_.weight_decay);
  const size_t n = parameters.size();
  if (options_.kind == OptimizerKind::kSgd) {
    // torch.optim.SGD: d = g + wd p; buf = d (first step) or momentum buf + d; p -= lr buf.
    const float momentum = static_cast<float>(options_.momentum);
    for (size_t i = 0; i < n; ++i) {
      float d = gradients[i];
      if (wd != 0.0f) d += wd * parameters[i];
      if (!first_.empty()) {
        first_[i] = started_ ? momentum * first_[i] + d : d;
        d = first_[i];
      }
      parameters[i] -= lr * d;
    }
    started_ = true;
    return;
  }
  // torch.optim.Adam / AdamW (amsgrad off).
  const float b1 = static_cast<float>(options_.beta1);
  const float b2 = static_cast<float>(options_.beta2);
  const float eps = static_cast<float>(options_.eps);
  // 1 - beta in double, then float (torch takes them as Python floats): in
  // float, 1 - 0.999f is 0.00099998713, and v drifts from torch's.
  const float one_minus_b1 = static_cast<float>(1.0 - options_.beta1);
  const float one_minus_b2 = static_cast<float>(1.0 - options_.beta2);
  const double t = static_cast<double>(step);
  const float bias1 = static_cast<float>(1.0 - std::pow(options_.beta1, t));
  const float bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(options_.beta2, t)));
  const float step_size = lr / bias1;
  const bool decoupled = options_.kind == OptimizerKind::kAdamW;
  for (size_t i = 0; i < n; ++i) {
    float g = gradients[i];
    if (decoupled)
      parameters[i] *= 1.0f - lr * wd;
    else if (wd != 0.0f)
      g += wd * parameters[i];
    first_[i] = b1 * first_[i] + one_minus_b1 * g;
    second_[i] = b2 * second_[i] + one_minus_b2 * g * g;
    const float denominator = std::sqrt(second_[i]) / bias2_sqrt + eps;
    parameters[i] -= step_size * first_[i] / denominator;
  }
}

}  // namespace ccscope::training_probe
