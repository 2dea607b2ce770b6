// compare_runs (the verdicts as data), render_compare_text and
// compare_exit_code, on files written by ccscope's own writers and on
// nccl-tests' output. The `compare` verb's flags and exit codes for input it
// cannot read: app/tests/compare_verb_test.cpp.
#include "ccscope/reports/compare.h"

#include <gtest/gtest.h>

#include <charconv>
#include <functional>
#include <optional>
#include <random>
#include <sstream>

#include "ccscope/reports/loaded_results.h"
#include "compare_test_util.h"

namespace ccscope::reports {
namespace {

using namespace testing;

struct Outcome {
  int code;
  std::string out;
  CompareResult result;
};

std::vector<LoadedRun> read_list(const std::string& comma_list) {
  std::vector<LoadedRun> runs;
  std::stringstream list(comma_list);
  for (std::string file; std::getline(list, file, ',');) runs.push_back(read_results(file));
  return runs;
}

// What `ccscope compare BASE CUR` computes: BASE and CUR are comma lists.
Outcome compare(const std::string& base, const std::string& cur,
                const CompareOptions& options = {}) {
  CompareResult result = compare_runs(read_list(base), read_list(cur), options);
  return {compare_exit_code(result), render_compare_text(result), result};
}

CompareOptions window(size_t min_size, size_t max_size) {
  CompareOptions o;
  o.min_size = min_size;
  o.max_size = max_size;
  return o;
}

auto same = [](size_t, int) { return 1.0; };

// The table rows of the sizes in the window ("* 1 MiB  6/6  0.800  0.78..0.82
// 0.00216  slower"), each split into its whitespace-separated tokens.
std::vector<std::vector<std::string>> window_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("* ", 0) != 0) continue;
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string word; words >> word;) row.push_back(word);
    rows.push_back(row);
  }
  return rows;
}

// `token` as a number when all of it is one ("0.00216", "1e-05"), else nullopt.
std::optional<double> whole_number(const std::string& token) {
  double value = 0;
  const char* end = token.data() + token.size();
  auto [used, ec] = std::from_chars(token.data(), end, value);
  if (ec != std::errc() || used != end || token.empty()) return std::nullopt;
  return value;
}

class Compare : public ResultFilesTest {};

TEST_F(Compare, IdenticalFilesPass) {
  auto base = write("base.csv", sweep(2, 1, same));
  auto cur = write("cur.json", sweep(2, 1, same));
  Outcome o = compare(base, cur);
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("drops by more than 5%"), std::string::npos)
      << o.out;  // states the threshold
  EXPECT_NE(o.out.find("summary: no regression"), std::string::npos);
}

TEST_F(Compare, LargeSizesTwentyPercentSlowerIsABandwidthRegression) {
  auto base = write("base.csv", sweep(2, 1, same));
  auto cur =
      write("cur.csv", sweep(2, 1, [](size_t s, int) { return s >= (1u << 20) ? 1.25 : 1.0; }));
  Outcome o = compare(base, cur);
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_NE(o.out.find("REGRESSION at 1 MiB, 4 MiB, 16 MiB, 64 MiB"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("bandwidth (beta"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("latency (alpha)"), std::string::npos) << o.out;
}

// Every record with a +-4% interval (ccscope.bench/5, adaptive sampling).
std::vector<BenchRecord> with_interval(std::vector<BenchRecord> records, double percent) {
  for (auto& r : records) {
    r.timing_samples = 30;
    r.ci_half_width_percent = percent;
    r.target_ci_percent = percent;
    r.converged = true;
  }
  return records;
}

TEST_F(Compare, ADifferenceInsideBothIntervalsIsNoChange) {
  // 3% slower everywhere, each side +-4%: no change, although the 2% threshold
  // alone would call it a regression (as it does without the intervals).
  auto slower = [](size_t, int) { return 1.03; };
  auto base = write("base.csv", with_interval(sweep(2, 1, same), 4));
  auto cur = write("cur.json", with_interval(sweep(2, 1, slower), 4));
  CompareOptions two_percent;
  two_percent.threshold = 0.02;
  Outcome o = compare(base, cur, two_percent);
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("no change (inside both intervals)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("+-4.0%/+-4.0%"), std::string::npos) << o.out;
  for (const auto& size : o.result.series.at(0).sizes) {
    EXPECT_TRUE(size.within_intervals);
    EXPECT_FALSE(size.slower);
  }
  auto plain_base = write("plain_base.csv", sweep(2, 1, same));
  auto plain_cur = write("plain_cur.csv", sweep(2, 1, slower));
  EXPECT_EQ(compare(plain_base, plain_cur, two_percent).code, 1);
}

TEST_F(Compare, ADifferenceOutsideTheIntervalsIsARegression) {
  // 10% slower, +-4% each side: outside both, beyond the 5% threshold.
  auto base = write("base.csv", with_interval(sweep(2, 1, same), 4));
  auto cur = write("cur.csv", with_interval(sweep(2, 1, [](size_t, int) { return 1.10; }), 4));
  Outcome o = compare(base, cur);
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_NE(o.out.find("REGRESSION at"), std::string::npos) << o.out;
  EXPECT_FALSE(o.result.series.at(0).sizes.at(0).within_intervals);
  // Inside one interval only (+-12% baseline, +-4% current): still a regression.
  auto wide = write("wide.csv", with_interval(sweep(2, 1, same), 12));
  EXPECT_EQ(compare(wide, cur).code, 1);
}

// As ccscope bench writes them: adaptive (the median of timed batches, to
// +-P%), adaptive as it was first written (the batches' mean), nccl-tests' fixed
// -n, each with its interval; or -C 1's issue time.
std::vector<BenchRecord> measured_as(std::vector<BenchRecord> records, const std::string& how,
                                     double percent) {
  for (auto& r : records) {
    const bool adaptive = how == "adaptive" || how == "adaptive-mean";
    r.time_method = how == "adaptive"
                        ? "host wall clock over timed batches + one sync each, the median batch, "
                          "until its 95% interval is within --target-ci (ccscope)"
                    : how == "adaptive-mean"
                        ? "host wall clock over timed batches + one sync each, until the 95% "
                          "interval is within --target-ci (ccscope)"
                    : how == "fixed" ? "host wall clock over -n iterations + one sync (nccl-tests)"
                                     : "host time to issue -n iterations (-C 1)";
    r.timing_samples = adaptive ? 40 : 20;
    r.ci_half_width_percent = percent;
    r.target_ci_percent = adaptive ? 2 : 0;
    r.converged = adaptive;
  }
  return records;
}

TEST_F(Compare, AdaptiveRunsAreJudgedByTheirIntervalsAndAMedianOnlyAgainstAMedian) {
  CompareOptions two_percent;
  two_percent.threshold = 0.02;
  auto base = write("adaptive.json", measured_as(sweep(2, 1, same), "adaptive", 4));
  // 3% slower inside both +-4% intervals: no change.
  auto close = write("close.json",
                     measured_as(sweep(2, 1, [](size_t, int) { return 1.03; }), "adaptive", 4));
  Outcome o = compare(base, close, two_percent);
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_TRUE(o.result.series.at(0).cannot_judge.empty()) << o.out;
  EXPECT_NE(o.out.find("no change (inside both intervals)"), std::string::npos) << o.out;
  // 10% slower: a regression.
  auto far =
      write("far.json", measured_as(sweep(2, 1, [](size_t, int) { return 1.10; }), "adaptive", 4));
  EXPECT_EQ(compare(base, far).code, 1) << compare(base, far).out;
  // The median of batches against nccl-tests' mean over -n: not the same
  // statistic, either way round.
  auto fixed = write("fixed.csv", measured_as(sweep(2, 1, same), "fixed", 4));
  for (const Outcome& mixed : {compare(base, fixed), compare(fixed, base)}) {
    EXPECT_FALSE(mixed.result.series.at(0).cannot_judge.empty()) << mixed.out;
    EXPECT_NE(mixed.out.find("measured differently"), std::string::npos) << mixed.out;
    EXPECT_NE(mixed.out.find("the median of timed batches"), std::string::npos) << mixed.out;
  }
  // Adaptive records written before the median (the batches' mean) are still
  // judged against a fixed run; one interval only (the fixed side states none):
  // the threshold judges, the interval is shown.
  auto mean_base = write("mean.json", measured_as(sweep(2, 1, same), "adaptive-mean", 4));
  auto bare =
      write("bare.csv", measured_as(sweep(2, 1, [](size_t, int) { return 1.03; }), "fixed", 0));
  Outcome one = compare(mean_base, bare, two_percent);
  EXPECT_EQ(one.code, 1) << one.out;
  EXPECT_NE(one.out.find("+-4.0%/-"), std::string::npos) << one.out;
  EXPECT_FALSE(one.result.series.at(0).sizes.at(0).within_intervals);
  // The issue time (-C 1) is another measurement: still refused.
  auto issue = write("issue.csv", measured_as(sweep(2, 1, same), "cputime", 4));
  Outcome refused = compare(mean_base, issue);
  EXPECT_NE(refused.out.find("measured differently"), std::string::npos) << refused.out;
}

TEST_F(Compare, OnlySmallSizesSlowerIsALatencyChange) {
  auto base = write("base.csv", sweep(2, 1, same));
  auto cur = write("cur.csv", sweep(2, 1, [](size_t s, int) { return s <= 16384 ? 1.5 : 1.0; }));
  Outcome o = compare(base, cur);  // the default window holds only bandwidth-bound sizes
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("slower outside the window at 1 KiB, 4 KiB, 16 KiB"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("change: latency (alpha)"), std::string::npos) << o.out;
  Outcome small = compare(base, cur, window(1024, 16384));
  EXPECT_EQ(small.code, 1) << small.out;
  EXPECT_NE(small.out.find("change: latency (alpha)"), std::string::npos) << small.out;
  EXPECT_EQ(small.out.find("bandwidth (beta"), std::string::npos) << small.out;
}

TEST_F(Compare, ZeroByteRowsAreNotCompared) {
  // nccl-tests rounds small reduce-scatter sizes down to 0 B; such rows move no
  // data, so a much slower 0 B row must neither appear nor change the verdict.
  auto with_zero_rows = [](double zero_time) {
    auto records = sweep(2, 1, same);
    for (int i = 0; i < 2; ++i) {
      BenchRecord zero = records.front();
      zero.size_bytes = zero.count = 0;
      zero.time_s = zero_time;
      zero.algbw_GBps = zero.busbw_GBps = 0;
      records.insert(records.begin(), zero);
    }
    return records;
  };
  Outcome o = compare(write("base.csv", with_zero_rows(1e-6)),
                      write("cur.csv", with_zero_rows(50e-6)), window(0, 64u << 20));
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(o.out.find(" 0 B    "), std::string::npos) << o.out;  // no table row
  EXPECT_NE(o.out.find("1 KiB"), std::string::npos) << o.out;
}

TEST_F(Compare, MissingSizesCannotBeJudged) {
  auto base = write("base.csv", sweep(2, 1, same));
  auto records = sweep(2, 1, same);
  records.erase(records.begin() + 7);  // 16 MiB
  auto cur = write("cur.csv", records);
  Outcome o = compare(base, cur);
  EXPECT_EQ(o.code, 125) << o.out;
  EXPECT_NE(o.out.find("lack sizes 16 MiB"), std::string::npos) << o.out;
}

TEST_F(Compare, DifferentRankCountsCannotBeJudged) {
  auto base = write("base.csv", sweep(2, 1, same));
  auto cur = write("cur.csv", sweep(4, 1, same), test_metadata(4));
  Outcome o = compare(base, cur);
  EXPECT_EQ(o.code, 125) << o.out;
  EXPECT_NE(o.out.find("different rank counts: baseline 2 ranks on 1 nodes, current 4"),
            std::string::npos)
      << o.out;
}

// K repeats per side with +-8% run-to-run noise: same medians within noise.
std::vector<BenchRecord> noisy(uint32_t seed, double slowdown, double spread) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(1 - spread, 1 + spread);
  return sweep(2, 6, [&](size_t, int) { return slowdown * noise(rng); });
}

TEST_F(Compare, NoiseWithinTheRunToRunSpreadPasses) {
  auto base = write("base.csv", noisy(1, 1.0, 0.08));
  auto cur = write("cur.csv", noisy(2, 1.0, 0.08));
  Outcome o = compare(base, cur);
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("  6/6  "), std::string::npos) << o.out;  // the repeats are samples
}

TEST_F(Compare, RepeatedSamplesDetectARealSlowdown) {
  auto base = write("base.csv", noisy(1, 1.0, 0.03));
  auto cur = write("cur.csv", noisy(2, 1.25, 0.03));
  Outcome o = compare(base, cur);
  EXPECT_EQ(o.code, 1) << o.out;
  // Every size in the window prints its p-value, below 0.05, in the p column
  // (the whole token: "0.00" alone would also match the model's "alpha 20.00 us").
  const auto rows = window_rows(o.out);
  ASSERT_FALSE(rows.empty()) << o.out;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 8u) << o.out;  // *, size, unit, samples, ratio, CI, p, "slower"
    EXPECT_EQ(row[3], "6/6") << o.out;
    const std::optional<double> p = whole_number(row[6]);
    ASSERT_TRUE(p.has_value()) << "p column '" << row[6] << "' is not a number\n" << o.out;
    EXPECT_LT(*p, 0.05) << o.out;
    EXPECT_EQ(row[7], "slower") << o.out;
  }
}

TEST_F(Compare, SeveralFilesPerSideAreSamples) {
  std::string base, cur;
  for (int i = 0; i < 4; ++i) {
    base += (i ? "," : "") + write("b" + std::to_string(i) + ".csv", sweep(2, 1, same));
    cur += (i ? "," : "") + write("c" + std::to_string(i) + ".csv", sweep(2, 1, same));
  }
  Outcome o = compare(base, cur);
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("  4/4  "), std::string::npos) << o.out;
}

TEST_F(Compare, NcclTestsFilesCompare) {
  Outcome o = compare(data_file("all_reduce_perf-h200-2rank-socket.txt"),
                      data_file("all_reduce_perf-h200-2rank-socket.txt"));
  EXPECT_EQ(o.code, 0) << o.out;
}

// Records measured with other options (nccl-tests' rotation, -m, -G, or
// another clock) are not like with like: no verdict, exit 125, saying why.
TEST_F(Compare, DifferentMeasurementMethodsCannotBeJudged) {
  auto measured = [](const std::function<void(BenchRecord&)>& set) {
    auto records = sweep(2, 1, same);
    for (auto& r : records) set(r);
    return records;
  };
  auto base = write("base.csv", sweep(2, 1, same));  // no rotation, -m 1, no graph
  Outcome rotated =
      compare(base, write("rot.json", measured([](BenchRecord& r) { r.rotated = true; })));
  EXPECT_EQ(rotated.code, 125) << rotated.out;
  EXPECT_NE(rotated.out.find("cannot judge: measured differently (buffer rotation: baseline "
                             "off, current on)"),
            std::string::npos)
      << rotated.out;
  EXPECT_EQ(rotated.out.find("busbw ratio"), std::string::npos) << rotated.out;  // no table

  Outcome aggregated =
      compare(base, write("agg.csv", measured([](BenchRecord& r) { r.aggregate_iterations = 4; })));
  EXPECT_EQ(aggregated.code, 125) << aggregated.out;
  EXPECT_NE(aggregated.out.find("operations per timed iteration (-m): baseline 1, current 4"),
            std::string::npos)
      << aggregated.out;

  Outcome graph =
      compare(base, write("graph.csv", measured([](BenchRecord& r) { r.graph_launches = 1; })));
  EXPECT_EQ(graph.code, 125) << graph.out;
  EXPECT_NE(graph.out.find("CUDA graph launches (-G): baseline 0, current 1"), std::string::npos)
      << graph.out;

  auto timed = [&](const char* name, const char* method) {
    return write(name, measured([&](BenchRecord& r) { r.time_method = method; }));
  };
  const char* wall = "host wall clock over -n iterations + one sync (nccl-tests)";
  const char* issue = "host time to issue -n iterations (-C)";
  Outcome clock = compare(timed("wall.csv", wall), timed("issue.csv", issue));
  EXPECT_EQ(clock.code, 125) << clock.out;
  // (the wall clock named as compare groups fixed runs and the first adaptive ones)
  EXPECT_NE(clock.out.find(std::string("time method: baseline the mean per completed iteration "
                                       "(fixed -n, or adaptive sampling before ccscope reported "
                                       "the median), current ") +
                           issue),
            std::string::npos)
      << clock.out;

  // Pooling samples measured two ways on one side is no better.
  Outcome mixed = compare(
      base + "," + write("rot2.csv", measured([](BenchRecord& r) { r.rotated = true; })), base);
  EXPECT_EQ(mixed.code, 125) << mixed.out;
  EXPECT_NE(mixed.out.find("buffer rotation: baseline off and on, current off"), std::string::npos)
      << mixed.out;

  // Measured alike: judged as before. A side that does not state its time
  // method (a file from before the field) is not refused for it.
  EXPECT_EQ(compare(timed("wall2.csv", wall), timed("wall3.json", wall)).code, 0);
  EXPECT_EQ(compare(base, timed("wall4.csv", wall)).code, 0);
}

// ---- which statistic over ranks is compared

// An all-reduce sweep (1 KiB .. 64 MiB) as a reader returns it from `format`:
// time_s is the `statistic` over ranks ("" = unstated: the average), and with
// `min_avg_max` the reader also has min/avg/max over ranks (ccscope's columns,
// OSU -f). The slowest rank takes `spread` times the average, the fastest
// 1/spread; `slowdown` scales every time.
LoadedRun loaded(const std::string& format, const std::string& statistic, bool min_avg_max,
                 double slowdown = 1, double spread = 1.5) {
  LoadedRun run;
  run.path = format + ".file";
  run.format = format;
  for (size_t size = 1024; size <= (64u << 20); size *= 4) {
    LoadedRecord r;
    r.collective = "allreduce";
    r.backend = "nccl";
    r.dtype = "float";
    r.op = "sum";
    r.in_place = false;
    r.size_bytes = size;
    r.ranks = 2;
    r.nodes = 1;
    const double avg = (20e-6 + static_cast<double>(size) / 5e9) * slowdown;
    const double max = avg * spread, min = avg / spread;
    r.time_statistic = statistic;
    r.time_s = statistic == "max" ? max : statistic == "min" ? min : avg;
    if (min_avg_max) r.time_min_s = min, r.time_avg_s = avg, r.time_max_s = max;
    if (statistic == "avg") r.time_avg_s = avg;  // as the nccl-tests and OSU readers do
    run.records.push_back(r);
  }
  return run;
}

Outcome compare_loaded(const LoadedRun& base, const LoadedRun& cur) {
  CompareResult result = compare_runs({base}, {cur}, {});
  return {compare_exit_code(result), render_compare_text(result), result};
}

TEST(CompareStatistic, TheSameStatisticOnBothSidesIsTimeS) {
  Outcome o =
      compare_loaded(loaded("ccscope-csv", "max", true), loaded("ccscope-csv", "max", true));
  EXPECT_EQ(o.code, 0) << o.out;
  ASSERT_EQ(o.result.series.size(), 1u);
  const StatisticChoice& c = o.result.series[0].statistic;
  EXPECT_EQ(c.statistic, "max");
  EXPECT_EQ(c.base_field, "time_s");
  EXPECT_EQ(c.current_field, "time_s");
  EXPECT_NE(o.out.find("\nstatistic: max over ranks (baseline: time_s; current: time_s)\n"),
            std::string::npos)
      << o.out;
}

// ccscope's time_s is the slowest rank's (1.5 x the average here), nccl-tests'
// the average: time_s against time_s would be a 33% "regression" that is only
// the statistic. ccscope's avg column against nccl-tests' time is like with like.
TEST(CompareStatistic, CcscopeAgainstNcclTestsComparesTheAverage) {
  const LoadedRun ccscope = loaded("ccscope-csv", "max", true);
  const LoadedRun nccl_tests = loaded("nccl-tests-text", "avg", false);
  for (const bool ccscope_first : {true, false}) {
    Outcome o =
        ccscope_first ? compare_loaded(ccscope, nccl_tests) : compare_loaded(nccl_tests, ccscope);
    EXPECT_EQ(o.code, 0) << o.out;
    ASSERT_EQ(o.result.series.size(), 1u);
    const StatisticChoice& c = o.result.series[0].statistic;
    EXPECT_EQ(c.statistic, "avg") << o.out;
    EXPECT_EQ(ccscope_first ? c.base_field : c.current_field, "time_avg_s") << o.out;
    EXPECT_EQ(ccscope_first ? c.current_field : c.base_field, "time_s") << o.out;
    const std::string line =
        ccscope_first
            ? "\nstatistic: avg over ranks (baseline: time_avg_s, its time_s being max; current: "
              "time_s)\n"
            : "\nstatistic: avg over ranks (baseline: time_s; current: time_avg_s, its time_s "
              "being max)\n";
    EXPECT_NE(o.out.find(line), std::string::npos) << o.out;
    for (const auto& s : o.result.series[0].sizes) EXPECT_DOUBLE_EQ(s.busbw_ratio, 1.0);
  }
  // A real slowdown is still seen through the average.
  Outcome slower = compare_loaded(ccscope, loaded("nccl-tests-text", "avg", false, 1.3));
  EXPECT_EQ(slower.code, 1) << slower.out;
}

// The same through the readers: a ccscope CSV (time_s the slowest rank's,
// rank_time_avg_s nccl-tests' time) against nccl-tests' own text output.
TEST_F(Compare, CcscopeFileAgainstNcclTestsTextComparesTheAverage) {
  const std::string nccl_tests = data_file("all_reduce_perf-h200-2rank-socket.txt");
  const LoadedRun source = read_results(nccl_tests);
  RunMetadata m = test_metadata();
  m.backend = "nccl";
  std::vector<BenchRecord> records;
  for (const LoadedRecord& l : source.records) {
    if (!l.time_s) continue;
    BenchRecord r;
    r.collective = l.collective;
    r.backend = l.backend;
    r.dtype = l.dtype;
    r.op = l.op;
    r.in_place = l.in_place.value_or(false);
    r.size_bytes = l.size_bytes;
    r.count = l.count.value_or(0);
    r.ranks = l.ranks.value_or(0);
    r.nodes = l.nodes.value_or(0);
    r.ranks_per_node = l.ranks_per_node.value_or(0);
    r.rank_time_avg_s = *l.time_s;
    r.rank_time_min_s = *l.time_s * 0.9;
    r.rank_time_max_s = r.time_s = *l.time_s * 1.5;
    r.time_statistic = "max";
    r.aggregate_iterations = l.aggregate_iterations.value_or(1);
    r.graph_launches = l.graph_launches.value_or(0);
    records.push_back(r);
  }
  ASSERT_FALSE(records.empty());
  Outcome o = compare(write("ccscope.csv", records, m), nccl_tests);
  EXPECT_EQ(o.code, 0) << o.out;
  ASSERT_FALSE(o.result.series.empty()) << o.out;
  for (const auto& v : o.result.series) {
    EXPECT_EQ(v.cannot_judge, "") << v.name;
    EXPECT_EQ(v.statistic.statistic, "avg") << v.name;
    EXPECT_EQ(v.statistic.base_field, "time_avg_s") << v.name;
  }
}

// Both sides carry min/avg/max (ccscope -a 1 against ccscope -a 3): the
// baseline's time_s statistic, taken from the current side's column.
TEST(CompareStatistic, DifferentTimeSOfBothCcscopeSidesFollowTheBaseline) {
  Outcome o =
      compare_loaded(loaded("ccscope-csv", "avg", true), loaded("ccscope-json", "max", true));
  EXPECT_EQ(o.code, 0) << o.out;
  ASSERT_EQ(o.result.series.size(), 1u);
  const StatisticChoice& c = o.result.series[0].statistic;
  EXPECT_EQ(c.statistic, "avg");
  EXPECT_EQ(c.base_field, "time_s");
  EXPECT_EQ(c.current_field, "time_avg_s");
}

TEST(CompareStatistic, NoCommonStatisticCannotBeJudged) {
  // A ccscope file with only its time (no rank_time_* columns) against nccl-tests.
  Outcome o =
      compare_loaded(loaded("nccl-tests-text", "avg", false), loaded("ccscope-csv", "max", false));
  EXPECT_EQ(o.code, 125) << o.out;
  ASSERT_EQ(o.result.series.size(), 1u);
  EXPECT_EQ(o.result.series[0].cannot_judge,
            "no common time statistic over ranks: baseline has only 'avg' (nccl-tests), current "
            "has only 'max' (ccscope)");
  EXPECT_NE(o.out.find("\nverdict: cannot judge: no common time statistic over ranks: baseline "
                       "has only 'avg' (nccl-tests), current has only 'max' (ccscope)\n"),
            std::string::npos)
      << o.out;
  EXPECT_EQ(o.out.find("busbw ratio"), std::string::npos) << o.out;  // no table
  EXPECT_NE(o.out.find("summary: cannot judge (exit 125)"), std::string::npos) << o.out;

  // A side that does not say which statistic its time is matches nothing stated.
  Outcome unstated =
      compare_loaded(loaded("nccl-tests-text", "avg", false), loaded("ccscope-csv", "", false));
  EXPECT_EQ(unstated.code, 125) << unstated.out;
  EXPECT_NE(unstated.out.find("current states no statistic over ranks for its times (ccscope)"),
            std::string::npos)
      << unstated.out;
}

TEST(CompareStatistic, NeitherSideStatingItComparesTimeS) {
  Outcome o = compare_loaded(loaded("ccscope-csv", "", false), loaded("ccscope-csv", "", false));
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(o.result.series.at(0).statistic.statistic, "");
  EXPECT_NE(o.out.find("statistic: time_s against time_s; neither side states"), std::string::npos)
      << o.out;
}

TEST(CompareStatistic, AnEmptySideCannotBeJudged) {
  LoadedRun empty;
  empty.path = "empty.csv";
  empty.format = "ccscope-csv";
  Outcome current = compare_loaded(loaded("ccscope-csv", "max", true), empty);
  EXPECT_EQ(current.code, 125) << current.out;
  EXPECT_NE(current.out.find("summary: cannot judge: no current records with a time"),
            std::string::npos)
      << current.out;
  Outcome baseline = compare_loaded(empty, loaded("ccscope-csv", "max", true));
  EXPECT_EQ(baseline.code, 125) << baseline.out;
  EXPECT_NE(baseline.out.find("cannot judge: no baseline records with a time"), std::string::npos)
      << baseline.out;
}

TEST(CompareExitCode, FollowsTheVerdicts) {
  CompareResult r;
  EXPECT_EQ(compare_exit_code(r), 125);  // nothing judged
  r.series.resize(2);
  EXPECT_EQ(compare_exit_code(r), 0);
  r.series[1].cannot_judge = "why";
  EXPECT_EQ(compare_exit_code(r), 125);
  r.series[0].regression = true;
  EXPECT_EQ(compare_exit_code(r), 1);  // a regression anywhere is one
  r.series.clear();
  r.cannot_judge = "no current records with a time";
  EXPECT_EQ(compare_exit_code(r), 125);
}

}  // namespace
}  // namespace ccscope::reports
