#pragma once
// `ccscope bench` arguments: nccl-tests' flags and meanings, plus ccscope's own.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/collectives/types.h"
#include "collective_spec.h"

namespace ccscope::bench {

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
  int warmup_iterations = 5;
  bool check = true;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  TimeAcrossRanks time_across_ranks = TimeAcrossRanks::kMaximum;
  std::string backend;  // "", "mpi" or "nccl"; "" = nccl when usable, else mpi
  bool isolate_ranks = false;
  double timeout_seconds = 300;
  std::string csv_path;
  std::string json_path;
  bool progress = true;
  int repeats = 1;                 // whole sweeps, for repeated samples (records carry `repeat`)
  int corrupt_rank = -1;           // test only: corrupt one output element on this rank
  std::vector<std::string> notes;  // things the user should know (printed by rank 0)
};

struct ParsedBenchArguments {
  std::optional<BenchOptions> options;  // empty when help was asked for
  std::string help_text;
};

// Throws UsageError with one line naming the bad argument and what to do.
ParsedBenchArguments parse_bench_arguments(const std::vector<std::string>& args);
std::string bench_help_text();

// Checks that need the rank count (root range); throws UsageError.
void validate_for_ranks(const BenchOptions& options, int ranks);

std::string time_statistic_description(TimeAcrossRanks mode);

}  // namespace ccscope::bench
