// `ccscope compare` and `ccscope baseline` through their verbs
// (app/src/compare_verb.cpp, baseline_verb.cpp): flags, what they print, and
// the exit codes `git bisect run` reads: 2 only for bad flags, 125 for
// anything that keeps compare from judging (input it cannot read, an empty
// current run, no common statistic, another setup than the baseline).
#include <gtest/gtest.h>

#include <algorithm>

#include "ccscope/app/verbs.h"
#include "compare_test_util.h"
#include "verb_run.h"

namespace ccscope::app {
namespace {

using namespace ccscope::reports;
using namespace ccscope::reports::testing;

using verb_testing::run_verb;
using Outcome = verb_testing::VerbRun;

Outcome compare(const std::vector<std::string>& args) { return run_verb(compare_verb, args); }

size_t lines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

auto same = [](size_t, int) { return 1.0; };

class CompareVerb : public ResultFilesTest {};

TEST_F(CompareVerb, PrintsTheReportAndExitsByTheVerdict) {
  auto base = write("base.csv", sweep(2, 1, same));
  Outcome ok = compare({base, write("cur.json", sweep(2, 1, same))});
  EXPECT_EQ(ok.rc, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("statistic: max over ranks"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("summary: no regression (exit 0)"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.err, "");
  Outcome slower =
      compare({base, write("slow.csv",
                           sweep(2, 1, [](size_t s, int) { return s >= 1u << 20 ? 1.25 : 1; }))});
  EXPECT_EQ(slower.rc, 1) << slower.out;
  Outcome window = compare({base, write("cur2.csv", sweep(2, 1, same)), "--sizes", "1K:16K"});
  EXPECT_EQ(window.rc, 0) << window.out;
  EXPECT_NE(window.out.find("window: sizes 1 KiB .. 16 KiB"), std::string::npos) << window.out;
}

TEST_F(CompareVerb, BadFlagsAreOneLineExitTwo) {
  auto base = write("base.csv", sweep(2, 1, same));
  for (const auto& args : std::vector<std::vector<std::string>>{{base, base, "--sizes", "big"},
                                                                {base, base, "--sizes", "9:1"},
                                                                {base},
                                                                {base, base, base},
                                                                {"--no-such-flag", base, base},
                                                                {"--threshold", "x", base, base},
                                                                {"--threshold", "nan", base, base},
                                                                {"--baseline", "main"}}) {
    Outcome o = compare(args);
    EXPECT_EQ(o.rc, 2) << args.front() << "\n" << o.out << o.err;
    EXPECT_EQ(lines(o.err), 1u) << o.err;
    EXPECT_EQ(o.out, "");
  }
}

// What git bisect run must skip (125), not take for a bad commit (2).
TEST_F(CompareVerb, InputItCannotReadIsOneLineExit125) {
  auto base = write("base.csv", sweep(2, 1, same));
  spit(dir_.file("empty.csv"), "");
  spit(dir_.file("garbage.txt"), "hello, this is not a results file\n");
  const std::string header_only = dir_.file("header-only.csv");
  write_run(header_only, {}, test_metadata());  // a run stopped before its first record
  for (const auto& [args, mention] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{base, dir_.file("nope.csv")}, "nope.csv"},
           {{dir_.file("nope.csv"), base}, "nope.csv"},
           {{base, dir_.file("empty.csv")}, "empty.csv"},
           {{base, dir_.file("garbage.txt")}, "garbage.txt"},
           {{base, dir_.path().string()}, "directory"},
           {{"--baseline", "nothere", "--dir", dir_.file("store"), base}, "nothere"}}) {
    Outcome o = compare(args);
    EXPECT_EQ(o.rc, 125) << mention << "\n" << o.out << o.err;
    EXPECT_EQ(lines(o.err), 1u) << o.err;
    EXPECT_NE(o.err.find("cannot judge"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find(mention), std::string::npos) << o.err;
  }
  // A current file without a record (stopped before its first size) can be
  // read, but there is nothing to judge.
  Outcome empty = compare({base, header_only});
  EXPECT_EQ(empty.rc, 125) << empty.out << empty.err;
  EXPECT_NE((empty.out + empty.err).find("cannot judge"), std::string::npos) << empty.out;
}

TEST_F(CompareVerb, NoCommonStatisticIsExit125NamingIt) {
  // ccscope records whose files hold only time_s (the slowest rank's), against
  // nccl-tests' average.
  auto records = sweep(2, 1, same);
  for (auto& r : records) {
    r.backend = "nccl";
    r.rank_time_min_s = r.rank_time_avg_s = r.rank_time_max_s = 0;
  }
  RunMetadata m = test_metadata();
  m.backend = "nccl";
  Outcome o =
      compare({data_file("all_reduce_perf-h200-2rank-socket.txt"), write("max.csv", records, m)});
  EXPECT_EQ(o.rc, 125) << o.out;
  EXPECT_NE(o.out.find("cannot judge: no common time statistic over ranks: baseline has only "
                       "'avg' (nccl-tests), current has only 'max' (ccscope)"),
            std::string::npos)
      << o.out;
}

TEST_F(CompareVerb, HelpStatesTheExitCodes) {
  Outcome o = compare({"--help"});
  EXPECT_EQ(o.rc, 0);
  EXPECT_NE(o.out.find("125 cannot judge"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("2 only for bad flags"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("cannot\nbe read"), std::string::npos) << o.out;
}

TEST_F(CompareVerb, BaselinesKeepAFingerprint) {
  const std::string store = dir_.file("store");
  auto base = write("base.csv", sweep(2, 1, same));
  Outcome saved = run_verb(baseline_verb, {"save", "main", base, "--dir", store});
  ASSERT_EQ(saved.rc, 0) << saved.err;
  EXPECT_EQ(run_verb(baseline_verb, {"save", "main", base, "--dir", store}).rc, 2);  // exists
  Outcome list = run_verb(baseline_verb, {"list", "--dir", store});
  EXPECT_NE(list.out.find("main"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("2 ranks, 1 nodes"), std::string::npos) << list.out;
  EXPECT_EQ(run_verb(baseline_verb, {"frobnicate"}).rc, 2);

  auto cur = write("cur.csv", sweep(2, 1, same));
  EXPECT_EQ(compare({"--baseline", "main", "--dir", store, cur}).rc, 0);

  RunMetadata gpu = test_metadata();
  gpu.gpu_names = {"NVIDIA H200", "NVIDIA H200"};
  auto other = write("other.csv", sweep(2, 1, same), gpu);
  Outcome refused = compare({"--baseline", "main", "--dir", store, other});
  EXPECT_EQ(refused.rc, 125) << refused.out;
  EXPECT_NE(refused.out.find("gpu_model 'cpu' vs 'NVIDIA H200'"), std::string::npos) << refused.out;
  EXPECT_EQ(compare({"--baseline", "main", "--dir", store, other, "--ignore-fingerprint"}).rc, 0);
  EXPECT_EQ(compare({"--baseline", "nothere", "--dir", store, cur}).rc, 125);
}

TEST_F(CompareVerb, ADriverChangeIsAFingerprintChange) {
  const std::string store = dir_.file("store");
  RunMetadata old_driver = test_metadata();
  old_driver.gpu_names = {"NVIDIA H200", "NVIDIA H200"};
  old_driver.driver_version = "570.86.15";
  ASSERT_EQ(
      run_verb(baseline_verb,
               {"save", "h200", write("base.csv", sweep(2, 1, same), old_driver), "--dir", store})
          .rc,
      0);
  RunMetadata new_driver = old_driver;
  new_driver.driver_version = "575.51.03";
  Outcome refused = compare(
      {"--baseline", "h200", "--dir", store, write("cur.csv", sweep(2, 1, same), new_driver)});
  EXPECT_EQ(refused.rc, 125) << refused.out;
  EXPECT_NE(refused.out.find("driver '570.86.15' vs '575.51.03'"), std::string::npos)
      << refused.out;
  EXPECT_EQ(compare({"--baseline", "h200", "--dir", store,
                     write("same.csv", sweep(2, 1, same), old_driver)})
                .rc,
            0);
}

}  // namespace
}  // namespace ccscope::app
