// read_results on every supported format, on broken inputs, and under fuzzing.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ccscope/reports/loaded_results.h"
#include "compare_test_util.h"
#include "readers_fuzz_entry.h"

namespace ccscope::reports {
namespace {

using namespace testing;

// The InputError message of reading `path`, or "" when it reads.
std::string error_of(const std::string& path) {
  try {
    read_results(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(NcclTestsText, OneRankFixture) {
  LoadedRun run = read_results(data_file("all_reduce_perf-h200-1rank.txt"));
  EXPECT_EQ(run.format, "nccl-tests-text");
  ASSERT_EQ(run.records.size(), 28u);  // 14 sizes x (out-of-place, in-place)
  const LoadedRecord& first = run.records[0];
  EXPECT_EQ(first.collective, "allreduce");
  EXPECT_EQ(first.backend, "nccl");
  EXPECT_EQ(first.dtype, "float");
  EXPECT_EQ(first.op, "sum");
  EXPECT_FALSE(first.root.has_value());
  EXPECT_EQ(first.size_bytes, 8u);
  EXPECT_EQ(first.count, 2u);
  EXPECT_EQ(first.in_place, false);
  EXPECT_DOUBLE_EQ(*first.time_s, 7.40e-6);
  EXPECT_EQ(*first.ranks, 1);
  EXPECT_EQ(*first.wrong, 0);
  EXPECT_FALSE(first.time_min_s.has_value());
  EXPECT_FALSE(first.repeat.has_value());
  EXPECT_EQ(run.records[1].in_place, true);
  EXPECT_DOUBLE_EQ(*run.records[1].time_s, 0.92e-6);
  EXPECT_DOUBLE_EQ(*run.records[27].algbw_GBps, 1e6);  // printed "1e+06"
  EXPECT_EQ(run.records[27].source.substr(run.records[27].source.rfind(':')), ":24");
  EXPECT_EQ(run.metadata.nccl_version, "2.28.3");
  EXPECT_EQ(run.metadata.gpu_names, std::vector<std::string>{"NVIDIA H200"});
  // "agg iters: 1 ... graph: 0" in the "# nThread" line; rotation is not printed.
  EXPECT_EQ(first.aggregate_iterations, 1);
  EXPECT_EQ(first.graph_launches, 0);
  EXPECT_FALSE(first.rotated.has_value());
  EXPECT_FALSE(first.failed_checks.has_value());
  EXPECT_EQ(first.time_method, "");
}

TEST(NcclTestsText, TwoRanksOnOneNode) {
  LoadedRun run = read_results(data_file("all_reduce_perf-h200-2rank-socket.txt"));
  ASSERT_EQ(run.records.size(), 26u);
  EXPECT_EQ(*run.records[0].ranks, 2);
  EXPECT_EQ(*run.records[0].nodes, 1);
  EXPECT_EQ(*run.records[0].ranks_per_node, 2);
  EXPECT_DOUBLE_EQ(*run.records.back().busbw_GBps, 1.85);
}

TEST(NcclTestsText, NotAvailableFiguresAreAbsent) {
  TempDir dir;
  std::string text = slurp(data_file("all_reduce_perf-h200-1rank.txt"));
  size_t row = text.find("           8             2");
  std::string line = text.substr(row, text.find('\n', row) - row);
  std::string na = line;
  na.replace(na.rfind("       0"), 8, "     N/A");  // in-place #wrong
  text.replace(row, line.size(), na);
  spit(dir.file("na.txt"), text);
  LoadedRun run = read_results(dir.file("na.txt"));
  EXPECT_FALSE(run.records[1].wrong.has_value());
  EXPECT_TRUE(run.records[0].wrong.has_value());
}

TEST(NcclTestsJson, FourRankFixture) {
  LoadedRun run = read_results(data_file("all_reduce_perf-h200-4rank-socket.json"));
  EXPECT_EQ(run.format, "nccl-tests-json");
  ASSERT_EQ(run.records.size(), 10u);
  EXPECT_EQ(run.records[0].collective, "allreduce");
  EXPECT_EQ(run.records[0].size_bytes, 1048576u);
  EXPECT_DOUBLE_EQ(*run.records[0].time_s, 27110.737425e-6);
  EXPECT_DOUBLE_EQ(*run.records[0].busbw_GBps, 0.058016);
  EXPECT_FALSE(run.records[0].root.has_value());
  EXPECT_EQ(*run.records[0].ranks, 4);
  EXPECT_EQ(*run.records[1].in_place, true);
  EXPECT_EQ(run.metadata.nccl_version, "2.28.3");
  EXPECT_EQ(run.metadata.ranks_per_node, 4);
  EXPECT_NE(run.metadata.command_line.find("all_reduce_perf"), std::string::npos);
  // config.aggregated_iterations and config.graph; rotation is not stated.
  EXPECT_EQ(run.records[1].aggregate_iterations, 1);
  EXPECT_EQ(run.records[1].graph_launches, 0);
  EXPECT_FALSE(run.records[1].rotated.has_value());
}

TEST(Osu, LatencyOnly) {
  LoadedRun run = read_results(data_file("osu_allreduce.txt"));
  EXPECT_EQ(run.format, "osu");
  ASSERT_EQ(run.records.size(), 19u);
  const LoadedRecord& r = run.records[0];
  EXPECT_EQ(r.collective, "allreduce");
  EXPECT_EQ(r.backend, "mpi");
  EXPECT_EQ(r.dtype, "float");
  EXPECT_EQ(r.op, "");
  EXPECT_EQ(r.size_bytes, 4u);
  EXPECT_DOUBLE_EQ(*r.time_s, 1.62e-6);
  EXPECT_FALSE(r.ranks.has_value());
  EXPECT_FALSE(r.in_place.has_value());
  EXPECT_FALSE(r.busbw_GBps.has_value());
  EXPECT_FALSE(r.time_min_s.has_value());
}

TEST(Osu, FullColumns) {
  LoadedRun run = read_results(data_file("osu_allgather_full.txt"));
  ASSERT_EQ(run.records.size(), 6u);
  EXPECT_EQ(run.records[0].collective, "allgather");
  EXPECT_EQ(run.records[0].dtype, "int8");
  EXPECT_DOUBLE_EQ(*run.records[5].time_s, 2101.45e-6);
  EXPECT_DOUBLE_EQ(*run.records[5].time_min_s, 2050.12e-6);
  EXPECT_DOUBLE_EQ(*run.records[5].time_max_s, 2160.88e-6);
}

// Metadata with the characters RFC 4180 must quote, including line breaks.
RunMetadata awkward_metadata() {
  RunMetadata m = test_metadata(2);
  m.environment = {{"CCSCOPE_NOTE", "two\nlines, a \"quote\"\r\nand \x1e byte"},
                   {"NCCL_DEBUG", "INFO"}};
  m.command_line = "ccscope bench allreduce --note \"a,b\"";
  m.driver_version = "570.86.15;575.51.03";  // a mixed-driver cluster
  return m;
}

TEST(CcscopeCsv, ReadsItsOwnOutputIncludingQuotedLineBreaks) {
  TempDir dir;
  write_run(dir.file("run.csv"), sweep(2, 2, [](size_t, int) { return 1.0; }), awkward_metadata());
  LoadedRun run = read_results(dir.file("run.csv"));
  EXPECT_EQ(run.format, "ccscope-csv");
  ASSERT_EQ(run.records.size(), 18u);  // 9 sizes x 2 repeats
  const LoadedRecord& r = run.records[10];
  EXPECT_EQ(r.collective, "allreduce");
  EXPECT_EQ(r.size_bytes, 4096u);
  EXPECT_EQ(*r.repeat, 1);
  EXPECT_EQ(*r.in_place, false);
  EXPECT_EQ(*r.ranks, 2);
  EXPECT_FALSE(r.root.has_value());
  EXPECT_DOUBLE_EQ(*r.time_s, 20e-6 + 4096 / 5e9);
  EXPECT_EQ(run.metadata.environment, awkward_metadata().environment);
  EXPECT_EQ(run.metadata.command_line, awkward_metadata().command_line);
  EXPECT_EQ(run.metadata.hosts.size(), 2u);
  EXPECT_EQ(run.metadata.driver_version, "570.86.15;575.51.03");
  // Each row spans three physical lines (two line breaks in the environment).
  EXPECT_EQ(r.source, dir.file("run.csv") + ":" + std::to_string(2 + 10 * 3));
}

TEST(CcscopeJson, ReadsItsOwnOutput) {
  TempDir dir;
  write_run(dir.file("run.json"), sweep(4, 1, [](size_t, int) { return 1.0; }), awkward_metadata());
  LoadedRun run = read_results(dir.file("run.json"));
  EXPECT_EQ(run.format, "ccscope-json");
  ASSERT_EQ(run.records.size(), 9u);
  EXPECT_EQ(*run.records[0].ranks, 4);
  EXPECT_EQ(run.metadata.command_line, awkward_metadata().command_line);
  EXPECT_EQ(run.metadata.driver_version, "570.86.15;575.51.03");
  EXPECT_EQ(run.records[3].source, dir.file("run.json") + ": records[3]");
}

// The fields of nccl-tests 2.19's way of timing and checking, through both writers and back.
TEST(CcscopeFiles, MeasurementFieldsRoundTrip) {
  for (const char* name : {"run.csv", "run.json"}) {
    TempDir dir;
    auto records = sweep(2, 1, [](size_t, int) { return 1.0; });
    for (auto& r : records) {
      r.rotated = true;
      r.aggregate_iterations = 8;
      r.graph_launches = 3;
      r.time_method = "host time to issue -n iterations (-C), \"quoted\"";
      r.check_iterations = 4;
      r.failed_checks = 1;
    }
    records[2].rotated = false;
    records[2].failed_checks = 0;
    RunMetadata m = awkward_metadata();
    m.backend_resources = "alloc=ncclMemAlloc, alltoall=ncclAlltoAll, blocking=0";
    write_run(dir.file(name), records, m);
    LoadedRun run = read_results(dir.file(name));
    ASSERT_EQ(run.records.size(), 9u) << name;
    const LoadedRecord& r = run.records[0];
    EXPECT_EQ(r.rotated, true) << name;
    EXPECT_EQ(r.aggregate_iterations, 8) << name;
    EXPECT_EQ(r.graph_launches, 3) << name;
    EXPECT_EQ(r.time_method, "host time to issue -n iterations (-C), \"quoted\"") << name;
    EXPECT_EQ(r.check_iterations, 4) << name;
    EXPECT_EQ(r.failed_checks, 1) << name;
    EXPECT_EQ(run.records[2].rotated, false) << name;
    EXPECT_EQ(run.records[2].failed_checks, 0) << name;
    EXPECT_EQ(run.metadata.backend_resources,
              "alloc=ncclMemAlloc, alltoall=ncclAlltoAll, blocking=0")
        << name;
  }
}

// Checks BenchRecord's defaults for the measurement fields.
void expect_measurement_defaults(const LoadedRun& run) {
  ASSERT_FALSE(run.records.empty());
  for (const auto& r : run.records) {
    EXPECT_EQ(r.rotated, false) << r.source;
    EXPECT_EQ(r.aggregate_iterations, 1) << r.source;
    EXPECT_EQ(r.graph_launches, 0) << r.source;
    EXPECT_EQ(r.time_method, "") << r.source;
    EXPECT_EQ(r.check_iterations, 0) << r.source;
    EXPECT_EQ(r.failed_checks, 0) << r.source;
  }
  EXPECT_EQ(run.metadata.backend_resources, "");
}

// A CSV file as ccscope wrote it before the measurement columns existed.
TEST(CcscopeCsv, FileWithoutTheMeasurementColumnsReadsTheDefaults) {
  TempDir dir;
  spit(dir.file("old.csv"),
       "schema,collective,backend,dtype,op,root,in_place,size_bytes,count,ranks,nodes,"
       "ranks_per_node,iterations,warmup_iterations,time_s,time_statistic,algbw_GBps,busbw_GBps,"
       "rank_time_min_s,rank_time_avg_s,rank_time_max_s,iteration_time_p50_s,"
       "iteration_time_p99_s,checked,wrong,ccscope_version,git_commit,mpi_library,nccl_version,"
       "cuda_version,hosts,gpu_names,environment,command_line,run_start_utc,record_time_utc,"
       "repeat,driver_version,iterations_per_sample\n"
       "ccscope.bench/1,allreduce,mpi,float,sum,-1,0,1024,256,2,1,2,20,5,2.5e-05,"
       "max over ranks of mean over iterations,0.04096,0.04096,2e-05,2.2e-05,2.5e-05,2.4e-05,"
       "3e-05,1,7,0.1.0,abc123,MPICH Version: 4.0.2,,,node0;node0,cpu;cpu,"
       "\"NCCL_DEBUG=INFO;UCX_TLS=tcp,self\",ccscope bench allreduce,2026-11-30T03:04:05Z,"
       "2026-11-30T03:04:06Z,0,,1\n");
  LoadedRun run = read_results(dir.file("old.csv"));
  ASSERT_EQ(run.records.size(), 1u);
  EXPECT_EQ(run.records[0].wrong, 7);
  EXPECT_DOUBLE_EQ(*run.records[0].time_s, 2.5e-5);
  EXPECT_EQ(run.records[0].time_statistic, "max");  // version 1's sentence, as a token
  expect_measurement_defaults(run);
}

// A JSON file as ccscope wrote it before the measurement keys existed.
TEST(CcscopeJson, FileWithoutTheMeasurementKeysReadsTheDefaults) {
  TempDir dir;
  spit(dir.file("old.json"), R"({
  "schema": "ccscope.bench/1", "complete": true,
  "metadata": {"ccscope_version": "0.1.0", "git_commit": "abc123", "backend": "mpi",
    "mpi_library": "MPICH Version: 4.0.2", "nccl_version": "", "cuda_version": "",
    "driver_version": "", "hosts": ["node0", "node0"], "gpu_names": ["cpu", "cpu"],
    "ranks": 2, "nodes": 1, "ranks_per_node": 2, "environment": {"NCCL_DEBUG": "INFO"},
    "command_line": "ccscope bench allreduce", "start_time_utc": "2026-11-30T03:04:05Z",
    "end_time_utc": "2026-11-30T03:05:05Z"},
  "records": [{"collective": "allreduce", "backend": "mpi", "dtype": "float", "op": "sum",
    "root": -1, "in_place": false, "size_bytes": 1024, "count": 256, "ranks": 2, "nodes": 1,
    "ranks_per_node": 2, "iterations": 20, "warmup_iterations": 5, "time_s": 2.5e-05,
    "time_statistic": "max over ranks of mean over iterations", "algbw_GBps": 0.04096,
    "busbw_GBps": 0.04096, "rank_time_min_s": 2e-05, "rank_time_avg_s": 2.2e-05,
    "rank_time_max_s": 2.5e-05, "iteration_time_p50_s": 2.4e-05,
    "iteration_time_p99_s": 3e-05, "iterations_per_sample": 1, "checked": true, "wrong": 7,
    "record_time_utc": "2026-11-30T03:04:06Z", "repeat": 0}]
}
)");
  LoadedRun run = read_results(dir.file("old.json"));
  ASSERT_EQ(run.records.size(), 1u);
  EXPECT_EQ(run.records[0].wrong, 7);
  EXPECT_EQ(run.records[0].time_statistic, "max");  // version 1's sentence, as a token
  expect_measurement_defaults(run);
}

TEST(CcscopeFiles, BadMeasurementFieldsAreNamed) {
  TempDir dir;
  auto records = sweep(2, 1, [](size_t, int) { return 1.0; });
  records[1].aggregate_iterations = 0;  // -m 0 is not a thing
  write_run(dir.file("bad.csv"), records, test_metadata());
  EXPECT_NE(error_of(dir.file("bad.csv")).find("aggregate_iterations 0 is out of range"),
            std::string::npos)
      << error_of(dir.file("bad.csv"));
  write_run(dir.file("bad.json"), records, test_metadata());
  EXPECT_NE(error_of(dir.file("bad.json")).find("records[1].aggregate_iterations"),
            std::string::npos)
      << error_of(dir.file("bad.json"));
}

TEST(Errors, NameFileAndLine) {
  TempDir dir;
  write_run(dir.file("good.csv"), sweep(2, 1, [](size_t, int) { return 1.0; }), test_metadata());
  const std::string csv = slurp(dir.file("good.csv"));

  spit(dir.file("empty.csv"), "");
  EXPECT_NE(error_of(dir.file("empty.csv")).find("empty.csv:1: empty file"), std::string::npos);

  spit(dir.file("cut.csv"), csv.substr(0, csv.size() - 40));  // last row cut short
  EXPECT_NE(error_of(dir.file("cut.csv")).find("cut.csv:10: fewer fields"), std::string::npos)
      << error_of(dir.file("cut.csv"));

  std::string typed = csv;
  typed.replace(typed.find(",max,"), 0, "x");  // time_s of row 1 -> "...x"
  spit(dir.file("typed.csv"), typed);
  EXPECT_NE(error_of(dir.file("typed.csv")).find("typed.csv:2: time_s"), std::string::npos)
      << error_of(dir.file("typed.csv"));

  spit(dir.file("open.csv"), csv + "ccscope.bench/1,\"allreduce\n");
  EXPECT_NE(error_of(dir.file("open.csv")).find("open.csv:11: a quoted field is not closed"),
            std::string::npos)
      << error_of(dir.file("open.csv"));

  std::string nccl = slurp(data_file("all_reduce_perf-h200-2rank-socket.txt"));
  spit(dir.file("cut.txt"), nccl.substr(0, nccl.find("   134217728") + 40));
  EXPECT_NE(error_of(dir.file("cut.txt")).find("cut.txt:24: expected 13 fields"), std::string::npos)
      << error_of(dir.file("cut.txt"));

  std::string bad_number = nccl;
  bad_number.replace(bad_number.find("4528.97"), 7, "4528.9x");
  spit(dir.file("bad.txt"), bad_number);
  EXPECT_NE(error_of(dir.file("bad.txt")).find("bad.txt:12: time '4528.9x'"), std::string::npos)
      << error_of(dir.file("bad.txt"));

  std::string json = slurp(data_file("all_reduce_perf-h200-4rank-socket.json"));
  spit(dir.file("cut.json"), json.substr(0, json.size() / 2));
  EXPECT_NE(error_of(dir.file("cut.json")).find("cut.json:1: invalid JSON"), std::string::npos)
      << error_of(dir.file("cut.json"));

  std::string wrong_type = json;
  wrong_type.replace(wrong_type.find("\"time\":27110.737425"), 19, "\"time\":\"slow\"");
  spit(dir.file("type.json"), wrong_type);
  EXPECT_NE(error_of(dir.file("type.json")).find("results[0].out_of_place.time: expected a number"),
            std::string::npos)
      << error_of(dir.file("type.json"));

  spit(dir.file("osu.txt"),
       "# OSU MPI Allreduce Latency Test v7.3\n# Size  Avg Latency(us)\n4 1.5\n8\n");
  EXPECT_NE(error_of(dir.file("osu.txt")).find("osu.txt:4: expected 2 fields"), std::string::npos);

  spit(dir.file("what.txt"), "hello\n");
  EXPECT_NE(error_of(dir.file("what.txt")).find("what.txt:1: unknown format"), std::string::npos);
  EXPECT_NE(error_of(dir.file("missing.csv")).find("cannot open"), std::string::npos);
}

// Out-of-range integers and NUL bytes: the same refusal, with file and line,
// in every format (ranks=99999999999 used to read as 1215752191).
TEST(Errors, OutOfRangeIntegersAndNulBytesInEveryFormat) {
  TempDir dir;
  write_run(dir.file("good.csv"), sweep(2, 1, [](size_t, int) { return 1.0; }), test_metadata());
  const std::string csv = slurp(dir.file("good.csv"));
  const size_t row2 = csv.find('\n') + 1;
  std::string ranks = csv;
  const size_t at = ranks.find(",2,1,2,", row2);  // ranks, nodes, ranks_per_node of row 2
  ASSERT_NE(at, std::string::npos);
  ranks.replace(at, 7, ",99999999999,1,2,");
  spit(dir.file("ranks.csv"), ranks);
  EXPECT_NE(error_of(dir.file("ranks.csv")).find("ranks.csv:2: ranks 99999999999 is out of range"),
            std::string::npos)
      << error_of(dir.file("ranks.csv"));
  std::string huge = csv;
  huge.replace(huge.find(",2,1,2,", row2), 7, ",2,1,99999999999999999999,");
  spit(dir.file("huge.csv"), huge);
  EXPECT_NE(
      error_of(dir.file("huge.csv")).find("ranks_per_node 99999999999999999999 is out of range"),
      std::string::npos)
      << error_of(dir.file("huge.csv"));

  std::string json = slurp(data_file("all_reduce_perf-h200-4rank-socket.json"));
  std::string wrong = json;
  const size_t nwrong = wrong.find("\"nwrong\":");
  ASSERT_NE(nwrong, std::string::npos);
  wrong.replace(nwrong, 9, "\"nwrong\":1e300,\"x\":");
  spit(dir.file("nwrong.json"), wrong);
  EXPECT_NE(error_of(dir.file("nwrong.json")).find("nwrong: not a count"), std::string::npos)
      << error_of(dir.file("nwrong.json"));

  std::string nccl = slurp(data_file("all_reduce_perf-h200-1rank.txt"));
  nccl.insert(nccl.find("# Out of bounds"), std::string("x\0y\n", 4));
  spit(dir.file("nul.txt"), nccl);
  EXPECT_NE(error_of(dir.file("nul.txt")).find("a NUL byte"), std::string::npos)
      << error_of(dir.file("nul.txt"));
  std::string nul_csv = csv;
  nul_csv[row2 + 3] = '\0';
  spit(dir.file("nul.csv"), nul_csv);
  EXPECT_NE(error_of(dir.file("nul.csv")).find("nul.csv:2: a NUL byte"), std::string::npos)
      << error_of(dir.file("nul.csv"));
}

// Random truncations and byte edits of valid inputs, through the libFuzzer
// target's entry (reports/fuzz): each reads or is refused with one line of
// InputError naming the input; never another exception, a crash or a hang.
// foreign_readers_test.cpp does the same over the nccl-tests and OSU inputs.
TEST(Fuzz, MutatedInputsThrowInputErrorOrRead) {
  TempDir dir;
  write_run(dir.file("run.csv"), sweep(2, 1, [](size_t, int) { return 1.0; }), awkward_metadata());
  write_run(dir.file("run.json"), sweep(2, 1, [](size_t, int) { return 1.0; }), awkward_metadata());
  std::vector<std::string> seeds = {slurp(dir.file("run.csv")), slurp(dir.file("run.json")),
                                    slurp(data_file("all_reduce_perf-h200-2rank-socket.txt")),
                                    slurp(data_file("all_reduce_perf-h200-4rank-socket.json")),
                                    slurp(data_file("osu_allgather_full.txt"))};
  // With its length: a literal's "\0" would end the alphabet there.
  static constexpr char kBytes[] = "\",\n\r{}[]:#-1e. N/A\x1e\0x";
  const std::string alphabet(kBytes, sizeof kBytes - 1);
  std::mt19937 rng(20261130);
  int read_ok = 0, rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string text = seeds[i % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t pos = rng() % text.size();
      switch (rng() % 4) {
        case 0:
          text.resize(pos);
          break;  // truncate
        case 1:
          text[pos] = alphabet[rng() % alphabet.size()];
          break;  // replace
        case 2:
          text.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;  // insert
        case 3:
          text.erase(pos, 1 + rng() % 16);
          break;  // delete
      }
    }
    bool read = false;
    ASSERT_EQ(fuzz::check_one_input(text, &read), "") << "iteration " << i;
    ++(read ? read_ok : rejected);
  }
  EXPECT_GT(read_ok, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace ccscope::reports

namespace ccscope::reports {
namespace {

// An nccl-tests -J file's first out-of-place bus_bw replaced by `value`.
std::string nccl_tests_json_with_busbw(const std::string& value) {
  std::string text = slurp(data_file("all_reduce_perf-h200-4rank-socket.json"));
  const std::string first = "\"bus_bw\":0.058016";
  text.replace(text.find(first), first.size(), "\"bus_bw\":" + value);
  return text;
}

// A negative or absurd busbw was shown, exported and judged a REGRESSION: every
// reader now meets the CSV reader's rules (and the plausible bound), naming
// file and record.
TEST(FigureRules, NcclTestsJsonBusbwNegativeOrAbsurdIsRefused) {
  TempDir dir;
  spit(dir.file("neg.json"), nccl_tests_json_with_busbw("-5"));
  EXPECT_EQ(error_of(dir.file("neg.json")),
            dir.file("neg.json") +
                ": results[0].out_of_place: busbw_GBps -5 is not a figure a benchmark measures "
                "(negative or not finite); is the file unedited?");
  spit(dir.file("huge.json"), nccl_tests_json_with_busbw("1e308"));
  EXPECT_EQ(error_of(dir.file("huge.json")),
            dir.file("huge.json") +
                ": results[0].out_of_place: busbw_GBps 1e+308 is above 1e+06 GB/s: not a "
                "measurement; is the file unedited?");
}

TEST(FigureRules, CcscopeCsvBusbwAbsurdIsRefusedLikeNcclTests) {
  TempDir dir;
  write_run(dir.file("good.csv"), sweep(2, 1, [](size_t, int) { return 1.0; }), test_metadata());
  const std::string csv = slurp(dir.file("good.csv"));
  ASSERT_EQ(error_of(dir.file("good.csv")), "");
  // The first row's busbw_GBps column, by the header.
  const size_t header_end = csv.find('\n');
  std::vector<std::string> header;
  for (size_t start = 0, comma; start < header_end; start = comma + 1) {
    comma = std::min(csv.find(',', start), header_end);
    header.push_back(csv.substr(start, comma - start));
  }
  const size_t column = std::find(header.begin(), header.end(), "busbw_GBps") - header.begin();
  ASSERT_LT(column, header.size());
  size_t at = header_end + 1;
  for (size_t c = 0; c < column; ++c) at = csv.find(',', at) + 1;
  const size_t end = csv.find(',', at);
  std::string bad = csv;
  bad.replace(at, end - at, "1e308");
  spit(dir.file("huge.csv"), bad);
  EXPECT_EQ(error_of(dir.file("huge.csv")),
            dir.file("huge.csv") +
                ":2: busbw_GBps 1e+308 is above 1e+06 GB/s: not a measurement; is the file "
                "unedited?");
}

TEST(FigureRules, TheAdviceIsGivenOnce) {
  TempDir dir;
  write_run(dir.file("good.csv"), sweep(2, 1, [](size_t, int) { return 1.0; }), test_metadata());
  spit(dir.file("open.csv"), slurp(dir.file("good.csv")) + "ccscope.bench/1,\"allreduce\n");
  EXPECT_EQ(error_of(dir.file("open.csv")),
            dir.file("open.csv") +
                ":11: a quoted field is not closed; is the file complete and unedited?");
}

}  // namespace
}  // namespace ccscope::reports
