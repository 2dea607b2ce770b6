#pragma once
// Reads a DeepSpeed JSON config into the probe's options: train_batch_size,
// train_micro_batch_size_per_gpu, gradient_accumulation_steps, fp16 (enabled,
// initial_scale_power, loss_scale_window, hysteresis, min_loss_scale), bf16
// (enabled), zero_optimization (stage, offload_optimizer, offload_param,
// overlap_comm, reduce_bucket_size, contiguous_gradients), gradient_clipping,
// optimizer (type SGD/Adam/AdamW, params lr, momentum, betas, eps,
// weight_decay). Says which keys it honoured and which it ignored.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {

// A config that cannot be used; what() is one line naming the key and what to do.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DeepSpeedConfig {
  TrainOptions options;               // `base` with the config applied
  std::string offload;                // "", "optimizer", "params" (offload_param implies both)
  std::vector<std::string> honoured;  // dotted keys: "zero_optimization.stage"
  std::vector<std::string>
      ignored;  // keys present but not modelled, with why: "wall_clock_breakdown (reporting only)"
  // DeepSpeed's own defaults applied where the config is silent, with their
  // values: "zero_optimization.overlap_comm false (below stage 3)".
  std::vector<std::string> defaulted;
};

// `text` is the file's content, `ranks` the world size (train_batch_size =
// micro batch x accumulation x ranks must hold, as DeepSpeed checks).
// Throws ConfigError.
DeepSpeedConfig parse_deepspeed_config(std::string_view text, const TrainOptions& base,
                                       size_t ranks);

}  // namespace ccscope::training_probe
