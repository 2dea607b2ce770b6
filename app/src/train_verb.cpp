// `ccscope train`: real training steps of a small MLP under a strategy (single,
// DDP, ZeRO-1/2/3, TP, PP, EP, 3D) over MPI, at one rank count or a scaling
// list: the flags, the console and the CSV rows. The settings' validation, the
// plan of runs and the runs themselves are training_probe's (train_setup.h,
// training_run.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/bench/benchmark.h"
#include "ccscope/collectives/world.h"
#include "ccscope/job/run_job.h"
#include "ccscope/job/watchdog.h"
#include "ccscope/records/training_record.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/user_files.h"
#include "ccscope/training_probe/deepspeed_config.h"
#include "ccscope/training_probe/train_setup.h"
#include "ccscope/training_probe/training_run.h"
#include "verb_support.h"

namespace ccscope::app {
// A named namespace, not an anonymous one: the verbs are one unity translation
// unit, and the probe's names must not reach the other verbs.
namespace train_verb_detail {

using namespace ccscope::training_probe;

constexpr const char* kTrainVerb = "train";

// The run's settings, and what only the command layer opens or prints.
struct TrainFlags {
  TrainSettings run;
  std::string deepspeed_config;
  std::string csv, runs_csv, ranks_csv, export_dir;
  size_t print_every = 10;
};

// The CSV flags given, as (flag, path).
std::vector<std::pair<std::string, std::string>> output_files(const TrainFlags& f) {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!f.csv.empty()) outputs.emplace_back("--csv", f.csv);
  if (!f.runs_csv.empty()) outputs.emplace_back("--runs-csv", f.runs_csv);
  if (!f.ranks_csv.empty()) outputs.emplace_back("--ranks-csv", f.ranks_csv);
  return outputs;
}

std::string mb(double bytes) { return fmt::format("{:.3f} MB", bytes / 1e6); }

// --csv, --runs-csv and --ranks-csv, when given.
struct Outputs {
  std::unique_ptr<RowFile> steps, runs, ranks;
};

// Rank 0, after a model-parallel run: bytes per group, the experts' traffic or the pipeline.
void print_parallel(const TrainOptions& o, const RunMeasurement& m) {
  std::printf(
      "# bytes per step per rank, the largest per group: tensor %s, pipeline %s, data %s, "
      "expert %s\n",
      mb(m.largest_tp_bytes).c_str(), mb(m.largest_pp_bytes).c_str(),
      mb(m.largest_dp_bytes).c_str(), mb(m.largest_ep_bytes).c_str());
  if (o.strategy == Strategy::kExpert) {
    const double a2a_s = m.all_to_all_median_s, step_s = m.summary.step_median_s;
    std::printf(
        "# expert all-to-all (counts, dispatch, combine; forward and backward): %.3f ms per step, "
        "%.1f%% of the step; token assignments over the run (warm-up included) routed %.0f, "
        "dropped %.0f (%.2f%%); load "
        "imbalance %.3f (max / mean per expert, median)\n",
        a2a_s * 1e3, step_s > 0 ? 100 * a2a_s / step_s : 0, m.routed_tokens, m.dropped_tokens,
        m.routed_tokens > 0 ? 100 * m.dropped_tokens / m.routed_tokens : 0,
        m.rank_records.front().load_imbalance);
    return;
  }
  if (o.parallel.pp == 1) return;
  const double textbook = textbook_bubble(o.parallel.pp, o.micro_batches, o.parallel.chunks);
  std::printf("# pipeline per rank (medians): %s, textbook bubble (N-1)/(vM+N-1) = %.3f\n",
              std::string(name(o.parallel.schedule)).c_str(), textbook);
  std::printf("%5s %6s %4s %4s %12s %10s %10s %8s %10s %14s\n", "rank", "stage", "tp", "dp",
              "pipeline ms", "busy ms", "idle ms", "bubble", "in flight", "activations MB");
  for (const records::TrainRankRecord& r : m.rank_records)
    std::printf("%5lld %6lld %4lld %4lld %12.3f %10.3f %10.3f %8.3f %10.0f %14.3f\n",
                static_cast<long long>(r.rank), static_cast<long long>(r.stage),
                static_cast<long long>(r.tp_rank), static_cast<long long>(r.dp_rank),
                r.pipeline_s * 1e3, r.pipeline_busy_s * 1e3, r.pipeline_idle_s * 1e3, r.bubble,
                static_cast<double>(r.peak_in_flight), r.peak_activation_B / 1e6);
}

// Rank 0, before the first step: the run, its layout and the table's head.
void print_header(const World& world, const TrainOptions& options, size_t ranks,
                  const std::string& backend) {
  const bool model_parallel = is_model_parallel(options.strategy);
  const size_t psi = model_parameters(options);
  const TransformerShape& t = options.transformer;
  const std::string model =
      options.model == TrainedModel::kTransformer
          ? fmt::format("transformer {} blocks x {} hidden, {} heads, sequence {}, vocabulary {}{}",
                        t.layers, t.hidden, t.heads, t.seq_len, t.vocab,
                        options.recompute != Recompute::kNone
                            ? fmt::format(", recompute {}", name(options.recompute))
                            : "")
          : fmt::format("{} x {} {}", options.shape.depth, options.shape.width,
                        name(options.shape.activation));
  std::printf(
      "# ccscope train: %s, %zu rank(s) (%s%s), model %s (%s parameters, %s), "
      "global batch %zu (%zu per %s, %zu micro-batch(es)), %s lr %g%s%s\n",
      std::string(name(options.strategy)).c_str(), ranks, backend.c_str(),
      options.overlap ? ", overlapped" : ", --no-overlap", model.c_str(),
      fmt::format("{:.2f} M", static_cast<double>(psi) / 1e6).c_str(),
      std::string(name(options.precision)).c_str(), options.global_batch,
      options.global_batch / data_replicas(options, ranks), model_parallel ? "replica" : "rank",
      options.micro_batches, std::string(name(options.optimizer.kind)).c_str(),
      options.optimizer.lr,
      options.grad_clip ? fmt::format(", clip {}", *options.grad_clip).c_str() : "",
      options.strategy == Strategy::kZero3 && !options.prefetch ? ", --no-prefetch" : "");
  if (model_parallel && options.strategy != Strategy::kExpert)
    std::printf(
        "# layout: tensor parallel %zu x pipeline %zu (%s, %zu chunk(s) per stage, %zu "
        "micro-batches) x data parallel %zu%s%s\n",
        options.parallel.tp, options.parallel.pp,
        std::string(name(options.parallel.schedule)).c_str(), options.parallel.chunks,
        options.micro_batches, options.parallel.dp, options.parallel.zero1 ? " with ZeRO-1" : "",
        options.sequence_parallel ? ", sequence parallel" : "");
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
    std::printf("# bytes sent per step per rank: %s; formula %g Psi (n-1)/n = %s: %s\n",
                mb(s.bytes_per_step).c_str(), m.bytes_formula_factor, mb(m.bytes_expected).c_str(),
                m.bytes_ok ? "ok" : "DIFFERS");
    std::printf(
        "# memory per rank (parameters, gradients, optimizer state): %s, %s, %s; ZeRO paper's "
        "accounting %s, %s, %s: %s\n",
        mb(m.memory.parameters).c_str(), mb(m.memory.gradients).c_str(),
        mb(m.memory.optimizer).c_str(), mb(m.memory_expected.parameters).c_str(),
        mb(m.memory_expected.gradients).c_str(), mb(m.memory_expected.optimizer).c_str(),
        m.memory_ok ? "ok" : "DIFFERS");
  }
  const records::TrainRunRecord& r = m.run;
  if (r.device_peak_B) {
    // What the GPU held beyond the accounting's three: activations, the fp32
    // working copies the kernels compute in, 16-bit copies and scratch.
    const double states = m.memory.parameters + m.memory.gradients + m.memory.optimizer;
    std::printf(
        "# device memory per rank, measured: the probe's allocations peaked at %s (the "
        "accounting's %s held on the device%s, the rest activations, fp32 working copies and "
        "scratch); the GPU had %s in use (cudaMemGetInfo)\n",
        mb(*r.device_peak_B).c_str(),
        mb(options.offload_optimizer ? states - m.memory.optimizer : states).c_str(),
        options.offload_optimizer ? ", the optimizer's on the host" : "",
        mb(r.device_used_B.value_or(0)).c_str());
  }
  if (r.offload_bytes_per_step) {
    const std::string against =
        r.offload_bytes_expected
            ? fmt::format("formula 2 x element x Psi / shards = {}): {}",
                          mb(*r.offload_bytes_expected), m.offload_ok ? "ok" : "DIFFERS")
            : std::string("the largest rank's slice of the model-parallel layout)");
    std::printf(
        "# offload per step: %s copied between device and host (%s; copies %.3f ms on the "
        "device, the optimizer step %.3f ms on the host\n",
        mb(*r.offload_bytes_per_step).c_str(), against.c_str(),
        r.offload_copy_median_s.value_or(0) * 1e3, r.host_optimizer_median_s.value_or(0) * 1e3);
  }
  if (options.check_consistency) {
    if (!m.inconsistent_after_step)
      std::printf("# parameters agree across ranks after every step\n");
    else
      std::printf("# parameters DIFFER across ranks after step %zu\n", *m.inconsistent_after_step);
  }
  if (m.equivalence) std::printf("# %s\n", m.equivalence->summary().c_str());
  if (m.equivalence64) std::printf("# %s\n", m.equivalence64->summary().c_str());
  if (m.gradient_check) std::printf("# %s\n", m.gradient_check->summary().c_str());
  if (m.scaling && ranks > 1)
    std::printf("# %s scaling against 1 rank: speed-up %.2f, efficiency %.1f%%\n",
                weak ? "weak" : "strong", m.scaling->speedup, 100 * m.scaling->efficiency);
  std::printf("\n");
  std::fflush(stdout);
}

// The training runs as the body of their job.
int run_training(job::JobContext& job, const TrainFlags& flags, TrainOptions base,
                 const std::vector<size_t>& counts) {
  const World& world = job.world();
  const bool leader = job.leader();
  auto fail_usage = [&](const std::string& what) {
    return leader ? usage_error(kTrainVerb, what) : kExitUsage;
  };
  TrainPlan plan;
  try {
    plan = plan_runs(
        flags.run, std::move(base), counts, static_cast<size_t>(world.size()),
        [&] { return reports::read_input_file(flags.deepspeed_config); },
        MpiSession::serialized_threads());
  } catch (const ConfigError& e) {
    return fail_usage(e.what());
  } catch (const reports::InputError& e) {
    return fail_usage(e.what());
  }
  if (leader)
    for (const std::string& note : plan_notes(plan, flags.deepspeed_config))
      std::printf("# %s\n", note.c_str());
  if (!plan.problem.empty()) return fail_usage(plan.problem);
  if (plan.overlap_refused && leader)
    std::fprintf(stderr,
                 "ccscope train: note: this MPI did not grant MPI_THREAD_SERIALIZED; "
                 "communication runs on the training thread (--no-overlap)\n");
  set_compute_threads(flags.run.threads);

  Outputs out;
  if (const int refused = open_outputs(job, kTrainVerb, [&] {
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
        if (flags.export_dir.empty()) return;
        reports::create_output_directory(flags.export_dir);
        for (const ExportFile& file : export_files(plan.base))
          reports::write_whole_file(
              reports::resolve_output(
                  (std::filesystem::path(flags.export_dir) / file.name).string()),
              file.bytes);
      }))
    return refused;

  HangWatchdog& watchdog = job.start_watchdog(plan.base.timeout);
  plan.base.on_timeout = [&job](const std::string& what) { job.end_job(job::kExitHang, what); };
  // Rank 0 of each run prints and writes as the figures come.
  bool run_leader = false;
  PlanHooks hooks;
  hooks.started = [&](const RunRequest& q, const Communicator& comm) {
    run_leader = comm.rank() == 0;
    if (run_leader) print_header(world, q.options, q.ranks, comm.backend_name());
    watchdog.begin_phase("train " + q.run_id);
  };
  hooks.step = [&](const RunRequest& q, const StepReport& step) {
    watchdog.operation_started();
    if (!run_leader) return;
    const StepFigures& f = step.own;
    const records::TrainStepRecord& s = step.record;
    if (flags.print_every && (f.step % flags.print_every == 0 || f.step + 1 == q.options.steps))
      std::printf("%6zu %12.6g %10.3f %11.3f %9.3f %11.3f %11.3f%s\n", f.step, f.loss,
                  s.step_s * 1e3, s.compute_s * 1e3, s.comm_s * 1e3, s.exposed_comm_s * 1e3,
                  s.bytes_sent / 1e6, f.skipped ? "  skipped" : "");
    std::fflush(stdout);
    if (out.steps) out.steps->append_row(records::train_step_cells(step.record));
  };
  hooks.finished = [&](const RunRequest& q, const RunMeasurement& m) {
    watchdog.end_phase();
    if (!m.leader) return;
    if (is_model_parallel(q.options.strategy)) {
      print_parallel(q.options, m);
      if (out.ranks)
        for (const records::TrainRankRecord& r : m.rank_records)
          out.ranks->append_row(records::train_rank_cells(r));
    }
    print_results(q.options, q.ranks, q.weak, m);
    if (out.runs) out.runs->append_row(records::train_run_cells(m.run));
  };
  // A wait cut short or a failure ends the job (run_job: exit 3, 2 or 1).
  const int exit_code = run_plan(world, plan, hooks) ? 0 : job::kExitCheckFailed;
  return job.leave_together(job.agree_on_exit_code(exit_code));
}

}  // namespace train_verb_detail

int train_verb(const std::vector<std::string>& args, const std::vector<std::string>&) {
  using namespace train_verb_detail;
  TrainFlags f;
  TrainSettings& s = f.run;
  CLI::App app{
      "ccscope train: real training steps of an MLP or a transformer under a strategy (single,\n"
      "ddp, zero1-3, tp, pp, ep, 3d; the transformer: single, ddp, zero1-3, tp)\n"
      "over MPI, gloo or (--backend nccl) on GPUs: step time, compute/communication/exposed\n"
      "split, bytes and memory against the formulas, the loss against one rank's. Launch with\n"
      "mpiexec -n N (or srun, torchrun's environment).",
      "ccscope train"};
  app.add_option("--strategy", s.strategy, "single, ddp, zero1, zero2, zero3, tp, pp, ep, 3d")
      ->capture_default_str();
  app.add_option("--steps", s.steps, "optimizer steps")->capture_default_str();
  app.add_option("--model", s.model,
                 "mlp (linear layers, MSE on a teacher network) or transformer (GPT-style "
                 "blocks, cross-entropy on a teacher's tokens)")
      ->capture_default_str();
  CLI::Option* width =
      app.add_option("--width", s.width, "features of every layer (transformer: hidden size, 64)")
          ->capture_default_str();
  CLI::Option* depth = app.add_option("--depth", s.depth, "linear layers (transformer: blocks, 2)")
                           ->capture_default_str();
  app.add_option("--heads", s.heads, "transformer: attention heads")->capture_default_str();
  app.add_option("--seq-len", s.seq_len, "transformer: tokens per sample")->capture_default_str();
  app.add_option("--vocab", s.vocab, "transformer: vocabulary size")->capture_default_str();
  app.add_flag("--sequence-parallel", s.sequence_parallel,
               "transformer, tp: Megatron's sequence parallelism (all-gather and reduce-scatter "
               "instead of all-reduce)");
  app.add_option("--recompute", s.recompute,
                 "transformer: activation recomputation none, selective (attention core) or full")
      ->capture_default_str();
  app.add_option("--activation", s.activation, "relu or tanh")->capture_default_str();
  CLI::Option* global_batch =
      app.add_option("--global-batch", s.global_batch,
                     "samples per step, all ranks together (with --weak: the batch at one rank; "
                     "by default rounded up to a multiple of the ranks x micro-batches)")
          ->capture_default_str();
  app.add_option("--micro-batches", s.micro_batches,
                 "gradient accumulation steps (DDP no_sync on all but the last)")
      ->capture_default_str();
  app.add_option("--samples", s.samples, "data set size (default 8 global batches)");
  app.add_option("--optimizer", s.optimizer, "sgd (with momentum), adam, adamw")
      ->capture_default_str();
  // The probe's ranges: what torch.optim takes, bounded where a larger value only diverges.
  add_number_option(app, "--lr", s.lr, "learning rate", {0, 10, true})->capture_default_str();
  add_number_option(app, "--momentum", s.momentum, "SGD momentum", {0, 1, false, true})
      ->capture_default_str();
  add_number_option(app, "--weight-decay", s.weight_decay, "weight decay (AdamW: decoupled)",
                    {0, 10})
      ->capture_default_str();
  add_number_option(app, "--beta1", s.beta1, "Adam beta1", {0, 1, false, true})
      ->capture_default_str();
  add_number_option(app, "--beta2", s.beta2, "Adam beta2", {0, 1, false, true})
      ->capture_default_str();
  add_number_option(app, "--eps", s.eps, "Adam epsilon", {0, 1, true, true})->capture_default_str();
  app.add_option("--precision", s.precision,
                 "fp32, bf16 (FSDP MixedPrecision: bf16 parameters and reduction, fp32 master), "
                 "fp16 (dynamic loss scaling)")
      ->capture_default_str();
  app.add_option("--initial-scale-power", s.initial_scale_power, "fp16: initial loss scale 2^N")
      ->capture_default_str();
  add_number_option(app, "--bucket-mb", s.bucket_mb, "DDP bucket_cap_mb / ZeRO reduce bucket (MiB)",
                    {0, 1e6, true})
      ->capture_default_str();
  app.add_flag("--no-overlap", s.no_overlap,
               "communication on the training thread (for comparison)");
  app.add_flag("--busy-poll", s.busy_poll,
               "MPI's blocking calls (they spin) instead of waits that yield the core to compute");
  app.add_flag("--no-prefetch", s.no_prefetch,
               "ZeRO-3: no gather of the next layer during compute");
  add_number_option(app, "--grad-clip", s.grad_clip, "clip gradients to this global norm (0: off)",
                    {0, 1e6});
  app.add_option("--deepspeed-config", f.deepspeed_config, "a DeepSpeed JSON config to run");
  app.add_option("--offload", s.offload,
                 "optimizer (the GPU path: optimizer state and master weights in host memory, "
                 "the step on the CPU, the copies measured) or params (DeepSpeed's offload)");
  app.add_option("--backend", s.backend,
                 "what the run communicates over: mpi or gloo (host memory; default: mpi under "
                 "an MPI launcher, else gloo), or nccl: the GPU path (the MLP: single, ddp, "
                 "zero1-3, tp, pp, 3d, ep; the transformer in fp32: single, ddp, zero1-3), "
                 "model and gradients in GPU memory, cuBLAS, gradients over NCCL");
  app.add_flag("--tf32", s.tf32,
               "nccl: fp32 GEMMs with TF32 inputs (cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32, as "
               "PyTorch's allow_tf32); off by default, as --check-loss needs");
  app.add_flag("--isolate-ranks", s.isolate_ranks,
               "nccl: give every rank its own NCCL_HOSTID, so ranks of one node may share a GPU "
               "(NCCL then connects them through its network transport), as bench's");
  app.add_option("--scaling", s.scaling,
                 "rank counts to run, e.g. 1,2,4 (on the job's first ranks)")
      ->delimiter(',');
  app.add_flag("--weak", s.weak, "with --scaling: the same per-rank batch (global batch x ranks)");
  app.add_flag("--check-loss", s.check_loss,
               "compare every run's loss with one rank's (single, same global batch); exit 1 when "
               "it differs beyond the tolerance");
  app.add_flag("--check-consistency", s.check_consistency,
               "after every step, check that parameters agree across ranks");
  app.add_option("--threads", s.threads, "OpenBLAS threads per rank")->capture_default_str();
  app.add_option("--seed", s.seed, "data, initial weights and sampler seed")->capture_default_str();
  add_output_option(app, "--csv", f.csv, "per-step records (ccscope.train_step)");
  add_output_option(app, "--runs-csv", f.runs_csv, "per-run records (ccscope.train_run)");
  app.add_option("--export", f.export_dir,
                 "write the initial weights, data and batches to DIR (compare-with-pytorch)");
  app.add_option("--print-every", f.print_every, "print every Nth step (0: none)")
      ->capture_default_str();
  add_number_option(app, "--timeout", s.timeout_seconds, "seconds any one wait may last",
                    {0, 1e6, true})
      ->capture_default_str();
  app.add_option("--tp", s.tp, "tensor-parallel degree (tp, 3d)");
  app.add_option("--pp", s.pp, "pipeline stages (pp, 3d)");
  app.add_option("--dp", s.dp, "data-parallel degree (3d; default: the ranks tp x pp leave)");
  app.add_option("--ep", s.ep, "expert-parallel degree (ep: every rank)");
  app.add_option("--schedule", s.schedule, "pipeline schedule: gpipe, 1f1b, interleaved")
      ->capture_default_str();
  app.add_option("--chunks", s.chunks, "interleaved: model chunks (virtual stages) per stage")
      ->capture_default_str();
  app.add_option("--stage-layers", s.stage_layers,
                 "blocks per (virtual) stage, e.g. 3,1 (default: balanced by parameters; a "
                 "block is a layer, or a layer pair under tensor parallelism)")
      ->delimiter(',');
  app.add_option("--zero-stage", s.zero_stage, "3d: 1 for ZeRO-1 over the data-parallel group")
      ->capture_default_str();
  app.add_option("--experts", s.experts, "ep: experts per mixture layer");
  app.add_option("--top-k", s.top_k, "ep: experts per token")->capture_default_str();
  add_number_option(app, "--capacity-factor", s.capacity_factor,
                    "ep: expert capacity factor (0: no limit, nothing dropped)", {0, 1e6})
      ->capture_default_str();
  add_output_option(app, "--ranks-csv", f.ranks_csv,
                    "model-parallel runs: per-rank records (ccscope.train_rank)");
  app.add_option("--fault", s.fault,
                 "tests only: sum, sampler, bucket, clip, microbatch, tp-allreduce, expert")
      ->group("");
  if (const std::optional<int> done = parse_flags(app, kTrainVerb, args)) return *done;
  s.global_batch_given = global_batch->count() > 0;
  s.width_given = width->count() > 0;
  s.depth_given = depth->count() > 0;
  s.deepspeed_config = reports::printable(f.deepspeed_config);
  s.export_data = !f.export_dir.empty();
  s.rank_records = !f.ranks_csv.empty();
  TrainOptions options;
  std::vector<size_t> counts;
  std::string problem;
  try {  // before MPI starts: the same file twice is refused at once
    (void)reports::resolve_outputs(output_files(f), {{"--deepspeed-config", f.deepspeed_config}});
  } catch (const reports::InputError& e) {
    problem = e.what();
  }
  if (problem.empty()) problem = options_from_settings(s, options);
  if (problem.empty()) problem = parse_rank_counts(s.scaling, counts);
  if (!problem.empty()) {
    if (bench::launcher_says_rank_zero()) return usage_error(kTrainVerb, problem);
    return kExitUsage;
  }
  return job::run_job({kTrainVerb},
                      [&](job::JobContext& job) { return run_training(job, f, options, counts); });
}

}  // namespace ccscope::app
