#include "ccscope/training_probe/deepspeed_config.h"

#include "ccscope/common/json_text.h"
#include "ccscope/common/text.h"

// Reads a DeepSpeed config (https://www.deepspeed.ai/docs/config-json/) into
// TrainOptions. Rules followed throughout:
//   - a key that is absent, "auto" (HF Trainer's placeholder) or null keeps
//     `base`'s value; "auto" and null are listed in `ignored`. Exceptions:
//     zero_optimization.overlap_comm and reduce_bucket_size, when absent, take
//     DeepSpeed's defaults (apply_zero_defaults; listed in `defaulted`).
//   - the one exception is the optimizer section: when it is present,
//     DeepSpeed builds a fresh optimizer from `params`, so a parameter that is
//     absent takes the optimizer's own default (torch's / FusedAdam's: lr
//     1e-3, momentum 0, betas (0.9, 0.999), eps 1e-8, weight_decay 0), while
//     "auto" keeps `base`'s value (what HF Trainer would fill in from its own
//     arguments).
//   - every other key is either applied (`honoured`, dotted) or listed in
//     `ignored` with why; none is dropped silently.
//   - every error is a ConfigError of one line that names the key and says
//     what to do.
// This file uses nothing from the other training_probe sources.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ccscope::training_probe {
namespace {

// ordered_json keeps the file's key order, so that `ignored` follows it.
using Json = nlohmann::ordered_json;

constexpr std::string_view kPrefix = "deepspeed config: ";

// Control characters (a key may hold an escaped newline) as \u00XX, so that
// messages and list entries stay on one line.
std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", u);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out;
}

[[noreturn]] void fail(const std::string& message) {
  throw ConfigError(std::string(kPrefix) + printable(message));
}

// A value as the file would write it, cut short: for messages.
std::string shown(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  constexpr size_t kMax = 40;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

std::string shown(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

std::string join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// 2 bytes for fp16/bf16, 4 for fp32 (model.cpp's element_bytes, not linked here).
size_t gradient_element_bytes(Precision precision) {
  return precision == Precision::kFloat32 ? 4 : 2;
}

std::optional<uint64_t> checked_product(std::initializer_list<uint64_t> factors) {
  uint64_t product = 1;
  for (uint64_t f : factors) {
    if (__builtin_mul_overflow(product, f, &product)) return std::nullopt;
  }
  return product;
}

class Reader {
 public:
  explicit Reader(DeepSpeedConfig& out) : out_(out) {}

  void honour(const std::string& key) { out_.honoured.push_back(printable(key)); }
  void ignore(const std::string& key, std::string_view why) {
    out_.ignored.push_back(printable(key) + " (" + std::string(why) + ")");
  }

  // True (and listed) when the value stands for "not given": "auto" or null.
  bool absent(const Json* value, const std::string& key) {
    if (value == nullptr) return true;
    if (value->is_null()) {
      ignore(key, "null: treated as absent");
      return true;
    }
    if (value->is_string() && value->get_ref<const std::string&>() == "auto") {
      ignore(key, "auto: the probe's own value kept");
      return true;
    }
    return false;
  }

  // A whole number >= minimum: a JSON integer, or a float with an integral
  // value (DeepSpeed configs write bucket sizes as 5e8).
  static uint64_t count(const Json& value, const std::string& key, uint64_t minimum,
                        std::string_view hint = "") {
    const std::string what_to_do =
        hint.empty() ? "write a whole number of at least " + std::to_string(minimum)
                     : std::string(hint);
    if (value.is_number_unsigned()) {
      uint64_t v = value.get<uint64_t>();
      if (v < minimum) {
        fail(key + " must be at least " + std::to_string(minimum) + ", got " + shown(value) + ": " +
             what_to_do);
      }
      return v;
    }
    if (value.is_number_integer()) {  // negative (non-negative ones are unsigned)
      fail(key + " must be at least " + std::to_string(minimum) + ", got " + shown(value) + ": " +
           what_to_do);
    }
    if (value.is_number_float()) {
      double v = value.get<double>();
      if (!std::isfinite(v) || v != std::floor(v)) {
        fail(key + " must be a whole number, got " + shown(value) + ": " + what_to_do);
      }
      if (v < static_cast<double>(minimum)) {
        fail(key + " must be at least " + std::to_string(minimum) + ", got " + shown(value) + ": " +
             what_to_do);
      }
      if (v >= 18446744073709551616.0) {  // 2^64
        fail(key + " is too large, got " + shown(value) + ": " + what_to_do);
      }
      return static_cast<uint64_t>(v);
    }
    fail(key + " must be an integer, got " + shown(value) + ": " + what_to_do);
  }

  // A finite number >= minimum (bool is not a number).
  static double number(const Json& value, const std::string& key, double minimum) {
    if (!value.is_number()) {
      fail(key + " must be a number, got " + shown(value) + ": write a number of at least " +
           shown(minimum));
    }
    double v = value.get<double>();
    if (!std::isfinite(v) || v < minimum) {
      fail(key + " must be at least " + shown(minimum) + ", got " + shown(value) +
           ": write a number of at least " + shown(minimum));
    }
    return v;
  }

  static bool boolean(const Json& value, const std::string& key) {
    if (!value.is_boolean()) {
      fail(key + " must be true or false, got " + shown(value) + ": write true or false");
    }
    return value.get<bool>();
  }

  static std::string string(const Json& value, const std::string& key, std::string_view hint) {
    if (!value.is_string()) {
      fail(key + " must be a string, got " + shown(value) + ": " + std::string(hint));
    }
    return value.get<std::string>();
  }

  static void require_object(const Json& value, const std::string& key) {
    if (!value.is_object()) {
      fail(key + " must be an object, got " + shown(value) + ": write it as { \"key\": value }");
    }
  }

 private:
  DeepSpeedConfig& out_;
};

// Parses with comments allowed (DeepSpeed reads configs with hjson, which
// accepts them) and duplicate keys refused (DeepSpeed refuses them too:
// dict_raise_error_on_duplicate_keys).
Json parse_text(std::string_view text) {
  std::vector<std::set<std::string>> seen;  // keys of each open object
  std::vector<std::string> path;            // dotted path of each open object
  std::string last_key;
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        path.push_back(path.empty() ? std::string() : join(path.back(), last_key));
        seen.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!seen.empty()) seen.pop_back();
        if (!path.empty()) path.pop_back();
        break;
      case Json::parse_event_t::key:
        last_key = parsed.get<std::string>();
        if (!seen.empty() && !seen.back().insert(last_key).second) {
          fail("duplicate key " + join(path.empty() ? std::string() : path.back(), last_key) +
               " (DeepSpeed refuses duplicates): keep one of them");
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return parse_json_text<Json>(text, /*ignore_comments=*/true, callback);
  } catch (const JsonLimitError& e) {
    fail(std::string(e.what()) + "; is this a DeepSpeed config?");
  } catch (const Json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..."
    std::string message = e.what();
    for (std::string_view marker : {"parse error at ", "parse error: ", "] "}) {
      if (auto at = message.find(marker); at != std::string::npos) {
        message = message.substr(at + marker.size());
        break;
      }
    }
    fail(message + "; fix the JSON at that position");
  } catch (const Json::exception& e) {
    // out_of_range.406 "number overflow parsing '1e400'", and the like.
    std::string message = e.what();
    if (auto at = message.find("] "); at != std::string::npos) message = message.substr(at + 2);
    fail(message + "; fix that value");
  }
}

std::string_view top_level_why(const std::string& key) {
  static const std::pair<std::string_view, std::string_view> kWhy[] = {
      {"scheduler", "the probe keeps lr constant"},
      {"steps_per_print", "reporting only"},
      {"wall_clock_breakdown", "reporting only"},
      {"memory_breakdown", "reporting only"},
      {"dump_state", "reporting only"},
      {"tensorboard", "reporting only"},
      {"wandb", "reporting only"},
      {"csv_monitor", "reporting only"},
      {"comet", "reporting only"},
      {"monitor_config", "reporting only"},
      {"flops_profiler", "reporting only"},
      {"comms_logger", "reporting only"},
      {"activation_checkpointing", "not modelled: activations are kept"},
      {"checkpoint", "checkpointing only"},
      {"amp", "not modelled: use fp16 or bf16"},
      {"prescale_gradients", "not modelled: gradients are averaged after the sum"},
      {"gradient_predivide_factor", "not modelled: gradients are averaged after the sum"},
      {"communication_data_type", "not modelled: gradients travel in the compute type"},
      {"sparse_gradients", "not modelled: the probe's gradients are dense"},
      {"data_types", "not modelled: gradients accumulate in the compute type"},
      {"zero_allow_untested_optimizer", "no effect on the probe"},
      {"zero_force_ds_cpu_optimizer", "no effect on the probe"},
      {"elasticity", "not modelled"},
      {"aio", "not modelled: NVMe offload"},
      {"pipeline", "not modelled: no pipeline parallelism"},
      {"compression_training", "not modelled"},
      {"data_efficiency", "not modelled"},
      {"curriculum_learning", "not modelled"},
  };
  for (const auto& [name, why] : kWhy) {
    if (key == name) return why;
  }
  return "unknown to the probe";
}

std::string_view zero_why(const std::string& key) {
  static const std::pair<std::string_view, std::string_view> kWhy[] = {
      {"contiguous_gradients", "memory layout only"},
      {"allgather_bucket_size", "not modelled: updated shards are gathered whole"},
      {"reduce_scatter", "not modelled: the probe always reduce-scatters"},
      {"allgather_partitions", "not modelled: the probe always all-gathers"},
      {"round_robin_gradients", "offload copy order, not modelled"},
      {"sub_group_size", "optimizer step grouping, not modelled"},
      {"load_from_fp32_weights", "checkpointing only"},
      {"elastic_checkpoint", "checkpointing only"},
      {"gather_16bit_weights_on_model_save", "checkpointing only"},
      {"cpu_offload", "deprecated: use offload_optimizer.device \"cpu\""},
      {"ignore_unused_parameters", "no effect on the probe"},
      {"legacy_stage1", "not modelled"},
      {"zero_hpz_partition_size", "not modelled: ZeRO++"},
      {"zero_quantized_weights", "not modelled: ZeRO++"},
      {"zero_quantized_gradients", "not modelled: ZeRO++"},
      {"mics_shard_size", "not modelled: MiCS"},
      {"mics_hierarchical_params_gather", "not modelled: MiCS"},
      {"memory_efficient_linear", "not modelled"},
  };
  for (const auto& [name, why] : kWhy) {
    if (key == name) return why;
  }
  if (key.rfind("stage3_", 0) == 0) return "stage 3 tuning, not modelled";
  return "unknown to the probe";
}

int stage_of(Strategy strategy) {
  switch (strategy) {
    case Strategy::kZero1:
      return 1;
    case Strategy::kZero2:
      return 2;
    case Strategy::kZero3:
      return 3;
    default:
      return 0;
  }
}

const Json* member(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// ---- precision: fp16, bf16 ------------------------------------------------

std::optional<bool> enabled(Reader& r, const Json* section, const std::string& name) {
  if (r.absent(section, name)) return std::nullopt;
  Reader::require_object(*section, name);
  const Json* value = member(*section, "enabled");
  const std::string key = name + ".enabled";
  if (r.absent(value, key)) return std::nullopt;
  bool on = Reader::boolean(*value, key);
  r.honour(key);
  return on;
}

void read_fp16_details(Reader& r, const Json& section, bool fp16_on, LossScalerOptions& scaler) {
  for (const auto& [key, value] : section.items()) {
    const std::string dotted = "fp16." + key;
    if (key == "enabled") continue;
    if (r.absent(&value, dotted)) continue;
    if (!fp16_on) {
      r.ignore(dotted, "fp16 is not enabled");
      continue;
    }
    if (key == "loss_scale") {
      // 0 selects dynamic scaling (DeepSpeed's default); any other value is a
      // static scale, which LossScalerOptions cannot express.
      if (Reader::number(value, dotted, 0) == 0) {
        r.honour(dotted);
      } else {
        r.ignore(dotted, "static loss scale not modelled: the probe scales dynamically");
      }
    } else if (key == "initial_scale_power") {
      uint64_t power = Reader::count(value, dotted, 0, "write a whole number from 0 to 63");
      if (power > 63)
        fail(dotted + " must be at most 63, got " + shown(value) +
             ": write a whole number from 0 to 63");
      scaler.initial_scale_power = static_cast<int>(power);
      r.honour(dotted);
    } else if (key == "loss_scale_window") {
      scaler.window = Reader::count(value, dotted, 1);
      r.honour(dotted);
    } else if (key == "hysteresis") {
      uint64_t h = Reader::count(value, dotted, 1);
      if (h > 1000000)
        fail(dotted + " must be at most 1000000, got " + shown(value) +
             ": write a small whole number such as 2");
      scaler.hysteresis = static_cast<int>(h);
      r.honour(dotted);
    } else if (key == "min_loss_scale") {
      double v = Reader::number(value, dotted, 0);
      if (v == 0) fail(dotted + " must be positive, got 0: write a positive number such as 1");
      scaler.min_scale = v;
      r.honour(dotted);
    } else if (key == "consecutive_hysteresis") {
      r.ignore(dotted, "not modelled: hysteresis refills only when the scale is halved");
    } else if (key == "auto_cast") {
      r.ignore(dotted, "not modelled: the probe rounds every operation to fp16");
    } else if (key == "fp16_master_weights_and_grads") {
      r.ignore(dotted, "not modelled: master weights are float32");
    } else {
      r.ignore(dotted, "unknown to the probe");
    }
  }
}

void read_precision(Reader& r, const Json& root, TrainOptions& options) {
  const Json* fp16 = member(root, "fp16");
  // DeepSpeed reads "bf16", or the older "bfloat16" when "bf16" is absent.
  const Json* bf16 = member(root, "bf16");
  std::string bf16_name = "bf16";
  if (const Json* old = member(root, "bfloat16")) {
    if (bf16 == nullptr) {
      bf16 = old;
      bf16_name = "bfloat16";
    } else {
      r.ignore("bfloat16", "superseded by bf16");
    }
  }
  std::optional<bool> fp16_on = enabled(r, fp16, "fp16");
  std::optional<bool> bf16_on = enabled(r, bf16, bf16_name);
  if (fp16_on.value_or(false) && bf16_on.value_or(false)) {
    fail("fp16.enabled and " + bf16_name + ".enabled are both true: enable one of them");
  }
  if (fp16_on.value_or(false)) {
    options.precision = Precision::kFloat16;
  } else if (bf16_on.value_or(false)) {
    options.precision = Precision::kBFloat16;
  } else {
    // An explicit false turns that format off; absent leaves `base`'s.
    if (fp16_on == false && options.precision == Precision::kFloat16) {
      options.precision = Precision::kFloat32;
    }
    if (bf16_on == false && options.precision == Precision::kBFloat16) {
      options.precision = Precision::kFloat32;
    }
  }
  if (fp16 != nullptr && fp16->is_object()) {
    read_fp16_details(r, *fp16, options.precision == Precision::kFloat16, options.loss_scaler);
  }
  if (bf16 != nullptr && bf16->is_object()) {
    for (const auto& [key, value] : bf16->items()) {
      if (key == "enabled") continue;
      r.ignore(bf16_name + "." + key, "not modelled");
    }
  }
}

// ---- batch sizes ------------------------------------------------------------

// train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps
// x ranks, as DeepSpeed's _configure_train_batch_size: any two give the third;
// one alone takes gradient_accumulation_steps 1 (train or micro given) or the
// probe's global batch (only accumulation given).
void read_batch(Reader& r, const Json& root, size_t ranks, TrainOptions& options) {
  auto get = [&](const char* key) -> std::optional<uint64_t> {
    const Json* value = member(root, key);
    if (r.absent(value, key)) return std::nullopt;
    uint64_t v = Reader::count(*value, key, 1, "write a positive whole number");
    r.honour(key);
    return v;
  };
  std::optional<uint64_t> train = get("train_batch_size");
  std::optional<uint64_t> micro = get("train_micro_batch_size_per_gpu");
  std::optional<uint64_t> gas = get("gradient_accumulation_steps");
  const std::string n = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
  auto str = [](uint64_t v) { return std::to_string(v); };
  auto product = [&](std::initializer_list<uint64_t> factors, const char* what) {
    std::optional<uint64_t> p = checked_product(factors);
    if (!p) fail(std::string(what) + " is too large to count: use smaller batch sizes");
    return *p;
  };

  if (train && micro && gas) {
    uint64_t p = product({*micro, *gas, ranks},
                         "train_micro_batch_size_per_gpu x "
                         "gradient_accumulation_steps x ranks");
    if (p != *train) {
      fail("train_batch_size " + str(*train) + " != train_micro_batch_size_per_gpu " + str(*micro) +
           " x gradient_accumulation_steps " + str(*gas) + " x " + n + " = " + str(p) +
           ": fix one of the three, or drop one and let it be derived");
    }
  } else if (train && micro) {
    uint64_t p = product({*micro, ranks}, "train_micro_batch_size_per_gpu x ranks");
    if (*train % p != 0) {
      fail("train_batch_size " + str(*train) +
           " is not a multiple of "
           "train_micro_batch_size_per_gpu " +
           str(*micro) + " x " + n + " = " + str(p) +
           ": change one of them, or give gradient_accumulation_steps");
    }
    gas = *train / p;
  } else if (train && gas) {
    uint64_t p = product({*gas, ranks}, "gradient_accumulation_steps x ranks");
    if (*train % p != 0) {
      fail("train_batch_size " + str(*train) +
           " is not a multiple of "
           "gradient_accumulation_steps " +
           str(*gas) + " x " + n + " = " + str(p) +
           ": change one of them, or give train_micro_batch_size_per_gpu");
    }
  } else if (micro && gas) {
    train = product({*micro, *gas, ranks},
                    "train_micro_batch_size_per_gpu x "
                    "gradient_accumulation_steps x ranks");
  } else if (train) {
    if (*train % ranks != 0) {
      fail("train_batch_size " + str(*train) + " does not divide over " + n +
           ": give a multiple of " + str(ranks));
    }
    gas = 1;
  } else if (micro) {
    gas = 1;
    train = product({*micro, ranks}, "train_micro_batch_size_per_gpu x ranks");
  } else if (gas) {
    uint64_t p = product({*gas, ranks}, "gradient_accumulation_steps x ranks");
    if (options.global_batch % p != 0) {
      fail("gradient_accumulation_steps " + str(*gas) +
           " without train_batch_size: the "
           "probe's global batch " +
           str(options.global_batch) + " is not a multiple of " + str(*gas) + " x " + n + " = " +
           str(p) + ": give train_batch_size as well");
    }
  }
  if (train) options.global_batch = *train;
  if (gas) options.micro_batches = *gas;
}

// ---- zero_optimization ------------------------------------------------------

enum class Device { kNone, kCpu, kNvme };

// offload_optimizer / offload_param: only `device` matters to the probe.
std::optional<Device> offload_device(Reader& r, const Json* section, const std::string& name) {
  if (r.absent(section, name)) return std::nullopt;
  Reader::require_object(*section, name);
  std::optional<Device> device;
  for (const auto& [key, value] : section->items()) {
    const std::string dotted = name + "." + key;
    if (key != "device") {
      r.ignore(dotted, "offload tuning, not modelled");
      continue;
    }
    if (r.absent(&value, dotted)) continue;
    const char* hint = "write \"cpu\", \"nvme\" or \"none\"";
    std::string d = ascii_lower(Reader::string(value, dotted, hint));
    if (d == "cpu") {
      device = Device::kCpu;
    } else if (d == "nvme") {
      device = Device::kNvme;
    } else if (d == "none") {
      device = Device::kNone;
    } else {
      fail(dotted + " must be \"cpu\", \"nvme\" or \"none\", got " + shown(value) + ": " + hint);
    }
  }
  return device;
}

void read_zero(Reader& r, const Json& root, DeepSpeedConfig& out) {
  const Json* zero = member(root, "zero_optimization");
  if (r.absent(zero, "zero_optimization")) return;
  TrainOptions& options = out.options;
  static constexpr Strategy kByStage[] = {Strategy::kDdp, Strategy::kZero1, Strategy::kZero2,
                                          Strategy::kZero3};
  if (zero->is_boolean()) {  // legacy form: true is stage 1, false stage 0
    options.strategy = kByStage[zero->get<bool>() ? 1 : 0];
    r.honour("zero_optimization");
    return;
  }
  Reader::require_object(*zero, "zero_optimization");

  const Json* stage_value = member(*zero, "stage");
  if (!r.absent(stage_value, "zero_optimization.stage")) {
    uint64_t stage =
        Reader::count(*stage_value, "zero_optimization.stage", 0, "write 0, 1, 2 or 3");
    if (stage > 3) {
      fail("zero_optimization.stage must be 0, 1, 2 or 3, got " + shown(*stage_value) +
           ": write 0, 1, 2 or 3");
    }
    options.strategy = kByStage[stage];
    r.honour("zero_optimization.stage");
  }
  const int stage = stage_of(options.strategy);
  const std::string stage_text =
      "stage " + std::to_string(stage) + (stage_value == nullptr ? " (the probe's strategy)" : "");

  std::optional<Device> optimizer_device =
      offload_device(r, member(*zero, "offload_optimizer"), "zero_optimization.offload_optimizer");
  std::optional<Device> param_device =
      offload_device(r, member(*zero, "offload_param"), "zero_optimization.offload_param");
  if (optimizer_device && *optimizer_device != Device::kNone && stage == 0) {
    fail("zero_optimization.offload_optimizer needs stage 1, 2 or 3, got " + stage_text +
         ": raise zero_optimization.stage or drop offload_optimizer");
  }
  if (param_device && *param_device != Device::kNone && stage != 3) {
    fail("zero_optimization.offload_param is valid only with stage 3, got " + stage_text +
         ": set zero_optimization.stage to 3 or drop offload_param");
  }
  for (auto [device, name, what] :
       {std::tuple{optimizer_device, "zero_optimization.offload_optimizer.device", "optimizer"},
        std::tuple{param_device, "zero_optimization.offload_param.device", "params"}}) {
    if (!device) continue;
    if (*device == Device::kNvme) {
      r.ignore(name, "nvme not modelled: no offload assumed");
      continue;
    }
    r.honour(name);
    // offload_param implies the optimizer state is offloaded as well.
    if (*device == Device::kCpu && out.offload != "params") out.offload = what;
  }

  for (const auto& [key, value] : zero->items()) {
    const std::string dotted = "zero_optimization." + key;
    if (key == "stage" || key == "offload_optimizer" || key == "offload_param") continue;
    if (r.absent(&value, dotted)) continue;
    if (key == "overlap_comm") {
      options.overlap = Reader::boolean(value, dotted);
      r.honour(dotted);
    } else if (key == "reduce_bucket_size") {
      // DeepSpeed counts the bucket in ELEMENTS of the gradient type, the probe
      // in bytes: times 2 for fp16/bf16 gradients, 4 for fp32.
      uint64_t elements = Reader::count(value, dotted, 1);
      std::optional<uint64_t> bytes =
          checked_product({elements, gradient_element_bytes(options.precision)});
      if (!bytes) fail(dotted + " " + shown(value) + " is too large: give fewer elements");
      options.bucket_bytes = *bytes;
      options.first_bucket_bytes = *bytes;  // DeepSpeed has no small first bucket
      r.honour(dotted);
    } else if (key == "stage3_prefetch_bucket_size") {
      options.prefetch = Reader::count(value, dotted, 0) > 0;
      r.honour(dotted);
    } else {
      r.ignore(dotted, zero_why(key));
    }
  }
}

// DeepSpeed's defaults for what the config leaves out (not "auto", which keeps
// the probe's own), from deepspeed/runtime/zero/config.py and the engine:
// overlap_comm is true only for stage 3 (its validator sets it so); the
// reduce bucket is 5e8 elements (reduce_bucket_size; without ZeRO the
// engine's allreduce bucket is the same 5e8), with no small first bucket as
// DDP has. overlap_comm false means stage 1 reduces after backward, stage 2
// reduces each bucket on the training thread as backward fills it.
void apply_zero_defaults(const Json& root, DeepSpeedConfig& out) {
  TrainOptions& options = out.options;
  const Json* zero = member(root, "zero_optimization");
  const bool object = zero != nullptr && zero->is_object();
  const int stage = stage_of(options.strategy);
  if (!object || !zero->contains("overlap_comm")) {
    options.overlap = stage == 3;
    out.defaulted.push_back(std::string("zero_optimization.overlap_comm ") +
                            (options.overlap ? "true (stage 3)" : "false (below stage 3)"));
  }
  if (!object || !zero->contains("reduce_bucket_size")) {
    constexpr uint64_t kElements = 500'000'000;
    options.bucket_bytes = kElements * gradient_element_bytes(options.precision);
    options.first_bucket_bytes = options.bucket_bytes;
    out.defaulted.push_back("zero_optimization.reduce_bucket_size 5e8 elements");
  }
}

// ---- gradient_clipping ------------------------------------------------------

void read_clipping(Reader& r, const Json& root, TrainOptions& options) {
  const Json* value = member(root, "gradient_clipping");
  if (r.absent(value, "gradient_clipping")) return;
  double v = Reader::number(*value, "gradient_clipping", 0);
  if (v > 0) {
    options.grad_clip = v;
  } else {
    options.grad_clip.reset();  // 0: DeepSpeed does not clip
  }
  r.honour("gradient_clipping");
}

// ---- optimizer --------------------------------------------------------------

void read_optimizer(Reader& r, const Json& root, TrainOptions& options) {
  const Json* section = member(root, "optimizer");
  if (r.absent(section, "optimizer")) return;
  Reader::require_object(*section, "optimizer");
  const Json* type_value = member(*section, "type");
  if (r.absent(type_value, "optimizer.type")) {
    if (type_value == nullptr) {
      fail("optimizer.type is missing: give \"SGD\", \"Adam\" or \"AdamW\"");
    }
    // "auto" (or null): the probe's optimizer stands; its params are not read.
    for (const auto& [key, value] : section->items()) {
      if (key != "type") r.ignore("optimizer." + key, "optimizer.type not given");
    }
    return;
  }
  const std::string type =
      Reader::string(*type_value, "optimizer.type", "write \"SGD\", \"Adam\" or \"AdamW\"");
  const std::string kind_name = ascii_lower(type);
  if (kind_name != "sgd" && kind_name != "adam" && kind_name != "adamw") {
    fail("optimizer type " + type + " is not modelled; use SGD, Adam or AdamW");
  }
  r.honour("optimizer.type");
  const bool sgd = kind_name == "sgd";

  const Json* params = member(*section, "params");
  static const Json kEmpty = Json::object();
  if (r.absent(params, "optimizer.params")) params = &kEmpty;
  Reader::require_object(*params, "optimizer.params");
  for (const auto& [key, value] : section->items()) {
    if (key != "type" && key != "params") r.ignore("optimizer." + key, "unknown to the probe");
  }

  // A fresh optimizer with its own defaults (torch.optim.SGD; DeepSpeed's
  // FusedAdam / DeepSpeedCPUAdam); "auto" keeps `base`'s value.
  const OptimizerOptions& from_base = options.optimizer;
  OptimizerOptions o;
  o.lr = 1e-3;
  o.momentum = 0.0;
  o.beta1 = 0.9;
  o.beta2 = 0.999;
  o.eps = 1e-8;
  o.weight_decay = 0.0;

  // DeepSpeed's "Adam" decouples weight decay unless params.adam_w_mode is
  // false (FusedAdam's adam_w_mode defaults to True), so plain "Adam" is
  // AdamW here, as it is in DeepSpeed; "AdamW" is always AdamW.
  bool adam_w_mode = true;
  bool torch_adam = false;
  bool weight_decay_given = false;
  for (const auto& [key, value] : params->items()) {
    const std::string dotted = "optimizer.params." + key;
    const bool is_auto = value.is_string() && value.get_ref<const std::string&>() == "auto";
    if (r.absent(&value, dotted)) {
      if (is_auto) {  // keep base's value
        if (key == "lr") o.lr = from_base.lr;
        if (key == "momentum") o.momentum = from_base.momentum;
        if (key == "betas") {
          o.beta1 = from_base.beta1;
          o.beta2 = from_base.beta2;
        }
        if (key == "eps") o.eps = from_base.eps;
        if (key == "weight_decay") {
          o.weight_decay = from_base.weight_decay;
          weight_decay_given = true;
        }
      }
      continue;
    }
    if (key == "lr") {
      o.lr = Reader::number(value, dotted, 0);
    } else if (key == "weight_decay") {
      o.weight_decay = Reader::number(value, dotted, 0);
      weight_decay_given = true;
    } else if (key == "momentum") {
      if (!sgd) {
        r.ignore(dotted, "SGD only");
        continue;
      }
      o.momentum = Reader::number(value, dotted, 0);
    } else if (key == "betas" || key == "eps" || key == "adam_w_mode" || key == "torch_adam") {
      if (sgd) {
        r.ignore(dotted, "Adam only");
        continue;
      }
      if (key == "betas") {
        auto in_range = [](const Json& b) {
          return b.is_number() && b.get<double>() >= 0 && b.get<double>() < 1;
        };
        if (!value.is_array() || value.size() != 2 || !in_range(value[0]) || !in_range(value[1])) {
          fail(dotted + " must be two numbers in [0, 1), got " + shown(value) +
               ": write e.g. [0.9, 0.999]");
        }
        o.beta1 = value[0].get<double>();
        o.beta2 = value[1].get<double>();
      } else if (key == "eps") {
        o.eps = Reader::number(value, dotted, 0);
      } else if (key == "adam_w_mode") {
        adam_w_mode = Reader::boolean(value, dotted);
        if (kind_name == "adamw") {
          r.ignore(dotted, "AdamW always decouples weight decay");
          continue;
        }
      } else {  // torch_adam: torch's Adam/AdamW instead of FusedAdam, same arithmetic
        torch_adam = Reader::boolean(value, dotted);
      }
    } else if (key == "nesterov" || key == "dampening" || key == "amsgrad" ||
               key == "bias_correction" || key == "maximize" || key == "foreach" ||
               key == "fused" || key == "capturable" || key == "differentiable") {
      r.ignore(dotted, "not modelled");
      continue;
    } else {
      r.ignore(dotted, "unknown to the probe");
      continue;
    }
    r.honour(dotted);
  }

  if (sgd) {
    o.kind = OptimizerKind::kSgd;
  } else if (kind_name == "adamw" || adam_w_mode) {
    o.kind = OptimizerKind::kAdamW;
    // torch.optim.AdamW (torch_adam) defaults weight_decay to 0.01, FusedAdam to 0.
    if (torch_adam && !weight_decay_given) o.weight_decay = 0.01;
  } else {
    o.kind = OptimizerKind::kAdam;
  }
  options.optimizer = o;
}

}  // namespace

DeepSpeedConfig parse_deepspeed_config(std::string_view text, const TrainOptions& base,
                                       size_t ranks) {
  if (ranks == 0) fail("ranks must be at least 1: pass the world size");
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    fail("the config is empty: give a JSON object such as { \"train_batch_size\": 32 }");
  }
  const Json root = parse_text(text);
  if (!root.is_object()) {
    fail("the top level must be a JSON object, got " + shown(root) +
         ": write the config as { \"key\": value, ... }");
  }
  DeepSpeedConfig out;
  out.options = base;
  Reader r(out);

  static const std::set<std::string, std::less<>> kHandled = {"train_batch_size",
                                                              "train_micro_batch_size_per_gpu",
                                                              "gradient_accumulation_steps",
                                                              "fp16",
                                                              "bf16",
                                                              "bfloat16",
                                                              "zero_optimization",
                                                              "gradient_clipping",
                                                              "optimizer"};
  for (const auto& [key, value] : root.items()) {
    if (kHandled.count(key) == 0) r.ignore(key, top_level_why(key));
  }
  // Precision first: reduce_bucket_size converts elements to bytes of it.
  read_precision(r, root, out.options);
  read_batch(r, root, ranks, out.options);
  read_zero(r, root, out);
  apply_zero_defaults(root, out);
  read_clipping(r, root, out.options);
  read_optimizer(r, root, out.options);
  return out;
}

}  // namespace ccscope::training_probe
