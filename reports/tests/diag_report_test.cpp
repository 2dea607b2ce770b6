// ccscope diag's files in `ccscope report`: read back (and refused with file
// and line), the HTML page's Findings section (a verdict per stage, FAIL and
// WARN rows first, PASS and SKIP folded in a <details>), the markdown tables,
// the --json document written and read back; bench pages unchanged by them.
//
// diag_data/diag_checks.csv is one diag run of two hosts, 8 checks of stages 1-3:
// 4 PASS, 1 SKIP, 1 FAIL (node.nvlink_bandwidth), 2 WARN; its cluster.clock_offset
// row has a hostile host "<script>x</script>" and a message with '&'.
// diag_checks_bad.csv is it with line 4's status "OK"; diag_checks_empty.csv its
// header alone; diag_incomplete.json a --json document of another run that
// stopped after a FAIL ("complete": false).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ccscope/records/diag_record.h"
#include "ccscope/reports/diag_results.h"
#include "ccscope/reports/html_report.h"
#include "ccscope/reports/markdown_report.h"
#include "ccscope/reports/training_results.h"
#include "ccscope/reports/user_files.h"  // read_input_file

namespace ccscope::reports {
namespace {

const std::string kDiag = CCSCOPE_DIAG_TEST_DATA;
const std::string kData = CCSCOPE_REPORTS_TEST_DATA;  // bench files
const std::string kTraining = CCSCOPE_TRAINING_TEST_DATA;

std::string error_of(const std::string& path) {
  try {
    read_diag_results(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string error_of_text(const std::string& text) {
  try {
    parse_diag_results("d.json", text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size()))
    ++n;
  return n;
}

// Where `what` first occurs in `text`; fails the test when it does not.
size_t at(const std::string& text, const std::string& what) {
  const size_t p = text.find(what);
  EXPECT_NE(p, std::string::npos) << "missing: " << what;
  return p;
}

TEST(DiagReaders, ReadsTheChecksOfACsv) {
  const DiagResults d = read_diag_results(kDiag + "/diag_checks.csv");
  ASSERT_EQ(d.checks.size(), 8u);
  EXPECT_TRUE(d.incomplete_runs.empty());
  const records::DiagCheck& fail = d.checks[4].check;
  EXPECT_EQ(fail.name, "node.nvlink_bandwidth");
  EXPECT_EQ(fail.status, records::DiagStatus::kFail);
  EXPECT_EQ(fail.stage, records::DiagStage::kNode);
  EXPECT_EQ(fail.host, "gpu-b");
  EXPECT_EQ(fail.rank, 3);
  EXPECT_EQ(fail.peer, "GPU5");
  EXPECT_EQ(fail.measured, 41.5);
  EXPECT_EQ(fail.expected, 150);
  EXPECT_EQ(fail.message, "GPU3 -> GPU5 at 28% of \"NV18\", a lane down?");
  EXPECT_EQ(d.checks[6].check.measured, -2.25);
  EXPECT_TRUE(std::isnan(d.checks[2].check.measured));
  EXPECT_EQ(d.checks[7].check.rank, -1);
}

TEST(DiagReaders, TellsDiagFilesFromOthers) {
  EXPECT_TRUE(is_diag_file(read_input_file(kDiag + "/diag_checks.csv")));
  EXPECT_TRUE(is_diag_file(read_input_file(kDiag + "/diag_checks_empty.csv")));
  EXPECT_TRUE(is_diag_file(read_input_file(kDiag + "/diag_incomplete.json")));
  EXPECT_FALSE(is_diag_file(read_input_file(kTraining + "/train_runs.csv")));
  EXPECT_FALSE(is_diag_file(read_input_file(kTraining + "/train_ranks_empty.csv")));
  EXPECT_FALSE(is_diag_file(read_input_file(kData + "/all_reduce_perf-h200-4rank-socket.json")));
  EXPECT_FALSE(is_diag_file(read_input_file(kData + "/osu_allreduce.txt")));
  EXPECT_FALSE(is_training_csv(read_input_file(kDiag + "/diag_checks.csv")));
  EXPECT_FALSE(
      is_diag_file("{\"schema\": \"ccscope.bench/1\", \"note\": \"ccscope.diag_check/1\"}"));
}

TEST(DiagReaders, BadFilesGiveOneLineNamingFileAndLine) {
  const std::string bad = error_of(kDiag + "/diag_checks_bad.csv");
  EXPECT_NE(bad.find("diag_checks_bad.csv:4: status: 'OK' is not PASS, WARN, FAIL or SKIP"),
            std::string::npos)
      << bad;
  EXPECT_EQ(bad.find('\n'), std::string::npos) << bad;
  const std::string empty = error_of(kDiag + "/diag_checks_empty.csv");
  EXPECT_NE(empty.find("diag_checks_empty.csv:1: a ccscope.diag_check CSV header but no records"),
            std::string::npos)
      << empty;
  // A truncated row, a newer version, a missing column.
  std::string text = read_input_file(kDiag + "/diag_checks.csv");
  text = text.substr(0, text.rfind(",GB/s,"));
  EXPECT_NE(error_of_text(text).find("d.json:9: 12 fields, the header has 15"), std::string::npos)
      << error_of_text(text);
  EXPECT_NE(error_of_text("schema,run_id,stage,check,status\nccscope.diag_check/7,d,1,rank.gemm,"
                          "PASS\n")
                .find("d.json:2: schema: ccscope.diag_check/7 is newer than this ccscope reads"),
            std::string::npos);
  EXPECT_NE(error_of_text("schema,run_id,check,status\nccscope.diag_check/1,d,rank.gemm,PASS\n")
                .find("d.json:1: the header has no 'stage' column"),
            std::string::npos);
}

// The CSV codec's "not closed" and the reader's advice were both followed by
// "is the file complete and unedited?": said once now.
TEST(DiagReaders, AnUnclosedQuoteGivesTheAdviceOnce) {
  const std::string text =
      read_input_file(kDiag + "/diag_checks.csv") + "ccscope.diag_check/1,\"d\n";
  EXPECT_EQ(error_of_text(text),
            "d.json:10: a quoted field is not closed; is the file complete and unedited?");
}

TEST(DiagReaders, BadJsonNamesTheKey) {
  const std::string good = read_input_file(kDiag + "/diag_incomplete.json");
  std::string bad = good;
  bad.replace(bad.find("\"FAIL\""), 6, "\"BROKEN\"");
  EXPECT_EQ(error_of_text(bad),
            "d.json: checks[1].status: 'BROKEN' is not PASS, WARN, FAIL or SKIP");
  bad = good;
  bad.replace(bad.find("899.0"), 5, "\"fast\"");
  EXPECT_EQ(error_of_text(bad), "d.json: checks[0].measured: expected a number, found \"fast\"");
  bad = good;
  bad.replace(bad.find("/1\""), 3, "/2\"");
  EXPECT_NE(error_of_text(bad).find("d.json: schema: ccscope.diag_check/2 is newer"),
            std::string::npos)
      << error_of_text(bad);
  EXPECT_NE(
      error_of_text("{\"schema\": \"ccscope.diag_check/1\", \"complete\": true, \"checks\": []}")
          .find("d.json: checks: no checks"),
      std::string::npos);
}

TEST(DiagJson, WrittenDocumentReadsBackCellForCell) {
  const DiagResults csv = read_diag_results(kDiag + "/diag_checks.csv");
  const std::string doc = diag_checks_json(csv.checks, false);
  EXPECT_TRUE(
      doc.starts_with("{\n  \"schema\": \"ccscope.diag_check/1\",\n  \"complete\": false,\n"))
      << doc;
  EXPECT_NE(doc.find("\"expected\": null"), std::string::npos);  // the SKIP's figures
  EXPECT_TRUE(is_diag_file(doc));
  const DiagResults back = parse_diag_results("diag.json", doc);
  ASSERT_EQ(back.checks.size(), csv.checks.size());
  const auto& kind = records::diag_check_kind();
  for (size_t r = 0; r < csv.checks.size(); ++r) {
    const auto written = records::diag_check_cells(csv.checks[r]);
    const auto read = records::diag_check_cells(back.checks[r]);
    for (size_t i = 0; i < kind.fields.size(); ++i)
      EXPECT_EQ(records::csv_text(read[i], kind.fields[i].type),
                records::csv_text(written[i], kind.fields[i].type))
          << "check " << r << ": " << kind.fields[i].name;
  }
  EXPECT_EQ(back.incomplete_runs, std::vector<std::string>{"diag-20261202T101500Z"});
  EXPECT_TRUE(
      parse_diag_results("d.json", diag_checks_json(csv.checks, true)).incomplete_runs.empty());
}

DiagResults fixture() {
  DiagResults d = read_diag_results(kDiag + "/diag_checks.csv");
  d.append(read_diag_results(kDiag + "/diag_incomplete.json"));
  return d;
}

TEST(DiagHtml, FindingsFailFirstPassFoldedVerdictPerStage) {
  const std::string html = render_html_report({}, TrainingResults{}, fixture(), ReportOptions{});
  EXPECT_EQ(count(html, "<h2 id=\"findings\">Findings</h2>"), 1u);
  EXPECT_EQ(count(html, "<h2>Summary</h2>"), 0u);  // diag files alone: no bench sections
  // One heading per run, with its worst status.
  EXPECT_NE(html.find("<h3 id=\"diag-run-diag-20261202_54101500_5a\">diag-20261202T101500Z <span "
                      "class=\"badge badge-fail\">FAIL</span></h3>"),
            std::string::npos);
  const size_t run1 = at(html, "<h3 id=\"diag-run-diag-20261202_54101500_5a\">");
  const size_t run2 = at(html, "<h3 id=\"diag-run-diag-20261203_54080000_5a\">");
  ASSERT_LT(run1, run2);
  const std::string first = html.substr(run1, run2 - run1);
  EXPECT_NE(first.find("2026-12-02T10:15:01Z to 2026-12-02T10:15:41Z, 8 check(s)."),
            std::string::npos);
  EXPECT_NE(first.find("stage 1 rank: 2 PASS, 1 SKIP</li>"), std::string::npos) << first;
  EXPECT_NE(first.find("<span class=\"badge badge-fail\">FAIL</span> stage 2 node: 1 FAIL, 1 "
                       "WARN, 1 PASS</li>"),
            std::string::npos);
  EXPECT_NE(first.find("stage 3 cluster: 1 WARN, 1 PASS</li>"), std::string::npos);
  // Every check shown once, in a row of its status.
  EXPECT_EQ(count(first, "<tr class=\"diag-"), 8u);
  EXPECT_EQ(count(first, "<tr class=\"diag-fail\">"), 1u);
  EXPECT_EQ(count(first, "<tr class=\"diag-warn\">"), 2u);
  EXPECT_EQ(count(first, "<tr class=\"diag-pass\">"), 4u);
  EXPECT_EQ(count(first, "<tr class=\"diag-skip\">"), 1u);
  // FAIL, then WARN (by stage), then in the folded part PASS, then SKIP.
  const size_t fail =
      at(first, "<td>node.nvlink_bandwidth</td><td><span class=\"badge badge-fail\">");
  const size_t warn_node = at(first, "<td>node.pcie_bandwidth</td>");
  const size_t warn_cluster = at(first, "<td>cluster.clock_offset</td>");
  const size_t folded =
      at(first, "<details class=\"diag-passed\"><summary>4 PASS, 1 SKIP</summary>");
  const size_t pass = at(first, "<td>rank.gemm</td>");
  const size_t skip = at(first, "<td>rank.gpu_visible</td>");
  EXPECT_LT(fail, warn_node);
  EXPECT_LT(warn_node, warn_cluster);
  EXPECT_LT(warn_cluster, folded);
  EXPECT_LT(folded, pass);
  EXPECT_LT(pass, skip);
  // The failure's row: where, measured vs expected with the unit, message, remedy.
  EXPECT_NE(first.find("<td>2 node</td><td>node.nvlink_bandwidth</td><td><span class=\"badge "
                       "badge-fail\">FAIL</span></td><td>gpu-b rank 3 \xE2\x86\x92 GPU5</td><td "
                       "class=\"num\">41.5 GB/s</td><td class=\"num\">150 GB/s</td><td>GPU3 -&gt; "
                       "GPU5 at 28% of &quot;NV18&quot;, a lane down?</td><td>check nvidia-smi "
                       "nvlink -s; reseat or RMA the board</td></tr>"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("<td>cluster</td><td class=\"num\">92.5 GB/s</td>"), std::string::npos);
  EXPECT_NE(first.find("<td class=\"num\">-2.25 ms</td><td class=\"num\">1 ms</td>"),
            std::string::npos);
  // Untrusted text escaped.
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(first.find("&lt;script&gt;x&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(first.find("2.25 ms &amp; rising"), std::string::npos);
  // The stopped run says so.
  const std::string second = html.substr(run2);
  EXPECT_NE(second.find("<strong>Incomplete:</strong>"), std::string::npos);
  EXPECT_EQ(first.find("Incomplete"), std::string::npos);
  EXPECT_NE(second.find("<details class=\"diag-passed\"><summary>1 PASS</summary>"),
            std::string::npos);
}

TEST(DiagHtml, BesideBenchRunsAndPagesWithoutDiagUnchanged) {
  const std::vector<LoadedRun> bench = {read_results(kData + "/all_reduce_perf-h200-1rank.txt")};
  const std::string alone = render_html_report(bench, ReportOptions{});
  EXPECT_EQ(render_html_report(bench, TrainingResults{}, DiagResults{}, ReportOptions{}), alone);
  EXPECT_EQ(count(alone, "Findings"), 0u);
  EXPECT_EQ(count(alone, ".badge"), 0u);
  const TrainingResults training = read_training_results(kTraining + "/train_runs.csv");
  const std::string all = render_html_report(bench, training, fixture(), ReportOptions{});
  EXPECT_LT(at(all, "<h2>Summary</h2>"), at(all, "<h2 id=\"findings\">Findings</h2>"));
  EXPECT_LT(at(all, "<h2 id=\"findings\">Findings</h2>"), at(all, "<h2>Training</h2>"));
  EXPECT_LT(at(all, "<h2>Training</h2>"), at(all, "<h2>Run metadata</h2>"));
  EXPECT_EQ(count(all, ".badge-fail {"), 1u);
}

TEST(DiagMarkdown, FindingsTableFailFirstAndVerdictPerStage) {
  const std::string md = render_markdown_report({}, TrainingResults{}, fixture(), ReportOptions{});
  EXPECT_EQ(md.substr(0, 30), "# ccscope report\n\n## Findings\n");
  const size_t run1 = at(md, "\n### diag-20261202T101500Z: FAIL\n");
  const size_t run2 = at(md, "\n### diag-20261203T080000Z: FAIL\n");
  ASSERT_LT(run1, run2);
  const std::string first = md.substr(run1, run2 - run1);
  EXPECT_NE(first.find("- stage 1 rank: 2 PASS, 1 SKIP\n- stage 2 node: 1 FAIL, 1 WARN, 1 PASS\n"
                       "- stage 3 cluster: 1 WARN, 1 PASS\n"),
            std::string::npos)
      << first;
  EXPECT_EQ(count(first, "\n| "), 9u);  // header and one row per check
  const size_t fail = at(first,
                         "| 2 node | node.nvlink_bandwidth | **FAIL** | gpu-b rank 3 "
                         "\xE2\x86\x92 GPU5 | 41.5 GB/s | 150 GB/s | GPU3 -\\> GPU5 at 28% of "
                         "\"NV18\", a lane down? | check nvidia-smi nvlink -s; reseat or "
                         "RMA the board |\n");
  const size_t warn = at(first, "| 2 node | node.pcie_bandwidth | **WARN** |");
  const size_t hostile = at(first,
                            "| 3 cluster | cluster.clock_offset | **WARN** | "
                            "\\<script\\>x\\</script\\> | -2.25 ms | 1 ms |");
  const size_t pass = at(first,
                         "| 1 rank | rank.gemm | PASS | gpu-a rank 0 | 912.5 GFLOP/s | 900 "
                         "GFLOP/s | GEMM at 101% of the reference | - |\n");
  const size_t skip = at(first, "| rank.gpu_visible | SKIP |");
  EXPECT_LT(fail, warn);
  EXPECT_LT(warn, hostile);
  EXPECT_LT(hostile, pass);
  EXPECT_LT(pass, skip);
  EXPECT_NE(md.substr(run2).find("**Incomplete:**"), std::string::npos);
  // Without diag checks: the text it was.
  const std::vector<LoadedRun> bench = {read_results(kData + "/all_reduce_perf-h200-1rank.txt")};
  EXPECT_EQ(render_markdown_report(bench, TrainingResults{}, DiagResults{}, ReportOptions{}),
            render_markdown_report(bench, ReportOptions{}));
  const std::string both =
      render_markdown_report(bench, TrainingResults{}, fixture(), ReportOptions{});
  EXPECT_LT(at(both, "| size |"), at(both, "\n## Findings\n"));
}

}  // namespace
}  // namespace ccscope::reports
