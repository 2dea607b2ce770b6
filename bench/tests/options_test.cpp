#include "options.h"

#include <gtest/gtest.h>

#include "ccscope/collectives/error.h"

namespace ccscope::bench {
namespace {

BenchOptions parse(std::vector<std::string> args) {
  auto parsed = parse_bench_arguments(args);
  EXPECT_TRUE(parsed.options.has_value());
  return parsed.options.value_or(BenchOptions{});
}

std::string usage_error(std::vector<std::string> args) {
  try {
    parse_bench_arguments(args);
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
  auto parsed = parse_bench_arguments({"--help"});
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
      {{"allreduce", "-b", "0"}, "greater than 0"},
      {{"allreduce", "-b", "-8"}, "-b"},
      {{"allreduce", "-e", "12Q"}, "not a size"},
      {{"allreduce", "-d", "float128"}, "unknown data type 'float128'"},
      {{"allreduce", "-o", "xor"}, "unknown reduction op 'xor'"},
      {{"gossip"}, "unknown collective 'gossip'"},
      {{}, "missing collective"},
      {{"allreduce", "-n", "0"}, "-n/--iters"},
      {{"allreduce", "-n", "10000001"}, "use 1 to 10000000"},
      {{"allreduce", "-n", "1.5"}, "not a whole number"},
      {{"allreduce", "-n", "99999999999999999999"}, "out of range"},
      {{"allreduce", "-w", "-1"}, "-w/--warmup_iters"},
      {{"allreduce", "-c", "2"}, "-c/--check"},
      {{"allreduce", "-a", "4"}, "-a/--average"},
      {{"allreduce", "-f", "0"}, "-f/--stepfactor"},
      // 2^70: used to be accepted
      {{"allreduce", "-f", "1180591620717411303424"},
       "-f/--stepfactor 1180591620717411303424 is out of range"},
      {{"allreduce", "-f", "2x"}, "-f/--stepfactor '2x' is not a whole number"},
      {{"allreduce", "--timeout", "nan"}, "--timeout"},
      {{"allreduce", "--repeat", "+"}, "--repeat"},
      {{"broadcast", "-r", "-1"}, "-r/--root"},
      {{"allreduce", "--backend", "gloo"}, "--backend 'gloo'"},
      {{"allreduce", "--timeout", "0"}, "--timeout"},
      {{"allreduce", "--repeat", "0"}, "--repeat"},
      {{"allreduce", "--frobnicate"}, "frobnicate"},
  };
  for (const auto& c : cases) {
    const std::string message = usage_error(c.args);
    EXPECT_NE(message.find(c.must_contain), std::string::npos) << "message: '" << message << "'";
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
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
}  // namespace ccscope::bench
