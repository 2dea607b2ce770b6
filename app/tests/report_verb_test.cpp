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

}  // namespace
}  // namespace ccscope::app
