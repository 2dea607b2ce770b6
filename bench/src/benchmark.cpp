// run_benchmark: see ccscope/bench/benchmark.h.
#include "ccscope/bench/benchmark.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/world.h"
#include "ccscope/job/backend_registry.h"
#include "ccscope/job/interruption.h"
#include "ccscope/job/watchdog.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/reporter.h"
#include "collective_spec.h"
#include "run_metadata.h"
#include "sweep_runner.h"

namespace ccscope::bench {
namespace {

constexpr int kExitOk = kBenchOk;
constexpr int kExitFailed = kBenchFailed;
constexpr int kExitUsage = kBenchRefused;
static_assert(kBenchTimeout == kTimeoutExitCode);

// The default backend (see backend_choice.h); every rank gets the same answer
// because it is computed from the same gathered facts.
std::string default_backend(const BenchOptions& options, const World& world) {
  const std::vector<std::string> gpu_ids =
      world.all_gather(gpu_identity_for_local_rank(world.local_rank()));
  const job::BackendChoice choice =
      job::choose_default_backend(world.hostnames(), gpu_ids, options.isolate_ranks);
  if (!choice.note.empty() && world.rank() == 0)
    std::fprintf(stderr, "ccscope bench: note: %s\n", choice.note.c_str());
  return choice.backend;
}

// The backend this run uses: --backend, else the default choice.
std::string resolve_backend(const BenchOptions& options, const World& world) {
  return options.backend.empty() ? default_backend(options, world) : options.backend;
}

std::unique_ptr<Communicator> make_communicator(const BenchOptions& options, const World& world,
                                                const std::string& backend) {
  if (backend == "nccl") return make_nccl_communicator(world, NcclOptions{options.isolate_ranks});
  if (backend == "ring") return make_ring_communicator(world);
  MpiOptions mpi;
  mpi.yielding_waits = options.yielding_waits;
  return make_mpi_communicator(world, mpi);
}

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

// Every rank has agreed to end (a refused output, buffers that do not fit):
// all say goodbye before any of them closes its watch connections, so that no
// watchdog takes an early leaver for a dead rank.
int leave_together(const World& world, int exit_code) {
  watchdog_say_goodbye();
  world.barrier();
  return exit_code;
}

}  // namespace

namespace {

// run_benchmark inside its MPI session; returns the exit code.
int benchmark_in_session(const BenchOptions& options, const ReporterSetup& setup_reporters,
                         const std::vector<std::string>& command_line) {
  const World world = World::from_mpi();
  const bool leader = world.rank() == 0;
  const int launched = launcher_rank_count();
  if (launched > 1 && world.size() == 1) {
    if (launcher_says_rank_zero())
      std::fprintf(
          stderr,
          "ccscope bench: error: the launcher started %d ranks but MPI sees only this one: "
          "ccscope was built with a different MPI (%s) than the launcher; use that MPI's "
          "mpiexec or rebuild ccscope against the launcher's MPI\n",
          launched, MpiSession::library_version().c_str());
    return kExitUsage;
  }
  try {
    validate_for_ranks(options, world.size());
  } catch (const UsageError& error) {
    if (leader) std::fprintf(stderr, "ccscope bench: error: %s\n", error.what());
    return kExitUsage;
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
  std::string backend;
  try {
    backend = resolve_backend(options, world);
    validate_for_backend(options, backend);  // every rank has the same backend: one answer
  } catch (const UsageError& error) {
    if (leader) std::fprintf(stderr, "ccscope bench: error: %s\n", error.what());
    return kExitUsage;
  }

  // The watchdog starts first so that --timeout also bounds the backend's
  // start-up (ncclCommInitRank blocks until every rank joins).
  std::unique_ptr<HangWatchdog> watchdog;
  try {
    watchdog = std::make_unique<HangWatchdog>(
        world, std::chrono::milliseconds(static_cast<long long>(options.timeout_seconds * 1000)));
    // (-T 0: a zero timeout, which the watchdog takes as none.)
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ccscope bench: rank %d (%s): cannot start the watchdog: %s\n",
                 world.rank(), world.hostname().c_str(), error.what());
    world.abort(kExitFailed);
  }
  std::unique_ptr<Communicator> comm;
  try {
    watchdog->begin_phase("start-up of the " + backend + " backend");
    watchdog->operation_started();
    comm = make_communicator(options, world, backend);
    watchdog->end_phase();
  } catch (const UsageError& error) {
    // Every rank fails the same way; one line is enough.
    if (leader) std::fprintf(stderr, "ccscope bench: error: %s\n", error.what());
    return kExitUsage;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ccscope bench: rank %d (%s): cannot start the %s backend: %s\n",
                 world.rank(), world.hostname().c_str(), backend.c_str(), error.what());
    watchdog_say_goodbye();  // an exit on purpose, not a death
    world.abort(kExitFailed);
  }

  // Every type of -d (all): element counts and sizes depend on it.
  for (DataType type : options.types) {
    BenchOptions typed = options;
    typed.type = type;
    if (const std::string problem = preflight(typed, world, *comm); !problem.empty()) {
      if (leader) std::fprintf(stderr, "ccscope bench: error: %s\n", problem.c_str());
      return leave_together(world, kExitUsage);
    }
  }

  // Output files are opened before measuring so a bad path fails at once.
  reports::ReporterList reporters;
  std::string open_error;
  if (leader) {
    try {
      setup_reporters(reporters);
    } catch (const reports::InputError& error) {  // says what to do already
      open_error = error.what();
    } catch (const std::exception& error) {
      open_error = error.what() + std::string("; choose a writable path");
    }
  }
  if (world.all_reduce_sum(static_cast<int64_t>(open_error.empty() ? 0 : 1)) != 0) {
    if (leader) std::fprintf(stderr, "ccscope bench: error: %s\n", open_error.c_str());
    return leave_together(world, kExitUsage);
  }

  job::InterruptHandlers interrupts(leader
                                        ? "ccscope bench: stopping after the current size (signal "
                                          "received; send it again to stop at once)\n"
                                        : "");
  try {
    reports::RunMetadata metadata = collect_run_metadata(world, *comm, command_line);
    if (leader) reporters.begin(metadata);
    SweepOutcome outcome;
    const std::vector<BenchOptions> runs = sweep_runs(options, world.size());
    // -N/--repeat 0: until stopped (a signal ends the sweep after its record).
    for (int repeat = 0; (options.repeats == 0 || repeat < options.repeats) &&
                         !outcome.stopped_by_signal && outcome.refused.empty();
         ++repeat) {
      for (const BenchOptions& one : runs) {
        const SweepOutcome part =
            run_sweep(one, world, *comm, *watchdog, leader ? &reporters : nullptr, repeat,
                      &job::InterruptHandlers::pending_signal);
        outcome.wrong_elements += part.wrong_elements;
        outcome.records += part.records;
        outcome.stopped_by_signal = part.stopped_by_signal;
        outcome.refused = part.refused;
        if (outcome.stopped_by_signal || !outcome.refused.empty()) break;
      }
      if (repeat == std::numeric_limits<int>::max() - 1) break;  // -N 0 for 2^31 sweeps
    }
    metadata.end_time_utc = utc_now_iso8601();
    if (outcome.stopped_by_signal)
      metadata.stopped_by = job::signal_name(outcome.stopped_by_signal);
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
    watchdog->begin_phase("teardown of the " + comm->backend_name() + " backend");
    watchdog->operation_started();
    comm.reset();
    watchdog->end_phase();
    // Every rank gets here (or has aborted): all say goodbye before any closes.
    leave_together(world, kExitOk);
    if (!outcome.refused.empty()) return kExitUsage;  // rank 0 said what fits
    if (end_failed) return kExitFailed;
    if (outcome.stopped_by_signal) {
      const int code = job::exit_code_for_signal(outcome.stopped_by_signal);
      if (leader)
        std::fprintf(stderr, "ccscope bench: stopped by %s after %zu record(s); exit %d\n",
                     metadata.stopped_by.c_str(), outcome.records, code);
      std::fflush(nullptr);
      // Every record is written. MPICH's mpiexec (Hydra 4.0) often loses the
      // ranks' exit status after it forwarded a signal and reports 0; an abort
      // with the code reaches it (measured: see README, "Stopping a run").
      if (world.size() > 1) {
        world.barrier();         // rank 0 has written and printed everything
        watchdog_say_goodbye();  // every rank: the abort below is on purpose
        // The launcher drops output still in its pipes when the abort arrives
        // (Hydra lost the line above 2 runs in 5 without this pause).
        std::this_thread::sleep_for(
            std::chrono::seconds(leader ? 1 : 10));  // rank 0's abort ends us
        world.abort(code);
      }
      return code;
    }
    return outcome.wrong_elements > 0 ? kExitFailed : kExitOk;
  } catch (const TimeoutError& error) {
    std::fprintf(stderr, "ccscope bench: rank %d (%s): %s\n", world.rank(),
                 world.hostname().c_str(), error.what());
    watchdog_say_goodbye();  // an exit on purpose, not a death
    world.abort(kTimeoutExitCode);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "ccscope bench: rank %d: error: %s\n", world.rank(), error.what());
    watchdog_say_goodbye();  // an exit on purpose, not a death
    world.abort(kExitUsage);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ccscope bench: rank %d (%s): error: %s\n", world.rank(),
                 world.hostname().c_str(), error.what());
    watchdog_say_goodbye();  // an exit on purpose, not a death
    world.abort(kExitFailed);
  }
}

}  // namespace

int run_benchmark(const BenchOptions& options, const ReporterSetup& setup_reporters,
                  const std::vector<std::string>& command_line) {
  MpiSession session(nullptr, nullptr);
  return session.finalize(benchmark_in_session(options, setup_reporters, command_line));
}

}  // namespace ccscope::bench
