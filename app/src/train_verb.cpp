// `ccscope train`: real training steps of a small MLP under a strategy (single,
// DDP, ZeRO-1/2/3) over MPI, at one rank count or a scaling list: step time,
// where it goes (compute, communication, exposed communication), bytes moved
// and memory against the formulas, the loss against one rank's, as records.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/bench/benchmark.h"
#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/world.h"
#include "ccscope/common/sizes.h"
#include "ccscope/common/statistics.h"
#include "ccscope/job/run_job.h"
#include "ccscope/job/watchdog.h"
#include "ccscope/records/training_record.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/user_files.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/deepspeed_config.h"
#include "ccscope/training_probe/equivalence.h"
#include "ccscope/training_probe/parallel_trainer.h"
#include "ccscope/training_probe/summary.h"
#include "ccscope/training_probe/trainer.h"
#include "ccscope/training_probe/training_run.h"
#include "verb_support.h"

namespace ccscope::app {
// A named namespace, not an anonymous one: the verbs are one unity translation
// unit, and the probe's names must not reach the other verbs.
namespace train_verb_detail {

using namespace ccscope::training_probe;

constexpr const char* kTrainVerb = "train";
constexpr int kExitCheckFailed = job::kExitCheckFailed;
constexpr int kExitTimeout = job::kExitHang;

struct TrainFlags {
  std::string strategy = "ddp";
  size_t steps = 100;
  size_t warmup = 5;
  size_t width = 512;
  size_t depth = 4;
  std::string activation = "relu";
  size_t global_batch = 128;
  bool global_batch_given = false;  // else the default is rounded to the rank count
  size_t micro_batches = 1;
  size_t samples = 0;
  std::string optimizer = "sgd";
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::string precision = "fp32";
  int initial_scale_power = 16;
  double bucket_mb = 25;
  bool no_overlap = false;
  bool no_prefetch = false;
  bool busy_poll = false;
  double grad_clip = 0;
  std::string deepspeed_config;
  std::string offload;
  std::vector<std::string> scaling;
  bool weak = false;
  bool check_loss = false;
  bool check_consistency = false;
  int threads = 1;
  uint64_t seed = 1;
  std::string csv, runs_csv, export_dir;
  size_t print_every = 10;
  double timeout_seconds = 300;
  std::string fault;  // tests: sum, sampler, bucket, clip, microbatch, tp-allreduce, expert
  // Model-parallel strategies (tp, pp, ep, 3d); 0: from the rank count.
  size_t tp = 0, pp = 0, dp = 0, ep = 0;
  std::string schedule = "1f1b";
  size_t chunks = 1;
  std::vector<size_t> stage_layers;
  int zero_stage = 0;
  size_t experts = 0;
  size_t top_k = 1;
  double capacity_factor = 1.25;
  std::string ranks_csv;
};

template <typename T>
std::optional<T> choose(const std::string& text,
                        std::initializer_list<std::pair<const char*, T>> choices) {
  for (const auto& [word, value] : choices)
    if (text == word) return value;
  return std::nullopt;
}

// The CSV flags given, as (flag, path).
std::vector<std::pair<std::string, std::string>> output_files(const TrainFlags& f) {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!f.csv.empty()) outputs.emplace_back("--csv", f.csv);
  if (!f.runs_csv.empty()) outputs.emplace_back("--runs-csv", f.runs_csv);
  if (!f.ranks_csv.empty()) outputs.emplace_back("--ranks-csv", f.ranks_csv);
  return outputs;
}

// Flags into options; "" or the one-line problem.
std::string options_from_flags(const TrainFlags& f, TrainOptions& o) {
  const auto strategy = choose<Strategy>(f.strategy, {{"single", Strategy::kSingle},
                                                      {"ddp", Strategy::kDdp},
                                                      {"zero1", Strategy::kZero1},
                                                      {"zero2", Strategy::kZero2},
                                                      {"zero3", Strategy::kZero3},
                                                      {"tp", Strategy::kTensor},
                                                      {"pp", Strategy::kPipeline},
                                                      {"ep", Strategy::kExpert},
                                                      {"3d", Strategy::kHybrid}});
  if (!strategy)
    return "--strategy '" + f.strategy +
           "': use single, ddp, zero1, zero2, zero3, tp, pp, ep or 3d";
  const auto schedule = parse_pipeline_schedule(f.schedule);
  if (!schedule) return "--schedule '" + f.schedule + "': use gpipe, 1f1b or interleaved";
  if (f.chunks == 0) return "--chunks must be at least 1";
  if (f.zero_stage != 0 && f.zero_stage != 1)
    return "--zero-stage " + std::to_string(f.zero_stage) +
           ": model-parallel runs take 0 or 1 (ZeRO-1 over the data-parallel group)";
  if (f.experts > kMaxExperts)
    return fmt::format("--experts {}: use at most {}", f.experts, kMaxExperts);
  if (!(f.capacity_factor >= 0) || f.capacity_factor > 1e6)
    return "--capacity-factor must be 0 (no limit) or a positive factor";
  const bool layout_flags = f.tp || f.pp || f.dp || f.zero_stage || !f.stage_layers.empty() ||
                            f.chunks != 1 || f.schedule != "1f1b";
  const bool expert_flags = f.experts || f.top_k != 1 || f.capacity_factor != 1.25;
  if (*strategy == Strategy::kExpert && layout_flags)
    return "--tp, --pp, --dp, --zero-stage, --schedule, --chunks and --stage-layers do not apply "
           "to --strategy ep (experts spread over every rank, the rest data-parallel)";
  if (*strategy != Strategy::kExpert && expert_flags)
    return "--experts, --top-k and --capacity-factor need --strategy ep";
  if (f.check_loss && *strategy == Strategy::kExpert && f.capacity_factor != 0)
    return "--check-loss with --strategy ep needs --capacity-factor 0: which tokens a capacity "
           "drops depends on how they are grouped over ranks and micro-batches, so single "
           "(one group) would drop others";
  if (!is_model_parallel(*strategy) && (f.tp || f.pp || f.dp || f.experts || f.zero_stage ||
                                        !f.stage_layers.empty() || f.chunks != 1))
    return "--tp, --pp, --dp, --chunks, --stage-layers, --zero-stage and --experts need "
           "--strategy tp, pp, ep or 3d";
  const auto precision = choose<Precision>(f.precision, {{"fp32", Precision::kFloat32},
                                                         {"float32", Precision::kFloat32},
                                                         {"bf16", Precision::kBFloat16},
                                                         {"bfloat16", Precision::kBFloat16},
                                                         {"fp16", Precision::kFloat16},
                                                         {"float16", Precision::kFloat16}});
  if (!precision) return "--precision '" + f.precision + "': use fp32, bf16 or fp16";
  const auto optimizer = choose<OptimizerKind>(f.optimizer, {{"sgd", OptimizerKind::kSgd},
                                                             {"adam", OptimizerKind::kAdam},
                                                             {"adamw", OptimizerKind::kAdamW}});
  if (!optimizer) return "--optimizer '" + f.optimizer + "': use sgd, adam or adamw";
  const auto activation =
      choose<Activation>(f.activation, {{"relu", Activation::kRelu}, {"tanh", Activation::kTanh}});
  if (!activation) return "--activation '" + f.activation + "': use relu or tanh";
  if (!(f.bucket_mb > 0)) return "--bucket-mb must be positive";
  if (f.grad_clip < 0) return "--grad-clip must be positive (0: no clipping)";
  if (f.threads < 1) return "--threads must be at least 1";
  if (!(f.timeout_seconds > 0) || f.timeout_seconds > 1e6)
    return "--timeout must be between 0 and 1e6 seconds";
  // One weight matrix is one MPI count (an int); the whole run must fit in memory.
  if (f.width == 0 || f.width > 46340)
    return "--width " + std::to_string(f.width) +
           ": use 1 to 46340 (a weight matrix must fit MPI's int count)";
  if (f.depth == 0 || f.depth > 100000) return "--depth must be 1 to 100000";
  if (f.global_batch == 0 || f.global_batch > (size_t{1} << 24))
    return "--global-batch must be 1 to 16777216";
  {
    const double w = static_cast<double>(f.width);
    const double samples = static_cast<double>(f.samples ? f.samples : 8 * f.global_batch);
    // Every rank builds the whole model's initial weights (ep: every expert).
    // In doubles: the count itself could overflow for absurd expert counts.
    const double mixtures = f.experts ? static_cast<double>((f.depth - 1) / 2) : 0.0;
    const double psi = (static_cast<double>(f.depth) - mixtures) * (w * w + w) +
                       mixtures * static_cast<double>(f.experts) * (w * w + 2 * w);
    // teacher (2 w^2), data (2 samples w), parameters, gradients, two optimizer
    // words, master weights, activations (2 per layer per sample)
    const double bytes =
        4.0 * (2 * w * w + 2 * samples * w + 6 * psi +
               2 * static_cast<double>(f.depth) * static_cast<double>(f.global_batch) * w);
    const double memory =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (memory > 0 && bytes > 0.8 * memory)
      return fmt::format(
          "the model and data need about {:.1f} GB per rank, more than this machine's {:.1f} GB "
          "allows; use a smaller --width, --depth, --global-batch or --samples",
          bytes / 1e9, memory / 1e9);
  }
  if (!f.offload.empty() && f.offload != "optimizer" && f.offload != "params")
    return "--offload '" + f.offload + "': use optimizer or params";
  o.strategy = *strategy;
  o.precision = *precision;
  o.shape = {f.width, f.depth, *activation};
  o.optimizer.kind = *optimizer;
  o.optimizer.lr = f.lr;
  o.optimizer.momentum = f.momentum;
  o.optimizer.weight_decay = f.weight_decay;
  o.optimizer.beta1 = f.beta1;
  o.optimizer.beta2 = f.beta2;
  o.optimizer.eps = f.eps;
  o.loss_scaler.initial_scale_power = f.initial_scale_power;
  o.global_batch = f.global_batch;
  o.micro_batches = f.micro_batches;
  o.steps = f.steps;
  o.dataset_samples = f.samples;
  o.seed = f.seed;
  o.bucket_bytes = static_cast<size_t>(f.bucket_mb * 1024 * 1024);
  // DDP's first bucket is 1 MiB, or the bucket cap when that is smaller.
  o.first_bucket_bytes = std::min(o.first_bucket_bytes, o.bucket_bytes);
  o.overlap = !f.no_overlap;
  o.prefetch = !f.no_prefetch;
  if (f.grad_clip > 0) o.grad_clip = f.grad_clip;
  o.timeout = std::chrono::milliseconds(static_cast<long long>(f.timeout_seconds * 1000));
  o.check_consistency = f.check_consistency;
  o.parallel.tp = f.tp;
  o.parallel.pp = f.pp;
  o.parallel.dp = f.dp;
  o.parallel.schedule = *schedule;
  o.parallel.chunks = f.chunks;
  o.parallel.stage_blocks = f.stage_layers;
  o.parallel.zero1 = f.zero_stage == 1;
  o.parallel.experts = f.experts;
  o.parallel.top_k = f.top_k;
  o.parallel.capacity_factor = f.capacity_factor;
  if (f.fault == "microbatch")
    o.faults.dropped_micro_batch = f.micro_batches > 1 ? 1 : 0;
  else if (f.fault == "tp-allreduce")
    o.faults.skipped_tp_all_reduce = true;
  else if (f.fault == "expert")
    o.faults.wrong_expert = true;
  else if (f.fault == "sum")
    o.faults.sum_not_average = true;
  else if (f.fault == "sampler")
    o.faults.sampler_not_reseeded = true;
  else if (f.fault == "bucket")
    o.faults.unreduced_bucket = 0;
  else if (f.fault == "clip")
    o.faults.clip_per_shard = true;
  else if (!f.fault.empty())
    return "--fault '" + f.fault +
           "': use sum, sampler, bucket, clip, microbatch, tp-allreduce or expert";
  return "";
}

std::string layout_text(const TrainOptions& o) {
  const ParallelOptions& p = o.parallel;
  if (o.strategy == Strategy::kExpert) return fmt::format("ep{}", p.experts);
  return fmt::format("t{}p{}d{}", p.tp, p.pp, p.dp);
}

std::string run_id(const TrainOptions& o, size_t ranks, bool weak) {
  if (is_model_parallel(o.strategy))
    return fmt::format("{}-{}-n{}", name(o.strategy), layout_text(o), ranks);
  return fmt::format("{}-n{}{}", name(o.strategy), ranks, weak ? "-weak" : "");
}

// The first tensor-parallel group whose ranks sit on more than one host
// ("tensor-parallel group of ranks 0, 1 spans hosts a, b"), or "".
std::string split_tensor_groups(const ParallelOptions& layout,
                                const std::vector<std::string>& hosts) {
  std::map<int, std::vector<size_t>> groups;
  for (size_t r = 0; r < hosts.size(); ++r) groups[group_colors(r, layout).tp].push_back(r);
  for (const auto& [color, ranks] : groups) {
    std::vector<std::string> where;
    for (size_t r : ranks)
      if (std::find(where.begin(), where.end(), hosts[r]) == where.end()) where.push_back(hosts[r]);
    if (where.size() > 1)
      return fmt::format("tensor-parallel group of ranks {} spans hosts {}", fmt::join(ranks, ", "),
                         fmt::join(where, ", "));
  }
  return "";
}

// Fills the degrees the flags left at 0 from the rank count (the named
// strategy's degree takes what the others leave); "" or the problem.
std::string complete_layout(TrainOptions& o, size_t ranks, size_t ep_flag) {
  ParallelOptions& p = o.parallel;
  if (o.strategy == Strategy::kExpert) {
    if (ep_flag && ep_flag != ranks)
      return fmt::format("--ep {}: expert parallelism spans every rank; launch with mpiexec -n {}",
                         ep_flag, ep_flag);
    p.tp = p.pp = p.dp = 1;
    return validate_parallel(o, ranks);
  }
  if (ep_flag) return "--ep needs --strategy ep";
  if (p.tp > ranks || p.pp > ranks || p.dp > ranks)  // before any product can wrap
    return fmt::format("--tp {}, --pp {} and --dp {} cannot exceed the {} ranks", p.tp, p.pp, p.dp,
                       ranks);
  auto rest = [&](size_t a, size_t b) -> size_t {
    const size_t used = std::max<size_t>(a, 1) * std::max<size_t>(b, 1);
    return ranks % used == 0 ? ranks / used : 0;
  };
  if (o.strategy == Strategy::kTensor && !p.tp) p.tp = rest(p.pp, p.dp);
  if (o.strategy == Strategy::kPipeline && !p.pp) p.pp = rest(p.tp, p.dp);
  if (!p.dp) p.dp = rest(p.tp, p.pp);
  if (!p.tp) p.tp = 1;
  if (!p.pp) p.pp = 1;
  if (!p.dp)
    return fmt::format("--tp {} x --pp {} does not divide the {} ranks", p.tp, p.pp, ranks);
  if (o.strategy == Strategy::kTensor && (p.pp > 1 || p.tp == 1))
    return "--strategy tp needs --tp 2 or more and no --pp (use --strategy 3d to combine)";
  if (o.strategy == Strategy::kPipeline && (p.tp > 1 || p.pp == 1))
    return "--strategy pp needs --pp 2 or more and no --tp (use --strategy 3d to combine)";
  if (p.zero1 && p.dp == 1)
    return "--zero-stage 1 shards over the data-parallel group: it needs --dp 2 or more";
  return validate_parallel(o, ranks);
}

std::string mb(double bytes) { return fmt::format("{:.3f} MB", bytes / 1e6); }

// --export DIR: what compare-with-pytorch loads (format in its README).
void export_run(const std::string& dir, const TrainOptions& o) {
  reports::create_output_directory(dir);
  auto write = [&](const std::string& file, const void* data, size_t bytes) {
    const std::string path = (std::filesystem::path(dir) / file).string();
    reports::write_whole_file(reports::resolve_output(path),
                              {static_cast<const char*>(data), bytes});
  };
  const size_t samples = dataset_size(o);
  const std::vector<float> params = initial_parameters(o.shape, o.seed);
  write("initial_parameters.f32", params.data(), params.size() * 4);
  const SyntheticDataset data = make_teacher_dataset(samples, o.shape.width, o.seed);
  write("inputs.f32", data.inputs.data(), data.inputs.size() * 4);
  write("targets.f32", data.targets.data(), data.targets.size() * 4);
  std::vector<int64_t> batches;
  for (size_t s = 0; s < o.steps; ++s)
    for (size_t i : batch_samples(samples, 1, 0, o.global_batch, o.seed, s))
      batches.push_back(static_cast<int64_t>(i));
  write("batches.i64", batches.data(), batches.size() * 8);
  const std::string model = fmt::format(
      "{{\"width\": {}, \"depth\": {}, \"activation\": \"{}\", \"optimizer\": {{\"kind\": \"{}\", "
      "\"lr\": {}, \"momentum\": {}, \"beta1\": {}, \"beta2\": {}, \"eps\": {}, "
      "\"weight_decay\": {}}}, \"global_batch\": {}, \"steps\": {}, \"samples\": {}, \"seed\": {}, "
      "\"precision\": \"{}\", \"loss\": \"mse mean over batch and features\"}}\n",
      o.shape.width, o.shape.depth, name(o.shape.activation), name(o.optimizer.kind),
      records::number_text(o.optimizer.lr), records::number_text(o.optimizer.momentum),
      records::number_text(o.optimizer.beta1), records::number_text(o.optimizer.beta2),
      records::number_text(o.optimizer.eps), records::number_text(o.optimizer.weight_decay),
      o.global_batch, o.steps, samples, o.seed, name(o.precision));
  write("model.json", model.data(), model.size());
}

struct Outputs {
  std::unique_ptr<RowFile> steps;
  std::unique_ptr<RowFile> runs;
  std::unique_ptr<RowFile> ranks;
};

void print_parallel(const TrainOptions& o, const RunSummary& s,
                    const std::vector<RankFigures>& ranks, const std::vector<StepFigures>& slowest,
                    size_t warmup) {
  double tp = 0, pp = 0, dp = 0, ep = 0;
  for (const RankFigures& f : ranks) {
    tp = std::max(tp, f.tp_bytes);
    pp = std::max(pp, f.pp_bytes);
    dp = std::max(dp, f.dp_bytes);
    ep = std::max(ep, f.ep_bytes);
  }
  std::printf(
      "# bytes per step per rank, the largest per group: tensor %s, pipeline %s, data %s, "
      "expert %s\n",
      mb(tp).c_str(), mb(pp).c_str(), mb(dp).c_str(), mb(ep).c_str());
  if (o.strategy == Strategy::kExpert) {
    std::vector<double> a2a;
    for (size_t i = std::min(warmup, slowest.size() - 1); i < slowest.size(); ++i)
      a2a.push_back(slowest[i].all_to_all_seconds);
    const double a2a_s = median(a2a);
    const RankFigures& first = ranks.front();  // routing figures are all ranks' sums
    std::printf(
        "# expert all-to-all (counts, dispatch, combine; forward and backward): %.3f ms per step, "
        "%.1f%% of the step; token assignments over the run (warm-up included) routed %.0f, "
        "dropped %.0f (%.2f%%); load "
        "imbalance %.3f (max / mean per expert, median)\n",
        a2a_s * 1e3, s.step_median_s > 0 ? 100 * a2a_s / s.step_median_s : 0, first.routed,
        first.dropped, first.routed > 0 ? 100 * first.dropped / first.routed : 0,
        first.load_imbalance);
    return;
  }
  if (o.parallel.pp == 1) return;
  const double textbook = textbook_bubble(o.parallel.pp, o.micro_batches, o.parallel.chunks);
  std::printf("# pipeline per rank (medians): %s, textbook bubble (N-1)/(vM+N-1) = %.3f\n",
              std::string(name(o.parallel.schedule)).c_str(), textbook);
  std::printf("%5s %6s %4s %4s %12s %10s %10s %8s %10s %14s\n", "rank", "stage", "tp", "dp",
              "pipeline ms", "busy ms", "idle ms", "bubble", "in flight", "activations MB");
  for (const RankFigures& f : ranks)
    std::printf("%5zu %6zu %4zu %4zu %12.3f %10.3f %10.3f %8.3f %10.0f %14.3f\n", f.rank, f.at.pp,
                f.at.tp, f.at.dp, f.pipeline_s * 1e3, f.busy_s * 1e3, f.idle_s * 1e3, bubble_of(f),
                f.peak_in_flight, f.peak_activation_bytes / 1e6);
}

// Rank 0, before the first step: the run, its layout and the table's head.
void print_header(const World& world, const TrainOptions& options, size_t ranks,
                  const std::string& backend) {
  const bool model_parallel = is_model_parallel(options.strategy);
  const size_t psi = options.strategy == Strategy::kExpert
                         ? moe_parameter_count(options.shape, options.parallel.experts)
                         : parameter_count(options.shape);
  // Samples each data-parallel replica trains on (tensor and pipeline ranks share theirs).
  const size_t replicas =
      !model_parallel || options.strategy == Strategy::kExpert ? ranks : options.parallel.dp;
  std::printf(
      "# ccscope train: %s, %zu rank(s) (%s%s), model %zu x %zu %s (%s parameters, %s), "
      "global batch %zu (%zu per %s, %zu micro-batch(es)), %s lr %g%s%s\n",
      std::string(name(options.strategy)).c_str(), ranks, backend.c_str(),
      options.overlap ? ", overlapped" : ", --no-overlap", options.shape.depth, options.shape.width,
      std::string(name(options.shape.activation)).c_str(),
      fmt::format("{:.2f} M", static_cast<double>(psi) / 1e6).c_str(),
      std::string(name(options.precision)).c_str(), options.global_batch,
      options.global_batch / replicas, model_parallel ? "replica" : "rank", options.micro_batches,
      std::string(name(options.optimizer.kind)).c_str(), options.optimizer.lr,
      options.grad_clip ? fmt::format(", clip {}", *options.grad_clip).c_str() : "",
      options.strategy == Strategy::kZero3 && !options.prefetch ? ", --no-prefetch" : "");
  if (model_parallel && options.strategy != Strategy::kExpert)
    std::printf(
        "# layout: tensor parallel %zu x pipeline %zu (%s, %zu chunk(s) per stage, %zu "
        "micro-batches) x data parallel %zu%s\n",
        options.parallel.tp, options.parallel.pp,
        std::string(name(options.parallel.schedule)).c_str(), options.parallel.chunks,
        options.micro_batches, options.parallel.dp, options.parallel.zero1 ? " with ZeRO-1" : "");
  if (model_parallel && options.strategy != Strategy::kExpert) {
    const std::string split = split_tensor_groups(options.parallel, world.hostnames());
    if (!split.empty())
      std::printf(
          "# note: %s: its all-reduces cross the network (ranks placed round-robin? "
          "place them node by node)\n",
          split.c_str());
  }
  if (options.strategy == Strategy::kExpert)
    std::printf("# experts: %zu over %zu ranks, top-%zu gate, capacity factor %g%s\n",
                options.parallel.experts, ranks, options.parallel.top_k,
                options.parallel.capacity_factor,
                options.parallel.capacity_factor == 0 ? " (no limit)" : "");
  std::printf("# times are the slowest rank's, per step\n");
  std::printf("%6s %12s %10s %11s %9s %11s %11s\n", "step", "loss", "step ms", "compute ms",
              "comm ms", "exposed ms", "MB sent");
  std::fflush(stdout);
}

// Rank 0, after the run: the summary, bytes and memory against the formulas,
// consistency, the loss against one rank's and the scaling.
void print_results(const TrainOptions& options, size_t ranks, bool weak, const RunMeasurement& m) {
  const RunSummary& s = m.summary;
  std::printf(
      "# step median %.3f ms (p90 %.3f) over %zu steps after %zu warm-up; compute %.3f ms, "
      "communication %.3f ms (%.1f%% of the step), exposed %.3f ms (%.1f%%); %.1f samples/s\n",
      s.step_median_s * 1e3, s.step_p90_s * 1e3, s.measured_steps, m.warmup,
      s.compute_median_s * 1e3, s.comm_median_s * 1e3, 100 * s.comm_share,
      s.exposed_comm_median_s * 1e3, 100 * s.exposed_comm_share, s.samples_per_s);
  if (is_model_parallel(options.strategy)) {
    std::printf(
        "# memory per rank, the largest (parameters, gradients, optimizer state): %s, %s, %s\n",
        mb(m.memory.parameters).c_str(), mb(m.memory.gradients).c_str(),
        mb(m.memory.optimizer).c_str());
  } else {
    const size_t psi = static_cast<size_t>(m.run.parameters);
    const double factor =
        m.bytes_expected /
        std::max(1.0, all_gather_bytes(psi, ranks, element_bytes(options.precision)));
    std::printf("# bytes sent per step per rank: %s; formula %g Psi (n-1)/n = %s: %s\n",
                mb(s.bytes_per_step).c_str(), ranks > 1 ? factor : 0.0,
                mb(m.bytes_expected).c_str(), m.bytes_ok ? "ok" : "DIFFERS");
    std::printf(
        "# memory per rank (parameters, gradients, optimizer state): %s, %s, %s; ZeRO paper's "
        "accounting %s, %s, %s: %s\n",
        mb(m.memory.parameters).c_str(), mb(m.memory.gradients).c_str(),
        mb(m.memory.optimizer).c_str(), mb(m.memory_expected.parameters).c_str(),
        mb(m.memory_expected.gradients).c_str(), mb(m.memory_expected.optimizer).c_str(),
        m.memory_ok ? "ok" : "DIFFERS");
  }
  if (options.check_consistency) {
    if (!m.inconsistent_after_step)
      std::printf("# parameters agree across ranks after every step\n");
    else
      std::printf("# parameters DIFFER across ranks after step %zu\n", *m.inconsistent_after_step);
  }
  if (m.equivalence) std::printf("# %s\n", m.equivalence->summary().c_str());
  if (m.scaling && ranks > 1)
    std::printf("# %s scaling against 1 rank: speed-up %.2f, efficiency %.1f%%\n",
                weak ? "weak" : "strong", m.scaling->speedup, 100 * m.scaling->efficiency);
  std::printf("\n");
  std::fflush(stdout);
}

// One run at `ranks` ranks on the world's first ranks; rank 0 prints and writes.
struct RunOutcome {
  bool ran = false;
  RunSummary summary;
  bool checks_pass = true;
};

RunOutcome run_one(const World& world, const TrainOptions& options, size_t ranks, bool weak,
                   bool yielding_waits, const std::optional<std::vector<double>>& reference,
                   Outputs& out, size_t print_every, HangWatchdog& watchdog,
                   double one_rank_step_s) {
  RunRequest request;
  request.options = options;
  request.ranks = ranks;
  request.weak = weak;
  request.yielding_waits = yielding_waits;
  request.run_id = run_id(options, ranks, weak);
  request.reference = reference;
  request.one_rank_step_s = one_rank_step_s;
  const bool model_parallel = is_model_parallel(options.strategy);
  bool leader = false;
  RunHooks hooks;
  hooks.started = [&](const Communicator& comm) {
    leader = comm.rank() == 0;
    if (leader) print_header(world, options, ranks, comm.backend_name());
    watchdog.begin_phase("train " + request.run_id);
  };
  hooks.step = [&](const StepReport& step) {
    watchdog.operation_started();
    if (!leader) return;
    const StepFigures& f = step.own;
    const StepFigures& s = step.slowest;
    if (print_every && (f.step % print_every == 0 || f.step + 1 == options.steps))
      std::printf("%6zu %12.6g %10.3f %11.3f %9.3f %11.3f %11.3f%s\n", f.step, f.loss,
                  s.step_seconds * 1e3, s.compute_seconds * 1e3, s.comm_seconds * 1e3,
                  s.exposed_comm_seconds * 1e3, s.bytes_sent / 1e6, f.skipped ? "  skipped" : "");
    std::fflush(stdout);
    if (out.steps)
      out.steps->append(
          records::csv_row(records::train_step_kind(), records::train_step_cells(step.record)));
  };
  RunMeasurement m = measure_run(world, request, hooks);
  RunOutcome outcome;
  if (!m.ran) return outcome;  // this rank sat the run out
  watchdog.end_phase();
  outcome.ran = true;
  outcome.summary = m.summary;
  if (!m.leader) return outcome;
  outcome.checks_pass = m.checks_pass;
  if (model_parallel) {
    print_parallel(options, m.summary, m.rank_figures, m.slowest, m.warmup);
    if (out.ranks)
      for (const records::TrainRankRecord& r : m.rank_records)
        out.ranks->append(
            records::csv_row(records::train_rank_kind(), records::train_rank_cells(r)));
  }
  print_results(options, ranks, weak, m);
  if (out.runs)
    out.runs->append(records::csv_row(records::train_run_kind(), records::train_run_cells(m.run)));
  return outcome;
}

// The training runs as the body of their job.
int run_training(job::JobContext& job, const TrainFlags& flags, TrainOptions base,
                 const std::vector<size_t>& counts) {
  const World& world = job.world();
  const bool leader = job.leader();
  const size_t world_size = static_cast<size_t>(world.size());
  auto fail_usage = [&](const std::string& what) {
    return leader ? usage_error(kTrainVerb, what) : kExitUsage;
  };
  std::vector<size_t> rank_counts = counts.empty() ? std::vector<size_t>{world_size} : counts;
  if (base.strategy == Strategy::kSingle) rank_counts = {1};
  for (size_t k : rank_counts)
    if (k > world_size)
      return fail_usage(fmt::format(
          "--scaling {}: the job has {} rank(s); launch with mpiexec -n {}", k, world_size, k));
  // The DeepSpeed config needs the world size (its batch arithmetic).
  if (!flags.deepspeed_config.empty()) {
    try {
      const std::string text = reports::read_input_file(flags.deepspeed_config);
      const DeepSpeedConfig ds = parse_deepspeed_config(text, base, rank_counts.back());
      base = ds.options;
      if (leader) {
        std::string honoured, ignored;
        for (const auto& k : ds.honoured) honoured += (honoured.empty() ? "" : ", ") + k;
        for (const auto& k : ds.ignored) ignored += (ignored.empty() ? "" : ", ") + k;
        std::printf("# deepspeed config %s: honoured %s\n", flags.deepspeed_config.c_str(),
                    honoured.empty() ? "nothing" : honoured.c_str());
        if (!ignored.empty()) std::printf("# deepspeed config: ignored %s\n", ignored.c_str());
        if (!ds.offload.empty())
          std::printf(
              "# offload %s: the CPU path keeps every state in host memory already; no "
              "host-device traffic to measure (0 B per step)\n",
              ds.offload.c_str());
      }
    } catch (const ConfigError& e) {
      // "deepspeed config: line 3 ..." -> "deepspeed config FILE: line 3 ..."
      std::string what = e.what();
      const std::string prefix = "deepspeed config";
      if (what.rfind(prefix, 0) == 0)
        what.insert(prefix.size(), " " + reports::printable(flags.deepspeed_config));
      return fail_usage(what);
    } catch (const reports::InputError& e) {
      return fail_usage(e.what());
    }
  } else if (!flags.offload.empty() && leader) {
    std::printf(
        "# --offload %s: the CPU path keeps every state in host memory already; no host-device "
        "traffic to measure (0 B per step)\n",
        flags.offload.c_str());
  }
  // Defaults run at any rank count: without --global-batch (or a DeepSpeed config's batch),
  // the default is rounded up to what every run's ranks and micro-batches divide.
  auto adopt_default_batch = [&](size_t multiple, const char* what) {
    if (flags.global_batch_given || !flags.deepspeed_config.empty()) return;
    const size_t batch = default_global_batch(base.global_batch, multiple);
    // (beyond --global-batch's range, validation below says what to choose)
    if (batch == base.global_batch || batch > (size_t{1} << 24)) return;
    if (leader)
      std::printf(
          "# global batch %zu: the default %zu rounded up to a multiple of %zu (%s); "
          "--global-batch sets it\n",
          batch, base.global_batch, multiple, what);
    base.global_batch = batch;
  };
  if (is_model_parallel(base.strategy)) {
    if (!counts.empty() || flags.weak)
      return fail_usage(
          "--scaling and --weak run data-parallel strategies; a model-parallel run "
          "spans the whole job");
    if (!flags.deepspeed_config.empty() || !flags.export_dir.empty() || !flags.offload.empty())
      return fail_usage("--deepspeed-config, --export and --offload apply to single, ddp and zero");
    const std::string problem = complete_layout(base, world_size, flags.ep);
    if (!problem.empty()) return fail_usage(problem);
    const size_t replicas = base.strategy == Strategy::kExpert ? world_size : base.parallel.dp;
    adopt_default_batch(replicas * base.micro_batches, "data-parallel replicas x micro-batches");
    const std::string batch = validate(base, replicas);
    if (!batch.empty()) return fail_usage(batch);
  } else {
    if (!flags.ranks_csv.empty())
      return fail_usage("--ranks-csv needs --strategy tp, pp, ep or 3d");
    // --weak: the per-rank batch is the flag's; else every rank count of the run divides it.
    size_t multiple = 1;
    for (size_t k : rank_counts) multiple = std::lcm(multiple, flags.weak ? size_t{1} : k);
    adopt_default_batch(multiple * base.micro_batches,
                        flags.weak ? "micro-batches" : "ranks x micro-batches");
    for (size_t k : rank_counts) {
      TrainOptions o = base;
      if (flags.weak) o.global_batch = base.global_batch * k;
      const std::string problem = validate(o, k);
      if (!problem.empty()) return fail_usage(problem);
    }
  }
  if (base.overlap && !MpiSession::serialized_threads()) {
    if (leader)
      std::fprintf(stderr,
                   "ccscope train: note: this MPI did not grant MPI_THREAD_SERIALIZED; "
                   "communication runs on the training thread (--no-overlap)\n");
    base.overlap = false;
  }
  set_compute_threads(flags.threads);

  Outputs out;
  std::string open_error;
  int open_exit = 0;
  if (leader) {
    try {
      const auto outputs = output_files(flags);
      const std::vector<reports::OutputTarget> targets =
          reports::resolve_outputs(outputs, {{"--deepspeed-config", flags.deepspeed_config}});
      for (size_t i = 0; i < outputs.size(); ++i) {
        const std::string& what = outputs[i].first;
        if (what == "--csv")
          out.steps = std::make_unique<RowFile>(targets[i], records::train_step_kind());
        if (what == "--runs-csv")
          out.runs = std::make_unique<RowFile>(targets[i], records::train_run_kind());
        if (what == "--ranks-csv")
          out.ranks = std::make_unique<RowFile>(targets[i], records::train_rank_kind());
      }
      if (!flags.export_dir.empty()) export_run(flags.export_dir, base);
    } catch (const reports::WriteError& e) {
      open_error = e.what();
      open_exit = kExitWriteFailed;
    } catch (const std::exception& e) {
      open_error = e.what();
      open_exit = kExitUsage;
    }
  }
  // Rank 0 alone opens them: every rank ends with its code.
  if (const int64_t code = world.all_reduce_sum(static_cast<int64_t>(open_exit)); code != 0) {
    if (!leader) return static_cast<int>(code);
    return open_exit == kExitWriteFailed ? write_error(kTrainVerb, open_error)
                                         : usage_error(kTrainVerb, open_error);
  }

  HangWatchdog& watchdog = job.start_watchdog(base.timeout);
  base.on_timeout = [&job](const std::string& what) { job.end_job(kExitTimeout, what); };
  int exit_code = 0;
  {
    // The single-rank references, computed on rank 0 while the others wait asleep.
    std::map<size_t, std::vector<double>> references;  // by global batch
    if (flags.check_loss && leader) {
      for (size_t k : rank_counts) {
        TrainOptions o = base;
        if (flags.weak) o.global_batch = base.global_batch * k;
        if (references.count(o.global_batch)) continue;
        std::vector<double> curve;
        const TrainResult single =
            is_model_parallel(o.strategy) ? train_parallel_single(o) : train_single(o);
        for (const StepFigures& f : single.steps) curve.push_back(f.loss);
        references[o.global_batch] = curve;
      }
    }
    // Ranks sitting a run out wait as long as a run may last: every step's
    // waits are bounded by the timeout (the watchdog names a stuck rank).
    const auto run_bound = base.timeout * static_cast<long long>(base.steps + 2);
    if (flags.check_loss)
      world.sleeping_barrier(run_bound * static_cast<long long>(rank_counts.size()));
    double one_rank_step_s = 0;
    for (size_t k : rank_counts) {
      TrainOptions o = base;
      if (flags.weak) o.global_batch = base.global_batch * k;
      std::optional<std::vector<double>> reference;
      if (auto it = references.find(o.global_batch); it != references.end()) reference = it->second;
      const RunOutcome outcome = run_one(world, o, k, flags.weak, !flags.busy_poll, reference, out,
                                         flags.print_every, watchdog, one_rank_step_s);
      if (outcome.ran && leader) {
        if (k == 1) one_rank_step_s = outcome.summary.step_median_s;
        if (!outcome.checks_pass) exit_code = kExitCheckFailed;
      }
      world.sleeping_barrier(run_bound);
    }
  }  // a wait cut short or a failure ends the job (run_job: exit 3, 2 or 1)
  return job.leave_together(job.agree_on_exit_code(exit_code));
}

}  // namespace train_verb_detail

int train_verb(const std::vector<std::string>& args, const std::vector<std::string>&) {
  using namespace train_verb_detail;
  TrainFlags f;
  CLI::App app{
      "ccscope train: real training steps of an MLP under a strategy (single, ddp, zero1-3)\n"
      "over MPI: step time, compute/communication/exposed split, bytes and memory against the\n"
      "formulas, the loss against one rank's. Launch with mpiexec -n N.",
      "ccscope train"};
  app.add_option("--strategy", f.strategy, "single, ddp, zero1, zero2, zero3, tp, pp, ep, 3d")
      ->capture_default_str();
  app.add_option("--steps", f.steps, "optimizer steps")->capture_default_str();
  app.add_option("--width", f.width, "features of every layer")->capture_default_str();
  app.add_option("--depth", f.depth, "linear layers")->capture_default_str();
  app.add_option("--activation", f.activation, "relu or tanh")->capture_default_str();
  CLI::Option* global_batch =
      app.add_option("--global-batch", f.global_batch,
                     "samples per step, all ranks together (with --weak: the batch at one rank; "
                     "by default rounded up to a multiple of the ranks x micro-batches)")
          ->capture_default_str();
  app.add_option("--micro-batches", f.micro_batches,
                 "gradient accumulation steps (DDP no_sync on all but the last)")
      ->capture_default_str();
  app.add_option("--samples", f.samples, "data set size (default 8 global batches)");
  app.add_option("--optimizer", f.optimizer, "sgd (with momentum), adam, adamw")
      ->capture_default_str();
  // The probe's ranges: what torch.optim takes, bounded where a larger value only diverges.
  add_number_option(app, "--lr", f.lr, "learning rate", {0, 10, true})->capture_default_str();
  add_number_option(app, "--momentum", f.momentum, "SGD momentum", {0, 1, false, true})
      ->capture_default_str();
  add_number_option(app, "--weight-decay", f.weight_decay, "weight decay (AdamW: decoupled)",
                    {0, 10})
      ->capture_default_str();
  add_number_option(app, "--beta1", f.beta1, "Adam beta1", {0, 1, false, true})
      ->capture_default_str();
  add_number_option(app, "--beta2", f.beta2, "Adam beta2", {0, 1, false, true})
      ->capture_default_str();
  add_number_option(app, "--eps", f.eps, "Adam epsilon", {0, 1, true, true})->capture_default_str();
  app.add_option("--precision", f.precision,
                 "fp32, bf16 (FSDP MixedPrecision: bf16 parameters and reduction, fp32 master), "
                 "fp16 (dynamic loss scaling)")
      ->capture_default_str();
  app.add_option("--initial-scale-power", f.initial_scale_power, "fp16: initial loss scale 2^N")
      ->capture_default_str();
  add_number_option(app, "--bucket-mb", f.bucket_mb, "DDP bucket_cap_mb / ZeRO reduce bucket (MiB)",
                    {0, 1e6, true})
      ->capture_default_str();
  app.add_flag("--no-overlap", f.no_overlap,
               "communication on the training thread (for comparison)");
  app.add_flag("--busy-poll", f.busy_poll,
               "MPI's blocking calls (they spin) instead of waits that yield the core to compute");
  app.add_flag("--no-prefetch", f.no_prefetch,
               "ZeRO-3: no gather of the next layer during compute");
  add_number_option(app, "--grad-clip", f.grad_clip, "clip gradients to this global norm (0: off)",
                    {0, 1e6});
  app.add_option("--deepspeed-config", f.deepspeed_config, "a DeepSpeed JSON config to run");
  app.add_option("--offload", f.offload,
                 "optimizer or params (DeepSpeed's offload; GPU path only)");
  app.add_option("--scaling", f.scaling,
                 "rank counts to run, e.g. 1,2,4 (on the job's first ranks)")
      ->delimiter(',');
  app.add_flag("--weak", f.weak, "with --scaling: the same per-rank batch (global batch x ranks)");
  app.add_flag("--check-loss", f.check_loss,
               "compare every run's loss with one rank's (single, same global batch); exit 1 when "
               "it differs beyond the tolerance");
  app.add_flag("--check-consistency", f.check_consistency,
               "after every step, check that parameters agree across ranks");
  app.add_option("--threads", f.threads, "OpenBLAS threads per rank")->capture_default_str();
  app.add_option("--seed", f.seed, "data, initial weights and sampler seed")->capture_default_str();
  add_output_option(app, "--csv", f.csv, "per-step records (ccscope.train_step)");
  add_output_option(app, "--runs-csv", f.runs_csv, "per-run records (ccscope.train_run)");
  app.add_option("--export", f.export_dir,
                 "write the initial weights, data and batches to DIR (compare-with-pytorch)");
  app.add_option("--print-every", f.print_every, "print every Nth step (0: none)")
      ->capture_default_str();
  add_number_option(app, "--timeout", f.timeout_seconds, "seconds any one wait may last",
                    {0, 1e6, true})
      ->capture_default_str();
  app.add_option("--tp", f.tp, "tensor-parallel degree (tp, 3d)");
  app.add_option("--pp", f.pp, "pipeline stages (pp, 3d)");
  app.add_option("--dp", f.dp, "data-parallel degree (3d; default: the ranks tp x pp leave)");
  app.add_option("--ep", f.ep, "expert-parallel degree (ep: every rank)");
  app.add_option("--schedule", f.schedule, "pipeline schedule: gpipe, 1f1b, interleaved")
      ->capture_default_str();
  app.add_option("--chunks", f.chunks, "interleaved: model chunks (virtual stages) per stage")
      ->capture_default_str();
  app.add_option("--stage-layers", f.stage_layers,
                 "blocks per (virtual) stage, e.g. 3,1 (default: balanced by parameters; a "
                 "block is a layer, or a layer pair under tensor parallelism)")
      ->delimiter(',');
  app.add_option("--zero-stage", f.zero_stage, "3d: 1 for ZeRO-1 over the data-parallel group")
      ->capture_default_str();
  app.add_option("--experts", f.experts, "ep: experts per mixture layer");
  app.add_option("--top-k", f.top_k, "ep: experts per token")->capture_default_str();
  add_number_option(app, "--capacity-factor", f.capacity_factor,
                    "ep: expert capacity factor (0: no limit, nothing dropped)", {0, 1e6})
      ->capture_default_str();
  add_output_option(app, "--ranks-csv", f.ranks_csv,
                    "model-parallel runs: per-rank records (ccscope.train_rank)");
  app.add_option("--fault", f.fault,
                 "tests only: sum, sampler, bucket, clip, microbatch, tp-allreduce, expert")
      ->group("");
  if (const std::optional<int> done = parse_flags(app, kTrainVerb, args)) return *done;
  f.global_batch_given = global_batch->count() > 0;
  TrainOptions options;
  std::string problem;
  try {  // before MPI starts: the same file twice is refused at once
    (void)reports::resolve_outputs(output_files(f), {{"--deepspeed-config", f.deepspeed_config}});
  } catch (const reports::InputError& e) {
    problem = e.what();
  }
  if (problem.empty()) problem = options_from_flags(f, options);
  if (!problem.empty()) {
    if (bench::launcher_says_rank_zero()) return usage_error(kTrainVerb, problem);
    return kExitUsage;
  }
  std::vector<size_t> counts;
  for (const std::string& word : f.scaling) {
    char* end = nullptr;
    const long value = std::strtol(word.c_str(), &end, 10);
    if (word.empty() || *end != '\0' || value < 1) {
      if (bench::launcher_says_rank_zero())
        return usage_error(kTrainVerb, "--scaling '" + word + "': give rank counts, e.g. 1,2,4");
      return kExitUsage;
    }
    counts.push_back(static_cast<size_t>(value));
  }
  return job::run_job({kTrainVerb},
                      [&](job::JobContext& job) { return run_training(job, f, options, counts); });
}

}  // namespace ccscope::app
