// `ccscope bench COLLECTIVE [flags]`: nccl-tests' flags into BenchOptions, the
// reporters rank 0 writes to, then bench::run_benchmark on every rank.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ccscope/app/bench_flags.h"
#include "ccscope/app/verbs.h"
#include "ccscope/bench/benchmark.h"
#include "ccscope/collectives/error.h"
#include "ccscope/records/collective.h"
#include "ccscope/reports/loaded_results.h"  // InputError
#include "ccscope/reports/reporter.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::app {

int bench_verb(const std::vector<std::string>& args, const std::vector<std::string>& command_line) {
  bench::BenchOptions options;
  try {
    // As all_reduce_perf & co., nccl-tests' fixed iteration count by default.
    BenchInvocation invocation;
    if (!command_line.empty()) {
      const std::string program = std::filesystem::path(command_line[0]).filename().string();
      for (const auto& d : all_collectives())
        invocation.as_nccl_tests_program |= program == d.nccl_tests_program;
    }
    ParsedBenchFlags parsed = parse_bench_flags(args, invocation);
    if (!parsed.options) {
      if (bench::launcher_says_rank_zero()) std::cout << parsed.help_text;
      return bench::kBenchOk;
    }
    options = std::move(*parsed.options);
    apply_nccl_tests_environment(options, [](const char* name) { return std::getenv(name); });
  } catch (const UsageError& error) {
    // Before MPI is up: the launcher's rank variable keeps it to one line.
    if (bench::launcher_says_rank_zero())
      std::fprintf(stderr, "ccscope bench: error: %s\n", error.what());
    return bench::kBenchRefused;
  }
  // Rank 0's outputs: the table on stdout, --csv and --json. Opened before
  // anything is measured, so a bad path fails at once on every rank.
  const auto setup = [&options](records::ReporterList& reporters) {
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!options.csv_path.empty()) outputs.emplace_back("--csv", options.csv_path);
    if (!options.json_path.empty()) outputs.emplace_back("--json", options.json_path);
    reports::refuse_same_file(outputs);  // an InputError says what to do already
    try {
      reporters.append(reports::make_console_reporter(std::cout));
      if (!options.csv_path.empty()) reporters.append(reports::make_csv_reporter(options.csv_path));
      if (!options.json_path.empty())
        reporters.append(reports::make_json_reporter(options.json_path));
    } catch (const reports::InputError&) {
      throw;
    } catch (const std::exception& error) {
      throw std::runtime_error(error.what() + std::string("; choose a writable path"));
    }
  };
  return bench::run_benchmark(options, setup, command_line);
}

}  // namespace ccscope::app
