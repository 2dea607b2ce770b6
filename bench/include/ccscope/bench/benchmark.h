#pragma once
// Running a benchmark from BenchOptions: MPI start-up, the checks that need
// the job (ranks, backend, memory), the hang watchdog, every sweep (-d/-o all,
// -r -1, -N), interruption by SIGINT/SIGTERM, and what each rank says when
// something goes wrong. The command layer (app/src/bench_verb.cpp) parses the
// flags into BenchOptions and names the reporters rank 0 writes to.
#include <functional>
#include <string>
#include <vector>

#include "ccscope/bench/options.h"
#include "ccscope/job/run_job.h"
#include "ccscope/records/reporter.h"

namespace ccscope::bench {

// The outcome of a run, as the process's exit code (ranks that abort hand it
// to MPI_Abort, so it is the library's to choose).
inline constexpr int kBenchOk = 0;
inline constexpr int kBenchFailed = 1;   // wrong results, a backend failure, an output not written
inline constexpr int kBenchRefused = 2;  // options this job cannot run (rank 0 said why)
inline constexpr int kBenchTimeout = 3;  // the watchdog stopped a hung operation
// Stopped by SIGINT/SIGTERM: 128 + the signal's number.

// Called on rank 0 once MPI is up and the options are judged, before anything
// is measured: appends the reporters the run writes to (console, --csv,
// --json, ...). An exception refuses the run on every rank (kBenchRefused)
// with its message, which says what to do.
using ReporterSetup = std::function<void(records::ReporterList& reporters)>;

// Runs the benchmark on every rank of the job. `command_line` goes into the
// run metadata. Returns one of the codes above (or does not return: an abort).
int run_benchmark(const BenchOptions& options, const ReporterSetup& setup_reporters,
                  const std::vector<std::string>& command_line);

// Before MPI is up: whether this process speaks for the job (job/'s).
using job::launcher_says_rank_zero;

}  // namespace ccscope::bench
