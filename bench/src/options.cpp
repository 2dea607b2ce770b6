#include "options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>

#include "ccscope/collectives/error.h"
#include "sizes.h"

namespace ccscope::bench {
namespace {

struct RawArguments {
  std::string collective;
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  // Integers are taken as text and parsed strictly (integer_argument): CLI11
  // alone accepted values beyond long long's range.
  std::string step_factor = "1";
  std::string iterations = "20", warmup = "5", check = "1", root = "0", average = "3";
  std::string datatype = "float", op = "sum", backend;
  bool isolate_ranks = false, no_progress = false;
  double timeout = 300;
  std::string csv, json;
  std::string corrupt_rank = "-1";
  std::string repeats = "1";
};

void build_app(CLI::App& app, RawArguments& raw) {
  app.description(
      "Measure a collective over a sweep of message sizes, check every result, and report "
      "algbw/busbw as nccl-tests does.\nLaunch with mpiexec/mpirun/srun; one rank per GPU "
      "for NCCL.");
  app.add_option("collective", raw.collective,
                 "allreduce | allgather | reducescatter | broadcast | alltoall | sendrecv; "
                 "several separated by commas are run one after the other");
  app.add_option("-b,--minbytes", raw.min_bytes, "smallest size, e.g. 8, 1K, 64M (default 32M)");
  app.add_option("-e,--maxbytes", raw.max_bytes, "largest size (default 32M)");
  app.add_option("-i,--stepbytes", raw.step_bytes,
                 "increment between sizes when -f is 1 (default 1M)");
  app.add_option("-f,--stepfactor", raw.step_factor,
                 "multiply sizes by this factor (default 1: add -i)");
  app.add_option("-n,--iters", raw.iterations, "timed iterations per size (default 20)");
  app.add_option("-w,--warmup_iters", raw.warmup,
                 "untimed warm-up iterations per size (default 5)");
  app.add_option("-c,--check", raw.check,
                 "check every element of every result: 1 or 0 (default 1)");
  app.add_option("-d,--datatype", raw.datatype,
                 "float (default), double, half, bfloat16, int32, int8, uint8");
  app.add_option("-o,--op", raw.op, "sum (default), prod, min, max, avg");
  app.add_option("-r,--root", raw.root, "root rank of broadcast (default 0)");
  app.add_option("-a,--average", raw.average,
                 "reported time across ranks: 0 rank 0, 1 average, 2 minimum, 3 maximum "
                 "(default 3, the slowest rank; nccl-tests defaults to 1)");
  app.add_option(
      "--backend", raw.backend,
      "mpi, nccl, or ring (ccscope's reference ring algorithms over MPI point-to-point); "
      "default: nccl when NCCL is built in and every rank has a GPU of its own (or "
      "--isolate-ranks), else mpi");
  app.add_flag("--isolate-ranks", raw.isolate_ranks,
               "give every rank its own NCCL_HOSTID: ranks of one node talk through NCCL's network "
               "transport");
  app.add_option("--timeout", raw.timeout,
                 "seconds an operation may make no progress before the run stops and names the "
                 "ranks that did not finish (default 300)");
  app.add_option("--csv", raw.csv, "write one CSV row per (size, in-place) as it completes");
  app.add_option("--json", raw.json, "write a JSON document, rewritten after every size");
  app.add_option("--repeat", raw.repeats,
                 "run the whole sweep K times (default 1); records carry the repeat index, so "
                 "`ccscope compare` has repeated samples to judge noise");
  app.add_flag("--no-progress", raw.no_progress, "no progress line on stderr");
  app.add_option("--test-corrupt-rank", raw.corrupt_rank,
                 "TESTING ONLY: corrupt one output element on this rank to prove the check fails");
  app.footer(
      "Sizes (nccl-tests' conventions):\n"
      "  allreduce, broadcast, sendrecv: size = the bytes of one rank's buffer\n"
      "  allgather:      size = the full OUTPUT (ranks x block), rounded down to 4 x ranks "
      "elements\n"
      "  reducescatter:  size = the full INPUT (ranks x block), rounded down to 4 x ranks "
      "elements\n"
      "  alltoall:       size = one rank's whole send buffer, rounded down to a multiple of ranks "
      "elements\n"
      "Bandwidth: algbw = size / time; busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n (allgather,\n"
      "  reducescatter, alltoall), 1 (broadcast, sendrecv). GB/s = 1e9 bytes/s.\n"
      "Time: mean over the -n iterations on each rank, then across ranks per -a.\n"
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

}  // namespace

std::string bench_help_text() {
  CLI::App app("ccscope bench", "ccscope bench");
  RawArguments raw;
  build_app(app, raw);
  return app.help();
}

ParsedBenchArguments parse_bench_arguments(const std::vector<std::string>& args) {
  CLI::App app("ccscope bench", "ccscope bench");
  RawArguments raw;
  build_app(app, raw);
  ParsedBenchArguments parsed;
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
  if (raw.collective.empty())
    bad("missing collective: ccscope bench <" + collective_choices() + "> [options]");
  options.collectives.clear();
  for (size_t start = 0; start <= raw.collective.size();) {
    const size_t comma = std::min(raw.collective.find(',', start), raw.collective.size());
    const std::string word = raw.collective.substr(start, comma - start);
    auto collective = parse_collective(word);
    if (!collective)
      bad("unknown collective '" + word + "': choose one of " + collective_choices());
    options.collectives.push_back(*collective);
    start = comma + 1;
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
  options.warmup_iterations =
      static_cast<int>(integer_argument("-w/--warmup_iters", raw.warmup, 0, 10000000));
  options.check_iterations =
      static_cast<int>(integer_argument("-c/--check", raw.check, 0, 1000));
  auto type = parse_data_type(raw.datatype);
  if (!type) bad("unknown data type '" + raw.datatype + "': choose one of " + data_type_choices());
  options.type = *type;
  options.types = {*type};
  auto op = parse_reduce_op(raw.op);
  if (!op) bad("unknown reduction op '" + raw.op + "': choose one of " + reduce_op_choices());
  options.op = *op;
  options.ops = {*op};
  options.root = static_cast<int>(integer_argument("-r/--root", raw.root, 0, 1 << 30));
  if (raw.average != "0" && raw.average != "1" && raw.average != "2" && raw.average != "3")
    bad("-a/--average must be 0 (rank 0), 1 (average), 2 (minimum) or 3 (maximum); got '" +
        raw.average + "'");
  options.time_across_ranks = static_cast<TimeAcrossRanks>(raw.average[0] - '0');
  if (!raw.backend.empty() && raw.backend != "mpi" && raw.backend != "nccl" &&
      raw.backend != "ring")
    bad("unknown --backend '" + raw.backend + "': choose mpi, nccl or ring");
  options.backend = raw.backend;
  options.isolate_ranks = raw.isolate_ranks;
  if (!(raw.timeout > 0) || raw.timeout > 1e6)
    bad("--timeout must be a positive number of seconds (got " + std::to_string(raw.timeout) + ")");
  options.timeout_seconds = raw.timeout;
  options.repeats = static_cast<int>(integer_argument("--repeat", raw.repeats, 1, 10000));
  options.csv_path = raw.csv;
  options.json_path = raw.json;
  options.progress = !raw.no_progress;
  options.corrupt_rank =
      static_cast<int>(integer_argument("--test-corrupt-rank", raw.corrupt_rank, -1, 1 << 30));
  for (Collective c : options.collectives)
    if (!has_reduction(c) && options.op != ReduceOp::kSum)
      options.notes.push_back(std::string(name(c)) + " does not reduce: -o " + raw.op +
                              " is ignored");
  parsed.options = options;
  return parsed;
}

void validate_for_ranks(const BenchOptions& options, int ranks) {
  const bool rooted = std::any_of(options.collectives.begin(), options.collectives.end(), has_root);
  if (rooted && options.root >= ranks)
    bad("-r/--root " + std::to_string(options.root) + " is out of range: this job has " +
        std::to_string(ranks) + " rank(s), so the root must be 0.." + std::to_string(ranks - 1));
  if (options.corrupt_rank >= ranks)
    bad("--test-corrupt-rank " + std::to_string(options.corrupt_rank) + " is out of range for " +
        std::to_string(ranks) + " rank(s)");
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
