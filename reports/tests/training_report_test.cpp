// ccscope train's CSVs in `ccscope report`: read back (and refused with file
// and line), the HTML page's Training section (one speed-up and efficiency
// curve per strategy, one loss curve per run), the markdown table; bench pages
// unchanged by them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ccscope/reports/html_report.h"
#include "ccscope/reports/markdown_report.h"
#include "ccscope/reports/training_results.h"

namespace ccscope::reports {
namespace {

const std::string kTraining = CCSCOPE_TRAINING_TEST_DATA;
const std::string kData = CCSCOPE_REPORTS_TEST_DATA;  // bench files

TrainingResults fixture() {
  TrainingResults t = read_training_results(kTraining + "/train_runs.csv");
  t.append(read_training_results(kTraining + "/train_steps.csv"));
  return t;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size()))
    ++n;
  return n;
}

// The element that starts with `open` (up to its closing tag `close`).
std::string element(const std::string& page, const std::string& open, const std::string& close) {
  const size_t b = page.find(open);
  if (b == std::string::npos) return "";
  const size_t e = page.find(close, b);
  return e == std::string::npos ? "" : page.substr(b, e + close.size() - b);
}

// The series groups of a chart: each one's <title> and number of points.
std::vector<std::pair<std::string, size_t>> series_of(const std::string& chart) {
  std::vector<std::pair<std::string, size_t>> out;
  const std::string open = "<g class=\"series training-series\">\n<title>";
  for (size_t p = chart.find(open); p != std::string::npos; p = chart.find(open, p + 1)) {
    const size_t t = p + open.size();
    const std::string group = chart.substr(p, chart.find("</g>", p) - p);
    out.push_back({chart.substr(t, chart.find("</title>", t) - t), count(group, "<circle")});
  }
  return out;
}

TEST(TrainingResults, ReadsRunAndStepFiles) {
  const TrainingResults t = fixture();
  ASSERT_EQ(t.runs.size(), 9u);
  ASSERT_EQ(t.steps.size(), 18u);
  EXPECT_EQ(t.runs[3].run_id, "ddp-n4");
  EXPECT_EQ(t.runs[3].speedup, 3.2);
  EXPECT_FALSE(t.runs[0].speedup.has_value());
  EXPECT_EQ(t.steps[6].run_id, "ddp-n2");
  EXPECT_EQ(t.steps[6].loss, 2.3);
}

TEST(TrainingResults, TrainingFilesAreToldFromBenchFiles) {
  EXPECT_TRUE(is_training_csv("schema,run_id\nccscope.train_run/1,a\n"));
  EXPECT_TRUE(is_training_csv("\nschema,run_id\r\n\r\n\"ccscope.train_step/7\",a\r\n"));
  EXPECT_FALSE(is_training_csv("schema,collective\nccscope.bench/3,allreduce\n"));
  EXPECT_FALSE(is_training_csv("schema,run_id\n"));
  EXPECT_FALSE(is_training_csv("run_id,schema\na,ccscope.train_run/1\n"));
  EXPECT_FALSE(is_training_csv("# nccl-tests version 2.13.8\n"));
}

TEST(TrainingResults, BadCellIsAnInputErrorNamingFileAndLine) {
  try {
    read_training_results(kTraining + "/train_runs_bad.csv");
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train_runs_bad.csv:4: step_median_s: 'fast' is not a finite number"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(TrainingResults, NewerVersionMissingColumnOrNoRowsRefused) {
  auto error = [](const std::string& text) {
    try {
      parse_training_results("t.csv", text);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("schema,run_id,step,loss\nccscope.train_step/1,a,0,1\n"
                  "ccscope.train_step/2,a,1,1\n")
                .find("t.csv:3: schema: ccscope.train_step/2 is newer"),
            std::string::npos);
  EXPECT_NE(error("schema,run_id,step\nccscope.train_step/1,a,0\n").find("t.csv:1:"),
            std::string::npos);
  EXPECT_NE(error("schema,run_id,strategy,ranks,step_median_s\nccscope.train_run/1,a,ddp,2\n")
                .find("t.csv:2:"),
            std::string::npos);
  EXPECT_EQ(error("schema,run_id,step,loss\nccscope.train_step/1,a,0,1\n"), "no error");
}

TEST(TrainingHtml, OneSpeedupAndEfficiencyCurvePerStrategy) {
  const std::string page = render_html_report({}, fixture(), ReportOptions{});
  EXPECT_EQ(count(page, "<h2>Training</h2>"), 1u);
  // Training files alone: no bench sections.
  EXPECT_EQ(count(page, "<h2>Summary</h2>"), 0u);
  EXPECT_EQ(count(page, "<h2>Run metadata</h2>"), 0u);
  const std::vector<std::pair<std::string, size_t>> expected = {
      {"ddp", 3}, {"ddp (weak)", 2}, {"zero1", 1}, {"zero3", 2}};
  for (const char* id : {"training-speedup", "training-efficiency"}) {
    const std::string chart =
        element(page, "<figure class=\"chart-box\" id=\"" + std::string(id) + "\">", "</figure>");
    ASSERT_FALSE(chart.empty()) << id;
    EXPECT_EQ(series_of(chart), expected) << id;
    EXPECT_EQ(count(chart, "<g class=\"ideal\">"), 1u) << id;
  }
  // The ideal speed-up is y = x: from (1, 1) to (4, 4), both on the diagonal.
  const std::string speedup =
      element(page, "<figure class=\"chart-box\" id=\"training-speedup\">", "</figure>");
  EXPECT_NE(speedup.find("ddp-n4): speed-up 3.20"), std::string::npos);
  const std::string ideal = element(speedup, "<g class=\"ideal\">", "</g>");
  EXPECT_NE(ideal.find("stroke-dasharray"), std::string::npos);
  const std::string efficiency =
      element(page, "<figure class=\"chart-box\" id=\"training-efficiency\">", "</figure>");
  EXPECT_NE(efficiency.find("zero3-n4): efficiency 69%"), std::string::npos);
}

TEST(TrainingHtml, RunsTableCommShareAndLossCurves) {
  const std::string page = render_html_report({}, fixture(), ReportOptions{});
  const std::string runs = element(page, "<table class=\"data training-runs\">", "</table>");
  EXPECT_EQ(count(runs, "<tr>"), 10u);  // header and 9 runs
  EXPECT_EQ(count(runs, "<td class=\"fail\">FAIL</td>"), 1u);
  EXPECT_EQ(count(runs, "<td class=\"check\">pass</td>"), 7u);
  EXPECT_NE(runs.find("<tr><td>zero1-n4</td><td>zero1</td><td>4</td><td>13</td>"),
            std::string::npos);
  const std::string comm = element(page, "<table class=\"data training-comm\">", "</table>");
  EXPECT_EQ(count(comm, "<tr>"), 6u);  // single, ddp, ddp (weak), zero1, zero3
  EXPECT_NE(comm.find("<th>1 rank</th><th>2 ranks</th><th>4 ranks</th>"), std::string::npos);
  EXPECT_NE(comm.find("<td>32.0% (exposed 12.0%)</td>"), std::string::npos);
  const std::string loss =
      element(page, "<figure class=\"chart-box\" id=\"training-loss\">", "</figure>");
  ASSERT_FALSE(loss.empty());
  const auto curves = series_of(loss);
  ASSERT_EQ(curves.size(), 3u);
  EXPECT_EQ(curves[0].first, "single-n1");
  EXPECT_EQ(curves[2].first, "zero3-n4");
  // One polyline per run, 6 points each.
  size_t polylines = 0;
  for (size_t p = loss.find("<g class=\"series training-series\">"); p != std::string::npos;
       p = loss.find("<g class=\"series training-series\">", p + 1), ++polylines) {
    const std::string line = element(loss.substr(p), "points=\"", "\"/>");
    EXPECT_EQ(count(line, ","), 6u) << line;
  }
  EXPECT_EQ(polylines, 3u);
}

TEST(TrainingHtml, BesideBenchRunsAndBenchPagesUnchanged) {
  const std::vector<LoadedRun> bench = {read_results(kData + "/all_reduce_perf-h200-1rank.txt")};
  const std::string alone = render_html_report(bench, ReportOptions{});
  EXPECT_EQ(render_html_report(bench, TrainingResults{}, ReportOptions{}), alone);
  EXPECT_EQ(count(alone, "Training"), 0u);
  const std::string both = render_html_report(bench, fixture(), ReportOptions{});
  EXPECT_EQ(count(both, "<h2>Summary</h2>"), 1u);
  EXPECT_EQ(count(both, "<h2>Training</h2>"), 1u);
  EXPECT_LT(both.find("<h2>Summary</h2>"), both.find("<h2>Training</h2>"));
  EXPECT_LT(both.find("<h2>Training</h2>"), both.find("<h2>Run metadata</h2>"));
  EXPECT_EQ(count(both, "<svg "), count(alone, "<svg ") + 3);
}

TEST(TrainingHtml, UntrustedStringsAreEscaped) {
  TrainingResults t;
  t.runs.resize(1);
  t.runs[0].run_id = "<script>x</script>";
  t.runs[0].strategy = "a&b";
  t.runs[0].speedup = 1;
  t.steps.resize(1);
  t.steps[0].run_id = "\"'><b>";
  const std::string page = render_html_report({}, t, ReportOptions{});
  EXPECT_EQ(page.find("<script>"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;x&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("a&amp;b"), std::string::npos);
}

TEST(TrainingMarkdown, OneRowPerRunAndALossTable) {
  const std::string text = render_markdown_report({}, fixture(), ReportOptions{});
  EXPECT_EQ(text.find("| # | run | format"), std::string::npos);  // no bench table
  EXPECT_NE(text.find("## Training\n\n| run | strategy | ranks | step median (ms) |"),
            std::string::npos);
  size_t rows = 0;
  for (const char* id : {"single-n1", "ddp-n1", "ddp-n2", "ddp-n4", "ddp-n2-weak", "ddp-n4-weak",
                         "zero1-n4", "zero3-n2", "zero3-n4"})
    rows += count(text, std::string("\n| ") + id + " | ");
  EXPECT_EQ(rows, 9u + 3u);  // the run table's and the loss table's (3 runs have steps)
  EXPECT_NE(text.find("| zero1-n4 | zero1 | 4 | 13 | 14.3 | 2462 | 30.8% | 11.5% |"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, " | FAIL | "), 1u);
  EXPECT_NE(text.find("| run | steps | first loss | last loss |"), std::string::npos);
  EXPECT_NE(text.find("| ddp-n2 | 6 | 2.3 | 0.513199 |"), std::string::npos) << text;

  const std::vector<LoadedRun> bench = {read_results(kData + "/all_reduce_perf-h200-1rank.txt")};
  EXPECT_EQ(render_markdown_report(bench, TrainingResults{}, ReportOptions{}),
            render_markdown_report(bench, ReportOptions{}));
  const std::string both = render_markdown_report(bench, fixture(), ReportOptions{});
  EXPECT_LT(both.find("| # | run | format"), both.find("\n## Training\n"));
}

}  // namespace
}  // namespace ccscope::reports
