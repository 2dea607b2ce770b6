#include "ccscope/topo/paths.h"

#include <gtest/gtest.h>

#include "ccscope/topo/nominal_rates.h"

namespace ccscope::topo {
namespace {

PciPlacement placed(const std::string& bus, std::vector<std::string> bridges,
                    const std::string& host, int numa) {
  PciPlacement p;
  p.bus_id = bus;
  for (const std::string& b : bridges) p.path.push_back({PciHop::Kind::kBridge, b});
  p.path.push_back({PciHop::Kind::kHostBridge, host});
  p.numa_node = numa;
  return p;
}

Gpu gpu(int index, PciPlacement pci, PcieLink link = {4, 16}) {
  Gpu g;
  g.index = index;
  g.name = "NVIDIA A100-SXM4-80GB";
  g.pci = std::move(pci);
  g.pcie_current = link;
  return g;
}

TEST(NominalRates, PcieGenerationsWithTheirEncoding) {
  EXPECT_NEAR(pcie_GBps(3, 16), 15.754, 0.001);  // 8 GT/s x 16 x 128/130 / 8
  EXPECT_NEAR(pcie_GBps(5, 16), 63.015, 0.001);
  EXPECT_NEAR(pcie_GBps(1, 1), 0.25, 1e-9);  // 2.5 GT/s, 8b/10b
  EXPECT_NEAR(pcie_GBps(6, 16), 64.0 * 16 * 242 / 256 / 8, 1e-9);
  EXPECT_EQ(pcie_GBps(7, 16), 0);
  EXPECT_EQ(pcie_GBps(4, 0), 0);
}

TEST(NominalRates, NvlinkByGenerationAndModel) {
  EXPECT_EQ(nvlink_link_GBps(2), 25);
  EXPECT_EQ(nvlink_link_GBps(5), 50);
  EXPECT_EQ(nvlink_version_of_model("Tesla V100-SXM3-32GB-H"), 2);
  EXPECT_EQ(nvlink_version_of_model("NVIDIA H200"), 4);
  EXPECT_EQ(nvlink_version_of_model("NVIDIA GH200 480GB"), 4);
  EXPECT_EQ(nvlink_version_of_model("NVIDIA B200"), 5);
  EXPECT_EQ(nvlink_version_of_model("Quadro RTX 6000"), 0);
  EXPECT_EQ(port_GBps(400), 50);
}

TEST(PathTokens, RoundTrip) {
  int links = 0;
  EXPECT_EQ(parse_path_level("NV12", &links), PathLevel::kNvLink);
  EXPECT_EQ(links, 12);
  EXPECT_EQ(path_token(PathLevel::kNvLink, 6), "NV6");
  for (const char* token : {"X", "PIX", "PXB", "PHB", "NODE", "SYS"})
    EXPECT_EQ(path_token(parse_path_level(token)), token);
  EXPECT_EQ(parse_path_level("NVX"), PathLevel::kUnknown);
  EXPECT_EQ(parse_path_level("pix"), PathLevel::kUnknown);
}

// A two-level switch like the DGX-2's: root port R, switch upstream U, two
// downstream ports D1/D2 with a GPU each; a second switch U2 under R.
TEST(PciPathLevel, SwitchesHostBridgesAndNumaNodes) {
  const PciPlacement g0 = placed("0000:34:00.0", {"d1", "u", "r"}, "hb0", 0);
  const PciPlacement g1 = placed("0000:36:00.0", {"d2", "u", "r"}, "hb0", 0);
  const PciPlacement g2 = placed("0000:39:00.0", {"d3", "u2", "r"}, "hb0", 0);
  const PciPlacement g3 = placed("0000:57:00.0", {"d4"}, "hb0", 0);
  const PciPlacement g4 = placed("0000:5c:00.0", {"d5"}, "hb1", 0);
  const PciPlacement g5 = placed("0000:b7:00.0", {"d6"}, "hb2", 1);
  EXPECT_EQ(pci_path_level(g0, g0), PathLevel::kSelf);
  EXPECT_EQ(pci_path_level(g0, g1), PathLevel::kPix);
  EXPECT_EQ(pci_path_level(g0, g2), PathLevel::kPxb);
  EXPECT_EQ(pci_path_level(g0, g3), PathLevel::kPhb);
  EXPECT_EQ(pci_path_level(g3, g4), PathLevel::kNode);
  EXPECT_EQ(pci_path_level(g4, g5), PathLevel::kSys);
  EXPECT_EQ(pci_path_level(g0, PciPlacement{}), PathLevel::kUnknown);
  // Directly under the same bridge.
  EXPECT_EQ(
      pci_path_level(placed("0000:01:00.0", {"b"}, "h", 0), placed("0000:01:00.1", {"b"}, "h", 0)),
      PathLevel::kPix);
}

TEST(GpuPairPath, NvlinkDirectAndThroughSwitches) {
  HostTopology host;
  host.gpus.push_back(gpu(0, placed("0000:34:00.0", {"d1", "u"}, "hb0", 0)));
  host.gpus.push_back(gpu(1, placed("0000:36:00.0", {"d2", "u"}, "hb0", 0)));
  host.gpus.push_back(gpu(2, placed("0000:b7:00.0", {"d6"}, "hb2", 1)));
  for (int l = 0; l < 4; ++l) {
    host.gpus[0].nvlinks.push_back({l, true, 3, "0000:36:00.0", false, 0});
    host.gpus[1].nvlinks.push_back({l, true, 3, "0000:34:00.0", false, 0});
  }
  host.gpus[0].nvlinks.push_back({4, false, 3, "0000:36:00.0", false, 0});  // down: not counted
  const NcclEnvironment env;
  const GpuPairPath direct = gpu_pair_path(host, host.gpus[0], host.gpus[1], env);
  EXPECT_EQ(direct.token(), "NV4");
  EXPECT_DOUBLE_EQ(direct.expected_GBps, 100);
  EXPECT_TRUE(direct.p2p);
  const GpuPairPath pcie = gpu_pair_path(host, host.gpus[0], host.gpus[2], env);
  EXPECT_EQ(pcie.token(), "SYS");
  EXPECT_NEAR(pcie.expected_GBps, pcie_GBps(4, 16), 1e-9);
  EXPECT_EQ(gpu_pair_paths(host, env).size(), 3u);

  // hwloc states bandwidth per switch: 6 switches x 25 GB/s = NV6.
  HostTopology switched;
  switched.gpus.push_back(gpu(0, placed("0000:34:00.0", {"a"}, "h", 0)));
  switched.gpus.push_back(gpu(1, placed("0000:36:00.0", {"b"}, "h", 0)));
  switched.gpus[0].name = switched.gpus[1].name = "Tesla V100-SXM3-32GB-H";
  for (int s = 0; s < 6; ++s) {
    switched.gpus[0].nvlinks.push_back(
        {-1, true, 0, "0000:6" + std::to_string(s) + ":00.0", true, 25});
    switched.gpus[1].nvlinks.push_back(
        {-1, true, 0, "0000:6" + std::to_string(s) + ":00.0", true, 25});
  }
  const GpuPairPath via = gpu_pair_path(switched, switched.gpus[0], switched.gpus[1], env);
  EXPECT_EQ(via.token(), "NV6");
  EXPECT_TRUE(via.through_nvswitch);
  EXPECT_DOUBLE_EQ(via.expected_GBps, 150);
}

TEST(GpuPairPath, NarrowerLinkBoundsAPciePairAndNvmlFillsUnknownPlacement) {
  HostTopology host;
  host.gpus.push_back(gpu(0, placed("0000:01:00.0", {"b"}, "h", 0), {5, 16}));
  host.gpus.push_back(gpu(1, placed("0000:02:00.0", {"b"}, "h", 0), {5, 8}));
  const GpuPairPath path = gpu_pair_path(host, host.gpus[0], host.gpus[1], {});
  EXPECT_EQ(path.token(), "PIX");
  EXPECT_NEAR(path.expected_GBps, pcie_GBps(5, 8), 1e-9);
  EXPECT_EQ(path.basis, "PCIe gen5 x8");

  HostTopology nvml_only;
  nvml_only.gpus.push_back(gpu(0, PciPlacement{}));
  nvml_only.gpus.push_back(gpu(1, PciPlacement{}));
  nvml_only.gpus[0].pci.bus_id = "0000:01:00.0";
  nvml_only.gpus[1].pci.bus_id = "0000:81:00.0";
  nvml_only.gpu_ancestors.push_back({0, 1, "SYS"});
  EXPECT_EQ(gpu_pair_path(nvml_only, nvml_only.gpus[0], nvml_only.gpus[1], {}).token(), "SYS");
}

TEST(GpuPairPath, P2pDisabledGoesThroughHostMemory) {
  HostTopology host;
  host.gpus.push_back(gpu(0, placed("0000:01:00.0", {"b"}, "h", 0)));
  host.gpus.push_back(gpu(1, placed("0000:02:00.0", {"b"}, "h", 0)));
  const GpuPairPath path =
      gpu_pair_path(host, host.gpus[0], host.gpus[1], {{"NCCL_P2P_DISABLE", "1"}});
  EXPECT_FALSE(path.p2p);
  EXPECT_NE(path.basis.find("no P2P"), std::string::npos);
}

HostTopology node(const std::string& name, double rate_Gbps, double shaped_Gbps) {
  HostTopology host;
  host.hostname = name;
  Nic eth;
  eth.name = "eth0";
  eth.kind = NicKind::kEthernet;
  eth.state = "up";
  eth.rate_Gbps = rate_Gbps;
  eth.shaped_Gbps = shaped_Gbps;
  eth.is_virtual = true;
  host.nics.push_back(eth);
  Nic lo;
  lo.name = "lo";
  lo.state = "unknown";
  lo.is_virtual = true;
  host.nics.push_back(lo);
  return host;
}

TEST(NodePairPath, SocketOverTheSlowerEnd) {
  const HostTopology a = node("node0", 10, 1), b = node("node1", 10, 0.2);
  const NodePairPath path = node_pair_path(a, b, {}, false);
  EXPECT_EQ(path.transport, NetworkChoice::Transport::kSocket);
  EXPECT_EQ(path.device_a, "eth0");
  EXPECT_DOUBLE_EQ(path.expected_GBps, 0.2 / 8);
  EXPECT_NE(path.basis.find("node1"), std::string::npos) << path.basis;
  EXPECT_NE(path.basis.find("tc shaper"), std::string::npos) << path.basis;
}

TEST(NodePairPath, InfinibandWhenBothEndsHaveAnActivePort) {
  HostTopology a = node("a", 100, 0), b = node("b", 100, 0);
  for (HostTopology* host : {&a, &b}) {
    Nic ib;
    ib.name = "mlx5_0:1";
    ib.kind = NicKind::kInfiniband;
    ib.state = "active";
    ib.rate_Gbps = 400;
    ib.has_gid = true;
    host->nics.push_back(ib);
  }
  NodePairPath path = node_pair_path(a, b, {}, false);
  EXPECT_EQ(path.transport, NetworkChoice::Transport::kInfiniband);
  EXPECT_DOUBLE_EQ(path.expected_GBps, 50);
  path = node_pair_path(a, b, {{"NCCL_IB_DISABLE", "1"}}, false);
  EXPECT_EQ(path.transport, NetworkChoice::Transport::kSocket);
  EXPECT_DOUBLE_EQ(path.expected_GBps, 12.5);
  // Only one end has IB: sockets.
  path = node_pair_path(a, node("c", 100, 0), {}, false);
  EXPECT_EQ(path.transport, NetworkChoice::Transport::kSocket);
}

TEST(SlowestRankPath, TheSlowestPairOfTheRanksUsed) {
  const std::vector<HostTopology> hosts = {node("node0", 10, 1), node("node1", 10, 1),
                                           node("node2", 10, 0.5)};
  // Ranks 0,1 on node0, 2,3 on node1: node2 unused, so 1 Gbit/s bounds.
  RankSetPath path = slowest_rank_path(hosts, {0, 0, 1, 1}, {-1, -1, -1, -1}, {}, true);
  EXPECT_DOUBLE_EQ(path.expected_GBps, 0.125);
  path = slowest_rank_path(hosts, {0, 1, 2}, {-1, -1, -1}, {}, true);
  EXPECT_DOUBLE_EQ(path.expected_GBps, 0.0625);
  EXPECT_NE(path.description.find("node2"), std::string::npos) << path.description;
  // One node, host memory: no path the table rates.
  path = slowest_rank_path(hosts, {0, 0}, {-1, -1}, {}, true);
  EXPECT_EQ(path.expected_GBps, 0);
}

TEST(PathMatrix, NvidiaSmiLayoutWithLegend) {
  HostTopology host;
  host.gpus.push_back(gpu(0, placed("0000:01:00.0", {"b"}, "h", 0)));
  host.gpus.push_back(gpu(1, placed("0000:02:00.0", {"c"}, "h", 0)));
  Nic nic;
  nic.name = "mlx5_0:1";
  nic.pci = placed("0000:03:00.0", {"b"}, "h", 0);
  host.nics.push_back(nic);
  const std::string matrix = render_path_matrix(host, {});
  EXPECT_NE(matrix.find("GPU0  X     PHB   PIX"), std::string::npos) << matrix;
  EXPECT_NE(matrix.find("NIC0: mlx5_0:1"), std::string::npos) << matrix;
  EXPECT_NE(matrix.find("PIX  = Connection traversing at most a single PCIe bridge"),
            std::string::npos);
}

}  // namespace
}  // namespace ccscope::topo

#include "ccscope/topo/report.h"

namespace ccscope::topo {
namespace {

TEST(CompleteReport, MeasuredPairsGetTheirPathAndBelowThresholdIsAFinding) {
  TopologyReport report;
  report.nodes = {node("node0", 10, 1), node("node1", 10, 1), node("node2", 10, 0.2)};
  report.sockets_only = true;
  report.measured.push_back({"node0", "node1", "", 0, 0, 0.1, false});    // 80%
  report.measured.push_back({"node0", "node2", "", 1, 0, 0.015, false});  // 60% of 0.025
  report.measured.push_back(
      {"node9/GPU0", "node9/GPUx", "", 2, 0, 1, false});  // not a pair we know
  complete_report(report);
  ASSERT_EQ(report.node_pairs.size(), 3u);
  EXPECT_EQ(report.measured[0].path, "socket over eth0");
  EXPECT_DOUBLE_EQ(report.measured[0].expected_GBps, 0.125);
  EXPECT_FALSE(report.measured[0].below_threshold);
  EXPECT_DOUBLE_EQ(report.measured[1].expected_GBps, 0.025);
  EXPECT_TRUE(report.measured[1].below_threshold);
  EXPECT_EQ(report.measured[2].expected_GBps, 0);
  EXPECT_FALSE(report.measured[2].below_threshold);
  size_t below = 0, link_rates = 0;
  for (const Finding& f : report.findings) {
    below += f.check == "measure.below_expected";
    if (f.check == "homogeneity.link_rates") {
      ++link_rates;
      EXPECT_EQ(f.host, "node2");
    }
  }
  EXPECT_EQ(below, 1u);
  EXPECT_EQ(link_rates, 1u);
  // The ranked table ends with the slowest pair.
  const std::string text = render_topology_text(report);
  const size_t table = text.find("measured (");
  ASSERT_NE(table, std::string::npos) << text;
  const size_t fast = text.find("node0 - node1", table), slow = text.find("node0 - node2", table);
  ASSERT_NE(slow, std::string::npos) << text;
  EXPECT_LT(fast, slow) << text;
}

}  // namespace
}  // namespace ccscope::topo
