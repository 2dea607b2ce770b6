// read_results: one entry point, five formats, all becoming LoadedRun.
//
//   ccscope CSV      header "schema,collective,...": fields parsed by fast-cpp-csv-parser
//   ccscope JSON     {"schema": "ccscope.bench/1", "metadata", "records"}
//   nccl-tests text  "# nccl-tests version ...", "# nThread ..." and the size/count/type table
//   nccl-tests JSON  -J output: {"args", "config", "results"}
//   OSU              "# OSU MPI Allreduce Latency Test", "# Size  Avg Latency(us) ..."
//
// nccl-tests and OSU output is often captured with a launcher's and other
// programs' lines around it, so their markers are looked for anywhere in the
// file, the earliest deciding.
//
// A figure the source does not hold stays std::nullopt. Anything malformed
// throws InputError("file:line: what is wrong; what to do").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/user_files.h"
#include "reader_support.h"

namespace ccscope::reports {
using namespace detail;

namespace {

size_t first_of(const std::string& raw, std::initializer_list<std::string_view> markers) {
  size_t first = std::string::npos;
  for (auto m : markers) first = std::min(first, raw.find(m));
  return first;
}

// A file of neither format that says why a benchmark failed ("This test
// requires at least two processes", "Invalid number of GPUs ..."): that, in one line.
void fail_if_failed_run(const std::string& path, const std::string& raw) {
  std::vector<std::string> lines;
  std::istringstream in(raw);
  size_t n = 0;
  for (std::string line; std::getline(in, line) && lines.size() < 20000; ++n) {
    bool prefixed = false;
    lines.push_back(strip_log_prefixes(line, prefixed));
  }
  std::string program;  // from a command line: "mpirun -np 1 ./osu_allreduce"
  for (const auto& line : lines)
    if (auto launch = parse_launch(line,
                                   [](std::string_view name) {
                                     return starts_with(name, "osu_") || name.ends_with("_perf") ||
                                            name.ends_with("_perf_mpi");
                                   });
        launch && !launch->program.empty() && program.empty())
      program = launch->program;
  for (std::string_view sign :
       {"Invalid number of GPUs", "Test NCCL failure", "Test CUDA failure", "requires at least",
        "Could Not Allocate Memory", "DATA VALIDATION ERROR"})
    if (raw.find(sign) != std::string::npos)
      fail_no_results(at(path, n), program.empty() ? "the benchmark" : program, lines);
}

// Above any link ccscope measures (NVLink 5: 1.8 TB/s per GPU) by far: a
// figure beyond it is an edited or corrupt file, and would decide a verdict.
constexpr double kMaxPlausibleGBps = 1e6;
// Longer than any collective's iteration (about 11 days).
constexpr double kMaxPlausibleSeconds = 1e6;

// The rules every format's records meet, whichever reader made them: figures
// are finite, not negative, and below the plausible bounds.
void check_figures(const LoadedRecord& r) {
  const auto check = [&r](const std::optional<double>& v, const char* name, double bound,
                          const char* unit) {
    if (!v) return;
    if (!std::isfinite(*v) || *v < 0)
      fail(r.source, fmt::format("{} {} is not a figure a benchmark measures (negative or not "
                                 "finite); is the file unedited?",
                                 name, *v));
    if (*v > bound)
      fail(r.source, fmt::format("{} {} is above {:g} {}: not a measurement; is the file unedited?",
                                 name, *v, bound, unit));
  };
  check(r.time_s, "time_s", kMaxPlausibleSeconds, "s");
  check(r.cpu_time_s, "cpu_time_s", kMaxPlausibleSeconds, "s");
  check(r.time_min_s, "time_min_s", kMaxPlausibleSeconds, "s");
  check(r.time_max_s, "time_max_s", kMaxPlausibleSeconds, "s");
  check(r.time_avg_s, "time_avg_s", kMaxPlausibleSeconds, "s");
  check(r.iteration_time_p50_s, "iteration_time_p50_s", kMaxPlausibleSeconds, "s");
  check(r.iteration_time_p99_s, "iteration_time_p99_s", kMaxPlausibleSeconds, "s");
  check(r.algbw_GBps, "algbw_GBps", kMaxPlausibleGBps, "GB/s");
  check(r.busbw_GBps, "busbw_GBps", kMaxPlausibleGBps, "GB/s");
}

LoadedRun parse_any_format(const std::string& path, const std::string& raw);

}  // namespace

LoadedRun read_results(const std::string& path) {
  return parse_results(path, read_input_file(path));
}

LoadedRun parse_results(const std::string& path, const std::string& raw) {
  LoadedRun run = parse_any_format(path, raw);
  for (const LoadedRecord& r : run.records) check_figures(r);
  return run;
}

namespace {

LoadedRun parse_any_format(const std::string& path, const std::string& raw) {
  // read_input_file refuses these too; text from elsewhere gets the same answer.
  if (const size_t nul = raw.find('\0'); nul != std::string::npos)
    fail(
        at(path, 1 + std::count(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(nul), '\n')),
        "a NUL byte: this is binary data, not a results file");
  const std::string head = trim(raw.substr(0, 4096));
  if (head.empty()) fail(at(path, 1), "empty file; rerun the benchmark");
  if (head[0] == '{') {
    json doc = parse_json(path, raw);
    if (!doc.is_object()) fail(at(path, 1), "a JSON document that is not an object");
    if (const json* schema = member(doc, "schema");
        schema && schema->is_string() && starts_with(schema->get<std::string>(), "ccscope.bench/"))
      return read_ccscope_json(path, doc);
    if (member(doc, "results") || member(doc, "args") || member(doc, "config"))
      return read_nccl_tests_json(path, doc);
    fail(at(path, 1),
         "JSON that is neither ccscope's (schema ccscope.bench/N) nor nccl-tests' -J output");
  }
  if (starts_with(head, "schema,") || starts_with(head, "\"schema\","))
    return read_ccscope_csv(path, raw);
  const size_t nccl_tests = first_of(
      raw, {"# nccl-tests version", "# Collective test starting:", "# nThread ", "out-of-place"});
  const size_t osu = first_of(raw, {"# OSU "});
  if (nccl_tests != std::string::npos && nccl_tests < osu) return read_nccl_tests_text(path, raw);
  if (osu != std::string::npos) return read_osu(path, raw);
  fail_if_failed_run(path, raw);
  fail(at(path, 1),
       "unknown format: expected ccscope CSV/JSON, nccl-tests text or -J JSON, or OSU output");
}

}  // namespace

}  // namespace ccscope::reports
