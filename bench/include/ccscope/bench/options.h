#pragma once
// What a benchmark run does, as options: the sweep, nccl-tests' switches and
// ccscope's own. The command layer (app/src/bench_flags.cpp) fills them from
// nccl-tests' flags; run_benchmark (ccscope/bench/benchmark.h) runs them.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/collectives/types.h"
#include "ccscope/records/collective.h"

namespace ccscope::bench {

// NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK (nccl-tests): world rank r runs in
// the group of color r & v, r | v, r % v or r / v (MPI_Comm_split's color).
enum class SplitOp { kNone, kAnd, kOr, kMod, kDiv };
struct WorldSplit {
  SplitOp op = SplitOp::kNone;
  long long value = 0;
};
// The group color of `world_rank`; 0 for every rank without a split.
int split_color(const WorldSplit& split, int world_rank);

// -a: how the ranks' times become the reported time (nccl-tests' numbering).
enum class TimeAcrossRanks { kRank0 = 0, kAverage = 1, kMinimum = 2, kMaximum = 3 };

struct BenchOptions {
  // The collectives to sweep, in order ("allreduce,allgather" runs both);
  // `collective` is the one being run.
  std::vector<Collective> collectives{Collective::kAllReduce};
  Collective collective = Collective::kAllReduce;
  size_t min_bytes = size_t{32} << 20;
  size_t max_bytes = size_t{32} << 20;
  size_t step_bytes = size_t{1} << 20;
  size_t step_factor = 1;
  int iterations = 20;
  // -w: untimed iterations before each size; 0 still issues one (nccl-tests
  // always runs one operation before it starts the clock).
  int warmup_iterations = 5;
  // --target-ci P (adaptive sampling): time batches of iterations until the 95%
  // confidence interval of the reported time is within +-P% or the size's
  // --max-seconds-per-size is spent; 0 = nccl-tests' fixed -n iterations.
  // (`ccscope bench` picks the default, see docs/bench.md; other callers get -n.)
  double target_ci_percent = 0;
  double max_seconds_per_size = 3;
  // -d / -o: the types and ops to sweep ("all" = every one, in nccl-tests'
  // order); `type` and `op` are the ones being run.
  std::vector<DataType> types{DataType::kFloat32};
  // -d all: types the backend cannot run are left out with a note (nccl-tests
  // drops fp8 below compute capability 9.0), not refused.
  bool types_are_all = false;
  std::vector<ReduceOp> ops{ReduceOp::kSum};
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  // -c N: check iterations per size, each on fresh inputs of its own seed (0 = no check).
  int check_iterations = 1;
  // Buffer rotation (nccl-tests): timed iteration k uses offset
  // size x (k mod (buffer / size)); --no-rotate keeps every iteration at offset 0.
  bool rotate_buffers = true;
  // -m: operations per timed iteration, issued in one group (nccl-tests' agg_iters).
  int aggregate_iterations = 1;
  // -G N: capture the -n iterations once as a graph and launch it N times (0 = off).
  int graph_launches = 0;
  // -C 1: report the host time to issue the operations instead of the time to
  // complete them (nccl-tests' report_cputime).
  bool report_cputime = false;
  // -z 1: wait for every operation before issuing the next (nccl-tests' blocking).
  bool blocking = false;
  // -r: root of broadcast; -1 (nccl-tests) = every rank in turn, resolved by
  // run_benchmark, so run_sweep always sees 0..ranks-1.
  int root = 0;
  TimeAcrossRanks time_across_ranks = TimeAcrossRanks::kMaximum;
  std::string backend;  // "", "mpi" or "nccl"; "" = nccl when usable, else mpi
  bool isolate_ranks = false;
  // -t x -g: ranks per process, each a thread of it (nccl-tests' threads and
  // GPUs per thread); the world is processes x this many ranks.
  int ranks_per_process = 1;
  int threads_per_process = 1;  // -t (for nccl-tests' "# nThread" line; -g is the rest)
  // MPI: wait in the nonblocking call, testing and yielding the core (as ccscope
  // train's communication does), instead of the blocking call's spin; with more
  // ranks than cores a spinning wait measures the scheduler, not the transport.
  // Unset: job::wait_policy decides (yield when the host's ranks outnumber its CPUs).
  std::optional<bool> yielding_waits;
  double timeout_seconds = 300;  // -T/--timeout; 0 = no timeout (nccl-tests' -T 0)
  // NCCL_TESTS_MIN_BW: the run fails (exit 1, "# Avg bus bandwidth : X FAILED")
  // when the average busbw of its rows is below 90% of this, as nccl-tests.
  std::optional<double> min_avg_busbw_GBps;
  WorldSplit split;  // NCCL_TESTS_SPLIT(_MASK): each group runs its own collectives
  std::string csv_path;
  std::string json_path;
  bool progress = true;
  // -N/--repeat: whole sweeps, for repeated samples (records carry `repeat`);
  // 0 = until stopped (nccl-tests' -N 0), SIGINT/SIGTERM end the run cleanly.
  int repeats = 1;
  int corrupt_rank = -1;           // test only: corrupt one output element on this rank
  int shift_block_rank = -1;       // test only: shift this rank's first output block by one element
  bool stale_output = false;       // test only: checks read the previous run's output
  std::vector<std::string> notes;  // things the user should know (printed by rank 0)
  std::vector<std::string> warnings;  // choices that remove a safety net (printed by rank 0)
};

// Checks that need the rank count (root range); throws UsageError.
void validate_for_ranks(const BenchOptions& options, int ranks);
// Checks that need the backend ("mpi", "nccl", "ring"; -G needs nccl), once it
// is chosen (run_benchmark: after the default choice; the flag parser: when
// --backend names it); throws UsageError.
void validate_for_backend(const BenchOptions& options, const std::string& backend);

std::string time_statistic_description(TimeAcrossRanks mode);

}  // namespace ccscope::bench
