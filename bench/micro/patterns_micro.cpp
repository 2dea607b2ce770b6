// Micro-benchmarks of bench's data patterns (bench/src/patterns.h): how fast
// DataPattern::fill_input writes a send buffer and DataPattern::check_output
// compares every element of a received buffer with its expected value, in
// bytes/s of the buffer, for float32, bfloat16 and int32 at 1 MiB and 64 MiB.
// The cases are bench's default (all-reduce, sum; the reduction path) and
// all-gather (the data-movement path), at 4 ranks.
//
// Names: patterns/<fill|check>/<allreduce_sum|allgather>/<type>/<1MiB|64MiB>
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccscope/collectives/types.h"
#include "patterns.h"

namespace {

using ccscope::Collective;
using ccscope::DataType;
using ccscope::ReduceOp;
using ccscope::bench::CheckResult;
using ccscope::bench::DataPattern;

constexpr int kRanks = 4;
constexpr int kRank = 1;

struct Case {
  const char* name;
  Collective collective;
  ReduceOp op;
};
const Case kCases[] = {{"allreduce_sum", Collective::kAllReduce, ReduceOp::kSum},
                       {"allgather", Collective::kAllGather, ReduceOp::kSum}};

// The pattern a check of this case and size uses (block: all-gather's per-rank
// block, a quarter of the output at 4 ranks).
DataPattern pattern_of(const Case& c, DataType type, size_t elements) {
  const size_t block = c.collective == Collective::kAllGather ? elements / kRanks : elements;
  const uint64_t seed = ccscope::bench::pattern_seed(
      c.collective, type, c.op, elements * ccscope::element_size(type), false, 0, 0);
  return DataPattern(c.collective, type, c.op, kRanks, 0, block, seed);
}

void fill(benchmark::State& state, Case c, DataType type, size_t bytes) {
  const size_t elements = bytes / ccscope::element_size(type);
  const DataPattern pattern = pattern_of(c, type, elements);
  // All-gather's send buffer is one block; all-reduce's the whole count.
  const size_t count = c.collective == Collective::kAllGather ? elements / kRanks : elements;
  std::vector<unsigned char> buffer(count * ccscope::element_size(type));
  for (auto _ : state) {
    pattern.fill_input(kRank, 0, count, buffer.data());
    benchmark::DoNotOptimize(buffer.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(count * ccscope::element_size(type)));
}

void check(benchmark::State& state, Case c, DataType type, size_t bytes) {
  const size_t elements = bytes / ccscope::element_size(type);
  const DataPattern pattern = pattern_of(c, type, elements);
  // A correct result (every element passes: the common case a check times).
  std::vector<unsigned char> received(bytes);
  for (size_t i = 0; i < elements; ++i)
    ccscope::store_element(received.data(), type, i, pattern.expected_value(kRank, i));
  const CheckResult first = pattern.check_output(kRank, 0, elements, received.data());
  if (first.wrong != 0) {
    state.SkipWithError("the expected buffer does not pass its own check");
    return;
  }
  for (auto _ : state) {
    CheckResult result = pattern.check_output(kRank, 0, elements, received.data());
    benchmark::DoNotOptimize(result);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

void register_all() {
  const DataType types[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kInt32};
  const size_t sizes[] = {size_t{1} << 20, size_t{64} << 20};
  for (const Case& c : kCases)
    for (DataType type : types)
      for (size_t bytes : sizes) {
        const std::string suffix = std::string(c.name) + "/" + std::string(ccscope::name(type)) +
                                   "/" + std::to_string(bytes >> 20) + "MiB";
        benchmark::RegisterBenchmark(("patterns/fill/" + suffix).c_str(), fill, c, type, bytes);
        benchmark::RegisterBenchmark(("patterns/check/" + suffix).c_str(), check, c, type, bytes);
      }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
