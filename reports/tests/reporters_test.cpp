// The writers: CSV header and round trip, JSON always valid, console table.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/records/schema.h"
#include "ccscope/reports/record.h"
#include "ccscope/reports/reporter.h"
#include "compare_test_util.h"

namespace ccscope::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::slurp;
using testing::TempDir;

// A small RFC 4180 reader: quoted fields may hold commas, doubled quotes and
// line breaks; rows end at an unquoted LF (or CRLF).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  bool any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field += c;
      }
      continue;
    }
    any = true;
    if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      // CRLF: the LF ends the row.
    } else if (c == '\n') {
      row.push_back(field);
      field.clear();
      rows.push_back(row);
      row.clear();
      any = false;
    } else {
      field += c;
    }
  }
  if (any || !field.empty()) {
    row.push_back(field);
    rows.push_back(row);
  }
  return rows;
}

RunMetadata sample_metadata() {
  RunMetadata m;
  m.ccscope_version = "0.1.0";
  m.git_commit = "abc1234";
  m.backend = "mpi";
  m.mpi_library = "MPICH Version: 4.0.2";
  m.nccl_version = "";
  m.cuda_version = "";
  m.hosts = {"node,1 \"a\"", "node,1 \"a\"", "node2"};
  m.gpu_names = {"cpu", "cpu", "cpu"};
  m.ranks = 3;
  m.nodes = 2;
  m.ranks_per_node = 2;
  m.environment = {{"CCSCOPE_NOTE", "line one\nline two"}, {"NCCL_DEBUG", "INFO"}};
  m.command_line = "ccscope bench -b 8 -e 128M";
  m.start_time_utc = "2026-11-30T03:04:05Z";
  return m;
}

BenchRecord sample_record(size_t size, bool in_place, double busbw) {
  BenchRecord r;
  r.collective = "allreduce";
  r.backend = "mpi";
  r.dtype = "float";
  r.op = "sum";
  r.root = -1;
  r.in_place = in_place;
  r.size_bytes = size;
  r.count = size / 4;
  r.ranks = 3;
  r.nodes = 2;
  r.ranks_per_node = 2;
  r.iterations = 20;
  r.warmup_iterations = 5;
  r.time_s = 1.0 / 3.0 * 1e-5;
  r.time_statistic = "max";
  r.algbw_GBps = 0.1 + busbw / 7;
  r.busbw_GBps = busbw;
  r.rank_time_min_s = 1.23456789012345e-6;
  r.rank_time_avg_s = 2e-6;
  r.rank_time_max_s = 3.3e-6;
  r.iteration_time_p50_s = 2.5e-6;
  r.iteration_time_p99_s = 9.87654321e-6;
  r.iterations_per_sample = 17;
  r.checked = true;
  r.wrong = 0;
  r.record_time_utc = "2026-11-30T03:04:06Z";
  return r;
}

// ---------------------------------------------------------------- CSV

TEST(CsvReporter, HeaderIsTheSchemaTable) {
  // Every CSV field of the table, in table order, "schema" first; names once.
  std::vector<std::string> expected;
  for (const auto& field : records::bench_kind().fields)
    if (field.in_csv) expected.emplace_back(field.name);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(expected.front(), "schema");
  EXPECT_EQ(std::set<std::string>(expected.begin(), expected.end()).size(), expected.size());
  EXPECT_EQ(csv_columns(), expected);

  TempDir dir;
  const std::string path = dir.file("empty.csv");
  auto reporter = make_csv_reporter(path);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  auto rows = parse_csv(slurp(path));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], expected);
  reporter->end(m);
  EXPECT_EQ(parse_csv(slurp(path)).size(), 1u);
}

TEST(CsvReporter, RowRoundTripsAndIsOnDiskRightAfterAdd) {
  TempDir dir;
  const std::string path = dir.file("run.csv");
  auto reporter = make_csv_reporter(path);
  RunMetadata m = sample_metadata();
  m.backend_resources = "alloc=ncclMemAlloc, alltoall=ncclAlltoAll, blocking=0";
  reporter->begin(m);
  BenchRecord r = sample_record(1048576, true, 1.0 / 7.0);
  r.wrong = 3;
  r.rotated = true;
  r.aggregate_iterations = 4;
  r.graph_launches = 2;
  r.time_method = "host wall clock over -n iterations + one sync (nccl-tests)";
  r.check_iterations = 5;
  r.failed_checks = 2;
  reporter->add(r);

  // Read before end(): the row must already be there (a crash keeps it).
  auto rows = parse_csv(slurp(path));
  ASSERT_EQ(rows.size(), 2u);
  const auto& header = rows[0];
  const auto& row = rows[1];
  ASSERT_EQ(row.size(), header.size());
  auto col = [&](const std::string& name) {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return row[i];
    ADD_FAILURE() << "no column " << name;
    return std::string();
  };
  EXPECT_EQ(col("schema"), "ccscope.bench/5");
  EXPECT_EQ(col("collective"), "allreduce");
  EXPECT_EQ(col("backend"), "mpi");
  EXPECT_EQ(col("dtype"), "float");
  EXPECT_EQ(col("op"), "sum");
  EXPECT_EQ(col("root"), "-1");
  EXPECT_EQ(col("in_place"), "1");
  EXPECT_EQ(col("size_bytes"), "1048576");
  EXPECT_EQ(col("count"), "262144");
  EXPECT_EQ(col("ranks"), "3");
  EXPECT_EQ(col("nodes"), "2");
  EXPECT_EQ(col("ranks_per_node"), "2");
  EXPECT_EQ(col("iterations"), "20");
  EXPECT_EQ(col("warmup_iterations"), "5");
  // Doubles read back bit for bit.
  EXPECT_EQ(std::stod(col("time_s")), r.time_s);
  EXPECT_EQ(std::stod(col("algbw_GBps")), r.algbw_GBps);
  EXPECT_EQ(std::stod(col("busbw_GBps")), r.busbw_GBps);
  EXPECT_EQ(std::stod(col("rank_time_min_s")), r.rank_time_min_s);
  EXPECT_EQ(std::stod(col("rank_time_avg_s")), r.rank_time_avg_s);
  EXPECT_EQ(std::stod(col("rank_time_max_s")), r.rank_time_max_s);
  EXPECT_EQ(std::stod(col("iteration_time_p50_s")), r.iteration_time_p50_s);
  EXPECT_EQ(std::stod(col("iteration_time_p99_s")), r.iteration_time_p99_s);
  EXPECT_EQ(col("iterations_per_sample"), "17");
  EXPECT_EQ(col("time_statistic"), r.time_statistic);
  EXPECT_EQ(col("checked"), "1");
  EXPECT_EQ(col("wrong"), "3");
  EXPECT_EQ(col("ccscope_version"), "0.1.0");
  EXPECT_EQ(col("git_commit"), "abc1234");
  EXPECT_EQ(col("mpi_library"), "MPICH Version: 4.0.2");
  EXPECT_EQ(col("nccl_version"), "");
  EXPECT_EQ(col("cuda_version"), "");
  EXPECT_EQ(col("hosts"), "node,1 \"a\";node,1 \"a\";node2");
  EXPECT_EQ(col("gpu_names"), "cpu;cpu;cpu");
  EXPECT_EQ(col("environment"), "CCSCOPE_NOTE=line one\nline two;NCCL_DEBUG=INFO");
  EXPECT_EQ(col("command_line"), "ccscope bench -b 8 -e 128M");
  EXPECT_EQ(col("run_start_utc"), "2026-11-30T03:04:05Z");
  EXPECT_EQ(col("record_time_utc"), "2026-11-30T03:04:06Z");
  EXPECT_EQ(col("rotated"), "1");
  EXPECT_EQ(col("aggregate_iterations"), "4");
  EXPECT_EQ(col("graph_launches"), "2");
  EXPECT_EQ(col("time_method"), "host wall clock over -n iterations + one sync (nccl-tests)");
  EXPECT_EQ(col("check_iterations"), "5");
  EXPECT_EQ(col("failed_checks"), "2");
  EXPECT_EQ(col("backend_resources"), "alloc=ncclMemAlloc, alltoall=ncclAlltoAll, blocking=0");
  // Fixed -n (target 0): samples and interval, no target, no converged.
  EXPECT_EQ(col("timing_samples"), "0");
  EXPECT_EQ(col("ci_half_width_percent"), "");
  EXPECT_EQ(col("target_ci_percent"), "");
  EXPECT_EQ(col("converged"), "");

  BenchRecord r2 = sample_record(2048, false, 2.5);
  r2.checked = false;
  reporter->add(r2);
  reporter->end(m);
  rows = parse_csv(slurp(path));
  ASSERT_EQ(rows.size(), 3u);
  const auto column = [&](const char* name) {
    return static_cast<size_t>(std::find(rows[0].begin(), rows[0].end(), name) - rows[0].begin());
  };
  EXPECT_EQ(rows[2].at(column("in_place")), "0");
  EXPECT_EQ(rows[2].at(column("checked")), "0");
  EXPECT_EQ(rows[2].at(column("wrong")), "");  // unchecked: no count
}

TEST(CsvReporter, QuotesOnlyWhatNeedsQuoting) {
  TempDir dir;
  const std::string path = dir.file("q.csv");
  auto reporter = make_csv_reporter(path);
  RunMetadata m = sample_metadata();
  m.hosts = {"plain"};
  m.environment = {{"A", "x\ry"}};
  reporter->begin(m);
  reporter->add(sample_record(8, false, 0));
  reporter->end(m);
  std::string text = slurp(path);
  EXPECT_NE(text.find(",plain,"), std::string::npos) << text;
  EXPECT_NE(text.find(",\"A=x\ry\","), std::string::npos) << text;
  EXPECT_NE(text.find(",allreduce,mpi,float,sum,-1,0,8,2,"), std::string::npos) << text;
}

TEST(CsvReporter, UnwritablePathThrowsNamingIt) {
  const std::string path = "/nonexistent-dir/x.csv";
  try {
    auto reporter = make_csv_reporter(path);
    reporter->begin(sample_metadata());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("No such file or directory"), std::string::npos) << what;
  }
}

// ---------------------------------------------------------------- JSON

TEST(JsonReporter, ValidAfterEveryStepAndCompleteAtEnd) {
  TempDir dir;
  const std::string path = dir.file("run.json");
  auto reporter = make_json_reporter(path);
  RunMetadata m = sample_metadata();
  reporter->begin(m);

  json doc = json::parse(slurp(path));
  EXPECT_EQ(doc.at("schema"), "ccscope.bench/5");
  EXPECT_EQ(doc.at("complete"), false);
  EXPECT_TRUE(doc.at("records").is_array());
  EXPECT_TRUE(doc.at("records").empty());

  const json& md = doc.at("metadata");
  // Every run field of the table is a metadata key (absent ones "" or []).
  for (const auto& field : records::bench_kind().fields)
    if (field.scope == records::FieldScope::kRun)
      EXPECT_TRUE(md.contains(std::string(field.name))) << field.name;
  EXPECT_EQ(md.at("hosts"), json(m.hosts));
  EXPECT_FALSE(md.contains("ranks"));  // ccscope.bench/2: each record holds its ranks
  EXPECT_TRUE(md.at("environment").is_object());
  EXPECT_EQ(md.at("environment").at("CCSCOPE_NOTE"), "line one\nline two");
  EXPECT_EQ(md.at("environment").at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(md.at("end_time_utc"), "");
  EXPECT_EQ(md.at("backend_resources"), "");

  BenchRecord r1 = sample_record(1024, false, 0.5);
  reporter->add(r1);
  // A crash here: the file is a whole document with the record.
  doc = json::parse(slurp(path));
  EXPECT_EQ(doc.at("complete"), false);
  ASSERT_EQ(doc.at("records").size(), 1u);
  const json& rec = doc.at("records").at(0);
  const auto& columns = csv_columns();
  // Every record field of the table is there, named as its CSV column.
  size_t record_fields = 0;
  for (const auto& field : records::bench_kind().fields) {
    if (field.scope != records::FieldScope::kRecord || field.name == "schema") continue;
    ++record_fields;
    EXPECT_TRUE(rec.contains(std::string(field.name))) << field.name;
    if (field.in_csv)
      EXPECT_NE(std::find(columns.begin(), columns.end(), field.name), columns.end()) << field.name;
  }
  EXPECT_EQ(rec.size(), record_fields);
  // The defaults: no rotation, one operation per iteration, no graph, unchecked.
  EXPECT_EQ(rec.at("rotated"), false);
  EXPECT_EQ(rec.at("aggregate_iterations"), 1);
  EXPECT_EQ(rec.at("graph_launches"), 0);
  EXPECT_EQ(rec.at("time_method"), "");
  EXPECT_EQ(rec.at("check_iterations"), 0);
  EXPECT_EQ(rec.at("failed_checks"), 0);
  EXPECT_EQ(rec.at("size_bytes"), 1024u);
  EXPECT_EQ(rec.at("in_place"), false);
  EXPECT_EQ(rec.at("root"), -1);
  EXPECT_EQ(rec.at("time_s").get<double>(), r1.time_s);
  EXPECT_EQ(rec.at("rank_time_min_s").get<double>(), r1.rank_time_min_s);
  EXPECT_EQ(rec.at("algbw_GBps").get<double>(), r1.algbw_GBps);

  reporter->add(sample_record(1024, true, 0.75));
  doc = json::parse(slurp(path));
  EXPECT_EQ(doc.at("records").size(), 2u);
  EXPECT_EQ(doc.at("records").at(1).at("in_place"), true);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  m.end_time_utc = "2026-11-30T03:10:00Z";
  reporter->end(m);
  doc = json::parse(slurp(path));
  EXPECT_EQ(doc.at("complete"), true);
  EXPECT_EQ(doc.at("metadata").at("end_time_utc"), "2026-11-30T03:10:00Z");
  EXPECT_EQ(doc.at("records").size(), 2u);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(JsonReporter, UnwritablePathThrowsNamingIt) {
  const std::string path = "/nonexistent-dir/x.json";
  try {
    auto reporter = make_json_reporter(path);
    reporter->begin(sample_metadata());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("No such file or directory"), std::string::npos) << what;
  }
}

// ---------------------------------------------------------------- console

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> data_lines(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& l : lines_of(text))
    if (!l.empty() && l[0] != '#') out.push_back(l);
  return out;
}

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(ConsoleReporter, OneLinePerSizeLikeNcclTests) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  std::string head = out.str();
  EXPECT_NE(head.find("0.1.0"), std::string::npos) << head;
  EXPECT_NE(head.find("abc1234"), std::string::npos) << head;
  EXPECT_NE(head.find("mpi"), std::string::npos) << head;
  EXPECT_NE(head.find("MPICH Version: 4.0.2"), std::string::npos) << head;
  EXPECT_EQ(head.find("NCCL version"), std::string::npos) << head;  // empty: not printed
  EXPECT_NE(head.find("node2"), std::string::npos) << head;

  BenchRecord a = sample_record(8, false, 1.0);
  a.time_s = 7.4e-6;
  a.algbw_GBps = 0.001;
  BenchRecord b = sample_record(8, true, 2.0);
  b.time_s = 0.92e-6;
  b.algbw_GBps = 0.01;
  reporter->add(a);
  // The out-of-place half waits for its in-place partner.
  EXPECT_TRUE(data_lines(out.str()).empty()) << out.str();
  reporter->add(b);
  auto lines = data_lines(out.str());
  ASSERT_EQ(lines.size(), 1u) << out.str();
  // Columns as in nccl-tests' all_reduce_perf output.
  EXPECT_EQ(lines[0],
            "           8             2     float     sum      -1     7.40    0.00    1.00       0"
            "     0.92    0.01    2.00       0");
  EXPECT_NE(out.str().find("# time: max over ranks of mean over iterations"), std::string::npos);
  // The column headers, byte for byte as nccl-tests 2.19 prints them.
  const std::string text_so_far = out.str();
  for (const char* header :
       {"#                                                              out-of-place              "
        "         in-place          \n",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    "
        " time   algbw   busbw  #wrong \n",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
        " (us)  (GB/s)  (GB/s)         \n"})
    EXPECT_NE(text_so_far.find(header), std::string::npos) << header;

  // A size with only an out-of-place record (and unchecked), then another.
  BenchRecord c = sample_record(1 << 20, false, 3.0);
  c.checked = false;
  c.time_s = 72454.8e-6;
  c.algbw_GBps = 1771.2;
  reporter->add(c);
  BenchRecord d = sample_record(4 << 20, false, 6.0);
  d.algbw_GBps = 57907;
  reporter->add(d);
  lines = data_lines(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();  // c printed when d (another size) arrived
  auto w = words(lines[1]);
  ASSERT_EQ(w.size(), 13u) << lines[1];
  EXPECT_EQ(w[0], "1048576");
  EXPECT_EQ(w[1], "262144");
  EXPECT_EQ(w[5], "72454.8");  // the figure fits the 7-wide column
  EXPECT_EQ(w[6], "1771.2");
  EXPECT_EQ(w[7], "3.00");
  EXPECT_EQ(w[8], "N/A");  // #wrong when not checked
  for (int i = 9; i < 13; ++i) EXPECT_EQ(w[i], "N/A") << i;

  m.end_time_utc = "2026-11-30T03:10:00Z";
  reporter->end(m);  // prints the pending d
  lines = data_lines(out.str());
  ASSERT_EQ(lines.size(), 3u) << out.str();
  w = words(lines[2]);
  ASSERT_EQ(w.size(), 13u);
  EXPECT_EQ(w[0], "4194304");
  EXPECT_EQ(w[6], "57907");
  EXPECT_EQ(w[9], "N/A");

  std::string text = out.str();
  EXPECT_NE(text.find("\n# Out of bounds values : 0 OK\n"), std::string::npos) << text;
  // (1 + 2 + 3 + 6) / 4 records
  EXPECT_NE(text.find("\n# Avg bus bandwidth    : 3 \n"), std::string::npos) << text;
}

TEST(ConsoleReporter, InPlaceOnlyWrongValuesAndAverage) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  BenchRecord a = sample_record(64, true, 0.25);
  a.wrong = 5;
  reporter->add(a);
  BenchRecord b = sample_record(128, false, 0.5);
  reporter->add(b);
  BenchRecord c = sample_record(128, true, 0.125);
  reporter->add(c);
  reporter->end(m);
  auto lines = data_lines(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  auto w = words(lines[0]);
  ASSERT_EQ(w.size(), 13u);
  EXPECT_EQ(w[0], "64");
  for (int i = 5; i < 9; ++i) EXPECT_EQ(w[i], "N/A") << i;
  EXPECT_EQ(w[12], "5");
  w = words(lines[1]);
  ASSERT_EQ(w.size(), 13u);
  EXPECT_EQ(w[0], "128");
  EXPECT_EQ(w[7], "0.50");
  EXPECT_EQ(w[11], "0.12");
  std::string text = out.str();
  // A record with wrong elements and no count of failed checks (as written
  // before failed_checks existed) counts as one failed check.
  EXPECT_NE(text.find("# Out of bounds values : 1 FAILED\n"), std::string::npos) << text;
  // (0.25 + 0.5 + 0.125) / 3
  EXPECT_NE(text.find("# Avg bus bandwidth    : 0.291667 \n"), std::string::npos) << text;
}

TEST(ConsoleReporter, OutOfBoundsCountsFailedChecksNotElements) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  BenchRecord a = sample_record(64, false, 0.25);
  a.check_iterations = 3;
  a.wrong = 5;  // 5 wrong elements found by 2 of the 3 checks
  a.failed_checks = 2;
  reporter->add(a);
  BenchRecord b = sample_record(64, true, 0.25);
  b.check_iterations = 3;
  reporter->add(b);
  reporter->end(m);
  std::string text = out.str();
  auto lines = data_lines(text);
  ASSERT_EQ(lines.size(), 1u) << text;
  auto w = words(lines[0]);
  ASSERT_EQ(w.size(), 13u);
  EXPECT_EQ(w[8], "5");   // #wrong: elements
  EXPECT_EQ(w[12], "0");  // in-place: none wrong
  EXPECT_NE(text.find("\n# Out of bounds values : 2 FAILED\n"), std::string::npos) << text;
}

TEST(ConsoleReporter, PassedChecksAreOk) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  BenchRecord a = sample_record(64, false, 0.25);
  a.check_iterations = 20;
  reporter->add(a);
  reporter->end(m);
  EXPECT_NE(out.str().find("\n# Out of bounds values : 0 OK\n"), std::string::npos) << out.str();
}

TEST(ConsoleReporter, HeaderNamesTheTimeStatisticAndMethod) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  m.backend_resources = "alloc=ncclMemAlloc, alltoall=ncclAlltoAll, blocking=0";
  reporter->begin(m);
  EXPECT_NE(out.str().find(
                "\n# Backend resources: alloc=ncclMemAlloc, alltoall=ncclAlltoAll, blocking=0\n"),
            std::string::npos)
      << out.str();
  BenchRecord a = sample_record(64, false, 0.25);
  a.time_method = "host wall clock over -n iterations + one sync (nccl-tests)";
  reporter->add(a);
  // Another time method: a table of its own, saying so.
  BenchRecord b = sample_record(128, false, 0.25);
  b.time_method = "host time to issue -n iterations (-C)";
  reporter->add(b);
  // Records that do not name their statistic say that too.
  BenchRecord c = sample_record(256, false, 0.25);
  c.time_statistic.clear();
  reporter->add(c);
  reporter->end(m);
  std::string text = out.str();
  EXPECT_NE(text.find("# Collective: allreduce\n"
                      "# time: max over ranks of mean over iterations\n"
                      "# time method: host wall clock over -n iterations + one sync (nccl-tests)\n"
                      "#\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n# time method: host time to issue -n iterations (-C)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n# time: statistic not recorded\n"), std::string::npos) << text;
  EXPECT_EQ(data_lines(text).size(), 3u) << text;
}

// Adaptive sampling's records (--target-ci): the interval per row in two
// more columns; a row that did not converge is marked and counted.
BenchRecord adaptive_record(size_t size, bool in_place, double half_width, bool converged) {
  BenchRecord r = sample_record(size, in_place, 1.0);
  r.timing_samples = 40;
  r.ci_half_width_percent = half_width;
  r.target_ci_percent = 2;
  r.converged = converged;
  return r;
}

// The run's notes (bench's diagnosis of what rows time besides the
// collective) follow the MPI library line; the files do not carry them.
TEST(ConsoleReporter, NotesFollowTheMpiLibrary) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  m.notes = {"Note: MPICH allocates scratch"};
  reporter->begin(m);
  reporter->end(m);
  const std::string text = out.str();
  EXPECT_NE(text.find("# MPI library: MPICH Version: 4.0.2\n# Note: MPICH allocates scratch\n"),
            std::string::npos)
      << text;
}

TEST(ConsoleReporter, AdaptiveRowsShowTheirInterval) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  reporter->add(adaptive_record(8, false, 1.26, true));
  reporter->add(adaptive_record(8, true, 6.04, false));
  reporter->end(m);
  const std::string text = out.str();
  EXPECT_NE(text.find("time 95% CI (target 2%)"), std::string::npos) << text;
  EXPECT_NE(text.find("    oop +-     ip +-\n"), std::string::npos) << text;
  const auto lines = data_lines(text);
  ASSERT_EQ(lines.size(), 1u) << text;
  EXPECT_NE(lines[0].find("  \u00b11.3%  "), std::string::npos) << lines[0];
  EXPECT_TRUE(lines[0].ends_with("  \u00b16.0%*")) << lines[0];
  EXPECT_NE(text.find("# * 1 time(s) did not reach the target interval"), std::string::npos)
      << text;

  // CSV and JSON carry the same four fields.
  TempDir dir;
  auto csv = make_csv_reporter(dir.file("a.csv"));
  auto json_out = make_json_reporter(dir.file("a.json"));
  for (auto* reporter_of : {csv.get(), json_out.get()}) {
    reporter_of->begin(m);
    reporter_of->add(adaptive_record(8, true, 6.04, false));
    reporter_of->end(m);
  }
  const auto rows = parse_csv(slurp(dir.file("a.csv")));
  ASSERT_EQ(rows.size(), 2u);
  auto col = [&](const std::string& name) {
    const auto at = std::find(rows[0].begin(), rows[0].end(), name) - rows[0].begin();
    return static_cast<size_t>(at) < rows[1].size() ? rows[1][at] : std::string("missing");
  };
  EXPECT_EQ(col("timing_samples"), "40");
  EXPECT_EQ(col("ci_half_width_percent"), "6.04");
  EXPECT_EQ(col("target_ci_percent"), "2");
  EXPECT_EQ(col("converged"), "0");
  const json record = json::parse(slurp(dir.file("a.json"))).at("records").at(0);
  EXPECT_EQ(record.at("timing_samples"), 40);
  EXPECT_EQ(record.at("ci_half_width_percent"), 6.04);
  EXPECT_EQ(record.at("target_ci_percent"), 2);
  EXPECT_EQ(record.at("converged"), false);
}

TEST(ConsoleReporter, FixedRowsKeepNcclTestsTable) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  BenchRecord r = sample_record(8, false, 1.0);
  r.ci_half_width_percent = 3;  // the stamped pass's interval: in the records only
  reporter->add(r);
  reporter->end(m);
  EXPECT_EQ(out.str().find("+-"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("target interval"), std::string::npos) << out.str();
}

TEST(ConsoleReporter, NewTableWhenTheCollectiveChanges) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  reporter->add(sample_record(1024, false, 1));
  BenchRecord g = sample_record(1024, false, 1);
  g.collective = "alltoall";
  g.op = "none";
  reporter->add(g);
  reporter->end(m);
  std::string text = out.str();
  auto lines = data_lines(text);
  ASSERT_EQ(lines.size(), 2u) << text;
  EXPECT_NE(text.find("# Collective: allreduce"), std::string::npos);
  EXPECT_NE(text.find("# Collective: alltoall"), std::string::npos);
  EXPECT_EQ(words(lines[1])[3], "none");
  EXPECT_EQ(words(lines[1])[9], "N/A");
}

TEST(ConsoleReporter, OneTableOverTypesAndOpsAsNcclTests) {
  // -d all -o all: nccl-tests prints one header; type and op are columns.
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  for (const char* dtype : {"float", "int8"}) {
    for (const char* op : {"sum", "max"}) {
      for (bool in_place : {false, true}) {
        BenchRecord r = sample_record(1024, in_place, 0);
        r.dtype = dtype;
        r.op = op;
        reporter->add(r);
      }
    }
  }
  reporter->end(m);
  const std::string text = out.str();
  size_t headers = 0;
  for (size_t at = text.find("# Collective:"); at != std::string::npos;
       at = text.find("# Collective:", at + 1))
    ++headers;
  EXPECT_EQ(headers, 1u) << text;
  const auto lines = data_lines(text);
  ASSERT_EQ(lines.size(), 4u) << text;  // one line per (type, op): out-of-place + in-place
  EXPECT_EQ(words(lines[0])[2], "float");
  EXPECT_EQ(words(lines[1])[3], "max");
  EXPECT_EQ(words(lines[3])[2], "int8");
}

TEST(ConsoleReporter, LargeFiguresShrinkToFitTheirColumns) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  BenchRecord a = sample_record(536870912, false, 0);
  a.count = 134217728;
  a.time_s = 256.02e-6;
  a.algbw_GBps = 2097.0;
  BenchRecord b = a;
  b.in_place = true;
  b.time_s = 0.41e-6;
  b.algbw_GBps = 1.3e6;
  reporter->add(a);
  reporter->add(b);
  BenchRecord c = a;
  c.size_bytes = 134217728;
  c.algbw_GBps = 275065;
  c.time_s = 123456.7e-6;
  reporter->add(c);
  reporter->end(m);
  auto lines = data_lines(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  EXPECT_EQ(lines[0],
            "   536870912     134217728     float     sum      -1   256.02  2097.0    0.00       0"
            "     0.41   1e+06    0.00       0");
  auto w = words(lines[1]);
  EXPECT_EQ(w[5], "123457");
  EXPECT_EQ(w[6], "275065");
}

TEST(ConsoleReporter, MinBwVerdictAndClosingLineAsNcclTests) {
  for (const auto& [minimum, verdict] :
       std::vector<std::pair<double, std::string>>{{3.0, "OK"}, {3.4, "FAILED"}}) {
    std::ostringstream out;
    auto reporter = make_console_reporter(out);
    RunMetadata m = sample_metadata();
    m.min_avg_busbw_GBps = minimum;
    reporter->begin(m);
    reporter->add(sample_record(8, false, 3.0));  // 3.0 >= 0.9 x 3.0, < 0.9 x 3.4
    reporter->end(m);
    const std::string text = out.str();
    EXPECT_NE(text.find("# Avg bus bandwidth    : 3 " + verdict +
                        "\n#\n"
                        "# Collective test concluded: all_reduce_perf\n"),
              std::string::npos)
        << text;
  }
}

TEST(ConsoleReporter, UsingDevicesLinesAsNcclTests) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  m.rank_devices = {"Pid   4000 on node0 device  0 [0000:07:00] NVIDIA H100",
                    "Pid   4001 on node0 device  1 [0000:08:00] NVIDIA H100"};
  reporter->begin(m);
  EXPECT_NE(out.str().find("# Using devices\n"
                           "#  Rank  0 Group  0 Pid   4000 on node0 device  0 [0000:07:00] "
                           "NVIDIA H100\n"
                           "#  Rank  1 Group  0 Pid   4001 on node0 device  1"),
            std::string::npos)
      << out.str();
}

// What a script parsing nccl-tests' header reads from it, with nccl-tests' line
// shapes: key -> value for the version, program, sweep parameters and devices.
std::map<std::string, std::string> nccl_tests_header_fields(const std::string& text) {
  const std::regex version(R"(^# nccl-tests version (\S+) nccl-headers=(\d+) nccl-library=(\d+))");
  const std::regex program(R"(^# Collective test starting: (\S+))");
  const std::regex parameters(
      R"(^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\) )"
      R"(warmup iters: (\d+) iters: (\d+) agg iters: (\d+) validation: (\d+) graph: (\d+))");
  const std::regex device(
      R"(^#  Rank +(\d+) Group +(\d+) Pid +(\d+) on +(\S+) device +(\d+) \[(\S+)\] (.*)$)");
  const std::vector<std::string> parameter_names = {"nThread", "nGpus",      "minBytes", "maxBytes",
                                                    "step",    "step_kind",  "warmup",   "iters",
                                                    "agg",     "validation", "graph"};
  std::map<std::string, std::string> fields;
  std::istringstream in(text);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, version)) {
      fields["version"] = m[1];
      fields["nccl-headers"] = m[2];
      fields["nccl-library"] = m[3];
    } else if (std::regex_search(line, m, program)) {
      fields["program"] = m[1];
    } else if (std::regex_search(line, m, parameters)) {
      for (size_t i = 0; i < parameter_names.size(); ++i) fields[parameter_names[i]] = m[i + 1];
    } else if (std::regex_search(line, m, device)) {
      fields["rank" + m[1].str()] = m[2].str() + "|" + m[3].str() + "|" + m[4].str() + "|" +
                                    m[5].str() + "|" + m[6].str() + "|" + m[7].str();
    }
  }
  return fields;
}

TEST(ConsoleReporter, NcclTestsHeaderLinesParseAsNcclTestsOwn) {
  // all_reduce_perf -b 8 -e 256M -f 4 -w 3 -n 10 over 2 ranks (the fixture), and
  // ccscope's header for the same flags and devices.
  const auto expected =
      nccl_tests_header_fields(slurp(testing::data_file("all_reduce_perf-h200-2rank-socket.txt")));
  ASSERT_EQ(expected.size(), 17u);  // 3 + 1 + 11 + 2 ranks
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  m.nccl_version = "2.28.3";
  m.rank_devices = {"Pid   2663 on         vm device  0 [0000:00:06] NVIDIA H200",
                    "Pid   2664 on         vm device  0 [0000:00:06] NVIDIA H200"};
  RunMetadata::NcclTestsParameters p;
  p.program = "all_reduce_perf";
  p.min_bytes = 8;
  p.max_bytes = 268435456;
  p.step_bytes = 1048576;
  p.step_factor = 4;
  p.warmup_iterations = 3;
  p.iterations = 10;
  p.check_iterations = 1;
  m.nccl_tests_parameters = p;
  reporter->begin(m);
  EXPECT_EQ(nccl_tests_header_fields(out.str()), expected) << out.str();
  EXPECT_NE(out.str().find("# nThread 1 nGpus 1 minBytes 8 maxBytes 268435456 step: 4(factor) "
                           "warmup iters: 3 iters: 10 agg iters: 1 validation: 1 graph: 0 "
                           "unalign: 0\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("(ccscope 0.1.0, following nccl-tests 2.19.6)"), std::string::npos);

  // Built against other headers than the library run (the backend's resources say so).
  std::ostringstream headers;
  auto reporter_headers = make_console_reporter(headers);
  m.backend_resources = "nccl=2.28.3, nccl_header=2.27.5, alloc=ncclMemAlloc";
  reporter_headers->begin(m);
  EXPECT_NE(headers.str().find("nccl-headers=22705 nccl-library=22803"), std::string::npos)
      << headers.str();

  // A step in bytes, the MPI backend (no NCCL: code 0), -t 2 -g 2 and a split's groups.
  std::ostringstream out2;
  auto reporter2 = make_console_reporter(out2);
  m.nccl_version = "";
  p.step_factor = 1;
  p.threads = 2;
  p.gpus = 2;
  m.nccl_tests_parameters = p;
  m.rank_groups = {0, 1};
  reporter2->begin(m);
  const auto fields = nccl_tests_header_fields(out2.str());
  EXPECT_EQ(fields.at("nccl-library"), "0");
  EXPECT_EQ(fields.at("step"), "1048576");
  EXPECT_EQ(fields.at("step_kind"), "bytes");
  EXPECT_EQ(fields.at("nThread"), "2");
  EXPECT_EQ(fields.at("nGpus"), "2");
  EXPECT_EQ(fields.at("rank1").substr(0, 2), "1|");
  EXPECT_EQ(fields.at("rank0").substr(0, 2), "0|");
}

TEST(ConsoleReporter, NoNcclTestsLinesWithoutTheirParameters) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  reporter->begin(sample_metadata());
  EXPECT_EQ(out.str().find("# nccl-tests version"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("# nThread"), std::string::npos) << out.str();
}

TEST(ConsoleReporter, EmptyRun) {
  std::ostringstream out;
  auto reporter = make_console_reporter(out);
  RunMetadata m = sample_metadata();
  reporter->begin(m);
  reporter->end(m);
  EXPECT_TRUE(data_lines(out.str()).empty());
  EXPECT_NE(out.str().find("# Avg bus bandwidth    : 0 \n"), std::string::npos) << out.str();
}

// A reporter that counts what it was fed and can be told to fail on add().
class CountingReporter : public Reporter {
 public:
  CountingReporter(int* added, bool fail) : added_(added), fail_(fail) {}
  void begin(const RunMetadata&) override {}
  void add(const BenchRecord&) override {
    if (fail_) throw std::runtime_error("disk full writing a.csv");
    ++*added_;
  }
  void end(const RunMetadata&) override {}

 private:
  int* added_;
  bool fail_;
};

TEST(ReporterList, AFailingReporterDoesNotStarveTheOthers) {
  int first = 0, third = 0, unused = 0;
  ReporterList list;
  list.append(std::make_unique<CountingReporter>(&first, false));
  list.append(std::make_unique<CountingReporter>(&unused, true));
  list.append(std::make_unique<CountingReporter>(&third, false));
  list.begin(sample_metadata());
  try {
    list.add(sample_record(1024, false, 1.0));
    FAIL() << "the failing reporter's error was swallowed";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "disk full writing a.csv");
  }
  EXPECT_EQ(first, 1);
  EXPECT_EQ(third, 1);  // fed although the one before it threw
}

}  // namespace
}  // namespace ccscope::reports
