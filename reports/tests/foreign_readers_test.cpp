// nccl-tests (text of every version since 2.0, -J JSON) and OSU (5.x-7.x)
// files as users have them, from reports/tests/inputs/ (one file per case,
// written from each version's printing code); and the seeded form of
// reports/fuzz's libFuzzer entry, mutating those files.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ccscope/reports/loaded_results.h"
#include "readers_fuzz_entry.h"

namespace ccscope::reports {
namespace {

namespace fs = std::filesystem;

std::string input(const std::string& name) {
  return std::string(CCSCOPE_READER_INPUTS) + "/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The InputError message of reading `name` under inputs/, or "" when it reads.
std::string error_of(const std::string& name) {
  try {
    read_results(input(name));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The same for text given here.
std::string text_error(const std::string& text) {
  try {
    parse_results("t.txt", text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// What a test says of one record; unset members are not checked, and a figure
// given as kAbsent must be std::nullopt.
constexpr double kAbsent = -1;
struct Row {
  std::string collective;
  size_t size = 0;
  std::optional<size_t> count;
  std::string dtype, op;
  std::optional<bool> in_place;
  std::optional<double> time_us, cpu_time_us, busbw;
  std::optional<int64_t> wrong;  // -1: absent
  std::optional<int> ranks;
  std::optional<int> root;  // -1: absent
};

void expect_figure(const std::optional<double>& got, std::optional<double> want, double scale,
                   const char* what, const std::string& source) {
  if (!want) return;
  if (*want == kAbsent) {
    EXPECT_FALSE(got.has_value()) << what << " of " << source;
  } else {
    ASSERT_TRUE(got.has_value()) << what << " of " << source;
    EXPECT_NEAR(*got, *want * scale, std::fabs(*want * scale) * 1e-12) << what << " of " << source;
  }
}

void expect_row(const LoadedRecord& r, const Row& e) {
  EXPECT_EQ(r.collective, e.collective) << r.source;
  EXPECT_EQ(r.size_bytes, e.size) << r.source;
  if (e.count) {
    EXPECT_EQ(r.count, e.count) << r.source;
  }
  EXPECT_EQ(r.dtype, e.dtype) << r.source;
  EXPECT_EQ(r.op, e.op) << r.source;
  if (e.in_place) {
    EXPECT_EQ(r.in_place, e.in_place) << r.source;
  }
  expect_figure(r.time_s, e.time_us, 1e-6, "time_s", r.source);
  expect_figure(r.cpu_time_s, e.cpu_time_us, 1e-6, "cpu_time_s", r.source);
  expect_figure(r.busbw_GBps, e.busbw, 1, "busbw", r.source);
  if (e.wrong) {
    if (*e.wrong < 0)
      EXPECT_FALSE(r.wrong.has_value()) << r.source;
    else
      EXPECT_EQ(r.wrong, e.wrong) << r.source;
  }
  if (e.ranks) {
    EXPECT_EQ(r.ranks, e.ranks) << r.source;
  }
  if (e.root) {
    if (*e.root < 0)
      EXPECT_FALSE(r.root.has_value()) << r.source;
    else
      EXPECT_EQ(r.root, e.root) << r.source;
  }
}

// Whether one of the run's notes holds `text`.
bool noted(const LoadedRun& run, const std::string& text) {
  return std::any_of(run.notes.begin(), run.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

std::string notes_of(const LoadedRun& run) {
  std::string out;
  for (const auto& n : run.notes) out += "\n  " + n;
  return out;
}

std::string line_of(const LoadedRecord& r) { return r.source.substr(r.source.rfind(':') + 1); }

// ------------------------------------------------------------------ nccl-tests text

TEST(NcclTestsText, V2_0AllReduceFromTheTableAlone) {
  LoadedRun run = read_results(input("nccl-tests/v2.0.0-all_reduce-4gpu.txt"));
  EXPECT_EQ(run.format, "nccl-tests-text");
  ASSERT_EQ(run.records.size(), 50u);  // 8 B .. 128 MiB, out-of-place and in-place
  expect_row(run.records[0],
             {"allreduce", 8, 2, "float", "sum", false, 5.00, kAbsent, 0.00, 0, 4, -1});
  expect_row(run.records[49], {"allreduce", 134217728, 33554432, "float", "sum", true, 8138.6,
                               kAbsent, 24.74, 0, 4, -1});
  // 2.0-2.9 print rank 0's time, 2.10- the average (-a 1).
  EXPECT_EQ(run.records[0].time_statistic, "rank0");
  EXPECT_FALSE(run.records[0].time_avg_s.has_value());
  EXPECT_EQ(run.records[0].nodes, 1);
  EXPECT_EQ(run.metadata.gpu_names.size(), 4u);
  EXPECT_EQ(run.metadata.gpu_names[3], "NVIDIA A100-SXM4-80GB");
  EXPECT_TRUE(noted(run, "collective allreduce (all_reduce_perf) read from its table"))
      << notes_of(run);
}

TEST(NcclTestsText, V2_0BroadcastHasARootColumnAndNoRedop) {
  LoadedRun run = read_results(input("nccl-tests/v2.0.0-broadcast-4gpu.txt"));
  ASSERT_EQ(run.records.size(), 46u);
  expect_row(run.records[0], {"broadcast", 8, 2, "float", "", false, 5.00, kAbsent, 0.00, 0, 4, 0});
  expect_row(run.records[44],
             {"broadcast", 33554432, 8388608, "float", "", false, 2018.3, kAbsent, 16.63, 0, 4, 0});
}

TEST(NcclTestsText, V2_9AllToAllPrintsAnEmptyRedop) {
  LoadedRun run = read_results(input("nccl-tests/v2.9.0-alltoall-8rank.txt"));
  ASSERT_EQ(run.records.size(), 40u);
  expect_row(run.records[0],
             {"alltoall", 128, 4, "float", "", false, 5.01, kAbsent, 0.02, 0, 8, -1});
  expect_row(run.records[39],
             {"alltoall", 67108864, 2097152, "float", "", true, 4749.6, kAbsent, 12.36, 0, 8, -1});
  EXPECT_EQ(run.records[0].nodes, 2);
  EXPECT_EQ(run.records[0].ranks_per_node, 4);
  EXPECT_EQ(run.records[0].time_statistic, "rank0");
}

TEST(NcclTestsText, V2_10ErrorColumnIsADeviationNotACount) {
  LoadedRun run = read_results(input("nccl-tests/v2.10.0-all_gather-8rank.txt"));
  ASSERT_EQ(run.records.size(), 40u);
  expect_row(run.records[0],
             {"allgather", 256, 8, "float", "", false, 5.02, kAbsent, 0.04, 0, 8, -1});
  EXPECT_EQ(run.records[0].time_statistic, "avg");  // 2.10: -a 1 by default
  // 1 MiB: out-of-place "0e+00" (no deviation), in-place "2e-01" (a deviation, not a count).
  const LoadedRecord& out = run.records[24];
  const LoadedRecord& in = run.records[25];
  ASSERT_EQ(out.size_bytes, 1048576u);
  EXPECT_EQ(out.wrong, 0);
  EXPECT_FALSE(in.wrong.has_value());
  EXPECT_TRUE(noted(run,
                    "1 'error' figures of nccl-tests before 2.13 are a nonzero largest "
                    "deviation"))
      << notes_of(run);
}

TEST(NcclTestsText, V2_11UnderMpirunTagOutputWithItsCommandLine) {
  LoadedRun run = read_results(input("nccl-tests/v2.11.0-reduce_scatter-tag-output.txt"));
  ASSERT_EQ(run.records.size(), 42u);
  expect_row(run.records[0],
             {"reducescatter", 16, 2, "float", "sum", false, 5.00, kAbsent, 0.00, 0, 2, -1});
  expect_row(run.records[40], {"reducescatter", 16777216, 2097152, "float", "sum", false, 927.7,
                               kAbsent, 9.04, 0, 2, -1});
  EXPECT_EQ(line_of(run.records[0]), "11");
  EXPECT_EQ(run.records[0].nodes, 2);
  EXPECT_EQ(run.metadata.command_line,
            "$ mpirun -np 2 --tag-output ./build/reduce_scatter_perf -b 16 -e 16M -f 2 -g 1");
  EXPECT_TRUE(noted(run, "read from the command line at line 1")) << notes_of(run);
  // The command line and rank 1's NCCL INFO on stderr.
  EXPECT_TRUE(noted(run, "2 lines of other programs skipped")) << notes_of(run);
  EXPECT_TRUE(noted(run, "33 nccl-tests lines read without their log prefix")) << notes_of(run);
}

TEST(NcclTestsText, V2_13WithoutAProgramNameTheAmbiguousTableIsRefused) {
  // all_gather and alltoall print the same columns and figures.
  const std::string e = error_of("nccl-tests/v2.13.0-all_gather-no-program.txt");
  EXPECT_NE(e.find("v2.13.0-all_gather-no-program.txt:1: the collective is unknown"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("fits all_gather_perf or alltoall_perf"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(NcclTestsText, V2_13UnderSrunLabelWithAnEmptyRedop) {
  LoadedRun run = read_results(input("nccl-tests/v2.13.0-alltoall-srun-label.txt"));
  ASSERT_EQ(run.records.size(), 30u);
  expect_row(run.records[0],
             {"alltoall", 1024, 32, "float", "", false, 5.07, kAbsent, 0.18, 0, 8, -1});
  expect_row(run.records[29],
             {"alltoall", 16777216, 524288, "float", "", true, 1191.2, kAbsent, 12.32, 0, 8, -1});
  EXPECT_EQ(run.records[0].nodes, 2);
  EXPECT_TRUE(
      noted(run, "collective alltoall (alltoall_perf) read from the command line at line 1"))
      << notes_of(run);
  EXPECT_TRUE(noted(run, "2 lines of other programs skipped")) << notes_of(run);  // srun, NCCL INFO
}

TEST(NcclTestsText, V2_13_4CpuTimeIsNeverTimeS) {
  LoadedRun run = read_results(input("nccl-tests/v2.13.4-all_gather-cputime.txt"));
  ASSERT_EQ(run.records.size(), 22u);
  expect_row(run.records[0],
             {"allgather", 1024, 128, "float", "none", false, kAbsent, 5.06, 0.10, 0, 2, -1});
  expect_row(run.records[21],
             {"allgather", 1048576, 131072, "float", "none", true, kAbsent, 63.30, 8.28, 0, 2, -1});
  EXPECT_EQ(run.records[0].time_statistic, "");  // no time_s to describe
  EXPECT_FALSE(run.records[0].time_avg_s.has_value());
  EXPECT_TRUE(noted(run, "-C: the time columns are host CPU time")) << notes_of(run);
}

TEST(NcclTestsText, V2_16NcclInfoLinesAndWrongInGFormatAndNotAvailable) {
  LoadedRun run = read_results(input("nccl-tests/v2.16.0-all_reduce-nccl-info.txt"));
  ASSERT_EQ(run.records.size(), 44u);
  expect_row(run.records[0],
             {"allreduce", 8, 2, "float", "sum", false, 5.00, kAbsent, 0.00, 0, 4, -1});
  // 4 MiB: "1.04858e+06" (%g of 1048576); 8 MiB: 123 twice; 16 MiB in-place: N/A.
  expect_row(run.records[38], {"allreduce", 4194304, 1048576, "float", "sum", false, 256.7, kAbsent,
                               24.51, 1048580, 4, -1});
  expect_row(run.records[40], {"allreduce", 8388608, 2097152, "float", "sum", false, 508.3, kAbsent,
                               24.75, 123, 4, -1});
  expect_row(run.records[43], {"allreduce", 16777216, 4194304, "float", "sum", true, 1021.7,
                               kAbsent, 24.63, -1, 4, -1});
  EXPECT_TRUE(noted(run, "collective allreduce (all_reduce_perf) read from its table"))
      << notes_of(run);
  EXPECT_TRUE(noted(run, "4 lines of other programs skipped")) << notes_of(run);
  EXPECT_TRUE(noted(run, "1 #wrong figures printed with 6 significant digits")) << notes_of(run);
}

TEST(NcclTestsText, V2_16_7SendRecvUnderKubectlTimestamps) {
  LoadedRun run = read_results(input("nccl-tests/v2.16.7-sendrecv-kubectl-timestamps.txt"));
  ASSERT_EQ(run.records.size(), 40u);
  expect_row(run.records[0],
             {"sendrecv", 8, 2, "float", "sum", false, 5.00, kAbsent, 0.00, 0, 2, -1});
  expect_row(run.records[38], {"sendrecv", 4194304, 1048576, "float", "sum", false, 235.7, kAbsent,
                               17.80, 0, 2, -1});
  EXPECT_EQ(run.records[0].nodes, 2);
  EXPECT_FALSE(noted(run, "read from"));  // "# Collective test starting" says it
  EXPECT_TRUE(noted(run, "34 nccl-tests lines read without their log prefix")) << notes_of(run);
}

TEST(NcclTestsText, V2_17_6ReduceWithTimestamps) {
  LoadedRun run = read_results(input("nccl-tests/v2.17.6-reduce-timestamps.txt"));
  ASSERT_EQ(run.records.size(), 36u);
  expect_row(run.records[0], {"reduce", 8, 2, "float", "sum", false, 5.00, kAbsent, 0.00, 0, 4, 0});
  expect_row(run.records[35],
             {"reduce", 1048576, 262144, "float", "sum", true, 68.59, kAbsent, 15.29, 0, 4, 0});
  EXPECT_EQ(run.metadata.nccl_version, "2.21.5");
  EXPECT_TRUE(run.notes.empty()) << notes_of(run);
}

TEST(NcclTestsText, V2_18_2BroadcastInAJournalWithTwoPasses) {
  LoadedRun run = read_results(input("nccl-tests/v2.18.2-broadcast-journal-cycles.txt"));
  ASSERT_EQ(run.records.size(), 20u);  // -N 2: 5 sizes twice
  expect_row(run.records[0],
             {"broadcast", 1024, 256, "float", "none", false, 5.06, kAbsent, 0.20, 0, 2, 0});
  expect_row(run.records[19],
             {"broadcast", 16384, 4096, "float", "none", true, 5.98, kAbsent, 2.74, 0, 2, 0});
  EXPECT_EQ(run.records[9].repeat, 0);
  EXPECT_EQ(run.records[10].repeat, 1);
  EXPECT_EQ(run.records[10].size_bytes, 1024u);
  EXPECT_EQ(run.records[0].aggregate_iterations, 1);
  EXPECT_EQ(run.records[0].graph_launches, 0);
}

TEST(NcclTestsText, V2_19_2PerIterationColumnsAndTimestamps) {
  LoadedRun run = read_results(input("nccl-tests/v2.19.2-all_reduce-per-iter-timestamps.txt"));
  ASSERT_EQ(run.records.size(), 10u);
  expect_row(run.records[0], {"allreduce", 1048576, 262144, "float", "sum", false, 62.67, kAbsent,
                              16.73, 0, 2, -1});
  expect_row(run.records[9], {"allreduce", 16777216, 4194304, "float", "sum", true, 937.02, kAbsent,
                              17.90, 0, 2, -1});
  EXPECT_DOUBLE_EQ(*run.records[0].iteration_time_p99_s, 78.34e-6);  // i_p99
  EXPECT_DOUBLE_EQ(*run.records[9].iteration_time_p99_s, 1171.28e-6);
  EXPECT_FALSE(run.records[0].time_min_s.has_value());  // i_min is over iterations, not ranks
}

TEST(NcclTestsText, V2_19_6TwoTestsKeepTheirOwnCollectiveAndRanks) {
  LoadedRun run = read_results(input("nccl-tests/v2.19.6-two-tests.txt"));
  ASSERT_EQ(run.records.size(), 34u);  // all_reduce 8 B..4 KiB, all_gather 1..64 KiB
  expect_row(run.records[0],
             {"allreduce", 8, 2, "float", "sum", false, 5.00, kAbsent, 0.00, 0, 2, -1});
  expect_row(run.records[19],
             {"allreduce", 4096, 1024, "float", "sum", true, std::nullopt, kAbsent, {}, 0, 2, -1});
  expect_row(run.records[20],
             {"allgather", 1024, 64, "float", "none", false, std::nullopt, kAbsent, {}, 0, 4, -1});
  expect_row(run.records[33],
             {"allgather", 65536, 4096, "float", "none", true, 9.02, kAbsent, 5.45, 0, 4, -1});
  EXPECT_EQ(run.records[0].nodes, 1);
  EXPECT_EQ(run.records[33].nodes, 2);
  EXPECT_EQ(run.metadata.ranks, 2);  // the first test's
  EXPECT_TRUE(noted(run, "2 tests in one file")) << notes_of(run);
  EXPECT_TRUE(noted(run, "3 lines of other programs skipped")) << notes_of(run);  // mpirun banner
}

TEST(NcclTestsText, ATestWithoutRowsAmongOthersIsNoted) {
  const std::string text = slurp(input("nccl-tests/v2.19.6-two-tests.txt")) +
                           "# Collective test starting: broadcast_perf\n# nThread 1 nGpus 2\n"
                           "Invalid number of GPUs: 2 requested but only 1 were found.\n";
  LoadedRun run = parse_results("t.txt", text);
  EXPECT_EQ(run.records.size(), 34u);
  EXPECT_TRUE(noted(run, "t.txt:57: a test (broadcast_perf) with no result rows")) << notes_of(run);
}

TEST(NcclTestsText, V2_19_6InvalidNumberOfGpusIsOneLine) {
  const std::string e = error_of("nccl-tests/v2.19.6-invalid-number-of-gpus.txt");
  EXPECT_NE(e.find("v2.19.6-invalid-number-of-gpus.txt:8: all_reduce_perf printed no results; "
                   "the file reports: 'Invalid number of GPUs: 8 requested but only 1 were "
                   "found.'"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(NcclTestsText, LogPrefixesOfOtherLaunchers) {
  const std::string table =
      "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg "
      "iters: 1 validation: 1 graph: 0\n"
      "#  Rank  0 Group  0 Pid   4000 on       h0 device  0 [0000:07:00] GPU\n"
      "#  Rank  1 Group  0 Pid   4001 on       h1 device  0 [0000:07:00] GPU\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "           8             2     float     sum      -1     5.00    0.00    0.00      0     "
      "5.05    0.00    0.00      0\n";
  for (const std::string prefix :
       {"[0] ", "[pod/trainer-0/main] ", "node01: ", "[2025-01-02 03:04:05] ",
        "2025-01-02 03:04:05,123 ", "2025-01-02T03:04:05+01:00 ", "Jan  2 03:04:05 h0 job[7]: "}) {
    std::string text = "mpirun -np 2 ./all_reduce_perf\n";
    std::istringstream in(table);
    for (std::string line; std::getline(in, line);) text += prefix + line + "\n";
    LoadedRun run = parse_results("t.txt", text);
    ASSERT_EQ(run.records.size(), 2u) << prefix;
    expect_row(run.records[1],
               {"allreduce", 8, 2, "float", "sum", true, 5.05, kAbsent, 0, 0, 2, -1});
    EXPECT_TRUE(noted(run, "5 nccl-tests lines read without their log prefix"))
        << prefix << notes_of(run);
  }
}

TEST(NcclTestsText, BrokenRowsNameTheirLine) {
  const std::string nccl = slurp(input("nccl-tests/v2.17.6-reduce-timestamps.txt"));
  std::string cut = nccl.substr(0, nccl.find("     1048576") + 40);
  EXPECT_NE(text_error(cut).find("t.txt:31: expected 15 fields"), std::string::npos)
      << text_error(cut);
  std::string bad = nccl;
  bad.replace(bad.find("67.91"), 5, "67.9x");
  EXPECT_NE(text_error(bad).find("t.txt:31: time '67.9x' is not a number"), std::string::npos)
      << text_error(bad);
  std::string negative = nccl;
  negative.replace(negative.find("  67.91"), 7, " -67.91");
  EXPECT_NE(text_error(negative).find("t.txt:31: time -67.91 is negative"), std::string::npos)
      << text_error(negative);
  static constexpr char kWithNul[] = "# nThread 1\n8 2 float sum -1 1 2 3\0 4";
  EXPECT_NE(text_error(std::string(kWithNul, sizeof kWithNul - 1)).find("NUL byte"),
            std::string::npos);
}

// ------------------------------------------------------------------ nccl-tests -J JSON

TEST(NcclTestsJson, V1OneProcessDrivingTwoGpus) {
  LoadedRun run = read_results(input("nccl-tests/v2.17.3-all_gather-json-v1.json"));
  EXPECT_EQ(run.format, "nccl-tests-json");
  ASSERT_EQ(run.records.size(), 12u);
  // devices[] lists one line per process; -g 2 makes it 2 ranks.
  expect_row(run.records[0], {"allgather", 1024, 128, "float", "none", false, 5.05632, kAbsent,
                              0.101259, 0, 2, -1});
  EXPECT_EQ(run.records[0].nodes, 1);
  EXPECT_EQ(run.metadata.hosts, (std::vector<std::string>{"dgx", "dgx"}));
  EXPECT_EQ(run.metadata.nccl_version, "2.18.5");
}

TEST(NcclTestsJson, V2CpuTimeAndPerIterationPercentiles) {
  LoadedRun run =
      read_results(input("nccl-tests/v2.19.2-all_reduce-json-v2-cputime-per-iter.json"));
  ASSERT_EQ(run.records.size(), 12u);
  expect_row(run.records[0],
             {"allreduce", 1024, 256, "float", "sum", false, kAbsent, 5.05632, 0.202519, 0, 2, -1});
  EXPECT_EQ(run.records[0].time_statistic, "");
  EXPECT_NEAR(*run.records[0].iteration_time_p50_s, 5.05632e-6 * 0.98, 1e-12);
  EXPECT_NEAR(*run.records[0].iteration_time_p99_s, 5.05632e-6 * 1.25, 1e-12);
  EXPECT_EQ(run.records[0].nodes, 2);
  EXPECT_TRUE(noted(run, "-C: nccl-tests gave host CPU time (cpu_time)")) << notes_of(run);
}

// ccscope's own console log (nccl-tests' table and header lines) says which
// statistic its times are: the slowest rank by default, not nccl-tests' average.
TEST(NcclTestsText, CcscopeConsoleLogKeepsItsOwnStatistic) {
  LoadedRun run = read_results(input("ccscope/console-allreduce-2rank-max.txt"));
  ASSERT_EQ(run.records.size(), 6u);
  for (const LoadedRecord& r : run.records) {
    EXPECT_EQ(r.time_statistic, "max");
    EXPECT_EQ(r.time_max_s, r.time_s);
    EXPECT_FALSE(r.time_avg_s.has_value());
  }
}

TEST(NcclTestsJson, V3MaxOverRanksNoValidationAndNan) {
  LoadedRun run =
      read_results(input("nccl-tests/v2.19.6-reduce_scatter-json-v3-max-novalidation.json"));
  ASSERT_EQ(run.records.size(), 12u);
  // -c 0: nwrong null; alg_bw/bus_bw "nan": absent.
  expect_row(run.records[0], {"reducescatter", 1024, 256, "half", "max", false, 5.05632, kAbsent,
                              kAbsent, -1, 2, -1});
  EXPECT_FALSE(run.records[0].algbw_GBps.has_value());
  expect_row(run.records[2], {"reducescatter", 4096, 1024, "half", "max", false, std::nullopt,
                              kAbsent, 0.391941, -1, 2, -1});
  // -a 3: the slowest rank's time.
  EXPECT_EQ(run.records[0].time_statistic, "max");
  EXPECT_EQ(run.records[0].time_max_s, run.records[0].time_s);
  EXPECT_FALSE(run.records[0].time_avg_s.has_value());
}

TEST(NcclTestsJson, FailedRunSaysItsError) {
  const std::string e = error_of("nccl-tests/v2.19.6-json-failed.json");
  EXPECT_NE(e.find("v2.19.6-json-failed.json: errors: all_reduce_perf measured nothing; its "
                   "errors say: 'NCCL failure common.cu:1011 'unhandled cuda error"),
            std::string::npos)
      << e;
}

// ------------------------------------------------------------------ OSU

TEST(Osu, V5_3AfterItsMpirunLine) {
  LoadedRun run = read_results(input("osu/v5.3-allreduce-mpirun.txt"));
  EXPECT_EQ(run.format, "osu");
  ASSERT_EQ(run.records.size(), 19u);
  expect_row(run.records[0], {"allreduce", 4, std::nullopt, "", "", std::nullopt, 2.00, kAbsent,
                              kAbsent, -1, 4, -1});
  expect_row(run.records[18], {"allreduce", 1048576, std::nullopt, "", "", std::nullopt, 211.72,
                               kAbsent, kAbsent, -1, 4, -1});
  EXPECT_FALSE(run.records[0].count.has_value());
  EXPECT_FALSE(run.records[0].in_place.has_value());
  EXPECT_EQ(run.records[0].time_statistic, "avg");
  EXPECT_EQ(run.metadata.command_line, "mpirun -np 4 ./osu_allreduce");
  EXPECT_TRUE(noted(run, "1 lines of other programs skipped")) << notes_of(run);
}

TEST(Osu, V5_6AllToAllSizesTimesRanks) {
  LoadedRun run = read_results(input("osu/v5.6.3-alltoall-full-mpiexec.txt"));
  ASSERT_EQ(run.records.size(), 11u);
  // OSU's 1 B per rank pair -> nccl-tests' 4 B over 4 ranks.
  expect_row(run.records[0], {"alltoall", 4, std::nullopt, "", "", std::nullopt, 2.00, kAbsent,
                              kAbsent, -1, 4, -1});
  expect_row(run.records[10], {"alltoall", 4096, std::nullopt, "", "", std::nullopt, 2.20, kAbsent,
                               kAbsent, -1, 4, -1});
  EXPECT_DOUBLE_EQ(*run.records[10].time_min_s, 1.98e-6);
  EXPECT_DOUBLE_EQ(*run.records[10].time_max_s, 2.43e-6);
  EXPECT_TRUE(noted(run,
                    "alltoall: OSU's per-rank sizes x 4 ranks (from line 1) = nccl-tests' "
                    "size convention"))
      << notes_of(run);
}

TEST(Osu, V6_1AllGatherWithoutARankCountKeepsOsuSizes) {
  LoadedRun run = read_results(input("osu/v6.1-allgather-no-ranks.txt"));
  ASSERT_EQ(run.records.size(), 13u);
  expect_row(run.records[0], {"allgather", 1, std::nullopt, "", "", std::nullopt, 2.00, kAbsent,
                              kAbsent, -1, std::nullopt, -1});
  EXPECT_FALSE(run.records[0].ranks.has_value());
  EXPECT_EQ(run.records[12].size_bytes, 4096u);
  EXPECT_TRUE(noted(run, "allgather: OSU prints one rank's size and the file gives no rank count"))
      << notes_of(run);
}

TEST(Osu, V7_0BroadcastValidationPass) {
  LoadedRun run = read_results(input("osu/v7.0-bcast-validation-srun.txt"));
  ASSERT_EQ(run.records.size(), 9u);
  for (const auto& r : run.records) EXPECT_EQ(r.wrong, 0) << r.source;
  expect_row(run.records[8], {"broadcast", 256, std::nullopt, "", "", std::nullopt, 2.05, kAbsent,
                              kAbsent, 0, 8, -1});
  EXPECT_TRUE(noted(run, "2 lines of other programs skipped")) << notes_of(run);  // srun's
}

TEST(Osu, V7_3ValidationErrorLineMarksItsSize) {
  LoadedRun run = read_results(input("osu/v7.3-allgather-validation-fail.txt"));
  ASSERT_EQ(run.records.size(), 11u);
  // Rank 0 printed Pass at 1024 B; another rank's error stopped the run there.
  expect_row(run.records[9], {"allgather", 512 * 8, std::nullopt, "int8", "", std::nullopt, 2.10,
                              kAbsent, kAbsent, 0, 8, -1});
  expect_row(run.records[10], {"allgather", 1024 * 8, std::nullopt, "int8", "", std::nullopt, 2.20,
                               kAbsent, kAbsent, 1, 8, -1});
  EXPECT_TRUE(noted(run, "1 sizes failed OSU's validation")) << notes_of(run);
  EXPECT_TRUE(noted(run, "x 8 ranks (from line 1)")) << notes_of(run);
}

TEST(Osu, V7_4FailRowAndItsErrorLineCountOnce) {
  LoadedRun run = read_results(input("osu/v7.4-allreduce-validation-fail.txt"));
  ASSERT_EQ(run.records.size(), 5u);
  EXPECT_EQ(run.records[3].wrong, 0);
  expect_row(run.records[4], {"allreduce", 64, std::nullopt, "float", "", std::nullopt, 2.01,
                              kAbsent, kAbsent, 1, std::nullopt, -1});
  EXPECT_TRUE(noted(run, "1 sizes failed OSU's validation")) << notes_of(run);
}

TEST(Osu, V7_4TwoDatatypesUnderSrunLabel) {
  LoadedRun run = read_results(input("osu/v7.4-reduce_scatter-cuda-two-types-srun-label.txt"));
  ASSERT_EQ(run.records.size(), 22u);
  // Reduce_scatter's size is already the whole buffer, as in nccl-tests.
  expect_row(run.records[0], {"reducescatter", 4, std::nullopt, "float", "", std::nullopt, 2.00,
                              kAbsent, kAbsent, -1, 16, -1});
  expect_row(run.records[21], {"reducescatter", 4096, std::nullopt, "int32", "", std::nullopt, 3.32,
                               kAbsent, kAbsent, -1, 16, -1});
  EXPECT_FALSE(noted(run, "per-rank sizes"));
  EXPECT_TRUE(noted(run, "27 OSU lines read without their log prefix")) << notes_of(run);
}

TEST(Osu, V7_4GatherThenScatterInOneFile) {
  LoadedRun run = read_results(input("osu/v7.4-gather-scatter-tag-output.txt"));
  ASSERT_EQ(run.records.size(), 14u);
  expect_row(run.records[0], {"gather", 2, std::nullopt, "int8", "", std::nullopt, 2.00, kAbsent,
                              kAbsent, -1, 2, -1});
  expect_row(run.records[13], {"scatter", 128, std::nullopt, "int8", "", std::nullopt, 3.01,
                               kAbsent, kAbsent, -1, 2, -1});
  EXPECT_TRUE(noted(run, ":3: gather: OSU's per-rank sizes x 2 ranks")) << notes_of(run);
  EXPECT_TRUE(noted(run, ":14: scatter: OSU's per-rank sizes x 2 ranks")) << notes_of(run);
}

TEST(Osu, RunThatPrintedOnlyAnErrorIsOneLine) {
  const std::string e = error_of("osu/v7.3-allreduce-one-process.txt");
  EXPECT_NE(e.find("v7.3-allreduce-one-process.txt:6: osu_allreduce printed no results; the file "
                   "reports: 'This test requires at least two processes'"),
            std::string::npos)
      << e;
}

// The program a failed run names is OSU's own (osu_bcast), from the description.
TEST(Osu, FailedRunNamesOsusProgram) {
  const std::string e = text_error(
      "# OSU MPI Broadcast Latency Test v7.4\nThis test requires at least two processes\n");
  EXPECT_NE(e.find("osu_bcast printed no results"), std::string::npos) << e;
}

TEST(Osu, NonBlockingTablesAreRefused) {
  const std::string e = error_of("osu/v7.4-iallreduce-nonblocking.txt");
  EXPECT_NE(e.find("v7.4-iallreduce-nonblocking.txt:2: OSU's non-blocking"), std::string::npos)
      << e;
}

TEST(Osu, EveryBlockingTitleOf5To7) {
  const std::pair<const char*, const char*> titles[] = {
      {"MPI Allreduce", "allreduce"},
      {"MPI-CUDA Allgather", "allgather"},
      {"MPI Allgatherv", "allgatherv"},
      {"MPI-ROCM All-to-All Personalized Exchange", "alltoall"},
      {"MPI All-to-Allv Personalized Exchange", "alltoallv"},
      {"MPI All-to-Allw Personalized Exchange", "alltoallw"},
      {"MPI Broadcast", "broadcast"},
      {"MPI-CUDA MANAGED Reduce", "reduce"},
      {"MPI Reduce_scatter", "reducescatter"},
      {"MPI Reduce_scatter_block", "reducescatter"},
      {"MPI Gather", "gather"},
      {"MPI Gatherv", "gatherv"},
      {"MPI Scatter", "scatter"},
      {"MPI Scatterv", "scatterv"},
      {"MPI Allreduce Persistent", "allreduce"},
      {"NCCL Allreduce", "allreduce"},
  };
  for (const auto& [title, collective] : titles) {
    LoadedRun run =
        parse_results("t.txt", std::string("# OSU ") + title +
                                   " Latency Test v7.4\n# Size  Avg Latency(us)\n8 1.5\n");
    ASSERT_EQ(run.records.size(), 1u) << title;
    EXPECT_EQ(run.records[0].collective, collective) << title;
    EXPECT_EQ(run.records[0].backend, std::string(title).find("NCCL") == 0 ? "nccl" : "mpi");
  }
  EXPECT_NE(text_error("# OSU MPI Barrier Latency Test v7.4\n# Avg Latency(us)\n1.5\n")
                .find("t.txt:1: OSU's barrier test has no message size"),
            std::string::npos);
  EXPECT_NE(text_error("# OSU MPI Bandwidth Test v7.4\n# Size  Bandwidth (MB/s)\n8 1.5\n")
                .find("t.txt:1: 'OSU MPI Bandwidth Test v7.4' is not an OSU collective latency"),
            std::string::npos);
  // A title with no backend word (OSU's point-to-point latency test) once ran
  // the name loop past the end of the words.
  EXPECT_NE(text_error("# OSU Latency Test v7.0\n# Size  Latency (us)\n8 1.5\n")
                .find("t.txt:1: 'OSU Latency Test v7.0' is not an OSU collective latency"),
            std::string::npos);
  EXPECT_NE(text_error("# OSU MPI Allreduce Latency Test v7.4\n# Size  Avg Latency(us)\n4 1.5\n8\n")
                .find("t.txt:4: expected 2 fields"),
            std::string::npos);
  EXPECT_NE(text_error("# OSU MPI Allreduce Latency Test\n# Size  Avg Latency(us)  Validation\n"
                       "4 1.5 Maybe\n")
                .find("t.txt:3: Validation 'Maybe' is neither Pass nor Fail"),
            std::string::npos);
}

// ------------------------------------------------------------------ fuzz

// Every file under inputs/, data/ and reports/fuzz/seeds/ (ccscope's CSV and
// JSON): the libFuzzer target's seeds too.
std::vector<std::string> seed_files() {
  std::vector<std::string> out;
  for (const std::string& dir :
       {std::string(CCSCOPE_READER_INPUTS), std::string(CCSCOPE_REPORTS_TEST_DATA),
        std::string(CCSCOPE_FUZZ_SEEDS)})
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Fuzz, EverySeedReadsOrIsRefusedInOneLine) {
  for (const auto& path : seed_files()) EXPECT_EQ(fuzz::check_one_input(slurp(path)), "") << path;
}

// Random edits of the seeds through the libFuzzer target's entry: each reads
// or is refused with one line of InputError; never another exception or crash.
TEST(Fuzz, MutatedSeedsReadOrAreRefused) {
  std::vector<std::string> seeds;
  for (const auto& path : seed_files()) seeds.push_back(slurp(path));
  ASSERT_GE(seeds.size(), 35u);
  // With its length: a literal's "\0" would end the alphabet there.
  static constexpr char kBytes[] =
      "\",\n\r\t{}[]:#-+1e.0 N/A\x1e\0\xff"
      "x";
  const std::string alphabet(kBytes, sizeof kBytes - 1);
  const std::vector<std::string> tokens = {"# nThread 1 nGpus 1\n",
                                           "# Collective test starting: all_gather_perf\n",
                                           "#wrong",
                                           "error",
                                           "cputime",
                                           "timestamp",
                                           "N/A",
                                           "1.04858e+06",
                                           "nan",
                                           "[1,0]<stdout>:",
                                           "0: ",
                                           "mpirun -np 4 ./alltoall_perf -g 2\n",
                                           "# OSU MPI Allgather Latency Test v7.4\n",
                                           "# Size  Avg Latency(us)  Validation\n",
                                           "Fail",
                                           "DATA VALIDATION ERROR: x on message size 8.\n",
                                           "99999999999999999999",
                                           "-1",
                                           "\"cpu_time\":",
                                           "\"results\":[]",
                                           "Invalid number of GPUs"};
  std::mt19937 rng(20261130);
  int read = 0, refused = 0;
  // 5000 edits (about 140 per seed): this test runs under ASan in CI, where 12000 took 15 s of
  // the sanitizer job; longer fuzzing is the libFuzzer target's (reports/fuzz).
  for (int i = 0; i < 5000; ++i) {
    std::string text = seeds[i % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t pos = rng() % text.size();
      switch (rng() % 6) {
        case 0:
          text.resize(pos);  // cut
          break;
        case 1:
          text[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 2:
          text.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 3:
          text.erase(pos, 1 + rng() % 16);
          break;
        case 4:
          text.insert(pos, tokens[rng() % tokens.size()]);
          break;
        case 5: {  // a piece of another seed: mixed formats, concatenated tests
          const std::string& other = seeds[rng() % seeds.size()];
          const size_t from = rng() % other.size();
          text.insert(pos, other.substr(from, rng() % 400));
          break;
        }
      }
    }
    bool was_read = false;
    ASSERT_EQ(fuzz::check_one_input(text, &was_read), "") << "iteration " << i;
    ++(was_read ? read : refused);
  }
  EXPECT_GT(read, 100);
  EXPECT_GT(refused, 100);
}

}  // namespace
}  // namespace ccscope::reports
