#include "ccscope/records/topology_record.h"

#include <gtest/gtest.h>

namespace ccscope::records {
namespace {

TEST(TopologyPathRecords, CsvRoundTripThroughTheTable) {
  TopologyPathRecord measured;
  measured.kind = "node_pair";
  measured.host_a = "node0";
  measured.host_b = "node,1";  // a comma: quoted by the writer
  measured.endpoint_a = "eth0";
  measured.endpoint_b = "eth0";
  measured.path = "socket";
  measured.basis = "socket over eth0: 1 Gbit/s (tc shaper)";
  measured.expected_GBps = 0.125;
  measured.measured_GBps = 0.1171;
  measured.percent_of_expected = 93.68;
  measured.below_threshold = false;
  measured.round = 2;
  TopologyPathRecord unmeasured;
  unmeasured.kind = "gpu_pair";
  unmeasured.endpoint_a = "GPU0";
  unmeasured.path = "NV6";

  const TopologyPathKind& kind = topology_path_kind();
  std::string text = csv_line(csv_columns(kind));
  text += csv_row(kind, topology_path_cells(measured));
  text += csv_row(kind, topology_path_cells(unmeasured));
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "schema,kind,host_a,host_b,endpoint_a,endpoint_b,path,basis,expected_GBps,"
            "measured_GBps,percent_of_expected,below_threshold,round");
  const std::vector<TopologyPathRecord> back = read_topology_path_csv(text);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].host_b, "node,1");
  EXPECT_EQ(back[0].basis, measured.basis);
  EXPECT_EQ(back[0].expected_GBps, 0.125);
  EXPECT_EQ(back[0].measured_GBps, 0.1171);
  EXPECT_EQ(back[0].below_threshold, false);
  EXPECT_EQ(back[0].round, 2);
  EXPECT_EQ(back[1].path, "NV6");
  EXPECT_FALSE(back[1].expected_GBps.has_value());
  EXPECT_FALSE(back[1].round.has_value());
}

TEST(TopologyPathRecords, BadFigureNamesTheFieldAndLine) {
  const std::string text = "kind,expected_GBps\ngpu_pair,1.5\nnode_pair,fast\n";
  try {
    read_topology_path_csv(text);
    FAIL() << "no error";
  } catch (const CsvError& e) {
    EXPECT_EQ(e.line, 3u);
    EXPECT_NE(std::string(e.what()).find("expected_GBps"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ccscope::records
