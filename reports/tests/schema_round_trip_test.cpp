// Every field of the bench schema's table, written by ccscope's CSV and JSON
// reporters and read back by read_results, holds what was written, including
// text with commas, quotes, line breaks and non-ASCII characters.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ccscope/records/schema.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/record_export.h"
#include "ccscope/reports/reporter.h"
#include "compare_test_util.h"
#include "sample_records.h"

namespace ccscope::reports {
namespace {

namespace fs = std::filesystem;
using records::bench_kind;
using records::Cell;
using records::testing::hostile_record;
using records::testing::hostile_run;

using testing::TempDir;

void write_run(std::unique_ptr<Reporter> reporter, const BenchRecord& record,
               const RunMetadata& m) {
  reporter->begin(m);
  reporter->add(record);
  reporter->end(m);
}

// What was written vs what was read, field by field, by the table.
void expect_same_fields(const LoadedRun& run, const BenchRecord& record, const RunMetadata& m,
                        bool json) {
  ASSERT_EQ(run.records.size(), 1u);
  records::LoadedBenchRow row{run.records[0], run.metadata};
  const std::vector<Cell> written = records::bench_cells(record, m);
  const std::vector<Cell> read = records::bench_cells(row);
  const auto& fields = bench_kind().fields;
  size_t compared = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (!fields[i].measured || (!json && !fields[i].in_csv)) continue;
    EXPECT_TRUE(written[i].present) << "the sample leaves out " << fields[i].name;
    EXPECT_EQ(records::csv_text(read[i], fields[i].type),
              records::csv_text(written[i], fields[i].type))
        << fields[i].name << (json ? " (JSON)" : " (CSV)");
    EXPECT_EQ(read[i].items, written[i].items) << fields[i].name;
    EXPECT_EQ(read[i].entries, written[i].entries) << fields[i].name;
    ++compared;
  }
  EXPECT_GE(compared, 40u);
}

TEST(SchemaRoundTrip, EveryFieldThroughCsv) {
  TempDir dir;
  const std::string path = (dir.path() / "run.csv").string();
  write_run(make_csv_reporter(path), hostile_record(), hostile_run());
  const LoadedRun run = read_results(path);
  EXPECT_EQ(run.format, "ccscope-csv");
  expect_same_fields(run, hostile_record(), hostile_run(), false);
  EXPECT_EQ(run.records[0].wrong, 9007199254740993);
  EXPECT_EQ(run.records[0].time_s, 1.0 / 3 * 1e-5);
}

TEST(SchemaRoundTrip, EveryFieldThroughJson) {
  TempDir dir;
  const std::string path = (dir.path() / "run.json").string();
  write_run(make_json_reporter(path), hostile_record(), hostile_run());
  const LoadedRun run = read_results(path);
  EXPECT_EQ(run.format, "ccscope-json");
  expect_same_fields(run, hostile_record(), hostile_run(), true);
  EXPECT_EQ(run.records[0].wrong, 9007199254740993);
  EXPECT_EQ(run.metadata.end_time_utc, "2026-12-01T13:05:00Z");
}

TEST(SchemaRoundTrip, OlderVersionReadsWithTheTablesDefaults) {
  TempDir dir;
  const std::string path = (dir.path() / "v1.csv").string();
  {
    std::ofstream out(path);
    out << "schema,collective,backend,dtype,op,root,in_place,size_bytes,count,ranks,time_s,"
           "time_statistic,checked,wrong\n"
           "ccscope.bench/1,allreduce,mpi,float,sum,-1,0,1024,256,2,1.5e-05,"
           "max over ranks of mean over iterations,0,0\n";
  }
  const LoadedRun run = read_results(path);
  ASSERT_EQ(run.records.size(), 1u);
  const LoadedRecord& r = run.records[0];
  EXPECT_EQ(r.time_statistic, "max");
  EXPECT_EQ(r.rotated, false);
  EXPECT_EQ(r.aggregate_iterations, 1);
  EXPECT_EQ(r.iterations_per_sample, 1u);
  EXPECT_FALSE(r.wrong.has_value());  // unchecked: 0 is no count
  EXPECT_FALSE(r.root.has_value());
  EXPECT_FALSE(r.time_min_s.has_value());
}

TEST(SchemaRoundTrip, NewerVersionIsRefusedSayingSo) {
  TempDir dir;
  const std::string path = (dir.path() / "v9.csv").string();
  {
    std::ofstream out(path);
    out << "schema,collective,size_bytes,time_s\nccscope.bench/9,allreduce,8,1e-06\n";
  }
  try {
    read_results(path);
    FAIL() << "a newer schema was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
  }
}

// nccl-tests 2.19's text, as it prints it (two sizes, one in-place N/A).
const char* kNcclTestsText =
    "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n"
    "# Collective test starting: all_reduce_perf\n"
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 128(factor) warmup iters: 1 iters: 20 "
    "agg iters: 1 validation: 1 graph: 0\n"
    "#\n"
    "#                                                              out-of-place                "
    "       in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
    "time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
    "(us)  (GB/s)  (GB/s)       \n"
    "           8             2     float     sum      -1    11.50    0.00    0.00      0    "
    "11.20    0.00    0.00      0\n"
    "        1024           256     float     sum      -1    12.25    0.08    0.13      0    "
    "12.00    0.09    0.13    N/A\n"
    "# Out of bounds values : 0 OK\n"
    "# Avg bus bandwidth    : 0.065\n";

// What ccscope understood of another tool's file, written in its schema, reads
// back the same, field by field.
TEST(SchemaRoundTrip, ImportedRecordsReadBackAsTheyWereUnderstood) {
  const LoadedRun nccl_tests = parse_results("nccl.txt", kNcclTestsText);
  ASSERT_EQ(nccl_tests.records.size(), 4u);
  const LoadedRun csv = parse_results("import.csv", records_csv({nccl_tests}));
  const LoadedRun json = parse_results("import.json", records_json({nccl_tests}));
  for (const LoadedRun* back : {&csv, &json}) {
    ASSERT_EQ(back->records.size(), nccl_tests.records.size()) << back->format;
    for (size_t i = 0; i < back->records.size(); ++i) {
      const auto before = records::bench_cells({nccl_tests.records[i], nccl_tests.metadata});
      const auto after = records::bench_cells({back->records[i], back->metadata});
      const auto& fields = bench_kind().fields;
      for (size_t f = 0; f < fields.size(); ++f)
        EXPECT_EQ(records::csv_text(after[f], fields[f].type),
                  records::csv_text(before[f], fields[f].type))
            << back->format << " record " << i << " " << fields[f].name;
    }
  }
  EXPECT_EQ(csv.records[1].time_statistic, "avg");
  EXPECT_EQ(csv.records[1].time_s, 11.2e-6);
  EXPECT_FALSE(csv.records[3].wrong.has_value());  // N/A stays absent
}

TEST(SchemaRoundTrip, OneJsonDocumentHoldsOneRunsMetadata) {
  LoadedRun a = parse_results("a.txt", kNcclTestsText);
  LoadedRun b = a;
  b.path = "b.txt";
  b.metadata.hosts = {"other-node"};
  EXPECT_NO_THROW(records_json({a, a}));
  EXPECT_THROW(records_json({a, b}), InputError);
  EXPECT_NO_THROW(records_csv({a, b}));
}

}  // namespace
}  // namespace ccscope::reports
