// Settings into options and plans: see ccscope/training_probe/train_setup.h.
#include "ccscope/training_probe/train_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <numeric>
#include <utility>

#include "ccscope/job/backend_registry.h"
#include "ccscope/records/schema.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/parallel_trainer.h"

namespace ccscope::training_probe {
namespace {

template <typename T>
std::optional<T> choose(const std::string& text,
                        std::initializer_list<std::pair<const char*, T>> choices) {
  for (const auto& [word, value] : choices)
    if (text == word) return value;
  return std::nullopt;
}

// The bytes every rank holds at once, about: teacher (2 w^2), data (2 samples
// w), parameters, gradients, two optimizer words, master weights, activations
// (2 per layer per sample). In doubles: the count itself could overflow for
// absurd expert counts.
double bytes_per_rank(const TrainSettings& s) {
  const double w = static_cast<double>(s.width);
  const double samples = static_cast<double>(s.samples ? s.samples : 8 * s.global_batch);
  if (s.model == "transformer") {  // the parameters' six copies, tokens, activations, logits
    const double h = s.width_given ? w : 64, layers = s.depth_given ? s.depth : 2;
    const double seq = static_cast<double>(s.seq_len), vocab = static_cast<double>(s.vocab);
    const double tokens = static_cast<double>(s.global_batch) * seq;
    const double psi = layers * (12 * h * h + 13 * h) + 2 * vocab * h + seq * h + 2 * h;
    const double held =
        layers * (tokens * (16 * h + 4) + tokens * static_cast<double>(s.heads) * seq);
    return 4.0 * (6 * psi + samples * (seq + 1) + held + 2 * tokens * (vocab + h));
  }
  // Every rank builds the whole model's initial weights (ep: every expert).
  const double mixtures = s.experts ? static_cast<double>((s.depth - 1) / 2) : 0.0;
  const double psi = (static_cast<double>(s.depth) - mixtures) * (w * w + w) +
                     mixtures * static_cast<double>(s.experts) * (w * w + 2 * w);
  return 4.0 * (2 * w * w + 2 * samples * w + 6 * psi +
                2 * static_cast<double>(s.depth) * static_cast<double>(s.global_batch) * w);
}

// The faults' words (tests only); "" or the problem.
std::string apply_fault(const TrainSettings& s, Faults& faults) {
  if (s.fault == "microbatch")
    faults.dropped_micro_batch = s.micro_batches > 1 ? 1 : 0;
  else if (s.fault == "tp-allreduce")
    faults.skipped_tp_all_reduce = true;
  else if (s.fault == "expert")
    faults.wrong_expert = true;
  else if (s.fault == "sum")
    faults.sum_not_average = true;
  else if (s.fault == "sampler")
    faults.sampler_not_reseeded = true;
  else if (s.fault == "bucket")
    faults.unreduced_bucket = 0;
  else if (s.fault == "clip")
    faults.clip_per_shard = true;
  else if (!s.fault.empty())
    return "--fault '" + s.fault +
           "': use sum, sampler, bucket, clip, microbatch, tp-allreduce or expert";
  return "";
}

// --model and the transformer's flags into `o`; "" or the problem.
std::string transformer_settings(const TrainSettings& f, Strategy strategy, TrainOptions& o) {
  const auto model = choose<TrainedModel>(
      f.model, {{"mlp", TrainedModel::kMlp}, {"transformer", TrainedModel::kTransformer}});
  if (!model) return "--model '" + f.model + "': use mlp or transformer";
  const auto recompute = choose<Recompute>(f.recompute, {{"none", Recompute::kNone},
                                                         {"selective", Recompute::kSelective},
                                                         {"full", Recompute::kFull}});
  if (!recompute) return "--recompute '" + f.recompute + "': use none, selective or full";
  const TrainSettings defaults;
  if (*model == TrainedModel::kMlp) {
    if (f.heads != defaults.heads || f.seq_len != defaults.seq_len || f.vocab != defaults.vocab ||
        f.sequence_parallel || *recompute != Recompute::kNone)
      return "--heads, --seq-len, --vocab, --sequence-parallel and --recompute need --model "
             "transformer";
    return "";
  }
  if (is_model_parallel(strategy) && strategy != Strategy::kTensor)
    return "--model transformer runs single, ddp, zero1, zero2, zero3 and tp; pp, ep and 3d "
           "are built for the MLP only";
  if (f.sequence_parallel && strategy != Strategy::kTensor)
    return "--sequence-parallel shards the tensor-parallel group's activations: it needs "
           "--strategy tp";
  if (f.activation != defaults.activation)
    return "--activation is the MLP's; the transformer's MLP uses GELU";
  if (f.vocab > (size_t{1} << 20) || f.seq_len > 65536 || f.heads > 65536)
    return "--vocab must be at most 1048576, --seq-len and --heads at most 65536";
  o.model = *model;
  o.transformer = {
      f.vocab, f.seq_len, f.width_given ? f.width : 64, f.heads, f.depth_given ? f.depth : 2, 0};
  o.sequence_parallel = f.sequence_parallel;
  o.recompute = *recompute;
  return transformer_problem(o.transformer, 1, false);
}

// The rank counts of the runs; "" or the problem.
std::string plan_rank_counts(Strategy strategy, const std::vector<size_t>& scaling,
                             size_t world_size, std::vector<size_t>& rank_counts) {
  rank_counts = scaling.empty() ? std::vector<size_t>{world_size} : scaling;
  if (strategy == Strategy::kSingle) rank_counts = {1};
  for (size_t k : rank_counts)
    if (k > world_size)
      return fmt::format("--scaling {}: the job has {} rank(s); launch with mpiexec -n {}", k,
                         world_size, k);
  return "";
}

}  // namespace

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
}

std::string options_from_settings(const TrainSettings& f, TrainOptions& o, double memory_bytes) {
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
  if (const std::string problem = transformer_settings(f, *strategy, o); !problem.empty())
    return problem;
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
  if (const double bytes = bytes_per_rank(f); memory_bytes > 0 && bytes > 0.8 * memory_bytes)
    return fmt::format(
        "the model and data need about {:.1f} GB per rank, more than this machine's {:.1f} GB "
        "allows; use a smaller --width, --depth, --global-batch or --samples",
        bytes / 1e9, memory_bytes / 1e9);
  if (!f.offload.empty() && f.offload != "optimizer" && f.offload != "params")
    return "--offload '" + f.offload + "': use optimizer or params";
  o.strategy = *strategy;  // (the transformer's settings are in o already)
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
  // ZeRO-1 reduces after backward, as DeepSpeed's stage 1 does by default
  // (overlap_comm false; a DeepSpeed config may turn it on).
  o.overlap = !f.no_overlap && o.strategy != Strategy::kZero1;
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
  return apply_fault(f, o.faults);
}

std::string parse_rank_counts(const std::vector<std::string>& words, std::vector<size_t>& counts) {
  counts.clear();
  for (const std::string& word : words) {
    char* end = nullptr;
    const long value = std::strtol(word.c_str(), &end, 10);
    if (word.empty() || *end != '\0' || value < 1)
      return "--scaling '" + word + "': give rank counts, e.g. 1,2,4";
    counts.push_back(static_cast<size_t>(value));
  }
  return "";
}

size_t model_parameters(const TrainOptions& o) {
  if (o.model == TrainedModel::kTransformer) return transformer_parameter_count(o.transformer);
  return o.strategy == Strategy::kExpert ? moe_parameter_count(o.shape, o.parallel.experts)
                                         : parameter_count(o.shape);
}

size_t data_replicas(const TrainOptions& o, size_t ranks) {
  return !is_model_parallel(o.strategy) || o.strategy == Strategy::kExpert ? ranks : o.parallel.dp;
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

std::string complete_layout(TrainOptions& o, size_t ranks, size_t ep) {
  ParallelOptions& p = o.parallel;
  if (o.strategy == Strategy::kExpert) {
    if (ep && ep != ranks)
      return fmt::format("--ep {}: expert parallelism spans every rank; launch with mpiexec -n {}",
                         ep, ep);
    p.tp = p.pp = p.dp = 1;
    return validate_parallel(o, ranks);
  }
  if (ep) return "--ep needs --strategy ep";
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

TrainOptions options_at(const TrainPlan& plan, size_t ranks) {
  TrainOptions o = plan.base;
  if (plan.weak) o.global_batch = plan.base.global_batch * ranks;
  return o;
}

// MPI's thread level: the communication thread needs MPI_THREAD_SERIALIZED.
void refuse_overlap(TrainPlan& plan, bool serialized_threads) {
  if (!plan.base.overlap || serialized_threads) return;
  plan.base.overlap = false;
  plan.overlap_refused = true;
}

namespace {

// --backend: a host backend trains over it as the default does; a device
// backend (nccl) is the GPU path, whose communicator spans the whole job.
std::string plan_backend(TrainPlan& plan, const std::string& name, size_t world_size) {
  TrainOptions& o = plan.base;
  o.backend = name;
  if (name.empty()) return "";
  const job::Backend* backend = job::find_backend(name);
  if (backend == nullptr) {
    std::vector<std::string> names;
    for (const job::Backend& b : job::registered_backends()) names.push_back(b.name);
    return fmt::format("--backend {}: not a backend; use one of {}", name, fmt::join(names, ", "));
  }
  if (!backend->built())
    return fmt::format(
        "--backend {}: not built into this ccscope ({} was not found when it was "
        "built)",
        name, backend->library);
  if (backend->capabilities.device != job::DeviceKind::kDevice) {
    if (!backend->capabilities.groups)
      return fmt::format(
          "--backend {}: the training probe needs a backend that makes group "
          "communicators",
          name);
    return "";
  }
  if (const std::string why = device_training_unsupported(o); !why.empty())
    return fmt::format("--backend {}: {}", name, why);
  for (size_t ranks : plan.rank_counts)
    if (o.strategy != Strategy::kSingle && ranks != world_size)
      return fmt::format(
          "--backend {}: its communicator spans every rank of the job, so each run "
          "must too ({} of {}); drop --scaling or launch {} ranks",
          name, ranks, world_size, ranks);
  if (o.strategy == Strategy::kSingle && world_size != 1)
    return fmt::format("--backend {} --strategy single runs in a job of one rank, not {}", name,
                       world_size);
  if (plan.offload == "params")
    return fmt::format(
        "--backend {}: offloading parameters (ZeRO-3's offload_param) is not run on "
        "the GPU path; --offload optimizer is",
        name);
  o.offload_optimizer = plan.offload == "optimizer";
  if (const std::string why = device_training_unsupported(o); !why.empty())
    return fmt::format("--backend {}: {}", name, why);
  return "";
}

}  // namespace

TrainPlan plan_runs(const TrainSettings& s, TrainOptions base, const std::vector<size_t>& scaling,
                    size_t world_size, const std::function<std::string()>& read_deepspeed,
                    bool serialized_threads) {
  TrainPlan plan;
  plan.problem = plan_rank_counts(base.strategy, scaling, world_size, plan.rank_counts);
  if (!plan.problem.empty()) return plan;
  // The DeepSpeed config needs the rank count (its batch arithmetic).
  if (!s.deepspeed_config.empty()) {
    try {
      plan.deepspeed = parse_deepspeed_config(read_deepspeed(), base, plan.rank_counts.back());
    } catch (const ConfigError& e) {
      // "deepspeed config: line 3 ..." -> "deepspeed config NAME: line 3 ..."
      std::string what = e.what();
      const std::string prefix = "deepspeed config";
      if (what.rfind(prefix, 0) == 0) what.insert(prefix.size(), " " + s.deepspeed_config);
      throw ConfigError(what);
    }
    base = plan.deepspeed->options;
  }
  plan.offload = plan.deepspeed ? plan.deepspeed->offload : s.offload;
  plan.base = std::move(base);
  plan.problem = plan_backend(plan, s.backend, world_size);
  if (!plan.problem.empty()) return plan;
  const job::Backend* chosen = job::find_backend(plan.base.backend);
  const bool on_gpu = chosen != nullptr && chosen->capabilities.device == job::DeviceKind::kDevice;
  if (!on_gpu && (s.tf32 || s.isolate_ranks)) {
    plan.problem = fmt::format("{} applies to the GPU path (--backend nccl)",
                               s.tf32 ? "--tf32" : "--isolate-ranks");
    return plan;
  }
  plan.base.isolate_ranks = s.isolate_ranks;
  plan.base.tf32 = s.tf32;
  plan.weak = s.weak;
  plan.check_loss = s.check_loss;
  plan.yielding_waits = !s.busy_poll;
  TrainOptions& o = plan.base;
  // Defaults run at any rank count: without --global-batch (or a DeepSpeed config's batch),
  // the default is rounded up to what every run's ranks and micro-batches divide.
  auto adopt_default_batch = [&](size_t multiple, const char* why) {
    if (s.global_batch_given || !s.deepspeed_config.empty()) return;
    const size_t batch = default_global_batch(o.global_batch, multiple);
    // (beyond --global-batch's range, validation below says what to choose)
    if (batch == o.global_batch || batch > (size_t{1} << 24)) return;
    plan.rounded = BatchRounding{o.global_batch, batch, multiple, why};
    o.global_batch = batch;
  };
  if (is_model_parallel(o.strategy)) {
    if (!s.scaling.empty() || s.weak) {
      plan.problem =
          "--scaling and --weak run data-parallel strategies; a model-parallel run "
          "spans the whole job";
      return plan;
    }
    if (!s.deepspeed_config.empty() || s.export_data) {
      plan.problem = "--deepspeed-config and --export apply to single, ddp and zero";
      return plan;
    }
    // The GPU path offloads each rank's slice of the optimizer (plan_backend set it);
    // on the CPU path there is nothing to offload.
    if (!s.offload.empty() && !o.offload_optimizer) {
      plan.problem =
          "--offload applies to tp, pp, 3d and ep on a GPU backend (--backend nccl), and to "
          "single, ddp and zero";
      return plan;
    }
    plan.problem = complete_layout(o, world_size, s.ep);
    if (!plan.problem.empty()) return plan;
    const size_t replicas = data_replicas(o, world_size);
    adopt_default_batch(replicas * o.micro_batches, "data-parallel replicas x micro-batches");
    plan.problem = validate(o, replicas);
    if (plan.problem.empty()) refuse_overlap(plan, serialized_threads);
    return plan;
  }
  if (s.rank_records) {
    plan.problem = "--ranks-csv needs --strategy tp, pp, ep or 3d";
    return plan;
  }
  // --weak: the per-rank batch is the flag's; else every rank count of the run divides it.
  size_t multiple = 1;
  for (size_t k : plan.rank_counts) multiple = std::lcm(multiple, s.weak ? size_t{1} : k);
  adopt_default_batch(multiple * o.micro_batches,
                      s.weak ? "micro-batches" : "ranks x micro-batches");
  for (size_t k : plan.rank_counts) {
    plan.problem = validate(options_at(plan, k), k);
    if (!plan.problem.empty()) return plan;
  }
  refuse_overlap(plan, serialized_threads);
  return plan;
}

namespace {

// --export of the transformer: its initial parameters (transformer.h's
// order), the token sequences [samples x (seq_len + 1)] as int64, every
// step's global batch, model.json (what pytorch_transformer.py builds).
std::vector<ExportFile> transformer_export_files(const TrainOptions& o) {
  std::vector<ExportFile> files;
  auto add = [&](const char* file, const void* data, size_t bytes) {
    files.push_back({file, std::string(static_cast<const char*>(data), bytes)});
  };
  const size_t samples = dataset_size(o);
  const TransformerShape& t = o.transformer;
  const std::vector<float> params = transformer_initial_parameters(t, o.seed);
  add("initial_parameters.f32", params.data(), params.size() * 4);
  const TokenDataset data = make_token_dataset(samples, t, o.seed);
  const std::vector<int64_t> tokens(data.tokens.begin(), data.tokens.end());
  add("sequences.i64", tokens.data(), tokens.size() * 8);
  std::vector<int64_t> batches;
  for (size_t s = 0; s < o.steps; ++s)
    for (size_t i : batch_samples(samples, 1, 0, o.global_batch, o.seed, s))
      batches.push_back(static_cast<int64_t>(i));
  add("batches.i64", batches.data(), batches.size() * 8);
  const OptimizerOptions& p = o.optimizer;
  const std::string model = fmt::format(
      "{{\"model\": \"transformer\", \"vocab\": {}, \"seq_len\": {}, \"hidden\": {}, "
      "\"heads\": {}, \"layers\": {}, \"ffn\": {}, \"gelu\": \"exact\", "
      "\"layer_norm_eps\": 1e-05, \"lm_head\": \"untied, no bias\", "
      "\"optimizer\": {{\"kind\": \"{}\", \"lr\": {}, \"momentum\": {}, \"beta1\": {}, "
      "\"beta2\": {}, \"eps\": {}, \"weight_decay\": {}}}, \"global_batch\": {}, "
      "\"micro_batches\": {}, \"grad_clip\": {}, \"steps\": {}, \"samples\": {}, "
      "\"seed\": {}, \"precision\": \"{}\", "
      "\"loss\": \"cross-entropy mean over every token of the global batch\"}}\n",
      t.vocab, t.seq_len, t.hidden, t.heads, t.layers, t.ffn_size(), name(p.kind),
      records::number_text(p.lr), records::number_text(p.momentum), records::number_text(p.beta1),
      records::number_text(p.beta2), records::number_text(p.eps),
      records::number_text(p.weight_decay), o.global_batch, o.micro_batches,
      o.grad_clip ? records::number_text(*o.grad_clip) : std::string("null"), o.steps, samples,
      o.seed, name(o.precision));
  add("model.json", model.data(), model.size());
  return files;
}

}  // namespace

std::vector<ExportFile> export_files(const TrainOptions& o) {
  if (o.model == TrainedModel::kTransformer) return transformer_export_files(o);
  std::vector<ExportFile> files;
  auto add = [&](const char* file, const void* data, size_t bytes) {
    files.push_back({file, std::string(static_cast<const char*>(data), bytes)});
  };
  const size_t samples = dataset_size(o);
  const std::vector<float> params = initial_parameters(o.shape, o.seed);
  add("initial_parameters.f32", params.data(), params.size() * 4);
  const SyntheticDataset data = make_teacher_dataset(samples, o.shape.width, o.seed);
  add("inputs.f32", data.inputs.data(), data.inputs.size() * 4);
  add("targets.f32", data.targets.data(), data.targets.size() * 4);
  std::vector<int64_t> batches;
  for (size_t s = 0; s < o.steps; ++s)
    for (size_t i : batch_samples(samples, 1, 0, o.global_batch, o.seed, s))
      batches.push_back(static_cast<int64_t>(i));
  add("batches.i64", batches.data(), batches.size() * 8);
  const std::string model = fmt::format(
      "{{\"width\": {}, \"depth\": {}, \"activation\": \"{}\", \"optimizer\": {{\"kind\": \"{}\", "
      "\"lr\": {}, \"momentum\": {}, \"beta1\": {}, \"beta2\": {}, \"eps\": {}, "
      "\"weight_decay\": {}}}, \"global_batch\": {}, \"micro_batches\": {}, \"grad_clip\": {}, "
      "\"steps\": {}, \"samples\": {}, \"seed\": {}, \"precision\": \"{}\", "
      "\"loss\": \"mse mean over batch and features\"}}\n",
      o.shape.width, o.shape.depth, name(o.shape.activation), name(o.optimizer.kind),
      records::number_text(o.optimizer.lr), records::number_text(o.optimizer.momentum),
      records::number_text(o.optimizer.beta1), records::number_text(o.optimizer.beta2),
      records::number_text(o.optimizer.eps), records::number_text(o.optimizer.weight_decay),
      o.global_batch, o.micro_batches,
      o.grad_clip ? records::number_text(*o.grad_clip) : std::string("null"), o.steps, samples,
      o.seed, name(o.precision));
  add("model.json", model.data(), model.size());
  return files;
}

std::vector<std::string> plan_notes(const TrainPlan& plan, const std::string& config_name) {
  std::vector<std::string> notes;
  if (plan.deepspeed) {
    const DeepSpeedConfig& ds = *plan.deepspeed;
    notes.push_back(fmt::format(
        "deepspeed config {}: honoured {}", config_name,
        ds.honoured.empty() ? "nothing" : fmt::format("{}", fmt::join(ds.honoured, ", "))));
    if (!ds.ignored.empty())
      notes.push_back(fmt::format("deepspeed config: ignored {}", fmt::join(ds.ignored, ", ")));
    if (!ds.defaulted.empty())
      notes.push_back(
          fmt::format("deepspeed config: DeepSpeed's defaults for what it leaves out: {}",
                      fmt::join(ds.defaulted, ", ")));
  }
  if (plan.base.offload_optimizer)
    notes.push_back(fmt::format(
        "{}{}: fp32 master weights and optimizer state in host memory, the optimizer step on "
        "the CPU; gradients copied down and parameters up each step (ZeRO: this rank's shard), "
        "measured against 2 x element x Psi / shards bytes",
        plan.deepspeed ? "offload " : "--offload ", plan.offload));
  else if (!plan.offload.empty())
    notes.push_back(fmt::format(
        "{}{}: the CPU path keeps every state in host memory already; no host-device traffic to "
        "measure (0 B per step)",
        plan.deepspeed ? "offload " : "--offload ", plan.offload));
  if (plan.rounded)
    notes.push_back(fmt::format(
        "global batch {}: the default {} rounded up to a multiple of {} ({}); --global-batch sets "
        "it",
        plan.rounded->to, plan.rounded->from, plan.rounded->multiple, plan.rounded->why));
  return notes;
}

}  // namespace ccscope::training_probe
