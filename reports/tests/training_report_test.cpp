// ccscope train's CSVs in `ccscope report`: read back (and refused with file
// and line), the HTML page's Training section (one speed-up and efficiency
// curve per strategy, one loss curve per run, a table per model-parallel run
// and its bubble per stage), the markdown tables; bench pages unchanged by them.
//
// training_data/train_ranks_{pp,3d,ep}.csv are ccscope.train_rank files as
// ccscope train wrote them (2 cores, one host):
//   mpiexec -n 2 ccscope train --strategy pp --micro-batches 4 --steps 10 --width 128
//       --global-batch 32 --ranks-csv train_ranks_pp.csv
//   mpiexec -n 4 ccscope train --strategy 3d --tp 2 --pp 2 --micro-batches 4 ... (same)
//   mpiexec -n 2 ccscope train --strategy ep --experts 4 --top-k 2 --capacity-factor 1 ...
// train_ranks_bad.csv is the 3d file with one bubble cell garbled ("0.64#1", line 3),
// train_ranks_empty.csv its header alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ccscope/reports/html_report.h"
#include "ccscope/reports/markdown_report.h"
#include "ccscope/reports/training_results.h"
#include "ccscope/reports/user_files.h"  // read_input_file

namespace ccscope::reports {
namespace {

const std::string kTraining = CCSCOPE_TRAINING_TEST_DATA;
const std::string kData = CCSCOPE_REPORTS_TEST_DATA;  // bench files

TrainingResults fixture() {
  TrainingResults t = read_training_results(kTraining + "/train_runs.csv");
  t.append(read_training_results(kTraining + "/train_steps.csv"));
  return t;
}

// The three model-parallel runs' rank records.
TrainingResults rank_fixture() {
  TrainingResults t;
  for (const char* name : {"pp", "3d", "ep"})
    t.append(read_training_results(kTraining + "/train_ranks_" + name + ".csv"));
  return t;
}

std::string error_of(const std::string& path) {
  try {
    read_training_results(path);
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

TEST(TrainingRanks, ReadsRankFilesThroughTheRecordsTable) {
  const TrainingResults t = rank_fixture();
  EXPECT_TRUE(t.runs.empty());
  EXPECT_TRUE(t.steps.empty());
  ASSERT_EQ(t.ranks.size(), 8u);  // pp 2, 3d 4, ep 2
  EXPECT_FALSE(t.empty());
  EXPECT_EQ(t.ranks[0].run_id, "pp-t1p2d1-n2");
  EXPECT_EQ(t.ranks[1].stage, 1);
  EXPECT_EQ(t.ranks[1].host, "vm");
  EXPECT_EQ(t.ranks[1].schedule, "1f1b");
  EXPECT_EQ(t.ranks[1].bubble_textbook, 0.2);
  EXPECT_EQ(t.ranks[5].tp_rank, 1);
  EXPECT_EQ(t.ranks[5].tp_bytes, 32768);
  EXPECT_EQ(t.ranks[7].dropped_share, 0.171875);
  EXPECT_TRUE(is_training_csv("schema,run_id\nccscope.train_rank/1,a\n"));
}

TEST(TrainingRanks, GarbledCellIsOneLineNamingFileAndLine) {
  const std::string what = error_of(kTraining + "/train_ranks_bad.csv");
  EXPECT_NE(what.find("train_ranks_bad.csv:3: bubble: '0.64#1' is not a finite number"),
            std::string::npos)
      << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
}

TEST(TrainingRanks, HeaderWithoutRowsIsATrainingFileWithNoRecords) {
  const std::string path = kTraining + "/train_ranks_empty.csv";
  // Told from bench files by its header, so that the training reader, not the
  // bench one (no 'collective' column), says what is wrong.
  EXPECT_TRUE(is_training_csv(read_input_file(path)));
  const std::string what = error_of(path);
  EXPECT_NE(what.find("train_ranks_empty.csv:1: a ccscope.train_rank CSV header but no records"),
            std::string::npos)
      << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  // Other headers alone stay what they were.
  EXPECT_FALSE(is_training_csv("schema,run_id,rank\n"));
  EXPECT_FALSE(is_training_csv("schema,collective,size_bytes,time_s\n"));
  EXPECT_TRUE(is_training_csv("schema,run_id,strategy,ranks,step_median_s\r\n\r\n"));
}

TEST(TrainingRanks, NewerVersionTruncatedRowOrMissingColumnRefused) {
  auto error = [](const std::string& text) {
    try {
      parse_training_results("r.csv", text);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = "schema,run_id,strategy,rank,stage,bubble\n";
  EXPECT_EQ(error(head + "ccscope.train_rank/1,a,pp,0,0,0.5\n"), "no error");
  EXPECT_NE(error(head + "ccscope.train_rank/1,a,pp,0,0,0.5\nccscope.train_rank/2,a,pp,1,1,0\n")
                .find("r.csv:3: schema: ccscope.train_rank/2 is newer"),
            std::string::npos);
  EXPECT_NE(error(head + "ccscope.train_rank/1,a,pp,0\n").find("r.csv:2:"), std::string::npos);
  EXPECT_NE(error("schema,run_id,strategy,rank\nccscope.train_rank/1,a,pp,0\n")
                .find("r.csv:1: the header has no 'stage' column"),
            std::string::npos);
}

// The cells of a table's row that starts with `first` (its <td> texts).
std::vector<std::string> html_cells(const std::string& table, const std::string& first) {
  const size_t b = table.find("<tr><td>" + first + "</td>");
  if (b == std::string::npos) return {};
  const std::string row = table.substr(b, table.find("</tr>", b) - b);
  std::vector<std::string> cells;
  for (size_t p = row.find("<td>"); p != std::string::npos; p = row.find("<td>", p + 1))
    cells.push_back(row.substr(p + 4, row.find("</td>", p) - p - 4));
  return cells;
}

std::vector<std::string> html_headers(const std::string& table) {
  std::vector<std::string> out;
  for (size_t p = table.find("<th>"); p != std::string::npos; p = table.find("<th>", p + 1))
    out.push_back(table.substr(p + 4, table.find("</th>", p) - p - 4));
  return out;
}

TEST(TrainingRanksHtml, OneTablePerRunWithoutItsAllZeroColumns) {
  const std::string page = render_html_report({}, rank_fixture(), ReportOptions{});
  EXPECT_EQ(count(page, "<h2>Training</h2>"), 1u);
  EXPECT_EQ(count(page, "<h3>Model-parallel ranks</h3>"), 1u);
  EXPECT_EQ(count(page, "<h2>Summary</h2>"), 0u);
  EXPECT_EQ(count(page, "<table class=\"data training-ranks\""), 3u);
  EXPECT_EQ(count(page, "<table class=\"data training-runs\">"), 0u);
  EXPECT_NE(page.find("<h4>pp-t1p2d1-n2 (pp): tp 1 x pp 2 x dp 1, 1f1b, 4 micro-batches</h4>"),
            std::string::npos);
  EXPECT_NE(page.find("<h4>ep-ep4-n2 (ep): experts over 2 ranks, 1 micro-batch</h4>"),
            std::string::npos);

  const std::string pp = element(
      page, "<table class=\"data training-ranks\" id=\"training-ranks-pp-t1p2d1-n2\">", "</table>");
  ASSERT_FALSE(pp.empty());
  const std::vector<std::string> pp_columns = {"rank",
                                               "host",
                                               "stage",
                                               "step median (ms)",
                                               "pp bytes/step",
                                               "pipeline busy (ms)",
                                               "pipeline idle (ms)",
                                               "bubble",
                                               "textbook bubble",
                                               "difference",
                                               "peak in flight",
                                               "activations (MB)",
                                               "memory"};
  EXPECT_EQ(html_headers(pp), pp_columns);
  EXPECT_EQ(count(pp, "<tr>"), 3u);  // header and 2 ranks
  // Rank 0: busy 0.333 ms, idle 0.343 ms, bubble 0.500 against 0.2 (+30.0 points), 2 in flight.
  const std::vector<std::string> rank0 = {"0",      "vm",    "0",      "0.7386", "16 KiB",
                                          "0.3332", "0.343", "50.0%",  "20.0%",  "+30.0 pp",
                                          "2",      "0.049", "387 KiB"};
  EXPECT_EQ(html_cells(pp, "0"), rank0);

  const std::string three_d = element(
      page, "<table class=\"data training-ranks\" id=\"training-ranks-3d-t2p2d1-n4\">", "</table>");
  const std::vector<std::string> columns = html_headers(three_d);
  EXPECT_NE(std::find(columns.begin(), columns.end(), "tp rank"), columns.end());
  EXPECT_NE(std::find(columns.begin(), columns.end(), "tp bytes/step"), columns.end());
  EXPECT_EQ(std::find(columns.begin(), columns.end(), "dp rank"), columns.end());  // all 0
  EXPECT_EQ(std::find(columns.begin(), columns.end(), "dp bytes/step"), columns.end());
  EXPECT_EQ(std::find(columns.begin(), columns.end(), "all-to-all share"), columns.end());
  EXPECT_EQ(count(three_d, "<tr>"), 5u);

  const std::string ep = element(
      page, "<table class=\"data training-ranks\" id=\"training-ranks-ep-ep4-n2\">", "</table>");
  const std::vector<std::string> ep_columns = {
      "rank",          "host",          "stage",  "step median (ms)",
      "dp bytes/step", "ep bytes/step", "memory", "all-to-all share",
      "dropped",       "load imbalance"};
  EXPECT_EQ(html_headers(ep), ep_columns);
  const std::vector<std::string> ep1 = {"1",         "vm",        "1",     "1.489", "195.5 KiB",
                                        "28.02 KiB", "973.5 KiB", "36.0%", "17.2%", "1.56"};
  EXPECT_EQ(html_cells(ep, "1"), ep1);
}

TEST(TrainingRanksHtml, BubblePerStageMeasuredBesideTextbook) {
  const std::string page = render_html_report({}, rank_fixture(), ReportOptions{});
  // Pipelined runs only: pp and 3d, not ep.
  EXPECT_EQ(count(page, "<figure class=\"chart-box\" id=\"training-bubble-"), 2u);
  EXPECT_EQ(count(page, "id=\"training-bubble-ep"), 0u);
  const std::string pp = element(
      page, "<figure class=\"chart-box\" id=\"training-bubble-pp-t1p2d1-n2\">", "</figure>");
  ASSERT_FALSE(pp.empty());
  EXPECT_EQ(count(pp, "<rect "), 4u);  // 2 stages x (measured, textbook)
  EXPECT_NE(pp.find("<title>stage 1 (rank 1): bubble 50.8%</title>"), std::string::npos);
  EXPECT_NE(pp.find("<title>stage 0: textbook bubble 20.0%</title>"), std::string::npos);
  // 3d: each stage's most idle rank of its two (stage 0: rank 1, 64.2%; stage 1: rank 3, 50.7%).
  const std::string three_d = element(
      page, "<figure class=\"chart-box\" id=\"training-bubble-3d-t2p2d1-n4\">", "</figure>");
  EXPECT_EQ(count(three_d, "<rect "), 4u);
  EXPECT_NE(three_d.find("stage 0 (rank 1): bubble 64.2%"), std::string::npos);
  EXPECT_NE(three_d.find("stage 1 (rank 3): bubble 50.7%"), std::string::npos);
  // The measured bar is as tall as its share: 50.8% against 20.0% of the same axis.
  auto height = [&](const std::string& title) {
    const size_t t = pp.find("<title>" + title);
    const size_t h = pp.rfind("height=\"", t);
    return std::stod(pp.substr(h + 8));
  };
  EXPECT_NEAR(height("stage 1 (rank 1)") / height("stage 1: textbook"), 0.5082 / 0.2, 0.01);
}

TEST(TrainingRanksHtml, BesideRunsAndStepsAndBenchPagesUnchanged) {
  TrainingResults t = fixture();
  const std::string without = render_html_report({}, t, ReportOptions{});
  t.append(rank_fixture());
  const std::string with = render_html_report({}, t, ReportOptions{});
  // The rank tables come last in the section; everything before them is as it was.
  const size_t ranks = with.find("<h3>Model-parallel ranks</h3>");
  ASSERT_NE(ranks, std::string::npos);
  EXPECT_EQ(with.substr(0, ranks), without.substr(0, without.find("</body>")));
  EXPECT_EQ(count(with, "<svg "), count(without, "<svg ") + 2);
  const std::vector<LoadedRun> bench = {read_results(kData + "/all_reduce_perf-h200-1rank.txt")};
  EXPECT_EQ(count(render_html_report(bench, ReportOptions{}), "Model-parallel"), 0u);
}

TEST(TrainingRanksHtml, UntrustedStringsAreEscaped) {
  TrainingResults t;
  t.ranks.resize(2);
  t.ranks[0].run_id = t.ranks[1].run_id = "<script>r</script>";
  t.ranks[0].strategy = "pp";
  t.ranks[0].host = "<b>h&";
  t.ranks[0].schedule = "\"'><i>";
  t.ranks[0].pp = 2;
  t.ranks[1].stage = 1;
  t.ranks[0].bubble_textbook = t.ranks[1].bubble_textbook = 0.2;
  const std::string page = render_html_report({}, t, ReportOptions{});
  EXPECT_EQ(page.find("<script>"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  EXPECT_EQ(page.find("<i>"), std::string::npos);
  EXPECT_NE(page.find("<td>&lt;b&gt;h&amp;</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>\xE2\x80\x94</td>"), std::string::npos);  // rank 1 has no host
  EXPECT_NE(page.find("id=\"training-ranks-_3cscript_3er_3c_2fscript_3e\""), std::string::npos);
  EXPECT_NE(page.find("id=\"training-bubble-_3cscript_3er_3c_2fscript_3e\""), std::string::npos);
}

TEST(TrainingRanksMarkdown, ATablePerRun) {
  const std::string text = render_markdown_report({}, rank_fixture(), ReportOptions{});
  EXPECT_EQ(text.find("| # | run | format"), std::string::npos);          // no bench table
  EXPECT_EQ(text.find("| run | strategy | ranks |"), std::string::npos);  // no run records
  EXPECT_NE(
      text.find("## Training\n\n### Model-parallel ranks\n\npp-t1p2d1-n2 (pp): tp 1 x pp 2 "
                "x dp 1, 1f1b, 4 micro-batches\n\n| rank | host | stage | step median (ms) |"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("|---:|---|---:|---:|"), std::string::npos);
  EXPECT_NE(text.find("\n| 0 | vm | 0 | 0.7386 | 16 KiB | 0.3332 | 0.343 | 50.0% | 20.0% | "
                      "+30.0 pp | 2 | 0.049 | 387 KiB |\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("\n| 1 | vm | 1 | 1.489 | 195.5 KiB | 28.02 KiB | 973.5 KiB | 36.0% | 17.2% | "
                "1.56 |\n"),
      std::string::npos)
      << text;
  EXPECT_EQ(count(text, "\n| rank | "), 3u);

  // After the runs and loss tables, a blank line apart; bench text unchanged.
  TrainingResults t = fixture();
  const std::string without = render_markdown_report({}, t, ReportOptions{});
  t.append(rank_fixture());
  const std::string with = render_markdown_report({}, t, ReportOptions{});
  EXPECT_EQ(with.substr(0, without.size()), without);
  EXPECT_EQ(with.substr(without.size(), 26), "\n### Model-parallel ranks\n");
  const std::vector<LoadedRun> bench = {read_results(kData + "/all_reduce_perf-h200-1rank.txt")};
  EXPECT_EQ(render_markdown_report(bench, TrainingResults{}, ReportOptions{}),
            render_markdown_report(bench, ReportOptions{}));
}

}  // namespace
}  // namespace ccscope::reports
