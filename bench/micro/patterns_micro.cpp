// Micro-benchmarks of bench's data patterns (bench/src/patterns.h): how fast
// DataPattern::fill_input writes a send buffer and DataPattern::check_output
// compares every element of a received buffer with its expected value, in
// bytes/s of the buffer, at 4 ranks (rank 1, also the root).
//  - the common cases at 1 MiB and 64 MiB: all-reduce sum and avg (the
//    reduction path) and all-gather (data movement) in float32, bfloat16,
//    half and int32;
//  - the rest at 1 MiB: every collective (sum), every op (all-reduce) and every
//    type (all-reduce sum, all-gather).
// Sizes are the sweep's (its "size" column, laid out by layout_for).
//
// Names: patterns/<fill|check>/<collective>[_<op>]/<type>/<size>
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ccscope/collectives/types.h"
#include "ccscope/records/collective.h"
#include "patterns.h"

namespace {

using ccscope::Collective;
using ccscope::DataType;
using ccscope::Layout;
using ccscope::ReduceOp;
using ccscope::bench::CheckResult;
using ccscope::bench::DataPattern;

constexpr int kRanks = 4;
constexpr int kRank = 1;
constexpr int kRoot = 1;

struct Case {
  Collective collective;
  ReduceOp op;
};

std::string case_name(const Case& c) {
  std::string name(ccscope::name(c.collective));
  if (ccscope::bench::has_reduction(c.collective)) {
    name += '_';
    name += ccscope::name(c.op);
  }
  return name;
}

Layout layout_of(const Case& c, DataType type, size_t bytes) {
  return ccscope::layout_for(c.collective, bytes, ccscope::element_size(type), kRanks, kRank);
}

DataPattern pattern_of(const Case& c, DataType type, const Layout& layout) {
  const uint64_t seed =
      ccscope::bench::pattern_seed(c.collective, type, c.op, layout.size_bytes, false, 0, 0);
  return DataPattern(c.collective, type, c.op, kRanks, kRoot, layout.param_count, seed);
}

void fill(benchmark::State& state, Case c, DataType type, size_t bytes) {
  const Layout layout = layout_of(c, type, bytes);
  const DataPattern pattern = pattern_of(c, type, layout);
  const size_t send_bytes = layout.send_count * ccscope::element_size(type);
  std::vector<unsigned char> buffer(send_bytes);
  for (auto _ : state) {
    pattern.fill_input(kRank, 0, layout.send_count, buffer.data());
    benchmark::DoNotOptimize(buffer.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(send_bytes));
}

void check(benchmark::State& state, Case c, DataType type, size_t bytes) {
  const Layout layout = layout_of(c, type, bytes);
  const DataPattern pattern = pattern_of(c, type, layout);
  const size_t recv_bytes = layout.recv_count * ccscope::element_size(type);
  // A correct result (every element passes: the common case a check times).
  std::vector<unsigned char> received(recv_bytes);
  pattern.expected_output(kRank, 0, layout.recv_count, received.data());
  const CheckResult first = pattern.check_output(kRank, 0, layout.recv_count, received.data());
  if (first.wrong != 0) {
    state.SkipWithError("the expected buffer does not pass its own check");
    return;
  }
  for (auto _ : state) {
    CheckResult result = pattern.check_output(kRank, 0, layout.recv_count, received.data());
    benchmark::DoNotOptimize(result);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(recv_bytes));
}

void register_all() {
  std::set<std::string> registered;
  const auto add = [&](const Case& c, DataType type, size_t bytes) {
    const std::string suffix = case_name(c) + "/" + std::string(ccscope::name(type)) + "/" +
                               std::to_string(bytes >> 20) + "MiB";
    if (!registered.insert(suffix).second) return;
    benchmark::RegisterBenchmark(("patterns/fill/" + suffix).c_str(), fill, c, type, bytes);
    benchmark::RegisterBenchmark(("patterns/check/" + suffix).c_str(), check, c, type, bytes);
  };
  const size_t small = size_t{1} << 20, large = size_t{64} << 20;
  const Case all_reduce_sum{Collective::kAllReduce, ReduceOp::kSum};
  const Case all_gather{Collective::kAllGather, ReduceOp::kSum};
  for (const Case& c : {all_reduce_sum, Case{Collective::kAllReduce, ReduceOp::kAvg}, all_gather})
    for (DataType type :
         {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16, DataType::kInt32})
      for (size_t bytes : {small, large}) add(c, type, bytes);
  for (const auto& d : ccscope::all_collectives())
    add({d.id, ReduceOp::kSum}, DataType::kFloat32, small);
  for (ReduceOp op : ccscope::all_reduce_ops())
    add({Collective::kAllReduce, op}, DataType::kFloat32, small);
  for (DataType type : ccscope::all_data_types()) {
    add(all_reduce_sum, type, small);
    add(all_gather, type, small);
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
