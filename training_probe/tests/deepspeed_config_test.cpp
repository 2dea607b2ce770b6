#include "ccscope/training_probe/deepspeed_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#ifndef CCSCOPE_DS_CONFIG_DIR
#error "CCSCOPE_DS_CONFIG_DIR must name training_probe/tests/data/deepspeed"
#endif

namespace ccscope::training_probe {
namespace {

std::string load(const std::string& name) {
  std::ifstream in(std::string(CCSCOPE_DS_CONFIG_DIR) + "/" + name);
  EXPECT_TRUE(in) << "cannot open " << name;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool has(const std::vector<std::string>& list, const std::string& entry) {
  return std::find(list.begin(), list.end(), entry) != list.end();
}

std::string listed(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& entry : list) out += "\n  " + entry;
  return out;
}

// The message of the ConfigError `text` raises ("" and a failure when none).
std::string error_of(const std::string& text, size_t ranks = 4, const TrainOptions& base = {}) {
  try {
    parse_deepspeed_config(text, base, ranks);
  } catch (const ConfigError& e) {
    std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.rfind("deepspeed config: ", 0), 0u) << what;
    return what;
  }
  ADD_FAILURE() << "no ConfigError for " << text;
  return "";
}

#define EXPECT_HAS(list, entry) EXPECT_TRUE(has(list, entry)) << entry << " not in" << listed(list)
#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(DeepSpeedConfig, Zero3WithOffloadAndBf16) {
  TrainOptions base;
  base.prefetch = false;
  DeepSpeedConfig c = parse_deepspeed_config(load("zero3_offload_bf16.json"), base, 8);
  EXPECT_EQ(c.options.strategy, Strategy::kZero3);
  EXPECT_EQ(c.options.precision, Precision::kBFloat16);
  EXPECT_EQ(c.offload, "params");
  EXPECT_EQ(c.options.global_batch, 64u);  // 4 x 2 x 8
  EXPECT_EQ(c.options.micro_batches, 2u);
  EXPECT_TRUE(c.options.overlap);
  EXPECT_EQ(c.options.bucket_bytes, 100'000'000u);  // 5e7 bf16 elements
  EXPECT_TRUE(c.options.prefetch);
  ASSERT_TRUE(c.options.grad_clip.has_value());
  EXPECT_DOUBLE_EQ(*c.options.grad_clip, 1.0);
  EXPECT_EQ(c.options.optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_DOUBLE_EQ(c.options.optimizer.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.options.optimizer.beta1, 0.9);
  EXPECT_DOUBLE_EQ(c.options.optimizer.beta2, 0.95);
  EXPECT_DOUBLE_EQ(c.options.optimizer.weight_decay, 0.1);
  for (const char* key :
       {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
        "bf16.enabled", "zero_optimization.stage", "zero_optimization.offload_optimizer.device",
        "zero_optimization.offload_param.device", "zero_optimization.overlap_comm",
        "zero_optimization.reduce_bucket_size", "zero_optimization.stage3_prefetch_bucket_size",
        "gradient_clipping", "optimizer.type", "optimizer.params.lr", "optimizer.params.betas"}) {
    EXPECT_HAS(c.honoured, key);
  }
  EXPECT_HAS(c.ignored, "scheduler (the probe keeps lr constant)");
  EXPECT_HAS(c.ignored, "steps_per_print (reporting only)");
  EXPECT_HAS(c.ignored, "wall_clock_breakdown (reporting only)");
  EXPECT_HAS(c.ignored, "zero_optimization.contiguous_gradients (memory layout only)");
  EXPECT_HAS(c.ignored,
             "zero_optimization.stage3_max_live_parameters (stage 3 tuning, not modelled)");
  EXPECT_HAS(c.ignored,
             "zero_optimization.offload_param.pin_memory (offload tuning, not modelled)");
  // Every key of the file is accounted for, once.
  EXPECT_EQ(c.honoured.size() + c.ignored.size(), 16u + 11u)
      << listed(c.honoured) << listed(c.ignored);
}

TEST(DeepSpeedConfig, Zero2WithFp16LossScaling) {
  TrainOptions base;
  base.grad_clip = 2.0;
  DeepSpeedConfig c = parse_deepspeed_config(load("zero2_fp16.json"), base, 2);
  EXPECT_EQ(c.options.strategy, Strategy::kZero2);
  EXPECT_EQ(c.options.precision, Precision::kFloat16);
  EXPECT_EQ(c.options.loss_scaler.initial_scale_power, 12);
  EXPECT_EQ(c.options.loss_scaler.window, 500u);
  EXPECT_EQ(c.options.loss_scaler.hysteresis, 2);
  EXPECT_DOUBLE_EQ(c.options.loss_scaler.min_scale, 1.0);
  EXPECT_EQ(c.options.global_batch, 64u);  // 8 x 4 x 2, derived
  EXPECT_EQ(c.options.micro_batches, 4u);
  EXPECT_EQ(c.offload, "optimizer");
  EXPECT_FALSE(c.options.overlap);
  EXPECT_EQ(c.options.bucket_bytes, 400'000'000u);  // 2e8 fp16 elements
  EXPECT_FALSE(c.options.grad_clip.has_value());    // 0: no clipping
  // DeepSpeed's "Adam" is FusedAdam with adam_w_mode=True: AdamW.
  EXPECT_EQ(c.options.optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_DOUBLE_EQ(c.options.optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.options.optimizer.weight_decay, 3e-7);
  for (const char* key : {"fp16.enabled", "fp16.loss_scale", "fp16.loss_scale_window",
                          "fp16.initial_scale_power", "fp16.hysteresis", "fp16.min_loss_scale"}) {
    EXPECT_HAS(c.honoured, key);
  }
  EXPECT_FALSE(has(c.honoured, "train_batch_size"));  // derived, not given
  EXPECT_HAS(c.ignored,
             "fp16.consecutive_hysteresis (not modelled: hysteresis refills only when the scale "
             "is halved)");
  EXPECT_HAS(c.ignored,
             "zero_optimization.reduce_scatter (not modelled: the probe always "
             "reduce-scatters)");
  EXPECT_HAS(c.ignored,
             "zero_optimization.allgather_bucket_size (not modelled: updated shards "
             "are gathered whole)");
}

TEST(DeepSpeedConfig, HfTrainerAutoValuesKeepTheProbesOwn) {
  TrainOptions base;
  base.global_batch = 48;
  base.micro_batches = 3;
  base.bucket_bytes = 12345;
  base.grad_clip = 0.7;
  base.optimizer.lr = 0.02;
  base.optimizer.beta1 = 0.5;
  base.optimizer.beta2 = 0.6;
  base.optimizer.eps = 1e-5;
  base.optimizer.weight_decay = 0.25;
  DeepSpeedConfig c = parse_deepspeed_config(load("hf_trainer_zero2_auto.json"), base, 4);
  EXPECT_EQ(c.options.precision, Precision::kFloat32);
  EXPECT_EQ(c.options.global_batch, 48u);
  EXPECT_EQ(c.options.micro_batches, 3u);
  EXPECT_EQ(c.options.bucket_bytes, 12345u);
  ASSERT_TRUE(c.options.grad_clip.has_value());
  EXPECT_DOUBLE_EQ(*c.options.grad_clip, 0.7);
  EXPECT_EQ(c.options.strategy, Strategy::kZero2);
  EXPECT_EQ(c.offload, "");  // device "none"
  EXPECT_EQ(c.options.optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_DOUBLE_EQ(c.options.optimizer.lr, 0.02);
  EXPECT_DOUBLE_EQ(c.options.optimizer.beta1, 0.5);
  EXPECT_DOUBLE_EQ(c.options.optimizer.beta2, 0.6);
  EXPECT_DOUBLE_EQ(c.options.optimizer.eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.options.optimizer.weight_decay, 0.25);
  for (const char* key :
       {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
        "gradient_clipping", "fp16.enabled", "bf16.enabled", "zero_optimization.reduce_bucket_size",
        "optimizer.params.lr", "optimizer.params.betas"}) {
    EXPECT_HAS(c.ignored, std::string(key) + " (auto: the probe's own value kept)");
  }
  EXPECT_HAS(c.ignored, "fp16.initial_scale_power (fp16 is not enabled)");

  // fp16 "auto" with the probe in fp16: the scaler keys apply.
  base.precision = Precision::kFloat16;
  base.loss_scaler.window = 7;
  c = parse_deepspeed_config(load("hf_trainer_zero2_auto.json"), base, 4);
  EXPECT_EQ(c.options.precision, Precision::kFloat16);
  EXPECT_EQ(c.options.loss_scaler.window, 1000u);
  EXPECT_HAS(c.honoured, "fp16.loss_scale_window");
}

TEST(DeepSpeedConfig, Zero1SgdFp32WithComments) {
  TrainOptions base;
  base.precision = Precision::kFloat32;
  DeepSpeedConfig c = parse_deepspeed_config(load("zero1_sgd_fp32.json"), base, 4);
  EXPECT_EQ(c.options.strategy, Strategy::kZero1);
  EXPECT_EQ(c.options.global_batch, 96u);
  EXPECT_EQ(c.options.micro_batches, 3u);  // micro batch 8 per rank
  EXPECT_EQ(c.options.optimizer.kind, OptimizerKind::kSgd);
  EXPECT_DOUBLE_EQ(c.options.optimizer.lr, 0.05);
  EXPECT_DOUBLE_EQ(c.options.optimizer.momentum, 0.9);
  EXPECT_DOUBLE_EQ(c.options.optimizer.weight_decay, 1e-4);
  EXPECT_EQ(c.options.bucket_bytes, 2'000'000'000u);  // 5e8 fp32 elements
  ASSERT_TRUE(c.options.grad_clip.has_value());
  EXPECT_DOUBLE_EQ(*c.options.grad_clip, 0.5);
  EXPECT_EQ(c.offload, "");
  EXPECT_HAS(c.ignored, "my_launcher_setting (unknown to the probe)");
  EXPECT_HAS(c.ignored, "flops_profiler (reporting only)");
  EXPECT_HAS(c.ignored, "prescale_gradients (not modelled: gradients are averaged after the sum)");
  EXPECT_HAS(c.ignored, "optimizer.params.nesterov (not modelled)");
}

struct Batch {
  size_t global, micro_batches;
};
Batch batch_of(const std::string& text, size_t ranks, TrainOptions base = {}) {
  DeepSpeedConfig c = parse_deepspeed_config(text, base, ranks);
  return {c.options.global_batch, c.options.micro_batches};
}

TEST(DeepSpeedConfig, BatchSizesTwoGiveTheThird) {
  // train & micro -> accumulation = 96 / (4 x 4)
  Batch b = batch_of(R"({"train_batch_size": 96, "train_micro_batch_size_per_gpu": 4})", 4);
  EXPECT_EQ(b.global, 96u);
  EXPECT_EQ(b.micro_batches, 6u);
  // train & accumulation -> micro batch 96 / (3 x 4) = 8, accumulation kept
  b = batch_of(R"({"train_batch_size": 96, "gradient_accumulation_steps": 3})", 4);
  EXPECT_EQ(b.global, 96u);
  EXPECT_EQ(b.micro_batches, 3u);
  // micro & accumulation -> train = 2 x 5 x 3
  b = batch_of(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 5})", 3);
  EXPECT_EQ(b.global, 30u);
  EXPECT_EQ(b.micro_batches, 5u);
  // all three, consistent; floats with integral values accepted
  b = batch_of(R"({"train_batch_size": 64.0, "train_micro_batch_size_per_gpu": 4,
                   "gradient_accumulation_steps": 2})",
               8);
  EXPECT_EQ(b.global, 64u);
  EXPECT_EQ(b.micro_batches, 2u);
  // one alone: accumulation 1, as DeepSpeed
  TrainOptions base;
  base.micro_batches = 4;
  b = batch_of(R"({"train_batch_size": 32})", 4, base);
  EXPECT_EQ(b.global, 32u);
  EXPECT_EQ(b.micro_batches, 1u);
  b = batch_of(R"({"train_micro_batch_size_per_gpu": 16})", 2, base);
  EXPECT_EQ(b.global, 32u);
  EXPECT_EQ(b.micro_batches, 1u);
  // accumulation alone: the probe's global batch stands
  base.global_batch = 120;
  b = batch_of(R"({"gradient_accumulation_steps": 5})", 4, base);
  EXPECT_EQ(b.global, 120u);
  EXPECT_EQ(b.micro_batches, 5u);
  // none: the probe's own
  b = batch_of("{}", 4, base);
  EXPECT_EQ(b.global, 120u);
  EXPECT_EQ(b.micro_batches, 4u);
}

TEST(DeepSpeedConfig, BatchSizesInconsistentOrIndivisible) {
  std::string e = error_of(R"({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 8,
                                "gradient_accumulation_steps": 4})",
                           4);
  EXPECT_CONTAINS(e,
                  "train_batch_size 100 != train_micro_batch_size_per_gpu 8 x "
                  "gradient_accumulation_steps 4 x 4 ranks = 128");
  e = error_of(R"({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 8})", 4);
  EXPECT_CONTAINS(e,
                  "train_batch_size 100 is not a multiple of train_micro_batch_size_per_gpu 8 "
                  "x 4 ranks = 32");
  e = error_of(R"({"train_batch_size": 100, "gradient_accumulation_steps": 3})", 4);
  EXPECT_CONTAINS(e, "gradient_accumulation_steps 3 x 4 ranks = 12");
  e = error_of(R"({"train_batch_size": 10})", 4);
  EXPECT_CONTAINS(e, "train_batch_size 10 does not divide over 4 ranks");
  TrainOptions base;
  base.global_batch = 128;
  e = error_of(R"({"gradient_accumulation_steps": 3})", 4, base);
  EXPECT_CONTAINS(e, "probe's global batch 128 is not a multiple of 3 x 4 ranks = 12");
  e = error_of(R"({"train_micro_batch_size_per_gpu": 4294967296,
                   "gradient_accumulation_steps": 4294967296})",
               4);
  EXPECT_CONTAINS(e, "too large");
}

TEST(DeepSpeedConfig, BatchSizesMustBePositiveWholeNumbers) {
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 0})"),
                  "train_batch_size must be at least 1, got 0");
  EXPECT_CONTAINS(error_of(R"({"train_micro_batch_size_per_gpu": -8})"),
                  "train_micro_batch_size_per_gpu must be at least 1, got -8");
  EXPECT_CONTAINS(error_of(R"({"gradient_accumulation_steps": 2.5})"),
                  "gradient_accumulation_steps must be a whole number, got 2.5");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": "32"})"),
                  R"(train_batch_size must be an integer, got "32")");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": true})"),
                  "train_batch_size must be an integer, got true");
  EXPECT_CONTAINS(error_of("{}", 0), "ranks must be at least 1");
}

TEST(DeepSpeedConfig, MalformedJsonIsOneLine) {
  std::string e = error_of("{\n  \"train_batch_size\": 8,\n    oops: 1\n}");
  EXPECT_CONTAINS(e, "deepspeed config: line 3, column 5: syntax error");
  EXPECT_CONTAINS(e, "fix the JSON at that position");
  EXPECT_EQ(e.find("[json.exception"), std::string::npos) << e;
  e = error_of("{\"fp16\": {\"enabled\": true,\n}}");  // trailing comma
  EXPECT_CONTAINS(e, "line 2, column 1");
  EXPECT_CONTAINS(error_of(""), "the config is empty");
  EXPECT_CONTAINS(error_of(" \n\t"), "the config is empty");
  e = error_of("{\"train_batch_size\": 8");  // truncated
  EXPECT_CONTAINS(e, "line 1");
  e = error_of("{\"a\": \"two\nlines\"}");  // a raw newline inside a string
  EXPECT_CONTAINS(e, "control character U+000A");
  e = error_of(R"({"gradient_clipping": 1e400})");
  EXPECT_CONTAINS(e, "number overflow");
  e = error_of("[1, 2]");
  EXPECT_CONTAINS(e, "the top level must be a JSON object, got [1,2]");
  e = error_of(R"({"zero_optimization": {"stage": 2, "stage": 3}})");
  EXPECT_CONTAINS(e, "duplicate key zero_optimization.stage");
}

// Nested 100,000 deep, `[[[...]]]` crashed the parser (exit 139) and
// `{"a":{"a":...` took 6 GB and 15 s: both are one line at once now.
TEST(DeepSpeedConfig, DeepNestingIsRefusedAtOnce) {
  const auto nested = [](const std::string& open, const std::string& close) {
    std::string text;
    for (int i = 0; i < 100000; ++i) text += open;
    text += "1";
    for (int i = 0; i < 100000; ++i) text += close;
    return text;
  };
  const auto started = std::chrono::steady_clock::now();
  for (const std::string& text : {nested("[", "]"), nested("{\"a\":", "}")})
    EXPECT_EQ(error_of(text),
              "deepspeed config: nested deeper than 256 levels: not a JSON document ccscope "
              "reads; is this a DeepSpeed config?");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

TEST(DeepSpeedConfig, WrongTypesNameTheKey) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {R"({"zero_optimization": {"stage": "two"}})",
       R"(zero_optimization.stage must be an integer, got "two": write 0, 1, 2 or 3)"},
      {R"({"zero_optimization": {"stage": 4}})",
       "zero_optimization.stage must be 0, 1, 2 or 3, got 4"},
      {R"({"zero_optimization": {"stage": -1}})",
       "zero_optimization.stage must be at least 0, got -1"},
      {R"({"zero_optimization": 3})", "zero_optimization must be an object, got 3"},
      {R"({"zero_optimization": {"overlap_comm": 1}})",
       "zero_optimization.overlap_comm must be true or false, got 1"},
      {R"({"zero_optimization": {"reduce_bucket_size": 1.5}})",
       "zero_optimization.reduce_bucket_size must be a whole number, got 1.5"},
      {R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "gpu"}}})",
       R"(zero_optimization.offload_param.device must be "cpu", "nvme" or "none", got "gpu")"},
      {R"({"zero_optimization": {"offload_optimizer": "cpu"}})",
       R"(zero_optimization.offload_optimizer must be an object, got "cpu")"},
      {R"({"fp16": {"enabled": "yes"}})", R"(fp16.enabled must be true or false, got "yes")"},
      {R"({"fp16": true})", "fp16 must be an object, got true"},
      {R"({"fp16": {"enabled": true, "initial_scale_power": 99}})",
       "fp16.initial_scale_power must be at most 63, got 99"},
      {R"({"fp16": {"enabled": true, "loss_scale_window": 0}})",
       "fp16.loss_scale_window must be at least 1, got 0"},
      {R"({"fp16": {"enabled": true, "min_loss_scale": 0}})",
       "fp16.min_loss_scale must be positive"},
      {R"({"gradient_clipping": "1.0"})", R"(gradient_clipping must be a number, got "1.0")"},
      {R"({"gradient_clipping": -1})", "gradient_clipping must be at least 0, got -1"},
      {R"({"optimizer": {"type": 7}})", "optimizer.type must be a string, got 7"},
      {R"({"optimizer": {"params": {}}})", "optimizer.type is missing"},
      {R"({"optimizer": {"type": "Adam", "params": []}})", "optimizer.params must be an object"},
      {R"({"optimizer": {"type": "Adam", "params": {"lr": -0.1}}})",
       "optimizer.params.lr must be at least 0, got -0.1"},
      {R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9]}}})",
       "optimizer.params.betas must be two numbers in [0, 1), got [0.9]"},
      {R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9, 1.5]}}})",
       "optimizer.params.betas must be two numbers in [0, 1)"},
      {R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": "false"}}})",
       R"(optimizer.params.adam_w_mode must be true or false, got "false")"},
  };
  for (const Case& c : cases) {
    EXPECT_CONTAINS(error_of(c.text), c.message);
  }
  // A long value is cut short in the message.
  std::string e = error_of(R"({"train_batch_size": ")" + std::string(500, 'x') + "\"}");
  EXPECT_LT(e.size(), 200u) << e;
}

TEST(DeepSpeedConfig, UnknownAndUnmodelledKeysAreListedWithWhy) {
  DeepSpeedConfig c = parse_deepspeed_config(R"({
    "wall_clock_breakdown": true,
    "my_key": {"x": 1},
    "activation_checkpointing": {"partition_activations": true},
    "zero_optimization": {"stage": 2, "fancy_new_knob": 3, "round_robin_gradients": true},
    "fp16": {"enabled": true, "shiny": 1},
    "bf16": {"enabled": false, "immediate_grad_update": true},
    "optimizer": {"type": "AdamW", "params": {"lr": 0.1, "amsgrad": false, "zeta": 2}, "extra": 1},
    "gradient_clipping": null
  })",
                                             {}, 1);
  EXPECT_HAS(c.ignored, "wall_clock_breakdown (reporting only)");
  EXPECT_HAS(c.ignored, "my_key (unknown to the probe)");
  EXPECT_HAS(c.ignored, "activation_checkpointing (not modelled: activations are kept)");
  EXPECT_HAS(c.ignored, "zero_optimization.fancy_new_knob (unknown to the probe)");
  EXPECT_HAS(c.ignored,
             "zero_optimization.round_robin_gradients (offload copy order, not modelled)");
  EXPECT_HAS(c.ignored, "fp16.shiny (unknown to the probe)");
  EXPECT_HAS(c.ignored, "bf16.immediate_grad_update (not modelled)");
  EXPECT_HAS(c.ignored, "optimizer.params.amsgrad (not modelled)");
  EXPECT_HAS(c.ignored, "optimizer.params.zeta (unknown to the probe)");
  EXPECT_HAS(c.ignored, "optimizer.extra (unknown to the probe)");
  EXPECT_HAS(c.ignored, "gradient_clipping (null: treated as absent)");
  EXPECT_EQ(c.ignored.size(), 11u) << listed(c.ignored);
  EXPECT_FALSE(has(c.honoured, "my_key"));
  // Keys with control characters stay on one line.
  c = parse_deepspeed_config("{\"odd\\nkey\": 1}", {}, 1);
  EXPECT_HAS(c.ignored, "odd\\u000akey (unknown to the probe)");
}

TEST(DeepSpeedConfig, OffloadParamNeedsStage3) {
  DeepSpeedConfig c = parse_deepspeed_config(
      R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})", {}, 2);
  EXPECT_EQ(c.offload, "params");
  EXPECT_HAS(c.honoured, "zero_optimization.offload_param.device");

  std::string e =
      error_of(R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})");
  EXPECT_CONTAINS(e, "zero_optimization.offload_param is valid only with stage 3, got stage 2");
  EXPECT_CONTAINS(e, "set zero_optimization.stage to 3 or drop offload_param");

  // Stage absent: the probe's strategy decides.
  TrainOptions base;
  base.strategy = Strategy::kZero3;
  c = parse_deepspeed_config(R"({"zero_optimization": {"offload_param": {"device": "cpu"}}})", base,
                             2);
  EXPECT_EQ(c.offload, "params");
  base.strategy = Strategy::kZero1;
  e = error_of(R"({"zero_optimization": {"offload_param": {"device": "cpu"}}})", 2, base);
  EXPECT_CONTAINS(e, "got stage 1 (the probe's strategy)");

  // nvme: listed, not modelled; "none" is no offload.
  c = parse_deepspeed_config(R"({"zero_optimization": {"stage": 3,
      "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"},
      "offload_optimizer": {"device": "none"}}})",
                             {}, 2);
  EXPECT_EQ(c.offload, "");
  EXPECT_HAS(c.ignored,
             "zero_optimization.offload_param.device (nvme not modelled: no offload "
             "assumed)");
  // offload_optimizer to cpu with offload_param on nvme: the optimizer only.
  c = parse_deepspeed_config(R"({"zero_optimization": {"stage": 3,
      "offload_param": {"device": "nvme"}, "offload_optimizer": {"device": "cpu"}}})",
                             {}, 2);
  EXPECT_EQ(c.offload, "optimizer");

  e = error_of(R"({"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}})");
  EXPECT_CONTAINS(e, "zero_optimization.offload_optimizer needs stage 1, 2 or 3, got stage 0");
}

TEST(DeepSpeedConfig, StagesMapToStrategies) {
  const Strategy expected[] = {Strategy::kDdp, Strategy::kZero1, Strategy::kZero2,
                               Strategy::kZero3};
  for (int stage = 0; stage < 4; ++stage) {
    DeepSpeedConfig c = parse_deepspeed_config(
        R"({"zero_optimization": {"stage": )" + std::to_string(stage) + "}}", {}, 2);
    EXPECT_EQ(c.options.strategy, expected[stage]) << stage;
  }
  // The legacy boolean form.
  EXPECT_EQ(parse_deepspeed_config(R"({"zero_optimization": true})", {}, 2).options.strategy,
            Strategy::kZero1);
  TrainOptions base;
  base.strategy = Strategy::kZero3;
  EXPECT_EQ(parse_deepspeed_config(R"({"zero_optimization": false})", base, 2).options.strategy,
            Strategy::kDdp);
}

TEST(DeepSpeedConfig, Precision) {
  EXPECT_CONTAINS(error_of(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})"),
                  "fp16.enabled and bf16.enabled are both true: enable one of them");
  EXPECT_EQ(parse_deepspeed_config(R"({"bfloat16": {"enabled": true}})", {}, 1).options.precision,
            Precision::kBFloat16);
  DeepSpeedConfig c = parse_deepspeed_config(
      R"({"bf16": {"enabled": false}, "bfloat16": {"enabled": true}})", {}, 1);
  EXPECT_EQ(c.options.precision, Precision::kFloat32);  // bf16 wins over the old name
  EXPECT_HAS(c.ignored, "bfloat16 (superseded by bf16)");
  // An explicit false turns the probe's format off; absent keeps it.
  TrainOptions base;
  base.precision = Precision::kFloat16;
  EXPECT_EQ(parse_deepspeed_config(R"({"fp16": {"enabled": false}})", base, 1).options.precision,
            Precision::kFloat32);
  EXPECT_EQ(parse_deepspeed_config(R"({"bf16": {"enabled": false}})", base, 1).options.precision,
            Precision::kFloat16);
  EXPECT_EQ(parse_deepspeed_config(R"({"bf16": {"enabled": true}})", base, 1).options.precision,
            Precision::kBFloat16);
  // Defaults of the loss scaler stay when the keys are absent.
  c = parse_deepspeed_config(R"({"fp16": {"enabled": true}})", {}, 1);
  EXPECT_EQ(c.options.loss_scaler.initial_scale_power, 16);
  EXPECT_EQ(c.options.loss_scaler.window, 1000u);
  EXPECT_EQ(c.options.loss_scaler.hysteresis, 2);
  EXPECT_DOUBLE_EQ(c.options.loss_scaler.min_scale, 1.0);
}

TEST(DeepSpeedConfig, StaticLossScaleIsIgnored) {
  DeepSpeedConfig c =
      parse_deepspeed_config(R"({"fp16": {"enabled": true, "loss_scale": 128}})", {}, 1);
  EXPECT_EQ(c.options.precision, Precision::kFloat16);
  EXPECT_HAS(c.ignored,
             "fp16.loss_scale (static loss scale not modelled: the probe scales dynamically)");
  EXPECT_FALSE(has(c.honoured, "fp16.loss_scale"));
}

TEST(DeepSpeedConfig, ReduceBucketSizeCountsElementsOfTheGradientType) {
  const std::string text = R"({"zero_optimization": {"reduce_bucket_size": 5e8}})";
  TrainOptions base;
  base.precision = Precision::kFloat32;
  EXPECT_EQ(parse_deepspeed_config(text, base, 1).options.bucket_bytes, 2'000'000'000u);
  base.precision = Precision::kBFloat16;
  EXPECT_EQ(parse_deepspeed_config(text, base, 1).options.bucket_bytes, 1'000'000'000u);
  // The config's own precision counts, whatever the order of the keys.
  EXPECT_EQ(
      parse_deepspeed_config(
          R"({"zero_optimization": {"reduce_bucket_size": 100}, "fp16": {"enabled": true}})", {}, 1)
          .options.bucket_bytes,
      200u);
  TrainOptions with_prefetch;
  EXPECT_FALSE(parse_deepspeed_config(
                   R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 0}})",
                   with_prefetch, 1)
                   .options.prefetch);
}

TEST(DeepSpeedConfig, Optimizers) {
  EXPECT_CONTAINS(error_of(R"({"optimizer": {"type": "Lamb", "params": {"lr": 0.1}}})"),
                  "optimizer type Lamb is not modelled; use SGD, Adam or AdamW");
  DeepSpeedConfig c = parse_deepspeed_config(
      R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false, "weight_decay": 0.01}}})",
      {}, 1);
  EXPECT_EQ(c.options.optimizer.kind, OptimizerKind::kAdam);
  EXPECT_DOUBLE_EQ(c.options.optimizer.weight_decay, 0.01);
  c = parse_deepspeed_config(
      R"({"optimizer": {"type": "ADAMW", "params": {"adam_w_mode": false}}})", {}, 1);
  EXPECT_EQ(c.options.optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_HAS(c.ignored, "optimizer.params.adam_w_mode (AdamW always decouples weight decay)");
  // Absent params take the optimizer's own defaults, not the probe's.
  TrainOptions base;
  base.optimizer.lr = 0.5;
  base.optimizer.momentum = 0.99;
  c = parse_deepspeed_config(R"({"optimizer": {"type": "SGD"}})", base, 1);
  EXPECT_EQ(c.options.optimizer.kind, OptimizerKind::kSgd);
  EXPECT_DOUBLE_EQ(c.options.optimizer.lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.options.optimizer.momentum, 0.0);  // torch.optim.SGD's default
  c = parse_deepspeed_config(R"({"optimizer": {"type": "Adam", "params": {"torch_adam": true}}})",
                             base, 1);
  EXPECT_EQ(c.options.optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_DOUBLE_EQ(c.options.optimizer.weight_decay, 0.01);  // torch.optim.AdamW's default
  c = parse_deepspeed_config(
      R"({"optimizer": {"type": "SGD", "params": {"betas": [0.9, 0.99], "momentum": 0.8}}})", base,
      1);
  EXPECT_DOUBLE_EQ(c.options.optimizer.momentum, 0.8);
  EXPECT_HAS(c.ignored, "optimizer.params.betas (Adam only)");
  c = parse_deepspeed_config(R"({"optimizer": {"type": "Adam", "params": {"momentum": 0.8}}})",
                             base, 1);
  EXPECT_HAS(c.ignored, "optimizer.params.momentum (SGD only)");
  // No optimizer section: the probe's optimizer stands.
  c = parse_deepspeed_config("{}", base, 1);
  EXPECT_DOUBLE_EQ(c.options.optimizer.lr, 0.5);
}

// Mutations of the fixtures (every prefix; every value replaced by values of
// other types) give either a config or a one-line ConfigError, never anything
// else.
TEST(DeepSpeedConfig, NeverCrashes) {
  auto check = [](const std::string& text) {
    try {
      parse_deepspeed_config(text, {}, 4);
    } catch (const ConfigError& e) {
      std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_FALSE(what.empty());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a ConfigError: " << e.what() << " for " << text;
    }
  };
  using nlohmann::json;
  const json replacements[] = {
      nullptr,       true, "auto", "x", -1, 0, 1.5, 1e30, json::array(), json::array({1, 2}),
      json::object()};
  for (const char* name : {"zero3_offload_bf16.json", "zero2_fp16.json",
                           "hf_trainer_zero2_auto.json", "zero1_sgd_fp32.json"}) {
    const std::string text = load(name);
    for (size_t n = 0; n <= text.size(); ++n) check(text.substr(0, n));
    const json parsed = json::parse(text, nullptr, true, /*ignore_comments=*/true);
    const json flat = parsed.flatten();
    for (const auto& [pointer, value] : flat.items()) {
      for (const json& replacement : replacements) {
        json mutated = parsed;
        mutated[json::json_pointer(pointer)] = replacement;
        check(mutated.dump());
        // The parent object replaced, too.
        json::json_pointer parent = json::json_pointer(pointer).parent_pointer();
        if (!parent.empty()) {
          mutated = parsed;
          mutated[parent] = replacement;
          check(mutated.dump());
        }
      }
    }
  }
}

}  // namespace
}  // namespace ccscope::training_probe

namespace ccscope::training_probe {
namespace {

// What DeepSpeed does where the config is silent (deepspeed/runtime/zero/config.py):
// overlap_comm true only for stage 3, a 5e8-element reduce bucket, no small first bucket.
TEST(DeepSpeedConfig, LeftOutKeysTakeDeepSpeedsDefaults) {
  TrainOptions base;  // the probe's: overlap on, 25 MiB buckets, 1 MiB first bucket
  for (int stage = 0; stage <= 3; ++stage) {
    const std::string text = R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": )" +
                             std::to_string(stage) + "}}";
    const DeepSpeedConfig c = parse_deepspeed_config(text, base, 1);
    EXPECT_EQ(c.options.overlap, stage == 3) << "stage " << stage;
    EXPECT_EQ(c.options.bucket_bytes, 1'000'000'000u) << "stage " << stage;  // 5e8 bf16
    EXPECT_EQ(c.options.first_bucket_bytes, c.options.bucket_bytes) << "stage " << stage;
    EXPECT_TRUE(has(c.defaulted, stage == 3
                                     ? "zero_optimization.overlap_comm true (stage 3)"
                                     : "zero_optimization.overlap_comm false (below stage 3)"))
        << "stage " << stage;
    EXPECT_TRUE(has(c.defaulted, "zero_optimization.reduce_bucket_size 5e8 elements"));
  }
  // No zero_optimization at all: stage 0, the same defaults.
  const DeepSpeedConfig none = parse_deepspeed_config(R"({"train_batch_size": 8})", base, 1);
  EXPECT_FALSE(none.options.overlap);
  EXPECT_EQ(none.options.bucket_bytes, 2'000'000'000u);  // 5e8 fp32
  // Given keys win, and "auto" keeps the probe's own values.
  const DeepSpeedConfig given = parse_deepspeed_config(
      R"({"zero_optimization": {"stage": 1, "overlap_comm": true, "reduce_bucket_size": 1000}})",
      base, 1);
  EXPECT_TRUE(given.options.overlap);
  EXPECT_EQ(given.options.bucket_bytes, 4000u);
  EXPECT_TRUE(given.defaulted.empty());
  const DeepSpeedConfig automatic = parse_deepspeed_config(
      R"({"zero_optimization": {"stage": 2, "overlap_comm": "auto", "reduce_bucket_size": "auto"}})",
      base, 1);
  EXPECT_EQ(automatic.options.overlap, base.overlap);
  EXPECT_EQ(automatic.options.bucket_bytes, base.bucket_bytes);
  EXPECT_EQ(automatic.options.first_bucket_bytes, base.first_bucket_bytes);
}

}  // namespace
}  // namespace ccscope::training_probe
