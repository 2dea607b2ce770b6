// BenchOptions' checks that need the job (ranks, backend); the flags that fill
// BenchOptions are parsed in the command layer (app/src/bench_flags.cpp).
#include "ccscope/bench/options.h"

#include <algorithm>
#include <string>

#include "ccscope/collectives/error.h"
#include "collective_spec.h"

namespace ccscope::bench {
namespace {

[[noreturn]] void bad(const std::string& what) { throw UsageError(what); }

}  // namespace

void validate_for_backend(const BenchOptions& options, const std::string& backend) {
  if (options.yielding_waits.value_or(false) && backend != "mpi")
    bad("--yielding-waits is the mpi backend's (its nonblocking calls), but this run uses " +
        backend + ": drop it or use --backend mpi");
  if (options.graph_launches > 0 && backend != "nccl")
    bad("-G/--cudagraph " + std::to_string(options.graph_launches) +
        " needs the nccl backend (CUDA graphs), but this run uses " + backend +
        ": drop -G or use --backend nccl on GPUs");
}

void validate_for_ranks(const BenchOptions& options, int ranks) {
  const bool rooted = std::any_of(options.collectives.begin(), options.collectives.end(), has_root);
  if (rooted && options.root >= ranks)
    bad("-r/--root " + std::to_string(options.root) + " is out of range: this job has " +
        std::to_string(ranks) + " rank(s), so the root must be 0.." + std::to_string(ranks - 1));
  if (options.corrupt_rank >= ranks)
    bad("--test-corrupt-rank " + std::to_string(options.corrupt_rank) + " is out of range for " +
        std::to_string(ranks) + " rank(s)");
  if (options.shift_block_rank >= ranks)
    bad("--test-shift-block " + std::to_string(options.shift_block_rank) + " is out of range for " +
        std::to_string(ranks) + " rank(s)");
}

int split_color(const WorldSplit& split, int world_rank) {
  const long long r = world_rank, v = split.value;
  switch (split.op) {
    case SplitOp::kNone:
      return 0;
    case SplitOp::kAnd:
      return static_cast<int>(r & v);
    case SplitOp::kOr:
      return static_cast<int>(r | v);
    case SplitOp::kMod:
      return v > 0 ? static_cast<int>(r % v) : 0;
    case SplitOp::kDiv:
      return v > 0 ? static_cast<int>(r / v) : 0;
  }
  return 0;
}

std::string time_statistic_description(TimeAcrossRanks mode) {
  switch (mode) {
    case TimeAcrossRanks::kRank0:
      return "rank 0's mean over iterations";
    case TimeAcrossRanks::kAverage:
      return "average over ranks of mean over iterations";
    case TimeAcrossRanks::kMinimum:
      return "min over ranks of mean over iterations";
    case TimeAcrossRanks::kMaximum:
      return "max over ranks of mean over iterations";
  }
  return "";
}

}  // namespace ccscope::bench
