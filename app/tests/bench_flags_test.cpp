// `ccscope bench` flags (app/src/bench_flags.cpp) into BenchOptions.
#include "ccscope/app/bench_flags.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ccscope/collectives/error.h"

namespace ccscope::app {
namespace {

using namespace ccscope::bench;

BenchOptions parse(std::vector<std::string> args) {
  auto parsed = parse_bench_flags(args);
  EXPECT_TRUE(parsed.options.has_value());
  return parsed.options.value_or(BenchOptions{});
}

std::string usage_error(std::vector<std::string> args) {
  try {
    parse_bench_flags(args);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

TEST(Options, NcclTestsDefaults) {
  const BenchOptions o = parse({"allreduce"});
  EXPECT_EQ(o.collective, Collective::kAllReduce);
  EXPECT_EQ(o.min_bytes, 32u << 20);
  EXPECT_EQ(o.max_bytes, 32u << 20);
  EXPECT_EQ(o.step_bytes, 1u << 20);
  EXPECT_EQ(o.step_factor, 1u);
  EXPECT_EQ(o.iterations, 20);
  EXPECT_EQ(o.warmup_iterations, 5);
  EXPECT_EQ(o.check_iterations, 1);
  EXPECT_EQ(o.type, DataType::kFloat32);
  EXPECT_EQ(o.op, ReduceOp::kSum);
  EXPECT_EQ(o.root, 0);
  EXPECT_EQ(o.time_across_ranks, TimeAcrossRanks::kMaximum);
}

// No flags at all: an all-reduce, with a note saying so (defaults run anywhere).
TEST(Options, NoCollectiveIsAnAllReduceAndSaysSo) {
  const BenchOptions o = parse({});
  ASSERT_EQ(o.collectives.size(), 1u);
  EXPECT_EQ(o.collective, Collective::kAllReduce);
  ASSERT_EQ(o.notes.size(), 1u);
  EXPECT_NE(o.notes[0].find("no collective given: allreduce"), std::string::npos) << o.notes[0];
  EXPECT_TRUE(parse({"allgather"}).notes.empty());
}

// Iterations: adaptive sampling by default for `ccscope bench`; nccl-tests'
// fixed -n 20 with -n, -C 1, -G, or as all_reduce_perf & co.
TEST(Options, AdaptiveSamplingIsTheDefaultOfCcscopeBench) {
  const BenchOptions o = parse({"allreduce"});
  EXPECT_EQ(o.target_ci_percent, kDefaultTargetCiPercent);
  EXPECT_EQ(o.max_seconds_per_size, 3);
  const BenchOptions tight =
      parse({"allreduce", "--target-ci", "0.5", "--max-seconds-per-size", "10"});
  EXPECT_EQ(tight.target_ci_percent, 0.5);
  EXPECT_EQ(tight.max_seconds_per_size, 10);
  EXPECT_EQ(parse({"allreduce", "-w", "0"}).target_ci_percent, kDefaultTargetCiPercent);
}

TEST(Options, NcclTestsFlagsOrProgramNamesKeepTheFixedCount) {
  EXPECT_EQ(parse({"allreduce", "-n", "20"}).target_ci_percent, 0);
  EXPECT_EQ(parse({"allreduce", "--iters", "5"}).target_ci_percent, 0);
  EXPECT_EQ(parse({"allreduce", "-C", "1"}).target_ci_percent, 0);
  const auto as_program = parse_bench_flags({"allreduce"}, BenchInvocation{true});
  ASSERT_TRUE(as_program.options);
  EXPECT_EQ(as_program.options->target_ci_percent, 0);
  EXPECT_EQ(as_program.options->iterations, 20);
  // ... unless asked for.
  const auto asked = parse_bench_flags({"allreduce", "--target-ci", "3"}, BenchInvocation{true});
  EXPECT_EQ(asked.options->target_ci_percent, 3);
}

// nccl-tests' environment variables, through a fake environment.
BenchOptions with_environment(const std::map<std::string, std::string>& environment) {
  BenchOptions o;
  apply_nccl_tests_environment(o, [&](const char* name) -> const char* {
    auto it = environment.find(name);
    return it == environment.end() ? nullptr : it->second.c_str();
  });
  return o;
}

std::string environment_error(const std::map<std::string, std::string>& environment) {
  try {
    with_environment(environment);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

TEST(NcclTestsEnvironment, MinBwAndSplitAsNcclTestsReadsThem) {
  EXPECT_FALSE(with_environment({}).min_avg_busbw_GBps);
  EXPECT_EQ(with_environment({}).split.op, SplitOp::kNone);
  EXPECT_EQ(with_environment({{"NCCL_TESTS_MIN_BW", "150.5"}}).min_avg_busbw_GBps, 150.5);
  const auto split = [&](const std::string& rule, int rank) {
    return split_color(with_environment({{"NCCL_TESTS_SPLIT", rule}}).split, rank);
  };
  EXPECT_EQ(split("AND1", 7), 1);
  EXPECT_EQ(split("&6", 7), 6);
  EXPECT_EQ(split("or8", 3), 11);
  EXPECT_EQ(split("|1", 2), 3);
  EXPECT_EQ(split("MOD2", 5), 1);
  EXPECT_EQ(split("%4", 6), 2);
  EXPECT_EQ(split("DIV4", 5), 1);
  EXPECT_EQ(split("/2", 5), 2);
  // The mask is hexadecimal and wins over NCCL_TESTS_SPLIT.
  const BenchOptions masked =
      with_environment({{"NCCL_TESTS_SPLIT_MASK", "0x10"}, {"NCCL_TESTS_SPLIT", "MOD2"}});
  EXPECT_EQ(split_color(masked.split, 17), 16);
  EXPECT_EQ(split_color(masked.split, 15), 0);
  EXPECT_EQ(split_color(WorldSplit{}, 5), 0);
}

TEST(NcclTestsEnvironment, UnreadableValuesAndTheDeviceAreRefused) {
  EXPECT_NE(environment_error({{"NCCL_TESTS_MIN_BW", "fast"}}).find("NCCL_TESTS_MIN_BW='fast'"),
            std::string::npos);
  EXPECT_NE(environment_error({{"NCCL_TESTS_SPLIT", "XOR1"}}).find("NCCL_TESTS_SPLIT='XOR1'"),
            std::string::npos);
  EXPECT_NE(environment_error({{"NCCL_TESTS_SPLIT", "MOD0"}}).find("divides by 0"),
            std::string::npos);
  EXPECT_NE(environment_error({{"NCCL_TESTS_SPLIT_MASK", "zz"}}).find("hexadecimal"),
            std::string::npos);
  EXPECT_NE(environment_error({{"NCCL_TESTS_DEVICE", "2"}}).find("CUDA_VISIBLE_DEVICES"),
            std::string::npos);
}

TEST(Options, ShortAndLongFlags) {
  const BenchOptions o =
      parse({"allgather", "-b",   "8",     "-e",    "128M",   "-f",        "2",
             "-n",        "7",    "-w",    "0",     "-c",     "0",         "-d",
             "bfloat16",  "-o",   "max",   "-a",    "1",      "--backend", "mpi",
             "--timeout", "12.5", "--csv", "x.csv", "--json", "x.json",    "--isolate-ranks"});
  EXPECT_EQ(o.collective, Collective::kAllGather);
  EXPECT_EQ(o.min_bytes, 8u);
  EXPECT_EQ(o.max_bytes, 128u << 20);
  EXPECT_EQ(o.step_factor, 2u);
  EXPECT_EQ(o.iterations, 7);
  EXPECT_EQ(o.warmup_iterations, 0);
  EXPECT_EQ(o.check_iterations, 0);
  EXPECT_EQ(o.type, DataType::kBFloat16);
  EXPECT_EQ(o.op, ReduceOp::kMax);
  EXPECT_EQ(o.time_across_ranks, TimeAcrossRanks::kAverage);
  EXPECT_EQ(o.backend, "mpi");
  EXPECT_DOUBLE_EQ(o.timeout_seconds, 12.5);
  EXPECT_EQ(o.csv_path, "x.csv");
  EXPECT_TRUE(o.isolate_ranks);
  EXPECT_FALSE(o.yielding_waits.has_value());  // the job's wait policy decides
  EXPECT_EQ(parse({"allreduce", "--yielding-waits"}).yielding_waits, std::optional<bool>(true));
  EXPECT_EQ(parse({"allreduce", "--busy-poll"}).yielding_waits, std::optional<bool>(false));
  const BenchOptions l =
      parse({"broadcast", "--minbytes", "1K", "--maxbytes", "1M", "--stepfactor", "4", "--iters",
             "3", "--warmup_iters", "1", "--datatype", "int8", "--root", "2"});
  EXPECT_EQ(l.min_bytes, 1024u);
  EXPECT_EQ(l.root, 2);
  EXPECT_EQ(l.type, DataType::kInt8);
}

TEST(Options, SeveralCollectives) {
  const BenchOptions o = parse({"allreduce,allgather,reduce_scatter"});
  EXPECT_EQ(o.collectives, (std::vector<Collective>{Collective::kAllReduce, Collective::kAllGather,
                                                    Collective::kReduceScatter}));
  EXPECT_NE(usage_error({"allreduce,,allgather"}).find("unknown collective ''"), std::string::npos);
  EXPECT_NE(usage_error({"allreduce,gossip"}).find("unknown collective 'gossip'"),
            std::string::npos);
}

TEST(Options, HelpIsNotAnError) {
  auto parsed = parse_bench_flags({"--help"});
  EXPECT_FALSE(parsed.options);
  EXPECT_NE(parsed.help_text.find("--minbytes"), std::string::npos);
  EXPECT_NE(parsed.help_text.find("full OUTPUT"), std::string::npos);  // all-gather size convention
  EXPECT_NE(parsed.help_text.find("full INPUT"), std::string::npos);
}

TEST(Options, EveryBadInputIsOneClearLine) {
  struct Case {
    std::vector<std::string> args;
    std::string must_contain;
  };
  const std::vector<Case> cases{
      {{"allreduce", "-b", "1M", "-e", "1K"}, "larger than -e"},
      {{"allreduce", "--yielding-waits", "--backend", "nccl"}, "--yielding-waits is the mpi"},
      {{"allreduce", "--yielding-waits", "--backend", "ring"}, "--yielding-waits is the mpi"},
      {{"allreduce", "-b", "0"}, "greater than 0"},
      {{"allreduce", "-b", "-8"}, "-b"},
      {{"allreduce", "-e", "12Q"}, "not a size"},
      {{"allreduce", "-d", "float128"}, "unknown data type 'float128'"},
      {{"allreduce", "-o", "xor"}, "unknown reduction op 'xor'"},
      {{"gossip"}, "unknown collective 'gossip'"},
      {{"allreduce", "-n", "0"}, "-n/--iters"},
      {{"allreduce", "-n", "10000001"}, "use 1 to 10000000"},
      {{"allreduce", "-n", "1.5"}, "not a whole number"},
      {{"allreduce", "-n", "99999999999999999999"}, "out of range"},
      {{"allreduce", "-w", "-1"}, "-w/--warmup_iters"},
      {{"allreduce", "-c", "-1"}, "-c/--check"},
      {{"allreduce", "-c", "1001"}, "-c/--check"},
      {{"allreduce", "-a", "4"}, "-a/--average"},
      {{"allreduce", "-f", "0"}, "-f/--stepfactor"},
      // 2^70: used to be accepted
      {{"allreduce", "-f", "1180591620717411303424"},
       "-f/--stepfactor 1180591620717411303424 is out of range"},
      {{"allreduce", "-f", "2x"}, "-f/--stepfactor '2x' is not a whole number"},
      {{"allreduce", "--timeout", "nan"}, "--timeout"},
      {{"allreduce", "--repeat", "+"}, "--repeat"},
      {{"allreduce", "--backend", "glo"}, "unknown --backend 'glo'"},
      {{"allreduce", "--timeout", "-1"}, "-T/--timeout '-1'"},
      {{"allreduce", "-T", "5s"}, "-T/--timeout '5s'"},
      {{"allreduce", "--repeat", "-1"}, "--repeat"},
      {{"allreduce", "-N", "10001"}, "-N/--repeat 10001 is out of range"},
      {{"allreduce", "-m", "0"}, "-m/--agg_iters"},
      {{"allreduce", "-m", "x"}, "-m/--agg_iters 'x'"},
      {{"allreduce", "-n", "100000", "-m", "10000"}, "lower -n or -m"},
      {{"allreduce", "--target-ci", "2", "-n", "20"}, "--target-ci and -n/--iters: give one"},
      {{"allreduce", "--target-ci", "2", "-C", "1"}, "--target-ci with -C 1"},
      {{"allreduce", "--target-ci", "0"}, "--target-ci '0' is not a number above 0"},
      {{"allreduce", "--target-ci", "x"}, "--target-ci 'x'"},
      {{"allreduce", "--target-ci", "51"}, "at most 50"},
      {{"allreduce", "--max-seconds-per-size", "-1"}, "--max-seconds-per-size '-1'"},
      {{"allreduce", "-z", "2"}, "-z/--blocking 2"},
      {{"allreduce", "-z", "yes"}, "-z/--blocking yes"},
      {{"allreduce", "-C", "2"}, "-C/--report_cputime 2"},
      {{"allreduce", "-G", "-1"}, "-G/--cudagraph"},
      {{"allreduce", "-G", "1", "--backend", "mpi"}, "needs the nccl backend"},
      {{"allreduce", "-G", "2", "--backend", "ring"}, "needs the nccl backend"},
      {{"allreduce", "-t", "2000"}, "-t/--nthreads 2000 is out of range"},
      {{"allreduce", "-g", "64", "-t", "32"}, "at most 1024 ranks per process"},
      {{"allreduce", "-g", "0"}, "-g/--ngpus 0 is out of range"},
      {{"allreduce", "--nthreads", "0"}, "-t/--nthreads 0 is out of range"},
      {{"allreduce", "-p", "2"}, "-p/--parallel_init 2"},
      {{"allreduce", "-y", "1"}, "-y/--stream_null 1"},
      {{"allreduce", "-R", "1"}, "-R/--local_register 1"},
      {{"allreduce", "--local_register", "2"}, "not supported"},
      {{"allreduce", "-S", "1"}, "-S/--report_timestamps 1"},
      {{"allreduce", "-M", "1"}, "-M/--memory 1"},
      {{"allreduce", "-u", "1"}, "-u/--unalign 1"},
      {{"allreduce", "-I", "1"}, "-I/--per_iter_timing 1"},
      {{"allreduce", "-K", "3"}, "-K/--per_iter_skip 3"},
      {{"allreduce", "-x", "1"}, "-x/--cta_policy 1"},
      {{"allreduce", "-D", "1"}, "-D/--device_implementation 1"},
      {{"allreduce", "-V", "32"}, "-V/--device_cta_count 32"},
      {{"allreduce", "-J", "out.txt"}, "only a .json file"},
      {{"allreduce", "-J", "dir.json/out"}, "only a .json file"},
      {{"allreduce", "-J", "a.json", "--json", "b.json"}, "two JSON files"},
      {{"allreduce", "-d", "all2"}, "unknown data type 'all2'"},
      {{"allreduce", "-o", "any"}, "unknown reduction op 'any'"},
      {{"broadcast", "-r", "-2"}, "-r/--root"},
      {{"allreduce", "--test-shift-block", "-2"}, "--test-shift-block"},

      {{"allreduce", "--frobnicate"}, "frobnicate"},
  };
  for (const auto& c : cases) {
    const std::string message = usage_error(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_NE(message.find(c.must_contain), std::string::npos)
        << joined << "-> message: '" << message << "'";
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(Options, NcclTestsLongSpellings) {
  const BenchOptions o = parse({"allreduce", "--agg_iters",
                                "4",         "--run_cycles",
                                "3",         "--check",
                                "5",         "--blocking",
                                "1",         "--report_cputime",
                                "1",         "--cudagraph",
                                "0",         "--average",
                                "2",         "--nthreads",
                                "1",         "--ngpus",
                                "1",         "--parallel_init",
                                "1",         "--stream_null",
                                "0",         "--local_register",
                                "0",         "--report_timestamps",
                                "0",         "--memory",
                                "0",         "--unalign",
                                "0",         "--per_iter_timing",
                                "0",         "--per_iter_skip",
                                "0",         "--device_implementation",
                                "0",         "--device_cta_count",
                                "16",        "--output_file",
                                "r.JSON",    "--timeout",
                                "7"});
  EXPECT_EQ(o.aggregate_iterations, 4);
  EXPECT_EQ(o.repeats, 3);
  EXPECT_EQ(o.check_iterations, 5);
  EXPECT_TRUE(o.blocking);
  EXPECT_TRUE(o.report_cputime);
  EXPECT_EQ(o.graph_launches, 0);
  EXPECT_EQ(o.time_across_ranks, TimeAcrossRanks::kMinimum);
  EXPECT_EQ(o.json_path, "r.JSON");
  EXPECT_DOUBLE_EQ(o.timeout_seconds, 7);
  EXPECT_TRUE(o.warnings.empty());
}

TEST(Options, NewFlagDefaults) {
  const BenchOptions o = parse({"allreduce"});
  EXPECT_EQ(o.aggregate_iterations, 1);
  EXPECT_EQ(o.graph_launches, 0);
  EXPECT_FALSE(o.blocking);
  EXPECT_FALSE(o.report_cputime);
  EXPECT_TRUE(o.rotate_buffers);
  EXPECT_FALSE(o.stale_output);
  EXPECT_EQ(o.shift_block_rank, -1);
  EXPECT_EQ(o.corrupt_rank, -1);
  EXPECT_EQ(o.repeats, 1);
  EXPECT_EQ(o.types, std::vector<DataType>{DataType::kFloat32});
  EXPECT_EQ(o.ops, std::vector<ReduceOp>{ReduceOp::kSum});
  EXPECT_DOUBLE_EQ(o.timeout_seconds, 300);
  EXPECT_TRUE(o.warnings.empty());
  EXPECT_TRUE(o.notes.empty());
}

TEST(Options, ShortNcclTestsFlags) {
  const BenchOptions o = parse({"allreduce", "-m", "8", "-N", "2", "-c", "3",  "-z", "1",     "-C",
                                "1",         "-G", "5", "-t", "1", "-g", "1",  "-p", "0",     "-y",
                                "0",         "-R", "0", "-S", "0", "-M", "0",  "-u", "0",     "-I",
                                "0",         "-K", "0", "-D", "0", "-V", "16", "-J", "x.json"});
  EXPECT_EQ(o.aggregate_iterations, 8);
  EXPECT_EQ(o.repeats, 2);
  EXPECT_EQ(o.check_iterations, 3);
  EXPECT_TRUE(o.blocking);
  EXPECT_TRUE(o.report_cputime);
  EXPECT_EQ(o.graph_launches, 5);  // backend not chosen yet: judged by validate_for_backend
  EXPECT_EQ(o.json_path, "x.json");
  // getopt-style attached values
  const BenchOptions attached = parse({"allreduce", "-b8", "-e1K", "-m2", "--iters=3"});
  EXPECT_EQ(attached.min_bytes, 8u);
  EXPECT_EQ(attached.max_bytes, 1024u);
  EXPECT_EQ(attached.aggregate_iterations, 2);
  EXPECT_EQ(attached.iterations, 3);
}

TEST(Options, RepeatedFlagTakesTheLastValueAsGetopt) {
  const BenchOptions o = parse({"allreduce", "-n", "5", "--iters", "9", "-T", "60", "-T", "0"});
  EXPECT_EQ(o.iterations, 9);
  EXPECT_DOUBLE_EQ(o.timeout_seconds, 0);
}

TEST(Options, CheckIterationsCountAndZeroIsNoCheck) {
  EXPECT_EQ(parse({"allreduce", "-c", "0"}).check_iterations, 0);
  EXPECT_EQ(parse({"allreduce", "-c", "1"}).check_iterations, 1);
  EXPECT_EQ(parse({"allreduce", "-c", "10"}).check_iterations, 10);
}

TEST(Options, AllTypesAndOpsInNcclTestsOrder) {
  const BenchOptions o = parse({"allreduce", "-d", "all", "-o", "all"});
  EXPECT_EQ(o.types, all_data_types());
  EXPECT_EQ(o.ops, all_reduce_ops());
  EXPECT_EQ(o.type, DataType::kInt8);
  EXPECT_EQ(o.op, ReduceOp::kSum);
  std::vector<std::string> type_names, op_names;
  for (DataType t : o.types) type_names.emplace_back(name(t));
  for (ReduceOp r : o.ops) op_names.emplace_back(name(r));
  EXPECT_EQ(type_names,
            (std::vector<std::string>{"int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
                                      "float", "double", "bfloat16", "f8e4m3", "f8e5m2"}));
  EXPECT_EQ(op_names, (std::vector<std::string>{"sum", "prod", "max", "min", "avg", "mulsum"}));
  // Every nccl-tests name parses to the type it names.
  for (const std::string& n : type_names)
    EXPECT_EQ(std::string(name(parse({"allreduce", "-d", n}).type)), n);
  for (const std::string& n : op_names)
    EXPECT_EQ(std::string(name(parse({"allreduce", "-o", n}).op)), n);
  const BenchOptions moving = parse({"allgather", "-o", "all"});
  ASSERT_EQ(moving.notes.size(), 1u);
  EXPECT_NE(moving.notes[0].find("run once per type"), std::string::npos);
}

TEST(Options, RepeatZeroRunsUntilStopped) {
  const BenchOptions o = parse({"allreduce", "-N", "0"});
  EXPECT_EQ(o.repeats, 0);
  ASSERT_EQ(o.notes.size(), 1u);
  EXPECT_NE(o.notes[0].find("until stopped"), std::string::npos);
  EXPECT_EQ(parse({"allreduce", "--repeat", "4"}).repeats, 4);
}

TEST(Options, TimeoutZeroIsNoneWithOneWarning) {
  const BenchOptions o = parse({"allreduce", "-T", "0"});
  EXPECT_DOUBLE_EQ(o.timeout_seconds, 0);
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_NE(o.warnings[0].find("no timeout"), std::string::npos);
  EXPECT_EQ(o.warnings[0].find('\n'), std::string::npos);
  EXPECT_DOUBLE_EQ(parse({"allreduce", "-T", "2.5"}).timeout_seconds, 2.5);
}

TEST(Options, TestOnlyFlags) {
  const BenchOptions o =
      parse({"allgather", "--no-rotate", "--test-stale-output", "--test-shift-block", "1"});
  EXPECT_FALSE(o.rotate_buffers);
  EXPECT_TRUE(o.stale_output);
  EXPECT_EQ(o.shift_block_rank, 1);
  EXPECT_THROW(validate_for_ranks(o, 1), UsageError);  // rank 1 of 1
  EXPECT_NO_THROW(validate_for_ranks(o, 2));
  const std::string help = bench_flags_help();
  for (const char* flag : {"--test-shift-block", "--test-stale-output", "--test-corrupt-rank"}) {
    const size_t at = help.find(flag);
    ASSERT_NE(at, std::string::npos) << flag;
    EXPECT_NE(help.substr(at, 200).find("TESTING ONLY"), std::string::npos) << flag;
  }
}

TEST(Options, GraphLaunchesNeedNccl) {
  const BenchOptions o = parse({"allreduce", "-G", "3"});
  EXPECT_NO_THROW(validate_for_backend(o, "nccl"));
  EXPECT_THROW(validate_for_backend(o, "mpi"), UsageError);
  EXPECT_THROW(validate_for_backend(o, "ring"), UsageError);
  EXPECT_NO_THROW(validate_for_backend(parse({"allreduce"}), "mpi"));
  EXPECT_EQ(parse({"allreduce", "-G", "2", "--backend", "nccl"}).graph_launches, 2);
  // -t x -g ranks per process, as nccl-tests' threads and GPUs per thread.
  EXPECT_EQ(parse({"allreduce", "-g", "4"}).ranks_per_process, 4);
  EXPECT_EQ(parse({"allreduce", "-t", "2", "-g", "3"}).ranks_per_process, 6);
  EXPECT_EQ(parse({"allreduce"}).ranks_per_process, 1);
}

TEST(Options, HelpNamesTheTimeStatisticAndEveryNcclTestsFlag) {
  const std::string help = bench_flags_help();
  EXPECT_NE(help.find("MAXIMUM over ranks"), std::string::npos);
  for (const char* flag : {"--nthreads",
                           "--ngpus",
                           "--minbytes",
                           "--maxbytes",
                           "--stepbytes",
                           "--stepfactor",
                           "--iters",
                           "--agg_iters",
                           "--warmup_iters",
                           "--run_cycles",
                           "--parallel_init",
                           "--check",
                           "--op",
                           "--datatype",
                           "--root",
                           "--blocking",
                           "--stream_null",
                           "--timeout",
                           "--cudagraph",
                           "--report_cputime",
                           "--report_timestamps",
                           "--output_file",
                           "--average",
                           "--local_register",
                           "--cta_policy",
                           "--device_implementation",
                           "--device_cta_count",
                           "--memory",
                           "--unalign",
                           "--per_iter_timing",
                           "--per_iter_skip",
                           "--help"})
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
}

TEST(Options, RootMinusOneIsEveryRank) {
  const BenchOptions o = parse({"broadcast", "-r", "-1"});
  EXPECT_EQ(o.root, -1);
  EXPECT_NO_THROW(validate_for_ranks(o, 3));
}

TEST(Options, RootOutOfRangeNeedsTheRankCount) {
  EXPECT_NO_THROW(validate_for_ranks(parse({"allreduce", "-r", "4"}), 2));  // no root: ignored
  const BenchOptions o = parse({"broadcast", "-r", "4"});
  EXPECT_THROW(validate_for_ranks(o, 4), UsageError);
  EXPECT_NO_THROW(validate_for_ranks(o, 5));
}

TEST(Options, OpIgnoredForDataMovementIsNoted) {
  const BenchOptions o = parse({"allgather", "-o", "max"});
  ASSERT_EQ(o.notes.size(), 1u);
  EXPECT_NE(o.notes[0].find("ignored"), std::string::npos);
}

}  // namespace
}  // namespace ccscope::app
