// nccl-tests' flags (and ccscope's own) into bench::BenchOptions, with CLI11.
#include "ccscope/app/bench_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include "ccscope/collectives/error.h"
#include "ccscope/common/sizes.h"
#include "ccscope/common/text.h"
#include "ccscope/job/backend_registry.h"
#include "ccscope/records/collective.h"
#include "verb_support.h"

namespace ccscope::app {
using namespace ccscope::bench;
namespace {

struct RawArguments {
  std::string collective;
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  // Integers are taken as text and parsed strictly (integer_argument): CLI11
  // alone accepted values beyond long long's range.
  std::string step_factor = "1";
  std::string iterations = "20", warmup = "5", check = "1", root = "0", average = "3";
  std::string datatype = "float", op = "sum", backend;
  bool yielding_waits = false;
  bool busy_poll = false;
  bool isolate_ranks = false, no_progress = false, no_rotate = false, stale_output = false;
  std::string timeout = "300";
  std::string csv, json, output_file;
  std::string corrupt_rank = "-1", shift_block_rank = "-1";
  std::string repeats = "1";
  std::string target_ci, max_seconds_per_size = "3";
  // nccl-tests flags (0/1 switches and counts).
  std::string threads = "1", gpus = "1", aggregate = "1", parallel_init = "0", blocking = "0",
              stream_null = "0", graph = "0", cputime = "0", timestamps = "0", local_register = "0",
              cta_policy, device_impl = "0", device_cta_count = "16", memory = "0", unalign = "0",
              per_iter_timing = "0", per_iter_skip = "0";
};

void build_app(CLI::App& app, RawArguments& raw) {
  // As getopt (nccl-tests): a flag given twice takes its last value.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.description(
      "Measure a collective over a sweep of message sizes, check every result, and report "
      "algbw/busbw as nccl-tests does.\nLaunch with mpiexec/mpirun/srun; one rank per GPU "
      "for NCCL. Every nccl-tests 2.19 flag is accepted; those ccscope cannot honour refuse "
      "values other than their default with one line.");
  app.add_option(
      "collective", raw.collective,
      collective_choices() + "; several separated by commas are run one after the other");
  app.add_option("-b,--minbytes", raw.min_bytes, "smallest size, e.g. 8, 1K, 64M (default 32M)");
  app.add_option("-e,--maxbytes", raw.max_bytes, "largest size (default 32M)");
  app.add_option("-i,--stepbytes", raw.step_bytes,
                 "increment between sizes when -f is 1 (default 1M)");
  app.add_option("-f,--stepfactor", raw.step_factor,
                 "multiply sizes by this factor (default 1: add -i)");
  app.add_option("-n,--iters", raw.iterations,
                 "timed iterations per size: nccl-tests' fixed count (default: adaptive "
                 "sampling, --target-ci; 20 when run as all_reduce_perf & co.)");
  app.add_option("--target-ci", raw.target_ci,
                 "adaptive sampling: time batches of iterations until the 95% confidence "
                 "interval of each row's time is within +-P% (default 2, unless -n, -C 1 or -G "
                 "is given or ccscope runs as an nccl-tests program: then nccl-tests' fixed -n)");
  app.add_option("--max-seconds-per-size", raw.max_seconds_per_size,
                 "adaptive sampling: time budget of one row (warm-up and batches); a row that "
                 "has not converged by then is reported with its interval and converged=0 "
                 "(default 3)");
  app.add_option("-m,--agg_iters", raw.aggregate,
                 "operations per timed iteration, issued in one group; the time is per "
                 "operation (default 1)");
  app.add_option("-w,--warmup_iters", raw.warmup,
                 "untimed warm-up iterations before each size (default 5)");
  app.add_option("-N,--run_cycles,--repeat", raw.repeats,
                 "run the whole sweep K times (default 1; 0 = until stopped with Ctrl-C or "
                 "SIGTERM); records carry the repeat index, so `ccscope compare` has repeated "
                 "samples to judge noise");
  app.add_option("-c,--check", raw.check,
                 "check iterations per size, each on fresh inputs, every element compared "
                 "(default 1; 0 = no check)");
  app.add_option("-d,--datatype", raw.datatype,
                 "element type: " + data_type_choices() +
                     ", or all (every type, nccl-tests' order; default float)");
  app.add_option("-o,--op", raw.op,
                 "reduction: " + reduce_op_choices() +
                     ", or all (every op; default sum); collectives that do not reduce run once "
                     "per type");
  app.add_option("-r,--root", raw.root,
                 "root rank of broadcast (default 0; -1 = every rank in turn)");
  app.add_option("-z,--blocking", raw.blocking,
                 "1 = wait for each operation to complete before issuing the next (default 0)");
  app.add_option("-C,--report_cputime", raw.cputime,
                 "1 = the time column is the host time to issue the operations, not the time "
                 "to complete them (default 0)");
  app.add_option("-a,--average", raw.average,
                 "time column across ranks: 0 rank 0, 1 average, 2 minimum, 3 maximum of each "
                 "rank's mean over the -n iterations (default 3, the slowest rank; nccl-tests "
                 "defaults to 1)");
  app.add_option("-T,--timeout", raw.timeout,
                 "seconds an operation may make no progress before the run stops and names the "
                 "ranks that did not finish (default 300; 0 = no timeout)");
  app.add_option("-G,--cudagraph", raw.graph,
                 "capture the -n iterations as a CUDA graph once and launch it N times "
                 "(default 0 = off; nccl backend only)");
  app.add_option("-J,--output_file", raw.output_file,
                 "write a JSON file (name ending in .json), as --json: ccscope's JSON schema, "
                 "not nccl-tests'");
  app.add_option("-t,--nthreads", raw.threads,
                 "threads per process (default 1); -t x -g ranks per process, each a thread "
                 "driving one GPU (or, without a GPU, one rank on host memory)");
  app.add_option("-g,--ngpus", raw.gpus,
                 "GPUs per thread (default 1): with -t, the ranks of each process; "
                 "mpiexec -n 2 ... -g 4 runs 8 ranks");
  app.add_option("-p,--parallel_init", raw.parallel_init,
                 "0 or 1; with one GPU per process (-t 1 -g 1) both initialise the same way");
  app.add_option("-y,--stream_null", raw.stream_null, "0 only: ccscope always uses its own stream");
  app.add_option("-R,--local_register", raw.local_register,
                 "0 only: buffer registration (1 local, 2 symmetric) is not supported");
  app.add_option("-S,--report_timestamps", raw.timestamps,
                 "0 only: no timestamp column (--csv/--json records carry the run's times)");
  app.add_option("-M,--memory", raw.memory, "0 only: no memory usage report");
  app.add_option("-u,--unalign", raw.unalign, "0 only: buffers are never misaligned");
  app.add_option("-I,--per_iter_timing", raw.per_iter_timing,
                 "0 only: --csv/--json records carry p50/p99 over iterations instead");
  app.add_option("-K,--per_iter_skip", raw.per_iter_skip, "0 only (needs -I 1)");
  app.add_option("-x,--cta_policy", raw.cta_policy, "not supported: NCCL's CTA policy is not set");
  app.add_option("-D,--device_implementation", raw.device_impl,
                 "0 only: NCCL's own implementation (device kernels need -R 2)");
  app.add_option("-V,--device_cta_count", raw.device_cta_count,
                 "16 only (the CTA count of -D's device implementation)");
  app.add_option(
      "--backend", raw.backend,
      "mpi, nccl, gloo (gloo's CPU collectives over TCP), or ring (ccscope's reference ring "
      "algorithms over MPI point-to-point); "
      "default: nccl when NCCL is built in and every rank has a GPU of its own (or "
      "--isolate-ranks), else mpi");
  app.add_flag("--yielding-waits", raw.yielding_waits,
               "mpi: wait in the nonblocking call, yielding the core between tests (ccscope "
               "train's waits) instead of spinning; the default when a host's ranks outnumber "
               "its CPUs (or CCSCOPE_YIELD_WHEN_IDLE=1)");
  app.add_flag("--busy-poll", raw.busy_poll,
               "mpi: MPI's blocking calls (they spin), also when ranks outnumber the CPUs");
  app.add_flag("--isolate-ranks", raw.isolate_ranks,
               "give every rank its own NCCL_HOSTID: ranks of one node talk through NCCL's network "
               "transport");
  add_output_option(app, "--csv", raw.csv,
                    "write one CSV row per (size, in-place) as it completes");
  add_output_option(app, "--json", raw.json, "write a JSON document, rewritten after every size");
  app.add_flag("--no-rotate", raw.no_rotate,
               "every timed iteration uses the same buffer offset (default: iteration k uses "
               "offset size x (k mod (buffer / size)), as nccl-tests)");
  app.add_flag("--no-progress", raw.no_progress, "no progress line on stderr");
  app.add_option("--test-corrupt-rank", raw.corrupt_rank,
                 "TESTING ONLY: corrupt one output element on this rank to prove the check fails");
  app.add_option("--test-shift-block", raw.shift_block_rank,
                 "TESTING ONLY: shift this rank's first output block by one element to prove "
                 "the check sees misplaced data");
  app.add_flag("--test-stale-output", raw.stale_output,
               "TESTING ONLY: the checks read the previous run's output, to prove they fail");
  // Sizes and bus factors from the collectives' descriptions (records/collective.h).
  std::string conventions = "Sizes (nccl-tests' conventions):\n";
  std::string factors = "Bandwidth: algbw = size / time; busbw = algbw x factor, n = ranks:\n";
  for (const auto& d : all_collectives()) {
    conventions += "  " + std::string(d.name) + ": " + std::string(d.size_convention) + "\n";
    factors += "  " + std::string(d.name) + " " + std::string(d.busbw_rule) + "\n";
  }
  app.footer(
      conventions + factors + "  GB/s = 1e9 bytes/s.\n" +
      "Time: as nccl-tests, each rank's host wall clock over the -n iterations issued back to\n"
      "  back plus one wait, per operation (x -m, x -G), then across ranks per -a: by default\n"
      "  the MAXIMUM over ranks (the slowest rank). p50/p99 come from a second, stamped pass.\n"
      "Buffers: send and receive are -e bytes each; timed iteration k of a size starts at\n"
      "  offset size x (k mod (-e / size)) (nccl-tests' rotation; --no-rotate: always 0).\n"
      "Checks: -c N runs N checks per size on inputs of their own seed; each stops the size at\n"
      "  the first that fails. Floating-point avg over NCCL on a rank count that is not a\n"
      "  power of two is allowed 2 ulps; everything else must match bit for bit.\n"
      "Invoked as all_reduce_perf, all_gather_perf, reduce_scatter_perf, broadcast_perf,\n"
      "  alltoall_perf or sendrecv_perf, ccscope runs `ccscope bench <that collective>`.\n"
      "Exit codes: 0 ok, 1 wrong results, 2 bad arguments, 3 timeout.");
}

[[noreturn]] void bad(const std::string& what) { throw UsageError(what); }

size_t size_argument(const std::string& flag, const std::string& text) {
  auto value = parse_size(text);
  if (!value)
    bad(flag + " '" + text +
        "' is not a size: use a positive number with an optional K, M, G suffix (e.g. 64M)");
  if (*value == 0) bad(flag + " must be greater than 0 bytes");
  return *value;
}

// A whole decimal number within [min_value, max_value], else UsageError.
long long integer_argument(const std::string& flag, const std::string& text, long long min_value,
                           long long max_value) {
  long long value = 0;
  const char* begin = text.data() + (text.size() > 1 && text[0] == '+' ? 1 : 0);
  const char* end = text.data() + text.size();
  auto [used, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc() && used == end && value >= min_value && value <= max_value) return value;
  if ((ec == std::errc() || ec == std::errc::result_out_of_range) && used == end)
    bad(flag + " " + text + " is out of range: use " + std::to_string(min_value) + " to " +
        std::to_string(max_value));
  bad(flag + " '" + text + "' is not a whole number (e.g. " + std::to_string(min_value) + ")");
}

// A flag taking one of a few values (nccl-tests' 0/1 switches): its index in
// `allowed` (so "0" -> 0 when allowed starts with "0"), else UsageError with `advice`.
int switch_argument(const std::string& flag, const std::string& text,
                    const std::vector<std::string>& allowed, const std::string& advice) {
  for (size_t k = 0; k < allowed.size(); ++k)
    if (text == allowed[k]) return static_cast<int>(k);
  bad(flag + " " + (text.empty() ? std::string("''") : text) + ": " + advice);
}

// -T/--timeout: seconds, fractions allowed; 0 = none.
double timeout_argument(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [used, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || used != end || !std::isfinite(value) || value < 0 || value > 1e6)
    bad("-T/--timeout '" + text +
        "' is not a number of seconds from 0 to 1000000: use e.g. 300 (0 = no timeout)");
  return value;
}

}  // namespace

std::string bench_flags_help() {
  CLI::App app("ccscope bench", "ccscope bench");
  RawArguments raw;
  build_app(app, raw);
  return app.help();
}

// A positive number of at most `most` (fractions allowed), else UsageError.
double positive_number_argument(const std::string& flag, const std::string& text, double most,
                                const std::string& example) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [used, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || used != end || !std::isfinite(value) || value <= 0 || value > most)
    bad(flag + " '" + text + "' is not a number above 0 and at most " +
        std::to_string(static_cast<long long>(most)) + ": use e.g. " + example);
  return value;
}

ParsedBenchFlags parse_bench_flags(const std::vector<std::string>& args) {
  return parse_bench_flags(args, BenchInvocation{});
}

ParsedBenchFlags parse_bench_flags(const std::vector<std::string>& args,
                                   const BenchInvocation& invocation) {
  CLI::App app("ccscope bench", "ccscope bench");
  RawArguments raw;
  build_app(app, raw);
  ParsedBenchFlags parsed;
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    parsed.help_text = app.help();
    return parsed;
  } catch (const CLI::ParseError& error) {
    bad(std::string(error.what()) + " (see ccscope bench --help)");
  }
  // Sizes may start with '-' only if negative: CLI11 would take them as flags,
  // so a negative size reaches us as a string here.
  BenchOptions options;
  // No collective: all-reduce, the one every bring-up runs first (nccl-tests'
  // all_reduce_perf), and a note says so.
  if (raw.collective.empty()) {
    raw.collective = "allreduce";
    options.notes.push_back("no collective given: allreduce (ccscope bench <" +
                            collective_choices() + "> picks another)");
  }
  options.collectives.clear();
  for (const std::string& word : split(raw.collective, ',')) {
    auto collective = parse_collective(word);
    if (!collective)
      bad("unknown collective '" + word + "': choose one of " + collective_choices());
    options.collectives.push_back(*collective);
  }
  options.collective = options.collectives.front();
  options.min_bytes = size_argument("-b/--minbytes", raw.min_bytes);
  options.max_bytes = size_argument("-e/--maxbytes", raw.max_bytes);
  options.step_bytes = size_argument("-i/--stepbytes", raw.step_bytes);
  if (options.min_bytes > options.max_bytes)
    bad("-b/--minbytes (" + raw.min_bytes + ") is larger than -e/--maxbytes (" + raw.max_bytes +
        "): swap them");
  // nccl-tests' -f is an integer factor; beyond 2^32 no second size fits in size_t anyway.
  options.step_factor =
      static_cast<size_t>(integer_argument("-f/--stepfactor", raw.step_factor, 1, 1LL << 32));
  // Every iteration's time is kept (8 bytes each, reduced over ranks) for p50/p99.
  options.iterations =
      static_cast<int>(integer_argument("-n/--iters", raw.iterations, 1, 10000000));
  options.aggregate_iterations =
      static_cast<int>(integer_argument("-m/--agg_iters", raw.aggregate, 1, 1000000));
  if (static_cast<long long>(options.iterations) * options.aggregate_iterations > 100000000LL)
    bad("-n/--iters x -m/--agg_iters = " + std::to_string(options.iterations) + " x " +
        std::to_string(options.aggregate_iterations) +
        " operations per size is more than 100000000: lower -n or -m");
  options.warmup_iterations =
      static_cast<int>(integer_argument("-w/--warmup_iters", raw.warmup, 0, 10000000));
  options.check_iterations = static_cast<int>(integer_argument("-c/--check", raw.check, 0, 1000));
  if (raw.datatype == "all") {
    options.types = all_data_types();
    options.types_are_all = true;
  } else {
    auto type = parse_data_type(raw.datatype);
    if (!type)
      bad("unknown data type '" + raw.datatype + "': choose one of " + data_type_choices() +
          ", or all");
    options.types = {*type};
  }
  options.type = options.types.front();
  if (raw.op == "all") {
    options.ops = all_reduce_ops();
  } else {
    auto op = parse_reduce_op(raw.op);
    if (!op)
      bad("unknown reduction op '" + raw.op + "': choose one of " + reduce_op_choices() +
          ", or all");
    options.ops = {*op};
  }
  options.op = options.ops.front();
  options.root = static_cast<int>(integer_argument("-r/--root", raw.root, -1, 1 << 30));
  if (raw.average != "0" && raw.average != "1" && raw.average != "2" && raw.average != "3")
    bad("-a/--average must be 0 (rank 0), 1 (average), 2 (minimum) or 3 (maximum); got '" +
        raw.average + "'");
  options.time_across_ranks = static_cast<TimeAcrossRanks>(raw.average[0] - '0');
  options.blocking =
      switch_argument("-z/--blocking", raw.blocking, {"0", "1"},
                      "use 0 (issue without waiting) or 1 (wait for each "
                      "operation); nccl-tests' -z 2 and -z 3 are not supported") == 1;
  options.report_cputime =
      switch_argument("-C/--report_cputime", raw.cputime, {"0", "1"},
                      "use 0 (time to complete) or 1 (host time to issue)") == 1;
  options.graph_launches =
      static_cast<int>(integer_argument("-G/--cudagraph", raw.graph, 0, 1000000));
  // Adaptive sampling or nccl-tests' fixed count: see docs/bench.md, "Iterations".
  const bool iterations_given = app.get_option("--iters")->count() > 0;
  if (!raw.target_ci.empty()) {
    options.target_ci_percent =
        positive_number_argument("--target-ci", raw.target_ci, 50, "2 (percent)");
    if (iterations_given)
      bad("--target-ci and -n/--iters: give one (--target-ci samples each size until its "
          "interval is narrow enough; -n times a fixed count)");
    if (options.report_cputime)
      bad("--target-ci with -C 1: the issue time is nccl-tests' fixed-count figure; drop one");
    if (options.graph_launches > 0)
      bad("--target-ci with -G: a graph replays a fixed -n; drop one");
  } else if (!iterations_given && !invocation.as_nccl_tests_program && !options.report_cputime &&
             options.graph_launches == 0) {
    options.target_ci_percent = kDefaultTargetCiPercent;
  }
  options.max_seconds_per_size = positive_number_argument(
      "--max-seconds-per-size", raw.max_seconds_per_size, 86400, "3 (seconds)");
  if (!raw.backend.empty() && job::find_backend(raw.backend) == nullptr) {
    std::string names;
    for (const job::Backend& b : job::registered_backends())
      names += (names.empty() ? "" : ", ") + b.name;
    bad("unknown --backend '" + raw.backend + "': choose " + names);
  }
  options.backend = raw.backend;
  if (options.graph_launches > 0 && !options.backend.empty())
    validate_for_backend(options, options.backend);
  options.isolate_ranks = raw.isolate_ranks;
  if (raw.yielding_waits && raw.busy_poll) bad("--yielding-waits and --busy-poll: give one");
  if (raw.yielding_waits || raw.busy_poll) options.yielding_waits = raw.yielding_waits;
  if (options.yielding_waits.value_or(false) && !options.backend.empty())
    validate_for_backend(options, options.backend);
  options.timeout_seconds = timeout_argument(raw.timeout);
  if (options.timeout_seconds == 0)
    options.warnings.push_back(
        "-T/--timeout 0: no timeout, a hung operation waits forever (a rank that dies is still "
        "named)");
  options.repeats = static_cast<int>(integer_argument("-N/--repeat", raw.repeats, 0, 10000));
  if (options.repeats == 0)
    options.notes.push_back("-N/--repeat 0: the sweep repeats until stopped (Ctrl-C or SIGTERM)");

  // -t and -g: ranks per process, each a thread of it (nccl-tests' threads x GPUs
  // per thread: the same ranks and rows; each GPU is driven by its own thread).
  const long long threads = integer_argument("-t/--nthreads", raw.threads, 1, 1024);
  const long long gpus = integer_argument("-g/--ngpus", raw.gpus, 1, 1024);
  if (threads * gpus > 1024) bad("-t x -g: at most 1024 ranks per process");
  options.ranks_per_process = static_cast<int>(threads * gpus);
  options.threads_per_process = static_cast<int>(threads);
  switch_argument("-p/--parallel_init", raw.parallel_init, {"0", "1"}, "use 0 or 1");
  switch_argument("-y/--stream_null", raw.stream_null, {"0"},
                  "ccscope cannot issue on the NULL stream; leave -y at 0");
  switch_argument("-R/--local_register", raw.local_register, {"0"},
                  "buffer registration (1 local, 2 symmetric) is not supported by ccscope's "
                  "NCCL backend; leave -R at 0");
  switch_argument("-S/--report_timestamps", raw.timestamps, {"0"},
                  "ccscope prints no timestamp column; --csv/--json records carry the run's "
                  "start and end times");
  switch_argument("-M/--memory", raw.memory, {"0"},
                  "ccscope has no memory usage report; leave -M at 0");
  switch_argument("-u/--unalign", raw.unalign, {"0"},
                  "ccscope does not misalign buffers; leave -u at 0");
  switch_argument("-I/--per_iter_timing", raw.per_iter_timing, {"0"},
                  "ccscope has no per-iteration columns; --csv/--json records carry p50/p99 "
                  "over iterations");
  switch_argument("-K/--per_iter_skip", raw.per_iter_skip, {"0"},
                  "it needs -I 1, which ccscope does not support; leave -K at 0");
  if (!raw.cta_policy.empty())
    bad("-x/--cta_policy " + raw.cta_policy +
        ": ccscope's NCCL backend does not set NCCL's CTA policy; drop -x");
  switch_argument("-D/--device_implementation", raw.device_impl, {"0"},
                  "ccscope runs NCCL's own implementation only; leave -D at 0");
  switch_argument("-V/--device_cta_count", raw.device_cta_count, {"16"},
                  "it sets the CTA count of -D's device implementation, which ccscope does not "
                  "have; drop -V");

  if (!raw.output_file.empty()) {
    const std::string& file = raw.output_file;
    const size_t dot = file.rfind('.');
    const size_t slash = file.rfind('/');
    std::string extension = dot == std::string::npos || (slash != std::string::npos && dot < slash)
                                ? ""
                                : file.substr(dot);
    std::transform(extension.begin(), extension.end(), extension.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (extension != ".json")
      bad("-J/--output_file '" + file +
          "': only a .json file is supported (as nccl-tests); use --csv FILE for CSV");
    if (!raw.json.empty() && raw.json != file)
      bad("-J/--output_file '" + file + "' and --json '" + raw.json +
          "' name two JSON files: give one");
    raw.json = file;
  }
  options.csv_path = raw.csv;
  options.json_path = raw.json;
  options.progress = !raw.no_progress;
  options.rotate_buffers = !raw.no_rotate;
  options.stale_output = raw.stale_output;
  options.corrupt_rank =
      static_cast<int>(integer_argument("--test-corrupt-rank", raw.corrupt_rank, -1, 1 << 30));
  options.shift_block_rank =
      static_cast<int>(integer_argument("--test-shift-block", raw.shift_block_rank, -1, 1 << 30));
  const bool several_ops = options.ops.size() > 1 || options.op != ReduceOp::kSum;
  for (Collective c : options.collectives)
    if (!describe(c).reduces && several_ops)
      options.notes.push_back(std::string(name(c)) + " does not reduce: -o " + raw.op +
                              " is ignored for it (run once per type)");
  parsed.options = options;
  return parsed;
}

void apply_nccl_tests_environment(BenchOptions& options,
                                  const std::function<const char*(const char*)>& get) {
  if (const char* text = get("NCCL_TESTS_MIN_BW")) {
    double value = 0;
    const std::string s(trimmed(text));
    auto [used, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc() || used != s.data() + s.size() || !std::isfinite(value) ||
        value < 0)
      bad("NCCL_TESTS_MIN_BW='" + std::string(text) +
          "' is not a bus bandwidth in GB/s: give a number such as 150, or unset it");
    options.min_avg_busbw_GBps = value;
  }
  // A whole number (decimal, or hexadecimal after 0x) after the operator.
  const auto number = [](const std::string& variable, const std::string& text,
                         const std::string& digits, int base) {
    long long value = 0;
    std::string d(trimmed(digits));
    if (base == 16 && (d.starts_with("0x") || d.starts_with("0X"))) d = d.substr(2);
    auto [used, ec] = std::from_chars(d.data(), d.data() + d.size(), value, base);
    if (d.empty() || ec != std::errc() || used != d.data() + d.size() || value < 0)
      bad(variable + "='" + text + "' is not a split nccl-tests reads: give " +
          (base == 16 ? "a hexadecimal mask such as 0x1"
                      : "AND, OR, MOD or DIV (or &, |, %, /) and a number, e.g. MOD2") +
          ", or unset it");
    return value;
  };
  if (const char* mask = get("NCCL_TESTS_SPLIT_MASK")) {
    options.split = {SplitOp::kAnd, number("NCCL_TESTS_SPLIT_MASK", mask, mask, 16)};
  } else if (const char* rule = get("NCCL_TESTS_SPLIT")) {
    const std::string text(trimmed(rule));
    static const std::vector<std::pair<std::string, SplitOp>> kOperators = {
        {"and", SplitOp::kAnd}, {"&", SplitOp::kAnd}, {"or", SplitOp::kOr},   {"|", SplitOp::kOr},
        {"mod", SplitOp::kMod}, {"%", SplitOp::kMod}, {"div", SplitOp::kDiv}, {"/", SplitOp::kDiv}};
    bool known = false;
    for (const auto& [word, op] : kOperators)
      if (ascii_lower(text.substr(0, word.size())) == word) {
        options.split = {op, number("NCCL_TESTS_SPLIT", rule, text.substr(word.size()), 10)};
        known = true;
        break;
      }
    if (!known) number("NCCL_TESTS_SPLIT", rule, "", 10);  // says what it takes
    if ((options.split.op == SplitOp::kMod || options.split.op == SplitOp::kDiv) &&
        options.split.value == 0)
      bad("NCCL_TESTS_SPLIT='" + std::string(rule) +
          "' divides by 0: give MOD or DIV a number above 0");
  }
  if (const char* device = get("NCCL_TESTS_DEVICE"))
    bad("NCCL_TESTS_DEVICE=" + std::string(device) +
        " is not supported: ccscope gives local rank r the r-th visible GPU; select GPUs with "
        "CUDA_VISIBLE_DEVICES instead, or unset it");
}

}  // namespace ccscope::app
