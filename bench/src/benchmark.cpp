// run_benchmark: see ccscope/bench/benchmark.h.
#include "ccscope/bench/benchmark.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/collectives/thread_ranks.h"
#include "ccscope/collectives/world.h"
#include "ccscope/job/backend_registry.h"
#include "ccscope/job/interruption.h"
#include "ccscope/job/run_job.h"
#include "ccscope/job/watchdog.h"
#include "ccscope/records/reporter.h"
#include "collective_spec.h"
#include "memory_budget.h"
#include "run_metadata.h"
#include "sweep_runner.h"

namespace ccscope::bench {
namespace {

constexpr int kExitOk = kBenchOk;
constexpr int kExitFailed = kBenchFailed;
constexpr int kExitUsage = kBenchRefused;
static_assert(kBenchOk == job::kExitOk && kBenchFailed == job::kExitCheckFailed &&
              kBenchRefused == job::kExitUsage && kBenchTimeout == job::kExitHang &&
              kBenchTimeout == kTimeoutExitCode);

// One run_sweep per (collective, type, op, root), in nccl-tests' order: types,
// then ops (only for collectives that reduce), then roots (only for rooted
// collectives with -r -1).
std::vector<BenchOptions> sweep_runs(const BenchOptions& options, int ranks) {
  std::vector<BenchOptions> runs;
  for (Collective collective : options.collectives) {
    const std::vector<ReduceOp> ops =
        has_reduction(collective) ? options.ops : std::vector<ReduceOp>{options.ops.front()};
    std::vector<int> roots{options.root < 0 ? 0 : options.root};
    if (options.root < 0 && has_root(collective))
      for (int r = 1; r < ranks; ++r) roots.push_back(r);
    for (DataType type : options.types)
      for (ReduceOp op : ops)
        for (int root : roots) {
          BenchOptions one = options;
          one.collective = collective;
          one.type = type;
          one.op = op;
          one.root = root;
          runs.push_back(one);
        }
  }
  return runs;
}

// nccl-tests' "# nThread ..." line's figures: the flags as given.
records::RunMetadata::NcclTestsParameters nccl_tests_parameters(const BenchOptions& options) {
  records::RunMetadata::NcclTestsParameters p;
  p.program = std::string(describe(options.collectives.front()).nccl_tests_program);
  p.threads = std::max(options.threads_per_process, 1);
  p.gpus = std::max(options.ranks_per_process / p.threads, 1);
  p.min_bytes = options.min_bytes;
  p.max_bytes = options.max_bytes;
  p.step_bytes = options.step_bytes;
  p.step_factor = options.step_factor;
  p.warmup_iterations = options.warmup_iterations;
  p.iterations = options.target_ci_percent > 0 ? 0 : options.iterations;
  p.aggregate_iterations = options.aggregate_iterations;
  p.check_iterations = options.check_iterations;
  p.graph_launches = options.graph_launches;
  return p;
}

// A SweepMonitor for thread ranks other than their process's first: that one
// tells the process's watchdog (the threads move through collectives together).
class SilentMonitor : public SweepMonitor {
 public:
  void begin_phase(const std::string&) override {}
  void operation_started() override {}
  void end_phase() override {}
};

// One rank's bench: the job's world, or (-g N) one thread's world of thread
// ranks, where `carries_process` is the process's first thread, which alone
// makes the process's own collective calls (the watchdog, opening outputs).
// Returns the exit code.
int bench_rank(job::JobContext& job, const World& world, bool carries_process,
               const BenchOptions& options, const ReporterSetup& setup_reporters,
               const std::vector<std::string>& command_line) {
  const bool leader = world.rank() == 0;
  const bool threads = options.ranks_per_process > 1;
  // As the job's refuse and leave_together, over this rank's world.
  const auto refuse = [&](const std::string& what) {
    if (leader) std::fprintf(stderr, "ccscope bench: error: %s\n", what.c_str());
    return kExitUsage;
  };
  const auto leave_together = [&](int code) {
    watchdog_say_goodbye();
    world.barrier();
    return code;
  };
  try {
    validate_for_ranks(options, world.size());
  } catch (const UsageError& error) {
    return refuse(error.what());
  }
  if (leader) {
    for (const auto& warning : options.warnings)
      std::fprintf(stderr, "ccscope bench: warning: %s\n", warning.c_str());
    for (const auto& note : options.notes)
      std::fprintf(stderr, "ccscope bench: note: %s\n", note.c_str());
  }

  // The backend is chosen (an exchange of GPU identities, no backend start-up)
  // and judged before the watchdog starts: a refusal then ends every rank
  // before any watchdog connection exists to be taken for a death.
  std::string backend = options.backend;
  try {
    if (backend.empty()) {
      const job::BackendChoice choice = job::default_backend(world, options.isolate_ranks);
      if (!choice.note.empty() && leader)
        std::fprintf(stderr, "ccscope bench: note: %s\n", choice.note.c_str());
      backend = choice.backend;
    }
    validate_for_backend(options, backend);  // every rank has the same backend: one answer
    // NCCL_TESTS_SPLIT needs communicators over groups of ranks.
    const job::Backend* chosen = job::find_backend(backend);
    if (options.split.op != SplitOp::kNone && chosen && !chosen->capabilities.groups)
      throw UsageError("NCCL_TESTS_SPLIT: the " + backend +
                       " backend's communicator spans the whole world in ccscope; use "
                       "--backend mpi, gloo or nccl, or unset NCCL_TESTS_SPLIT");
  } catch (const UsageError& error) {
    return refuse(error.what());
  }

  // The watchdog starts first so that --timeout also bounds the backend's
  // start-up (ncclCommInitRank blocks until every rank joins).
  // (-T 0: a zero timeout, which the watchdog takes as none.) Thread ranks wait
  // for their process's first thread to start it (the barrier's last arrival
  // then carries the process's part: one thread at a time in the process's world).
  HangWatchdog* process_watchdog = nullptr;
  if (carries_process)
    process_watchdog = &job.start_watchdog(
        std::chrono::milliseconds(static_cast<long long>(options.timeout_seconds * 1000)));
  if (threads) world.barrier();
  SilentMonitor silent;
  std::unique_ptr<WatchdogMonitor> watching;
  if (process_watchdog) watching = std::make_unique<WatchdogMonitor>(*process_watchdog);
  SweepMonitor& watchdog = watching ? static_cast<SweepMonitor&>(*watching) : silent;
  std::unique_ptr<Communicator> comm;
  try {
    watchdog.begin_phase("start-up of the " + backend + " backend");
    watchdog.operation_started();
    job::BackendOptions backend_options{options.isolate_ranks, options.yielding_waits};
    // NCCL_TESTS_SPLIT: this rank's group (MPI_Comm_split's color, as nccl-tests).
    if (options.split.op != SplitOp::kNone)
      backend_options.color = split_color(options.split, world.rank());
    comm = job::make_backend(backend, world, backend_options);
    watchdog.end_phase();
  } catch (const UsageError& error) {
    return refuse(error.what());  // every rank fails the same way; one line is enough
  } catch (const std::exception& error) {
    job.end_job(kExitFailed, "cannot start the " + backend + " backend: " + error.what());
  }

  // Types the backend cannot run here (fp8 on NCCL below compute capability 9.0):
  // -d all leaves them out, as nccl-tests does, saying so; a type asked for by
  // name is refused before anything runs. The reason is the same on every rank
  // (the backend decided it over all of them).
  BenchOptions runnable = options;
  runnable.types.clear();
  for (DataType type : options.types) {
    const std::string reason = comm->unsupported_reason(type);
    if (reason.empty()) {
      runnable.types.push_back(type);
    } else if (!options.types_are_all) {
      return leave_together(refuse(reason));
    } else if (leader) {
      std::fprintf(stderr, "ccscope bench: note: -d all: %s left out: %s\n",
                   std::string(name(type)).c_str(), reason.c_str());
    }
  }
  if (runnable.types.empty()) return leave_together(refuse("no -d type can run here"));

  // Every type of -d (all): element counts and sizes depend on it.
  for (DataType type : runnable.types) {
    BenchOptions typed = options;
    typed.type = type;
    if (const std::string problem = preflight(typed, world, *comm); !problem.empty())
      return leave_together(refuse(problem));
  }

  // Output files are opened before measuring so a bad path fails at once (by
  // the process: its first thread, then told to the others).
  records::ReporterList reporters;
  std::string open_error;
  if (carries_process) open_error = job.open_outputs([&] { setup_reporters(reporters); });
  if (threads)
    for (const std::string& problem : world.all_gather(open_error))
      if (!problem.empty()) {
        open_error = problem;
        break;
      }
  if (!open_error.empty()) return leave_together(refuse(open_error));

  std::unique_ptr<job::InterruptHandlers> interrupts;
  if (carries_process)
    interrupts = std::make_unique<job::InterruptHandlers>(
        leader ? "ccscope bench: stopping after the current size "
                 "(signal received; send it again to stop at once)\n"
               : "");
  records::RunMetadata metadata = collect_run_metadata(world, *comm, command_line);
  const job::Launch& launch = job.launch();
  metadata.launch = job::launch_kind_name(launch.kind);
  metadata.launcher = launch.launcher;
  metadata.slurm_job_id = launch.slurm_job_id;
  metadata.slurm_step_id = launch.slurm_step_id;
  metadata.slurm_nodelist = launch.slurm_nodelist;
  metadata.ranks_per_process = options.ranks_per_process;
  metadata.nccl_tests_parameters = nccl_tests_parameters(options);
  if (std::string note = scratch_allocation_note(metadata.backend, metadata.mpi_library,
                                                 options.collectives, options.max_bytes,
                                                 metadata.environment);
      !note.empty())
    metadata.notes.push_back(std::move(note));
  if (options.split.op != SplitOp::kNone)
    for (int r = 0; r < world.size(); ++r)
      metadata.rank_groups.push_back(split_color(options.split, r));
  if (leader) reporters.begin(metadata);
  SweepOutcome outcome;
  const std::vector<BenchOptions> runs = sweep_runs(runnable, world.size());
  // -N/--repeat 0: until stopped (a signal ends the sweep after its record).
  for (int repeat = 0; (options.repeats == 0 || repeat < options.repeats) &&
                       !outcome.stopped_by_signal && outcome.refused.empty();
       ++repeat) {
    for (const BenchOptions& one : runs) {
      const SweepOutcome part =
          run_sweep(one, world, job_shape(world), *comm, watchdog, leader ? &reporters : nullptr,
                    repeat, &job::InterruptHandlers::pending_signal);
      outcome.wrong_elements += part.wrong_elements;
      outcome.records += part.records;
      outcome.busbw_sum_GBps += part.busbw_sum_GBps;
      outcome.stopped_by_signal = part.stopped_by_signal;
      outcome.refused = part.refused;
      if (outcome.stopped_by_signal || !outcome.refused.empty()) break;
    }
    if (repeat == std::numeric_limits<int>::max() - 1) break;  // -N 0 for 2^31 sweeps
  }
  metadata.end_time_utc = utc_now_iso8601();
  // NCCL_TESTS_MIN_BW: nccl-tests' verdict on the average busbw of the rows.
  metadata.min_avg_busbw_GBps = options.min_avg_busbw_GBps;
  const double average_busbw =
      outcome.records > 0 ? outcome.busbw_sum_GBps / static_cast<double>(outcome.records) : 0.0;
  const bool below_min_bw =
      options.min_avg_busbw_GBps && average_busbw < 0.9 * *options.min_avg_busbw_GBps;
  if (outcome.stopped_by_signal) metadata.stopped_by = job::signal_name(outcome.stopped_by_signal);
  // The last write (the JSON's final version) failing on rank 0 is a failed
  // run, but every rank still ends normally: no abort, one line.
  bool end_failed = false;
  if (leader) {
    try {
      reporters.end(metadata);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "ccscope bench: error: %s\n", error.what());
      end_failed = true;
    }
  }
  // Backend teardown before MPI_Finalize, watched: NCCL's finalize waits for
  // every peer, and a peer that aborted must not leave this rank hanging.
  watchdog.begin_phase("teardown of the " + comm->backend_name() + " backend");
  watchdog.operation_started();
  comm.reset();
  watchdog.end_phase();
  // Every rank gets here (or has aborted): all say goodbye before any closes.
  leave_together(kExitOk);
  if (!outcome.refused.empty()) return kExitUsage;  // rank 0 said what fits
  if (end_failed) return kExitFailed;
  if (below_min_bw && !outcome.stopped_by_signal) {
    if (leader)
      std::fprintf(stderr,
                   "ccscope bench: average busbw %g GB/s is below 90%% of NCCL_TESTS_MIN_BW=%g "
                   "GB/s; exit 1\n",
                   average_busbw, *options.min_avg_busbw_GBps);
    return kExitFailed;
  }
  if (outcome.stopped_by_signal) {
    const int code = job::exit_code_for_signal(outcome.stopped_by_signal);
    if (leader)
      std::fprintf(stderr, "ccscope bench: stopped by %s after %zu record(s); exit %d\n",
                   metadata.stopped_by.c_str(), outcome.records, code);
    std::fflush(nullptr);
    // Every record is written. MPICH's mpiexec (Hydra 4.0) often loses the
    // ranks' exit status after it forwarded a signal and reports 0; an abort
    // with the code reaches it (measured: see docs/bench.md, "Stopping a run").
    if (world.size() > 1 && carries_process) {
      world.barrier();         // rank 0 has written and printed everything
      watchdog_say_goodbye();  // every rank: the abort below is on purpose
      // The launcher drops output still in its pipes when the abort arrives
      // (Hydra lost the line above 2 runs in 5 without this pause).
      std::this_thread::sleep_for(std::chrono::seconds(leader ? 1 : 10));  // rank 0's abort ends us
      world.abort(code);
    }
    return code;
  }
  return outcome.wrong_elements > 0 ? kExitFailed : kExitOk;
}

// run_benchmark as the body of its job: one rank per process, or (-g N) N
// thread ranks per process; returns the exit code.
int benchmark_job(job::JobContext& job, const BenchOptions& options,
                  const ReporterSetup& setup_reporters,
                  const std::vector<std::string>& command_line) {
  const int count = options.ranks_per_process;
  if (count <= 1) return bench_rank(job, job.world(), true, options, setup_reporters, command_line);
  const ThreadRanks thread_ranks(job.world(), count);
  std::vector<int> codes(static_cast<size_t>(count), kExitOk);
  std::vector<std::thread> threads;
  for (int t = 0; t < count; ++t)
    threads.emplace_back([&, t] {
      // A thread's failure ends the job, as an exception of the body does.
      try {
        const World world = thread_ranks.world_of(t);
        codes[static_cast<size_t>(t)] =
            bench_rank(job, world, t == 0, options, setup_reporters, command_line);
      } catch (const TimeoutError& e) {
        job.end_job(job::kExitHang, e.what());
      } catch (const UsageError& e) {
        job.end_job(job::kExitUsage, std::string("error: ") + e.what());
      } catch (const std::exception& e) {
        job.end_job(job::kExitCheckFailed, std::string("error: ") + e.what());
      }
    });
  for (auto& thread : threads) thread.join();
  return *std::max_element(codes.begin(), codes.end());
}

}  // namespace

int run_benchmark(const BenchOptions& options, const ReporterSetup& setup_reporters,
                  const std::vector<std::string>& command_line) {
  return job::run_job({"bench", job::OnSignal::kBodyStops}, [&](job::JobContext& job) {
    return benchmark_job(job, options, setup_reporters, command_line);
  });
}

}  // namespace ccscope::bench
