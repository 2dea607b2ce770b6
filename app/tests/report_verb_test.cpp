// `ccscope report` (app/src/report_verb.cpp): arguments, exit codes, and a
// round trip from a CSV written by ccscope's own CSV reporter.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/records/schema.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/record.h"
#include "ccscope/reports/reporter.h"

namespace ccscope::app {
namespace {

using namespace ccscope::reports;
namespace fs = std::filesystem;

int report_main(const std::vector<std::string>& args) { return report_verb(args, {}); }

class ReportVerb : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ccscope-report-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  static std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  fs::path dir_;
};

TEST_F(ReportVerb, UsageErrorsExit2) {
  EXPECT_EQ(report_main({}), 2);
  EXPECT_EQ(report_main({"--no-such-flag", "x.csv"}), 2);
  EXPECT_EQ(report_main({file("missing.csv"), "-o", file("out.html")}), 2);
  EXPECT_FALSE(fs::exists(file("out.html")));
}

TEST_F(ReportVerb, HelpExits0) { EXPECT_EQ(report_main({"--help"}), 0); }

TEST_F(ReportVerb, HtmlAndMarkdownFromCcscopeCsv) {
  RunMetadata m;
  m.ccscope_version = "0.1.0";
  m.backend = "mpi";
  m.hosts = {"<script>alert(1)</script>", "vm"};
  m.ranks = 2;
  m.nodes = 1;
  m.ranks_per_node = 2;
  {
    auto csv = make_csv_reporter(file("run.csv"));
    csv->begin(m);
    for (size_t size = 8; size <= 1024; size *= 2)
      for (bool in_place : {false, true}) {
        BenchRecord r;
        r.collective = "allreduce";
        r.backend = "mpi";
        r.dtype = "float";
        r.op = "sum";
        r.in_place = in_place;
        r.size_bytes = size;
        r.count = size / 4;
        r.ranks = 2;
        r.nodes = 1;
        r.ranks_per_node = 2;
        r.time_s = 1e-5;
        r.algbw_GBps = size / 1e-5 / 1e9;
        r.busbw_GBps = r.algbw_GBps;
        csv->add(r);
      }
    csv->end(m);
  }
  ASSERT_EQ(report_main({file("run.csv"), "-o", file("out.html")}), 0);
  const std::string html = slurp(file("out.html"));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);

  ASSERT_EQ(report_main({"--markdown", file("run.csv"), "-o", file("out.md")}), 0);
  const std::string md = slurp(file("out.md"));
  EXPECT_NE(md.find("## allreduce, out-of-place"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 KiB |"), std::string::npos) << md;
}

const char* kNcclTestsText =
    "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n"
    "# Collective test starting: all_gather_perf\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
    "time   algbw   busbw #wrong\n"
    "        1024           128     float    none      -1    12.25    0.08    0.06      0    "
    "12.00    0.09    0.06      0\n"
    "# Avg bus bandwidth    : 0.06\n";

// `--csv` alone writes the records read, in ccscope's schema, and nothing else.
TEST_F(ReportVerb, CsvExportOfAnotherToolsFileReadsBackInCcscopesSchema) {
  std::ofstream(file("nccl.txt")) << kNcclTestsText;
  ASSERT_EQ(report_main({file("nccl.txt"), "--csv", file("import.csv")}), 0);
  const std::string text = slurp(file("import.csv"));
  EXPECT_EQ(text.rfind("schema,collective,", 0), 0u) << text;
  const LoadedRun back = read_results(file("import.csv"));
  EXPECT_EQ(back.format, "ccscope-csv");
  ASSERT_EQ(back.records.size(), 2u);
  EXPECT_EQ(back.records[0].collective, "allgather");
  EXPECT_EQ(back.records[0].size_bytes, 1024u);
  EXPECT_EQ(back.records[0].time_statistic, "avg");
  EXPECT_EQ(back.records[1].in_place, true);
  EXPECT_DOUBLE_EQ(*back.records[1].time_s, 12e-6);
}

TEST_F(ReportVerb, JsonExportRefusesRunsOfDifferentMetadata) {
  std::ofstream(file("a.txt")) << kNcclTestsText;
  std::ofstream(file("b.txt"))
      << "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n"
      << "#  Rank  0 Group  0 Pid  11 on other-node device  0 [0x01] NVIDIA H200\n"
      << std::string(kNcclTestsText).substr(std::string(kNcclTestsText).find('\n') + 1);
  ASSERT_EQ(report_main({file("a.txt"), "--json", file("one.json")}), 0);
  EXPECT_EQ(read_results(file("one.json")).records.size(), 2u);
  EXPECT_EQ(report_main({file("a.txt"), file("b.txt"), "--json", file("two.json")}), 2);
  EXPECT_FALSE(fs::exists(file("two.json")));
  EXPECT_EQ(report_main({file("a.txt"), file("b.txt"), "--csv", file("two.csv")}), 0);
  EXPECT_EQ(read_results(file("two.csv")).records.size(), 4u);
}

TEST_F(ReportVerb, SchemaPrintsEveryFieldOfTheTable) {
  ::testing::internal::CaptureStdout();
  ASSERT_EQ(report_main({"--schema"}), 0);
  const std::string text = ::testing::internal::GetCapturedStdout();
  for (const auto& field : records::bench_kind().fields)
    EXPECT_NE(text.find("| " + std::string(field.name) + " |"), std::string::npos) << field.name;
  EXPECT_NE(text.find("ccscope.bench/5"), std::string::npos);
}

TEST_F(ReportVerb, TwoOutputsOnStandardOutputAreRefused) {
  std::ofstream(file("a.txt")) << kNcclTestsText;
  EXPECT_EQ(report_main({file("a.txt"), "--csv", "-", "--json", "-"}), 2);
}

}  // namespace
}  // namespace ccscope::app
