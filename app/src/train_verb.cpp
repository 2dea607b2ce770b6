// `ccscope train`: real training steps of a small MLP under a strategy (single,
// DDP, ZeRO-1/2/3) over MPI, at one rank count or a scaling list: step time,
// where it goes (compute, communication, exposed communication), bytes moved
// and memory against the formulas, the loss against one rank's, as records.
#include <fcntl.h>
#include <fmt/format.h>
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
#include <optional>
#include <string>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/bench/benchmark.h"
#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/watchdog.h"
#include "ccscope/collectives/world.h"
#include "ccscope/common/sizes.h"
#include "ccscope/records/training_record.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/user_files.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/deepspeed_config.h"
#include "ccscope/training_probe/equivalence.h"
#include "ccscope/training_probe/summary.h"
#include "ccscope/training_probe/trainer.h"
#include "verb_support.h"

namespace ccscope::app {
// A named namespace, not an anonymous one: the verbs are one unity translation
// unit, and the probe's names must not reach the other verbs.
namespace train_verb_detail {

using namespace ccscope::training_probe;

constexpr const char* kTrainVerb = "train";
constexpr int kExitCheckFailed = 1;
constexpr int kExitTimeout = 3;

struct TrainFlags {
  std::string strategy = "ddp";
  size_t steps = 100;
  size_t warmup = 5;
  size_t width = 512;
  size_t depth = 4;
  std::string activation = "relu";
  size_t global_batch = 128;
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
  std::string fault;  // tests: sum, sampler, bucket, clip
};

template <typename T>
std::optional<T> choose(const std::string& text,
                        std::initializer_list<std::pair<const char*, T>> choices) {
  for (const auto& [word, value] : choices)
    if (text == word) return value;
  return std::nullopt;
}

// Flags into options; "" or the one-line problem.
std::string options_from_flags(const TrainFlags& f, TrainOptions& o) {
  const auto strategy = choose<Strategy>(f.strategy, {{"single", Strategy::kSingle},
                                                      {"ddp", Strategy::kDdp},
                                                      {"zero1", Strategy::kZero1},
                                                      {"zero2", Strategy::kZero2},
                                                      {"zero3", Strategy::kZero3}});
  if (!strategy) return "--strategy '" + f.strategy + "': use single, ddp, zero1, zero2 or zero3";
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
    const double psi = static_cast<double>(f.depth) * (w * w + w);
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
  if (f.fault == "sum")
    o.faults.sum_not_average = true;
  else if (f.fault == "sampler")
    o.faults.sampler_not_reseeded = true;
  else if (f.fault == "bucket")
    o.faults.unreduced_bucket = 0;
  else if (f.fault == "clip")
    o.faults.clip_per_shard = true;
  else if (!f.fault.empty())
    return "--fault '" + f.fault + "': use sum, sampler, bucket or clip";
  return "";
}

std::string run_id(const TrainOptions& o, size_t ranks, bool weak) {
  return fmt::format("{}-n{}{}", name(o.strategy), ranks, weak ? "-weak" : "");
}

std::string mb(double bytes) { return fmt::format("{:.3f} MB", bytes / 1e6); }

// Agreement of a measured figure with its formula: within 1%, or within
// `slack` bytes (ZeRO's padding to a multiple of the rank count and the few
// bytes of scalar reductions, which the formulas leave out).
bool agrees(double measured, double expected, double slack) {
  return std::abs(measured - expected) <= std::max(0.01 * expected, slack);
}

// --export DIR: what compare-with-pytorch loads (format in its README).
void export_run(const std::string& dir, const TrainOptions& o) {
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& file, const void* data, size_t bytes) {
    const std::string path = (std::filesystem::path(dir) / file).string();
    reports::write_whole_file(reports::resolve_output(path),
                              {static_cast<const char*>(data), bytes});
  };
  const size_t samples = o.dataset_samples ? o.dataset_samples : 8 * o.global_batch;
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

// Rows of a CSV flushed as they are measured (a failed run keeps them).
class RowFile {
 public:
  template <typename Kind>
  RowFile(const reports::OutputTarget& target, const Kind& kind)
      : fd_(reports::open_stream_output(target)) {
    append(records::csv_line(records::csv_columns(kind)));
  }
  ~RowFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  RowFile(const RowFile&) = delete;
  RowFile& operator=(const RowFile&) = delete;
  void append(const std::string& text) {
    if (!reports::write_all(fd_, text))
      throw std::runtime_error("cannot write a row: " + std::string(std::strerror(errno)));
  }

 private:
  int fd_ = -1;
};

struct Outputs {
  std::unique_ptr<RowFile> steps;
  std::unique_ptr<RowFile> runs;
};

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
  RunOutcome outcome;
  MpiOptions mpi;
  mpi.first_ranks = static_cast<int>(ranks);
  mpi.yielding_waits = yielding_waits;
  std::unique_ptr<Communicator> comm = make_mpi_communicator(world, mpi);
  if (!comm) return outcome;  // this rank sits the run out
  outcome.ran = true;
  const bool leader = comm->rank() == 0;
  const std::string id = run_id(options, ranks, weak);
  if (leader) {
    const size_t psi = parameter_count(options.shape);
    std::printf(
        "# ccscope train: %s, %zu rank(s) (%s%s), model %zu x %zu %s (%s parameters, %s), "
        "global batch %zu (%zu per rank, %zu micro-batch(es)), %s lr %g%s%s\n",
        std::string(name(options.strategy)).c_str(), ranks, comm->backend_name().c_str(),
        options.overlap ? ", overlapped" : ", --no-overlap", options.shape.depth,
        options.shape.width, std::string(name(options.shape.activation)).c_str(),
        fmt::format("{:.2f} M", static_cast<double>(psi) / 1e6).c_str(),
        std::string(name(options.precision)).c_str(), options.global_batch,
        options.global_batch / ranks, options.micro_batches,
        std::string(name(options.optimizer.kind)).c_str(), options.optimizer.lr,
        options.grad_clip ? fmt::format(", clip {}", *options.grad_clip).c_str() : "",
        options.strategy == Strategy::kZero3 && !options.prefetch ? ", --no-prefetch" : "");
    std::printf("# times are the slowest rank's, per step\n");
    std::printf("%6s %12s %10s %11s %9s %11s %11s\n", "step", "loss", "step ms", "compute ms",
                "comm ms", "exposed ms", "MB sent");
    std::fflush(stdout);
  }
  std::vector<StepFigures> slowest;
  watchdog.begin_phase("train " + id);
  auto on_step = [&](const StepFigures& f) {
    watchdog.operation_started();
    // The slowest rank's figures (the communication thread is idle between steps).
    double figures[5] = {f.step_seconds, f.compute_seconds, f.comm_seconds, f.exposed_comm_seconds,
                         f.bytes_sent};
    comm->all_reduce(figures, figures, 5, DataType::kFloat64, ReduceOp::kMax);
    StepFigures s = f;
    s.step_seconds = figures[0];
    s.compute_seconds = figures[1];
    s.comm_seconds = figures[2];
    s.exposed_comm_seconds = figures[3];
    s.bytes_sent = figures[4];
    slowest.push_back(s);
    if (!leader) return;
    if (print_every && (f.step % print_every == 0 || f.step + 1 == options.steps))
      std::printf("%6zu %12.6g %10.3f %11.3f %9.3f %11.3f %11.3f%s\n", f.step, f.loss,
                  s.step_seconds * 1e3, s.compute_seconds * 1e3, s.comm_seconds * 1e3,
                  s.exposed_comm_seconds * 1e3, s.bytes_sent / 1e6, f.skipped ? "  skipped" : "");
    std::fflush(stdout);
    if (out.steps) {
      records::TrainStepRecord r;
      r.run_id = id;
      r.strategy = std::string(name(options.strategy));
      r.ranks = static_cast<int64_t>(ranks);
      r.step = static_cast<int64_t>(f.step);
      r.loss = f.loss;
      r.step_s = s.step_seconds;
      r.compute_s = s.compute_seconds;
      r.comm_s = s.comm_seconds;
      r.exposed_comm_s = s.exposed_comm_seconds;
      r.bytes_sent = s.bytes_sent;
      r.grad_norm = f.grad_norm;
      r.loss_scale = f.loss_scale;
      r.skipped = f.skipped;
      out.steps->append(records::csv_row(records::train_step_kind(), records::train_step_cells(r)));
    }
  };
  const TrainResult result = train(*comm, options, on_step);
  watchdog.end_phase();
  double memory[3] = {result.memory.parameters, result.memory.gradients, result.memory.optimizer};
  comm->all_reduce(memory, memory, 3, DataType::kFloat64, ReduceOp::kMax);
  const size_t warmup = std::min<size_t>(options.steps > 1 ? options.steps - 1 : 0, 5);
  outcome.summary = summarize(slowest, warmup, options.global_batch);
  if (!leader) return outcome;

  const RunSummary& s = outcome.summary;
  const size_t psi = result.parameters;
  const double bytes_expected = expected_bytes_per_step(
      options.strategy, psi, ranks, element_bytes(options.precision), options.micro_batches);
  const MemoryFootprint mem_expected =
      expected_memory(options.strategy, psi, ranks, options.precision,
                      state_words_per_parameter(options.optimizer));
  // Padding: communicated - psi elements; each moves at most 3 m times (ZeRO-3)
  // and is held in at most 4 float32 words (shard, master, optimizer state).
  const double padding = static_cast<double>(result.communicated_elements - psi);
  const double m = static_cast<double>(options.micro_batches);
  const double bytes_slack = padding * 4 * 3 * m + 64 * (2 + m);
  const double memory_slack = padding * 16 + 64;
  const bool bytes_ok = agrees(s.bytes_per_step, bytes_expected, bytes_slack);
  const bool memory_ok = agrees(memory[0], mem_expected.parameters, memory_slack) &&
                         agrees(memory[1], mem_expected.gradients, memory_slack) &&
                         agrees(memory[2], mem_expected.optimizer, memory_slack);
  std::printf(
      "# step median %.3f ms (p90 %.3f) over %zu steps after %zu warm-up; compute %.3f ms, "
      "communication %.3f ms (%.1f%% of the step), exposed %.3f ms (%.1f%%); %.1f samples/s\n",
      s.step_median_s * 1e3, s.step_p90_s * 1e3, s.measured_steps, warmup, s.compute_median_s * 1e3,
      s.comm_median_s * 1e3, 100 * s.comm_share, s.exposed_comm_median_s * 1e3,
      100 * s.exposed_comm_share, s.samples_per_s);
  const double factor =
      bytes_expected /
      std::max(1.0, all_gather_bytes(psi, ranks, element_bytes(options.precision)));
  std::printf("# bytes sent per step per rank: %s; formula %g Psi (n-1)/n = %s: %s\n",
              mb(s.bytes_per_step).c_str(), ranks > 1 ? factor : 0.0, mb(bytes_expected).c_str(),
              bytes_ok ? "ok" : "DIFFERS");
  std::printf(
      "# memory per rank (parameters, gradients, optimizer state): %s, %s, %s; ZeRO paper's "
      "accounting %s, %s, %s: %s\n",
      mb(memory[0]).c_str(), mb(memory[1]).c_str(), mb(memory[2]).c_str(),
      mb(mem_expected.parameters).c_str(), mb(mem_expected.gradients).c_str(),
      mb(mem_expected.optimizer).c_str(), memory_ok ? "ok" : "DIFFERS");
  outcome.checks_pass = bytes_ok && memory_ok;
  if (options.check_consistency) {
    const auto differs = std::find_if(result.steps.begin(), result.steps.end(),
                                      [](const StepFigures& f) { return !f.consistent; });
    if (differs == result.steps.end()) {
      std::printf("# parameters agree across ranks after every step\n");
    } else {
      std::printf("# parameters DIFFER across ranks after step %zu\n", differs->step);
      outcome.checks_pass = false;
    }
  }

  records::TrainRunRecord r;
  r.run_id = id;
  r.strategy = std::string(name(options.strategy));
  r.ranks = static_cast<int64_t>(ranks);
  // The nodes of the run's ranks, by World's own node arithmetic.
  const std::vector<std::string> hosts(
      world.hostnames().begin(), world.hostnames().begin() + static_cast<std::ptrdiff_t>(ranks));
  r.nodes = World::from_hostnames(0, hosts).node_count();
  r.backend = comm->backend_name();
  r.precision = std::string(name(options.precision));
  r.optimizer = std::string(name(options.optimizer.kind));
  r.width = static_cast<int64_t>(options.shape.width);
  r.depth = static_cast<int64_t>(options.shape.depth);
  r.parameters = static_cast<int64_t>(psi);
  r.global_batch = static_cast<int64_t>(options.global_batch);
  r.micro_batches = static_cast<int64_t>(options.micro_batches);
  r.steps = static_cast<int64_t>(options.steps);
  r.warmup_steps = static_cast<int64_t>(warmup);
  r.overlap = options.overlap;
  r.prefetch = options.prefetch;
  r.bucket_bytes = static_cast<int64_t>(options.bucket_bytes);
  r.scaling = one_rank_step_s > 0 || ranks == 1 ? (weak ? "weak" : "strong") : "";
  r.step_median_s = s.step_median_s;
  r.step_p90_s = s.step_p90_s;
  r.compute_median_s = s.compute_median_s;
  r.comm_median_s = s.comm_median_s;
  r.exposed_comm_median_s = s.exposed_comm_median_s;
  r.comm_share = s.comm_share;
  r.exposed_comm_share = s.exposed_comm_share;
  r.samples_per_s = s.samples_per_s;
  r.bytes_per_step = s.bytes_per_step;
  r.bytes_per_step_expected = bytes_expected;
  r.memory_parameters_B = memory[0];
  r.memory_gradients_B = memory[1];
  r.memory_optimizer_B = memory[2];
  r.memory_parameters_expected_B = mem_expected.parameters;
  r.memory_gradients_expected_B = mem_expected.gradients;
  r.memory_optimizer_expected_B = mem_expected.optimizer;
  r.final_loss = result.steps.back().loss;
  if (reference) {
    std::vector<double> curve;
    for (const auto& f : result.steps) curve.push_back(f.loss);
    const EquivalenceResult eq =
        compare_losses(curve, *reference, loss_tolerance(options.precision));
    std::printf("# %s\n", eq.summary().c_str());
    r.loss_max_rel_diff = eq.max_relative_difference;
    r.loss_tolerance = eq.tolerance;
    r.loss_equivalent = eq.equivalent;
    outcome.checks_pass = outcome.checks_pass && eq.equivalent;
  }
  const double t1 = ranks == 1 ? s.step_median_s : one_rank_step_s;
  if (t1 > 0) {
    const Scaling sc = scaling(t1, s.step_median_s, ranks, weak);
    r.speedup = sc.speedup;
    r.efficiency = sc.efficiency;
    if (ranks > 1)
      std::printf("# %s scaling against 1 rank: speed-up %.2f, efficiency %.1f%%\n",
                  weak ? "weak" : "strong", sc.speedup, 100 * sc.efficiency);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (out.runs)
    out.runs->append(records::csv_row(records::train_run_kind(), records::train_run_cells(r)));
  return outcome;
}

int run_training(const TrainFlags& flags, TrainOptions base, const std::vector<size_t>& counts) {
  MpiSession session(nullptr, nullptr);
  const World world = World::from_mpi();
  const bool leader = world.rank() == 0;
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
  for (size_t k : rank_counts) {
    TrainOptions o = base;
    if (flags.weak) o.global_batch = base.global_batch * k;
    const std::string problem = validate(o, k);
    if (!problem.empty()) return fail_usage(problem);
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
  if (leader) {
    try {
      if (!flags.csv.empty())
        out.steps = std::make_unique<RowFile>(reports::resolve_output(flags.csv),
                                              records::train_step_kind());
      if (!flags.runs_csv.empty())
        out.runs = std::make_unique<RowFile>(reports::resolve_output(flags.runs_csv),
                                             records::train_run_kind());
      if (!flags.export_dir.empty()) {
        if (std::filesystem::exists(flags.export_dir) &&
            !std::filesystem::is_directory(flags.export_dir))
          throw std::runtime_error("--export " + flags.export_dir +
                                   " exists and is not a directory; name a directory");
        export_run(flags.export_dir, base);
      }
    } catch (const std::exception& e) {
      open_error = e.what();
    }
  }
  if (world.all_reduce_sum(static_cast<int64_t>(open_error.empty() ? 0 : 1)) != 0)
    return fail_usage(open_error);

  std::unique_ptr<HangWatchdog> watchdog;
  try {
    watchdog = std::make_unique<HangWatchdog>(world, base.timeout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccscope train: rank %d (%s): cannot start the watchdog: %s\n",
                 world.rank(), world.hostname().c_str(), e.what());
    world.abort(1);
  }
  base.on_timeout = [&world](const std::string& what) {
    std::fprintf(stderr, "ccscope train: rank %d (%s): %s\n", world.rank(),
                 world.hostname().c_str(), what.c_str());
    watchdog_say_goodbye();
    world.abort(kExitTimeout);
  };
  int exit_code = 0;
  try {
    // The single-rank references, computed on rank 0 while the others wait asleep.
    std::map<size_t, std::vector<double>> references;  // by global batch
    if (flags.check_loss && leader) {
      for (size_t k : rank_counts) {
        TrainOptions o = base;
        if (flags.weak) o.global_batch = base.global_batch * k;
        if (references.count(o.global_batch)) continue;
        std::vector<double> curve;
        for (const StepFigures& f : train_single(o).steps) curve.push_back(f.loss);
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
                                         flags.print_every, *watchdog, one_rank_step_s);
      if (outcome.ran && leader) {
        if (k == 1) one_rank_step_s = outcome.summary.step_median_s;
        if (!outcome.checks_pass) exit_code = kExitCheckFailed;
      }
      world.sleeping_barrier(run_bound);
    }
  } catch (const TimeoutError& e) {
    std::fprintf(stderr, "ccscope train: rank %d (%s): %s\n", world.rank(),
                 world.hostname().c_str(), e.what());
    watchdog_say_goodbye();
    world.abort(kExitTimeout);
  } catch (const UsageError& e) {
    if (leader) std::fprintf(stderr, "ccscope train: error: %s\n", e.what());
    watchdog_say_goodbye();
    world.abort(kExitUsage);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccscope train: rank %d (%s): %s\n", world.rank(),
                 world.hostname().c_str(), e.what());
    watchdog_say_goodbye();
    world.abort(1);
  }
  int64_t failed = world.all_reduce_sum(static_cast<int64_t>(exit_code != 0));
  watchdog_say_goodbye();
  world.barrier();
  return failed ? kExitCheckFailed : 0;
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
  app.add_option("--strategy", f.strategy, "single, ddp, zero1, zero2, zero3")
      ->capture_default_str();
  app.add_option("--steps", f.steps, "optimizer steps")->capture_default_str();
  app.add_option("--width", f.width, "features of every layer")->capture_default_str();
  app.add_option("--depth", f.depth, "linear layers")->capture_default_str();
  app.add_option("--activation", f.activation, "relu or tanh")->capture_default_str();
  app.add_option("--global-batch", f.global_batch,
                 "samples per step, all ranks together (with --weak: the batch at one rank)")
      ->capture_default_str();
  app.add_option("--micro-batches", f.micro_batches,
                 "gradient accumulation steps (DDP no_sync on all but the last)")
      ->capture_default_str();
  app.add_option("--samples", f.samples, "data set size (default 8 global batches)");
  app.add_option("--optimizer", f.optimizer, "sgd (with momentum), adam, adamw")
      ->capture_default_str();
  app.add_option("--lr", f.lr, "learning rate")->capture_default_str();
  app.add_option("--momentum", f.momentum, "SGD momentum")->capture_default_str();
  app.add_option("--weight-decay", f.weight_decay, "weight decay (AdamW: decoupled)")
      ->capture_default_str();
  app.add_option("--beta1", f.beta1, "Adam beta1")->capture_default_str();
  app.add_option("--beta2", f.beta2, "Adam beta2")->capture_default_str();
  app.add_option("--eps", f.eps, "Adam epsilon")->capture_default_str();
  app.add_option("--precision", f.precision,
                 "fp32, bf16 (FSDP MixedPrecision: bf16 parameters and reduction, fp32 master), "
                 "fp16 (dynamic loss scaling)")
      ->capture_default_str();
  app.add_option("--initial-scale-power", f.initial_scale_power, "fp16: initial loss scale 2^N")
      ->capture_default_str();
  app.add_option("--bucket-mb", f.bucket_mb, "DDP bucket_cap_mb / ZeRO reduce bucket (MiB)")
      ->capture_default_str();
  app.add_flag("--no-overlap", f.no_overlap,
               "communication on the training thread (for comparison)");
  app.add_flag("--busy-poll", f.busy_poll,
               "MPI's blocking calls (they spin) instead of waits that yield the core to compute");
  app.add_flag("--no-prefetch", f.no_prefetch,
               "ZeRO-3: no gather of the next layer during compute");
  app.add_option("--grad-clip", f.grad_clip, "clip gradients to this global norm (0: off)");
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
  app.add_option("--csv", f.csv, "per-step records (ccscope.train_step)");
  app.add_option("--runs-csv", f.runs_csv, "per-run records (ccscope.train_run)");
  app.add_option("--export", f.export_dir,
                 "write the initial weights, data and batches to DIR (compare-with-pytorch)");
  app.add_option("--print-every", f.print_every, "print every Nth step (0: none)")
      ->capture_default_str();
  app.add_option("--timeout", f.timeout_seconds, "seconds any one wait may last")
      ->capture_default_str();
  app.add_option("--fault", f.fault, "tests only: sum, sampler, bucket or clip")->group("");
  if (const std::optional<int> done = parse_flags(app, kTrainVerb, args)) return *done;
  TrainOptions options;
  const std::string problem = options_from_flags(f, options);
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
  return run_training(f, options, counts);
}

}  // namespace ccscope::app
