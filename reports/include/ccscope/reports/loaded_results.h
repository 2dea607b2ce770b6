#pragma once
// Results read back from files: ccscope's own CSV/JSON, nccl-tests' text and
// -J JSON output, OSU collective output. Every source becomes the same shape;
// a figure the source did not contain is std::nullopt (absent), never invented.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/reports/record.h"

namespace ccscope::reports {

// Bad input file: the message names the file and line ("run.csv:17: ...").
// Front ends print it as one line and exit 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LoadedRecord {
  std::string source;      // "file:line" (or "file" for JSON) where the record came from
  std::string collective;  // ccscope names: allreduce, allgather, ... (nccl-tests' mapped)
  std::string backend;     // "mpi", "nccl", "ring"; "nccl" for nccl-tests, "mpi" for OSU
  std::string dtype;       // nccl-tests names (float, half, ...); "" when absent
  std::string op;          // sum, prod, ..., "none"; "" when absent
  std::optional<int> root;
  std::optional<bool> in_place;
  size_t size_bytes = 0;
  std::optional<size_t> count;
  std::optional<int> ranks;
  std::optional<int> nodes;
  std::optional<int> ranks_per_node;
  std::optional<double> time_s;
  std::optional<double> algbw_GBps;
  std::optional<double> busbw_GBps;
  std::optional<double> time_min_s;  // OSU min / ccscope rank_time_min_s
  std::optional<double> time_max_s;
  std::optional<double> time_avg_s;  // average over ranks of each rank's time
  // Which statistic over ranks time_s is, machine-readable: "max" (ccscope's
  // default: the slowest rank), "avg" (nccl-tests' default, OSU's "Avg
  // Latency"), "min", "rank0"; "" when the source does not say.
  std::string time_statistic;
  // Host CPU time to issue the operations (nccl-tests -C prints it in the time
  // column, -J as cpu_time): never a completion time, so never time_s.
  std::optional<double> cpu_time_s;
  std::optional<double> iteration_time_p50_s;
  std::optional<double> iteration_time_p99_s;
  std::optional<int64_t> wrong;
  std::optional<int> repeat;  // sample index when a run holds repeated sweeps
  // How the timed iterations ran (BenchRecord's fields of the same names).
  // ccscope files written before these fields existed read as BenchRecord's
  // defaults (no rotation, -m 1, no graph, unchecked); other formats fill what
  // they print (nccl-tests: -m and -G) and leave the rest absent.
  std::optional<bool> rotated;
  std::optional<int> aggregate_iterations;
  std::optional<int> graph_launches;
  std::string time_method;  // "" when absent or not said
  std::optional<int> check_iterations;
  std::optional<int> failed_checks;
};

struct LoadedRun {
  std::string path;
  std::string format;  // "ccscope-csv", "ccscope-json", "nccl-tests-text", "nccl-tests-json", "osu"
  RunMetadata metadata;  // what the source said; empty strings/zeros when absent
  std::vector<LoadedRecord> records;
  // What the reader skipped or converted, one line each, for the user to see
  // ("12 lines of other programs skipped (NCCL INFO, launcher prefixes)").
  std::vector<std::string> notes;
};

}  // namespace ccscope::reports

namespace ccscope::reports {

// Reads one results file, detecting its format from its content. Throws
// InputError naming the file and line for anything malformed, truncated, empty
// or of an unknown format.
LoadedRun read_results(const std::string& path);
// The same for text already read; `path` names it in messages.
LoadedRun parse_results(const std::string& path, const std::string& text);

}  // namespace ccscope::reports
