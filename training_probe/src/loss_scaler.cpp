#include "ccscope/training_probe/loss_scaler.h"

#include <algorithm>
#include <cmath>

namespace ccscope::training_probe {

LossScaler::LossScaler(LossScalerOptions options)
    : options_(options),
      scale_(std::ldexp(1.0, options.initial_scale_power)),
      hysteresis_left_(std::max(options.hysteresis, 1)) {}

bool LossScaler::update(bool overflow) {
  if (overflow) {
    // DeepSpeed: the scale drops once the hysteresis is used up; the step is
    // skipped either way.
    if (hysteresis_left_ <= 1)
      scale_ = std::max(scale_ / 2.0, options_.min_scale);
    else
      --hysteresis_left_;
    good_steps_ = 0;
    return true;
  }
  if (++good_steps_ >= options_.window) {
    scale_ *= 2.0;
    good_steps_ = 0;
    hysteresis_left_ = std::max(options_.hysteresis, 1);
  }
  return false;
}

}  // namespace ccscope::training_probe
