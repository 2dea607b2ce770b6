// The checklist's pure parts: statuses, the verdict against an expected
// figure, the efficiency the network allows, the Prometheus text.
#include "ccscope/diag/check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ccscope/diag/checklist.h"
#include "ccscope/diag/prometheus.h"

namespace ccscope::diag {
namespace {

Check check(std::string name, Status status, std::string host = "node0", int rank = 0) {
  Check c;
  c.stage = Stage::kCluster;
  c.name = std::move(name);
  c.status = status;
  c.host = std::move(host);
  c.rank = rank;
  return c;
}

TEST(Check, WorstStatusIgnoresSkip) {
  EXPECT_EQ(worst_status({}), Status::kPass);
  EXPECT_EQ(worst_status({check("a", Status::kSkip)}), Status::kPass);
  EXPECT_EQ(worst_status({check("a", Status::kPass), check("b", Status::kWarn)}), Status::kWarn);
  EXPECT_EQ(worst_status({check("a", Status::kFail), check("b", Status::kWarn)}), Status::kFail);
  EXPECT_STREQ(status_name(Status::kFail), "FAIL");
  EXPECT_STREQ(stage_name(Stage::kScaling), "scaling");
}

TEST(Check, AgainstExpected) {
  EXPECT_EQ(judge_against_expected(0.9, 1.0, 0.5, 0.25), Status::kPass);
  EXPECT_EQ(judge_against_expected(0.5, 1.0, 0.5, 0.25), Status::kPass);  // at the bar
  EXPECT_EQ(judge_against_expected(0.3, 1.0, 0.5, 0.25), Status::kWarn);
  EXPECT_EQ(judge_against_expected(0.2, 1.0, 0.5, 0.25), Status::kFail);  // a link at 1/5
  EXPECT_EQ(judge_against_expected(0.2, 0.0, 0.5, 0.25), Status::kSkip);  // unknown expected
}

TEST(Check, AllowedEfficiency) {
  EXPECT_DOUBLE_EQ(allowed_efficiency(0.1, 1e9, 1, 1.0), 1.0);
  // 4 ranks: 1 GB x 2 x 3/4 at 1 GB/s = 1.5 s of all-reduce beside a 0.5 s step.
  EXPECT_NEAR(allowed_efficiency(0.5, 1e9, 4, 1.0), 0.25, 1e-12);
  EXPECT_EQ(allowed_efficiency(0.5, 1e9, 4, 0.0), 0.0);
}

TEST(Check, MeasurementTurnsSerializeRanksOfOneMachine) {
  // Two real nodes of two ranks and a third with one: two turns, nodes at once.
  EXPECT_EQ(measurement_turns({"boot a", "boot a", "boot b", "boot b", "boot c"}),
            (std::vector<int>{0, 1, 0, 1, 0}));
  // Three "nodes" that are network namespaces of one machine: one rank at a time.
  EXPECT_EQ(measurement_turns({"boot a", "boot a", "boot a", "boot a"}),
            (std::vector<int>{0, 1, 2, 3}));
  // Interleaved placement: turns follow rank order within each machine.
  EXPECT_EQ(measurement_turns({"boot a", "boot b", "boot a", "boot b"}),
            (std::vector<int>{0, 0, 1, 1}));
  EXPECT_TRUE(measurement_turns({}).empty());
}

TEST(Prometheus, OneSeriesPerCheckWithEscapedLabels) {
  Check a = check("cluster.clock_offset", Status::kWarn, "node\"2", 4);
  a.measured = 50.25;
  a.expected = 10;
  a.unit = "ms";
  Check b = check("rank.gemm", Status::kPass, "node0", 0);
  b.stage = Stage::kRank;
  PrometheusRun run;
  run.exit_code = 0;
  run.seconds = 12.5;
  run.finished_unix_s = 1700000000;
  const std::string text = prometheus_text({a, b}, run);
  EXPECT_NE(text.find("# TYPE ccscope_diag_check_status gauge\n"), std::string::npos);
  EXPECT_NE(text.find("ccscope_diag_check_status{stage=\"cluster\",check=\"cluster.clock_offset\","
                      "host=\"node\\\"2\",rank=\"4\",peer=\"\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ccscope_diag_check_measured{stage=\"cluster\",check=\"cluster.clock_"
                      "offset\",host=\"node\\\"2\",rank=\"4\",peer=\"\",unit=\"ms\"} 50.25\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ccscope_diag_check_status{stage=\"rank\",check=\"rank.gemm\",host=\"node0\","
                      "rank=\"0\",peer=\"\"} 0\n"),
            std::string::npos);
  // No figure: no measured series for rank.gemm.
  EXPECT_EQ(text.find("ccscope_diag_check_measured{stage=\"rank\""), std::string::npos);
  EXPECT_NE(text.find("ccscope_diag_stage_status{stage=\"cluster\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ccscope_diag_duration_seconds 12.5\n"), std::string::npos);
}

TEST(Prometheus, RepeatedLabelsKeepTheWorst) {
  const std::string text =
      prometheus_text({check("topo.pcie", Status::kWarn), check("topo.pcie", Status::kFail),
                       check("topo.pcie", Status::kPass)},
                      {});
  const std::string series =
      "ccscope_diag_check_status{stage=\"cluster\",check=\"topo.pcie\",host=\"node0\",rank=\"0\","
      "peer=\"\"} ";
  const size_t at = text.find(series);
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(text.substr(at + series.size(), 2), "2\n");
  EXPECT_EQ(text.find(series, at + 1), std::string::npos);  // once
}

}  // namespace
}  // namespace ccscope::diag
