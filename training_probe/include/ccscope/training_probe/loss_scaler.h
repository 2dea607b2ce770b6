#pragma once
// fp16's dynamic loss scaling as DeepSpeed's DynamicLossScaler: start at
// 2^initial_scale_power; on an overflow skip the step and, once `hysteresis`
// overflows in a row used up, halve the scale (not below min_scale); after
// `window` steps without overflow double it. A pure state machine.
#include <cstddef>

namespace ccscope::training_probe {

struct LossScalerOptions {
  int initial_scale_power = 16;
  size_t window = 1000;  // loss_scale_window
  int hysteresis = 2;
  double min_scale = 1.0;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options);
  double scale() const { return scale_; }
  // After a step's gradients were checked (on every rank, with the overflow
  // flag already reduced): returns true when the step must be skipped.
  bool update(bool overflow);

 private:
  LossScalerOptions options_;
  double scale_;
  int hysteresis_left_;
  size_t good_steps_ = 0;
};

}  // namespace ccscope::training_probe
