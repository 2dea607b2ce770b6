// What every verb refuses the same way (issue 22, item 8), through the verbs
// themselves: a floating-point flag that is NaN, infinite or out of its range;
// an output file with an empty name, named twice or also read; an output that
// cannot be written (exit 1, one line naming the file once). Each case is
// paired with another mistake the verb finds later, before MPI starts, so that
// a verb that let the value through stops there instead of running.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ccscope/app/bench_flags.h"
#include "ccscope/app/verbs.h"
#include "ccscope/collectives/error.h"
#include "ccscope/records/training_record.h"
#include "compare_test_util.h"
#include "verb_run.h"

namespace ccscope::app {
namespace {

using reports::testing::data_file;
using reports::testing::slurp;
using reports::testing::spit;
using reports::testing::TempDir;
using verb_testing::Verb;
using verb_testing::VerbRun;

VerbRun run(Verb verb, const std::vector<std::string>& args) {
  return verb_testing::run_verb(verb, args);
}

std::string topology() { return std::string(CCSCOPE_TOPO_TEST_DATA) + "/hwloc-2socket-pci-ib.xml"; }

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + (a.empty() ? "''" : a);
  return out;
}

struct Case {
  const char* verb_name;
  Verb verb;
  std::vector<std::string> args;
  std::string flag;  // the flag the one line must name
};

// One line on stderr naming `flag`, exit 2.
void expect_refused(const Case& c, const std::string& problem) {
  const VerbRun r = run(c.verb, c.args);
  const std::string what = std::string(c.verb_name) + " " + joined(c.args);
  EXPECT_EQ(r.rc, 2) << what << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\n" << r.err;
  EXPECT_NE(r.err.find("error: " + c.flag + ": "), std::string::npos) << what << "\n" << r.err;
  EXPECT_NE(r.err.find(problem), std::string::npos) << what << "\n" << r.err;
}

// --------------------------------------------------------------- numbers

TEST(NumberFlags, NonFiniteAndOutOfRangeValuesAreRefusedByEveryVerb) {
  // The later mistake of each verb: topo -b 0, diag --bytes 1, train
  // --strategy bogus, advise without --params, compare without files.
  std::vector<Case> cases;
  for (const char* flag : {"--timeout", "--threshold"})
    for (const char* value : {"nan", "inf", "-1", "1e300"})
      cases.push_back({"topo", topo_verb, {flag, value, "-b", "0"}, flag});
  for (const char* value : {"nan", "-inf", "101"})
    cases.push_back({"compare", compare_verb, {"--threshold", value}, "--threshold"});
  for (const char* flag :
       {"--timeout", "--warn-fraction", "--fail-fraction", "--clock-warn-ms", "--min-efficiency"})
    for (const char* value : {"nan", "inf", "-1"})
      cases.push_back({"diag", diag_verb, {"--stages", "1", flag, value, "--bytes", "1"}, flag});
  for (const char* flag : {"--inter-busbw", "--intra-busbw", "--momentum", "--usable-memory",
                           "--pcie-GBps", "--compute-seconds", "--bucket-mb"})
    for (const char* value : {"nan", "inf", "-1"})
      cases.push_back({"advise", advise_verb, {flag, value}, flag});
  for (const char* flag : {"--lr", "--momentum", "--beta1", "--beta2", "--eps", "--weight-decay",
                           "--bucket-mb", "--grad-clip", "--timeout", "--capacity-factor"})
    for (const char* value : {"-1", "nan", "inf", "1180591620717411303424"})  // 2^70
      cases.push_back({"train", train_verb, {flag, value, "--strategy", "bogus"}, flag});
  for (const Case& c : cases) expect_refused(c, "");
}

TEST(NumberFlags, TheLineSaysWhatIsAccepted) {
  VerbRun r = run(train_verb, {"--lr", "nan", "--strategy", "bogus"});
  EXPECT_EQ(r.err,
            "ccscope train: error: --lr: nan is not a finite number: give one in (0, 10] "
            "(ccscope train --help)\n");
  r = run(diag_verb, {"--stages", "1", "--timeout", "nan", "--bytes", "1"});
  EXPECT_EQ(r.err,
            "ccscope diag: error: --timeout: nan is not a finite number: give one in [1, 86400] "
            "(ccscope diag --help)\n");
  r = run(advise_verb, {"--inter-busbw", "2e6"});
  EXPECT_EQ(r.err,
            "ccscope advise: error: --inter-busbw: 2e6 is outside [0, 1000000] (ccscope advise "
            "--help)\n");
}

TEST(NumberFlags, ValuesInRangeStillParse) {
  // Each reaches the later mistake: the number itself was accepted.
  EXPECT_NE(
      run(train_verb, {"--lr", "0.5", "--eps", "1e-6", "--momentum", "0", "--strategy", "bogus"})
          .err.find("--strategy 'bogus'"),
      std::string::npos);
  EXPECT_NE(
      run(topo_verb, {"--timeout", "1", "--threshold", "1", "-b", "0"}).err.find("-b/--bytes"),
      std::string::npos);
}

// --------------------------------------------------------------- outputs

TEST(OutputFiles, EmptyNamesAreRefusedByEveryVerb) {
  std::vector<Case> cases = {
      {"topo", topo_verb, {"--from", topology(), "--csv", ""}, "--csv"},
      {"diag", diag_verb, {"--json", "", "--bytes", "1"}, "--json"},
      {"diag", diag_verb, {"--csv", "", "--bytes", "1"}, "--csv"},
      {"diag", diag_verb, {"--prometheus", "", "--bytes", "1"}, "--prometheus"},
      {"train", train_verb, {"--csv", "", "--strategy", "bogus"}, "--csv"},
      {"train", train_verb, {"--runs-csv", "", "--strategy", "bogus"}, "--runs-csv"},
      {"train", train_verb, {"--ranks-csv", "", "--strategy", "bogus"}, "--ranks-csv"},
      {"report", report_verb, {"missing.csv", "--csv", ""}, "--csv"},
      {"report", report_verb, {"missing.csv", "--json", ""}, "--json"},
      {"report", report_verb, {"missing.csv", "-o", ""}, "--output"},
      {"diag nccl-log", nccl_log_verb, {"missing.log", "--json-file", ""}, "--json-file"},
  };
  for (const Case& c : cases) expect_refused(c, "an empty file name: name a file");
  for (const char* flag : {"--csv", "--json"}) {
    try {
      (void)parse_bench_flags({"allreduce", flag, ""});
      ADD_FAILURE() << "bench " << flag << " '' was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(flag) + ": an empty file name"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(OutputFiles, AnOutputThatIsAnInputIsRefusedAndTheInputKept) {
  TempDir dir;
  const std::string log = dir.file("x.log");
  spit(log, "not an NCCL line\n");
  VerbRun r = run(nccl_log_verb, {log, "--json-file", log});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "ccscope diag nccl-log: error: --json-file and log file name the same file '" +
                       log + "': give each its own file (ccscope diag nccl-log --help)\n");
  EXPECT_EQ(slurp(log), "not an NCCL line\n");

  const std::string csv = dir.file("s.csv");
  r = run(train_verb, {"--csv", csv, "--runs-csv", csv, "--strategy", "bogus"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "ccscope train: error: --csv and --runs-csv name the same file '" + csv +
                       "': give each its own file (ccscope train --help)\n");

  const std::string topo_copy = dir.file("t.xml");
  spit(topo_copy, slurp(topology()));
  r = run(topo_verb, {"--from", topo_copy, "--csv", topo_copy});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err, "ccscope topo: error: --csv and --from name the same file '" + topo_copy +
                       "': give each its own file (ccscope topo --help)\n");
  EXPECT_EQ(slurp(topo_copy), slurp(topology()));
}

// bench exits 1 when an output cannot be written; every verb does now, with
// the file named once (nccl-log said "cannot write 'F': cannot write 'F': ..."
// and exited 2, train and report exited 2).
TEST(OutputFiles, AWriteFailureIsExitOneAndOneLine) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no writable /dev/full here";
  TempDir dir;
  spit(dir.file("x.log"), "not an NCCL line\n");
  VerbRun r = run(nccl_log_verb, {dir.file("x.log"), "--json-file", "/dev/full"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err,
            "ccscope diag nccl-log: error: cannot write '/dev/full': No space left on device\n");
  r = run(topo_verb, {"--from", topology(), "--csv", "/dev/full"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "ccscope topo: error: cannot write '/dev/full': No space left on device\n");
  r = run(report_verb, {data_file("all_reduce_perf-h200-1rank.txt"), "-o", "/dev/full"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "ccscope report: error: cannot write '/dev/full': No space left on device\n");
}

// --------------------------------------------------------------- messages

// The training CSV reader added its advice after the CSV codec's own.
TEST(Messages, AnUnclosedQuoteInATrainingCsvGivesTheAdviceOnce) {
  TempDir dir;
  const auto& kind = records::train_run_kind();
  std::string header;
  for (const auto& column : records::csv_columns(kind))
    header += (header.empty() ? "" : ",") + column;
  spit(dir.file("runs.csv"), header + "\n" + kind.schema_id() + ",\"open\n");
  const VerbRun r = run(report_verb, {dir.file("runs.csv")});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "ccscope report: error: " + dir.file("runs.csv") +
                       ":2: a quoted field is not closed; is the file complete and unedited?\n");
}

}  // namespace
}  // namespace ccscope::app
