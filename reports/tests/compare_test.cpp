// `ccscope compare` and `ccscope baseline` through their entry points, on
// files written by ccscope's own writers.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "ccscope/reports/compare_command.h"
#include "compare_test_util.h"

namespace ccscope::reports {
namespace {

using namespace testing;

struct Outcome {
  int code;
  std::string out, err;
};

Outcome run_verb(int (*verb)(const std::vector<std::string>&),
                 const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int code = verb(args);
  std::string out = ::testing::internal::GetCapturedStdout();
  return {code, out, ::testing::internal::GetCapturedStderr()};
}

Outcome compare(const std::vector<std::string>& args) { return run_verb(compare_main, args); }

auto same = [](size_t, int) { return 1.0; };

class Compare : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::vector<BenchRecord>& records,
                    const RunMetadata& m = test_metadata()) {
    write_run(dir_.file(name), records, m);
    return dir_.file(name);
  }
  TempDir dir_;
};

TEST_F(Compare, IdenticalFilesPass) {
  auto base = write("base.csv", sweep(2, 1, same));
  auto cur = write("cur.json", sweep(2, 1, same));
  Outcome o = compare({base, cur});
  EXPECT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("drops by more than 5%"), std::string::npos)
      << o.out;  // states the threshold
  EXPECT_NE(o.out.find("summary: no regression"), std::string::npos);
}

TEST_F(Compare, LargeSizesTwentyPercentSlowerIsABandwidthRegression) {
  auto base = write("base.csv", sweep(2, 1, same));
  auto cur =
      write("cur.csv", sweep(2, 1, [](size_t s, int) { return s >= (1u << 20) ? 1.25 : 1.0; }));
  Outcome o = compare({base, cur});
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_NE(o.out.find("REGRESSION at 1 MiB, 4 MiB, 16 MiB, 64 MiB"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("bandwidth (beta"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("latency (alpha)"), std::string::npos) << o.out;
}

TEST_F(Compare, OnlySmallSizesSlowerIsALatencyChange) {
  auto base = write("base.csv", sweep(2, 1, same));
  auto cur = write("cur.csv", sweep(2, 1, [](size_t s, int) { return s <= 16384 ? 1.5 : 1.0; }));
  Outcome o = compare({base, cur});  // the default window holds only bandwidth-bound sizes
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("slower outside the window at 1 KiB, 4 KiB, 16 KiB"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("change: latency (alpha)"), std::string::npos) << o.out;
  Outcome small = compare({base, cur, "--sizes", "1K:16K"});
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
  Outcome o = compare({write("base.csv", with_zero_rows(1e-6)),
                       write("cur.csv", with_zero_rows(50e-6)), "--sizes", "0:64M"});
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(o.out.find(" 0 B    "), std::string::npos) << o.out;  // no table row
  EXPECT_NE(o.out.find("1 KiB"), std::string::npos) << o.out;
}

TEST_F(Compare, MissingSizesCannotBeJudged) {
  auto base = write("base.csv", sweep(2, 1, same));
  auto records = sweep(2, 1, same);
  records.erase(records.begin() + 7);  // 16 MiB
  auto cur = write("cur.csv", records);
  Outcome o = compare({base, cur});
  EXPECT_EQ(o.code, 125) << o.out;
  EXPECT_NE(o.out.find("lack sizes 16 MiB"), std::string::npos) << o.out;
}

TEST_F(Compare, DifferentRankCountsCannotBeJudged) {
  auto base = write("base.csv", sweep(2, 1, same));
  auto cur = write("cur.csv", sweep(4, 1, same), test_metadata(4));
  Outcome o = compare({base, cur});
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
  Outcome o = compare({base, cur});
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("  6/6  "), std::string::npos) << o.out;  // the repeats are samples
}

TEST_F(Compare, RepeatedSamplesDetectARealSlowdown) {
  auto base = write("base.csv", noisy(1, 1.0, 0.03));
  auto cur = write("cur.csv", noisy(2, 1.25, 0.03));
  Outcome o = compare({base, cur});
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_NE(o.out.find("0.00"), std::string::npos) << o.out;  // p-values printed
}

TEST_F(Compare, SeveralFilesPerSideAreSamples) {
  std::string base, cur;
  for (int i = 0; i < 4; ++i) {
    base += (i ? "," : "") + write("b" + std::to_string(i) + ".csv", sweep(2, 1, same));
    cur += (i ? "," : "") + write("c" + std::to_string(i) + ".csv", sweep(2, 1, same));
  }
  Outcome o = compare({base, cur});
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("  4/4  "), std::string::npos) << o.out;
}

TEST_F(Compare, BadArgumentsAndInputAreOneLineExitTwo) {
  auto base = write("base.csv", sweep(2, 1, same));
  for (const auto& args : std::vector<std::vector<std::string>>{{base, dir_.file("nope.csv")},
                                                                {base, base, "--sizes", "big"},
                                                                {base},
                                                                {"--threshold", "x", base, base}}) {
    Outcome o = compare(args);
    EXPECT_EQ(o.code, 2) << o.out;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
}

TEST_F(Compare, NcclTestsFilesCompare) {
  Outcome o = compare({data_file("all_reduce_perf-h200-2rank-socket.txt"),
                       data_file("all_reduce_perf-h200-2rank-socket.txt")});
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
      compare({base, write("rot.json", measured([](BenchRecord& r) { r.rotated = true; }))});
  EXPECT_EQ(rotated.code, 125) << rotated.out;
  EXPECT_NE(rotated.out.find("cannot judge: measured differently (buffer rotation: baseline "
                             "off, current on)"),
            std::string::npos)
      << rotated.out;
  EXPECT_EQ(rotated.out.find("busbw ratio"), std::string::npos) << rotated.out;  // no table

  Outcome aggregated = compare(
      {base, write("agg.csv", measured([](BenchRecord& r) { r.aggregate_iterations = 4; }))});
  EXPECT_EQ(aggregated.code, 125) << aggregated.out;
  EXPECT_NE(aggregated.out.find("operations per timed iteration (-m): baseline 1, current 4"),
            std::string::npos)
      << aggregated.out;

  Outcome graph =
      compare({base, write("graph.csv", measured([](BenchRecord& r) { r.graph_launches = 1; }))});
  EXPECT_EQ(graph.code, 125) << graph.out;
  EXPECT_NE(graph.out.find("CUDA graph launches (-G): baseline 0, current 1"), std::string::npos)
      << graph.out;

  auto timed = [&](const char* name, const char* method) {
    return write(name, measured([&](BenchRecord& r) { r.time_method = method; }));
  };
  const char* wall = "host wall clock over -n iterations + one sync (nccl-tests)";
  const char* issue = "host time to issue -n iterations (-C)";
  Outcome clock = compare({timed("wall.csv", wall), timed("issue.csv", issue)});
  EXPECT_EQ(clock.code, 125) << clock.out;
  EXPECT_NE(clock.out.find(std::string("time method: baseline ") + wall + ", current " + issue),
            std::string::npos)
      << clock.out;

  // Pooling samples measured two ways on one side is no better.
  Outcome mixed = compare(
      {base + "," + write("rot2.csv", measured([](BenchRecord& r) { r.rotated = true; })), base});
  EXPECT_EQ(mixed.code, 125) << mixed.out;
  EXPECT_NE(mixed.out.find("buffer rotation: baseline off and on, current off"), std::string::npos)
      << mixed.out;

  // Measured alike: judged as before. A side that does not state its time
  // method (a file from before the field) is not refused for it.
  EXPECT_EQ(compare({timed("wall2.csv", wall), timed("wall3.json", wall)}).code, 0);
  EXPECT_EQ(compare({base, timed("wall4.csv", wall)}).code, 0);
}

TEST_F(Compare, BaselinesKeepAFingerprint) {
  const std::string store = dir_.file("store");
  auto base = write("base.csv", sweep(2, 1, same));
  Outcome saved = run_verb(baseline_main, {"save", "main", base, "--dir", store});
  ASSERT_EQ(saved.code, 0) << saved.err;
  EXPECT_EQ(run_verb(baseline_main, {"save", "main", base, "--dir", store}).code, 2);  // exists
  Outcome list = run_verb(baseline_main, {"list", "--dir", store});
  EXPECT_NE(list.out.find("main"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("2 ranks, 1 nodes"), std::string::npos) << list.out;

  auto cur = write("cur.csv", sweep(2, 1, same));
  EXPECT_EQ(compare({"--baseline", "main", "--dir", store, cur}).code, 0);

  RunMetadata gpu = test_metadata();
  gpu.gpu_names = {"NVIDIA H200", "NVIDIA H200"};
  auto other = write("other.csv", sweep(2, 1, same), gpu);
  Outcome refused = compare({"--baseline", "main", "--dir", store, other});
  EXPECT_EQ(refused.code, 125) << refused.out;
  EXPECT_NE(refused.out.find("gpu_model 'cpu' vs 'NVIDIA H200'"), std::string::npos) << refused.out;
  EXPECT_EQ(compare({"--baseline", "main", "--dir", store, other, "--ignore-fingerprint"}).code, 0);
  EXPECT_EQ(compare({"--baseline", "nothere", "--dir", store, cur}).code, 2);
}

TEST_F(Compare, ADriverChangeIsAFingerprintChange) {
  const std::string store = dir_.file("store");
  RunMetadata old_driver = test_metadata();
  old_driver.gpu_names = {"NVIDIA H200", "NVIDIA H200"};
  old_driver.driver_version = "570.86.15";
  ASSERT_EQ(
      run_verb(baseline_main,
               {"save", "h200", write("base.csv", sweep(2, 1, same), old_driver), "--dir", store})
          .code,
      0);
  RunMetadata new_driver = old_driver;
  new_driver.driver_version = "575.51.03";
  Outcome refused = compare(
      {"--baseline", "h200", "--dir", store, write("cur.csv", sweep(2, 1, same), new_driver)});
  EXPECT_EQ(refused.code, 125) << refused.out;
  EXPECT_NE(refused.out.find("driver '570.86.15' vs '575.51.03'"), std::string::npos)
      << refused.out;
  EXPECT_EQ(compare({"--baseline", "h200", "--dir", store,
                     write("same.csv", sweep(2, 1, same), old_driver)})
                .code,
            0);
}

}  // namespace
}  // namespace ccscope::reports
