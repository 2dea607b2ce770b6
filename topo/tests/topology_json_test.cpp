// ccscope's topology JSON (topo/src/topology_json.cpp): a hand-built topology
// written and read back field by field, the errors of the reader (one line
// naming the JSON path), the schema version, the caps on what it reads, and the
// findings of topo/fuzz/topo_fuzz.cpp, each as the input that showed it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ccscope/records/document_kind.h"
#include "ccscope/topo/paths.h"
#include "ccscope/topo/report.h"
#include "test_files.h"

namespace ccscope::topo {
namespace {

using test::slurp;

PciHop bridge(const std::string& id) { return {PciHop::Kind::kBridge, id}; }
PciHop host_bridge(const std::string& id) { return {PciHop::Kind::kHostBridge, id}; }

NvLink nvlink(int index, bool active, int version, const std::string& remote, bool is_switch,
              double GBps) {
  NvLink link;
  link.link = index;
  link.active = active;
  link.version = version;
  link.remote_bus_id = remote;
  link.remote_is_switch = is_switch;
  link.bandwidth_GBps = GBps;
  return link;
}

// Two GPUs behind one PCIe switch, with NVLinks to each other and to an
// NVSwitch, a third on the other socket with only a partial PCIe figure (a
// generation, no width); an IB port, a shaped Ethernet port, loopback.
HostTopology hand_built_node() {
  HostTopology node;
  node.hostname = "gpu-node-07";
  node.numa_nodes = 2;
  node.packages = 2;
  node.cores = 64;
  node.pus = 128;
  node.cpu_model = "AMD EPYC 9654 96-Core Processor";
  node.driver_version = "550.54.15";
  node.cuda_version = "12.4";
  node.nccl_version = "2.21.5";
  for (int i = 0; i < 3; ++i) {
    Gpu gpu;
    gpu.index = i;
    gpu.name = i < 2 ? "NVIDIA H100 80GB HBM3" : "NVIDIA L40S";
    gpu.uuid = "GPU-0000000" + std::to_string(i);
    gpu.cuda_compute_capability = i < 2 ? 90 : 89;
    node.gpus.push_back(gpu);
  }
  Gpu& g0 = node.gpus[0];
  g0.pci.bus_id = "0000:1b:00.0";
  g0.pci.path = {bridge("0000:1a:00.0"), bridge("0000:19:00.0"), host_bridge("pci0000:17")};
  g0.pci.numa_node = 0;
  g0.pci.package = 0;
  g0.pcie_current = {5, 16};
  g0.pcie_max = {5, 16};
  g0.nvlinks = {nvlink(0, true, 4, "0000:1c:00.0", false, 26.5625),
                nvlink(1, false, 4, "0000:1c:00.0", false, 0),
                nvlink(2, true, 4, "0000:c5:00.0", true, 0)};
  Gpu& g1 = node.gpus[1];
  g1.pci.bus_id = "0000:1c:00.0";
  g1.pci.path = {bridge("0000:1a:01.0"), bridge("0000:19:00.0"), host_bridge("pci0000:17")};
  g1.pci.numa_node = 0;
  g1.pci.package = 0;
  g1.pcie_current = {4, 8};
  g1.pcie_max = {5, 16};
  g1.nvlinks = {nvlink(0, true, 4, "0000:1b:00.0", false, 26.5625),
                nvlink(-1, true, 0, "0000:c5:00.0", true, 150.0)};
  Gpu& g2 = node.gpus[2];
  g2.pci.bus_id = "0000:9b:00.0";
  g2.pci.path = {host_bridge("pci0000:97")};
  g2.pci.numa_node = 1;
  g2.pci.package = 1;
  g2.pcie_current = {4, 0};
  node.nics.resize(3);
  Nic& ib = node.nics[0];
  ib.name = "mlx5_0:1";
  ib.kind = NicKind::kInfiniband;
  ib.rate_Gbps = 400;
  ib.state = "active";
  ib.mtu = 4096;
  ib.driver = "mlx5_core";
  ib.netdev = "ib0";
  ib.has_gid = true;
  ib.pci.bus_id = "0000:1d:00.0";
  ib.pci.path = {bridge("0000:1a:02.0"), bridge("0000:19:00.0"), host_bridge("pci0000:17")};
  ib.pci.numa_node = 0;
  Nic& eth = node.nics[1];
  eth.name = "eth0";
  eth.kind = NicKind::kEthernet;
  eth.rate_Gbps = 10;
  eth.shaped_Gbps = 1.25;
  eth.state = "up";
  eth.mtu = 9000;
  eth.driver = "ixgbe";
  eth.rdma_device = "mlx5_1";
  eth.pci.bus_id = "0000:c1:00.1";
  eth.pci.path = {host_bridge("pci0000:c0")};
  eth.pci.numa_node = 1;
  Nic& lo = node.nics[2];
  lo.name = "lo";
  lo.state = "unknown";
  lo.mtu = 65536;
  lo.is_virtual = true;
  node.gpu_ancestors = {{0, 1, "PXB"}, {0, 2, "SYS"}, {1, 2, "SYS"}};
  // "sources" is a JSON object, whose keys the writer puts in name order.
  node.sources = {{"hwloc", true, "hwloc XML version 2.0"},
                  {"nvml", true, "NVML 12.550.54.15"},
                  {"sysfs", false, "no /sys/class/net"}};
  node.notes = {"hwloc: a GPU without a PCI link speed", "nvml: GPU2 has no NVLink"};
  return node;
}

void expect_same_link(const PcieLink& a, const PcieLink& b, const char* what) {
  EXPECT_EQ(a.generation, b.generation) << what;
  EXPECT_EQ(a.width, b.width) << what;
}

void expect_same_placement(const PciPlacement& a, const PciPlacement& b) {
  EXPECT_EQ(a.bus_id, b.bus_id);
  EXPECT_EQ(a.numa_node, b.numa_node);
  EXPECT_EQ(a.package, b.package);
  expect_same_link(a.link, b.link, "pci.link");
  ASSERT_EQ(a.path.size(), b.path.size());
  for (size_t i = 0; i < a.path.size(); ++i) {
    EXPECT_EQ(a.path[i].kind, b.path[i].kind) << "hop " << i;
    EXPECT_EQ(a.path[i].id, b.path[i].id) << "hop " << i;
  }
}

void expect_same_node(const HostTopology& a, const HostTopology& b) {
  EXPECT_EQ(a.hostname, b.hostname);
  EXPECT_EQ(a.numa_nodes, b.numa_nodes);
  EXPECT_EQ(a.packages, b.packages);
  EXPECT_EQ(a.cores, b.cores);
  EXPECT_EQ(a.pus, b.pus);
  EXPECT_EQ(a.cpu_model, b.cpu_model);
  EXPECT_EQ(a.driver_version, b.driver_version);
  EXPECT_EQ(a.cuda_version, b.cuda_version);
  EXPECT_EQ(a.nccl_version, b.nccl_version);
  ASSERT_EQ(a.gpus.size(), b.gpus.size());
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    SCOPED_TRACE("gpus[" + std::to_string(i) + "]");
    const Gpu &x = a.gpus[i], &y = b.gpus[i];
    EXPECT_EQ(x.index, y.index);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.uuid, y.uuid);
    expect_same_placement(x.pci, y.pci);
    expect_same_link(x.pcie_current, y.pcie_current, "pcie_current");
    expect_same_link(x.pcie_max, y.pcie_max, "pcie_max");
    EXPECT_EQ(x.cuda_compute_capability, y.cuda_compute_capability);
    ASSERT_EQ(x.nvlinks.size(), y.nvlinks.size());
    for (size_t l = 0; l < x.nvlinks.size(); ++l) {
      SCOPED_TRACE("nvlinks[" + std::to_string(l) + "]");
      EXPECT_EQ(x.nvlinks[l].link, y.nvlinks[l].link);
      EXPECT_EQ(x.nvlinks[l].active, y.nvlinks[l].active);
      EXPECT_EQ(x.nvlinks[l].version, y.nvlinks[l].version);
      EXPECT_EQ(x.nvlinks[l].remote_bus_id, y.nvlinks[l].remote_bus_id);
      EXPECT_EQ(x.nvlinks[l].remote_is_switch, y.nvlinks[l].remote_is_switch);
      EXPECT_EQ(x.nvlinks[l].bandwidth_GBps, y.nvlinks[l].bandwidth_GBps);
    }
  }
  ASSERT_EQ(a.nics.size(), b.nics.size());
  for (size_t i = 0; i < a.nics.size(); ++i) {
    SCOPED_TRACE("nics[" + std::to_string(i) + "]");
    const Nic &x = a.nics[i], &y = b.nics[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.rate_Gbps, y.rate_Gbps);
    EXPECT_EQ(x.shaped_Gbps, y.shaped_Gbps);
    EXPECT_EQ(x.state, y.state);
    EXPECT_EQ(x.mtu, y.mtu);
    EXPECT_EQ(x.driver, y.driver);
    EXPECT_EQ(x.netdev, y.netdev);
    EXPECT_EQ(x.rdma_device, y.rdma_device);
    EXPECT_EQ(x.has_gid, y.has_gid);
    EXPECT_EQ(x.is_virtual, y.is_virtual);
    expect_same_placement(x.pci, y.pci);
  }
  ASSERT_EQ(a.gpu_ancestors.size(), b.gpu_ancestors.size());
  for (size_t i = 0; i < a.gpu_ancestors.size(); ++i) {
    EXPECT_EQ(a.gpu_ancestors[i].gpu_a, b.gpu_ancestors[i].gpu_a) << i;
    EXPECT_EQ(a.gpu_ancestors[i].gpu_b, b.gpu_ancestors[i].gpu_b) << i;
    EXPECT_EQ(a.gpu_ancestors[i].level, b.gpu_ancestors[i].level) << i;
  }
  ASSERT_EQ(a.sources.size(), b.sources.size());
  for (size_t i = 0; i < a.sources.size(); ++i) {
    EXPECT_EQ(a.sources[i].name, b.sources[i].name) << i;
    EXPECT_EQ(a.sources[i].read, b.sources[i].read) << i;
    EXPECT_EQ(a.sources[i].detail, b.sources[i].detail) << i;
  }
  EXPECT_EQ(a.notes, b.notes);
}

// What read_topology_json says of `text`; "" when it reads.
std::string error_of(const std::string& text) {
  try {
    (void)read_topology_json(text);
  } catch (const TopologyError& e) {
    return e.what();
  }
  return "";
}

// A one-node document with `node_body` inside the node's braces.
std::string one_node(const std::string& node_body) {
  return R"({"schema": "ccscope.topo/1", "nodes": [{)" + node_body + "}]}";
}

// `count` copies of `item`, comma-separated.
std::string repeated(const std::string& item, size_t count) {
  std::string out;
  out.reserve((item.size() + 1) * count);
  for (size_t i = 0; i < count; ++i) out += (i ? "," : "") + item;
  return out;
}

TEST(TopologyJson, HandBuiltTopologyReadsBackFieldByField) {
  TopologyReport report;
  report.nodes.push_back(hand_built_node());
  HostTopology second = hand_built_node();
  second.hostname = "gpu-node-08";
  second.gpus.pop_back();
  second.notes.clear();
  report.nodes.push_back(second);
  const std::vector<HostTopology> nodes = read_topology_json(topology_json(report));
  ASSERT_EQ(nodes.size(), 2u);
  for (size_t i = 0; i < nodes.size(); ++i) {
    SCOPED_TRACE("nodes[" + std::to_string(i) + "]");
    expect_same_node(report.nodes[i], nodes[i]);
  }
}

TEST(TopologyJson, DocumentWrittenFromWhatWasReadIsTheSame) {
  TopologyReport report;
  report.nodes.push_back(hand_built_node());
  const std::string first = topology_json(report);
  report.nodes = read_topology_json(first);
  EXPECT_EQ(topology_json(report), first);
}

TEST(TopologyJson, TheDgx2SeedReadsAndRenders) {
  const std::string seed =
      slurp(std::string(CCSCOPE_TOPO_TEST_DATA) + "/../../fuzz/seeds/ccscope-topo-dgx2.json");
  ASSERT_FALSE(seed.empty());
  TopologyReport report;
  report.nodes = read_topology_json(seed);
  ASSERT_EQ(report.nodes.size(), 1u);
  EXPECT_EQ(report.nodes[0].gpus.size(), 16u);
  complete_report(report);
  EXPECT_NE(render_topology_text(report).find("GPU0  X     NV6"), std::string::npos);
}

TEST(TopologyJson, WrongTypeNamesTheJsonPath) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {one_node(R"("gpus": [{}, {}, {}, {"index": "3"}])"),
       "nodes[0].gpus[3].index: a string where a whole number belongs"},
      {one_node(R"("gpus": [{"index": true}])"),
       "nodes[0].gpus[0].index: true/false where a whole number belongs"},
      {one_node(R"("gpus": [{"name": 7}])"),
       "nodes[0].gpus[0].name: a number where a string belongs"},
      {one_node(R"("gpus": [{"nvlinks": [{}, {"active": 1}]}])"),
       "nodes[0].gpus[0].nvlinks[1].active: a number where true/false belongs"},
      {one_node(R"("gpus": [{"nvlinks": [{"bandwidth_GBps": "25"}]}])"),
       "nodes[0].gpus[0].nvlinks[0].bandwidth_GBps: a string where a number belongs"},
      {one_node(R"("gpus": [{"pcie_max": [5, 16]}])"),
       "nodes[0].gpus[0].pcie_max: an array where an object belongs"},
      {one_node(R"("gpus": [{"pcie_max": {"width": "x16"}}])"),
       "nodes[0].gpus[0].pcie_max.width: a string where a whole number belongs"},
      {one_node(R"("gpus": [{"pci_path": ["bridge:0000:1a:00.0", 3]}])"),
       "nodes[0].gpus[0].pci_path[1]: a number where a string belongs"},
      {one_node(R"("gpus": [{"pci_path": ["switch:0000:1a:00.0"]}])"),
       "nodes[0].gpus[0].pci_path[0]: \"switch:0000:1a:00.0\" is not bridge:ID or host:ID"},
      {one_node(R"("gpus": [3])"), "nodes[0].gpus[0]: a number where an object belongs"},
      {one_node(R"("gpus": {})"), "nodes[0].gpus: an object where an array belongs"},
      {one_node(R"("nics": [{}, {"rate_Gbps": false}])"),
       "nodes[0].nics[1].rate_Gbps: true/false where a number belongs"},
      {one_node(R"("nics": [{"pci_path": "host:pci0000:00"}])"),
       "nodes[0].nics[0].pci_path: a string where an array belongs"},
      {one_node(R"("gpu_ancestors": [{"level": 2}])"),
       "nodes[0].gpu_ancestors[0].level: a number where a string belongs"},
      {one_node(R"("sources": {"hwloc": {"read": "yes"}})"),
       "nodes[0].sources.\"hwloc\".read: a string where true/false belongs"},
      {one_node(R"("sources": [])"), "nodes[0].sources: an array where an object belongs"},
      {one_node(R"("notes": ["fine", {}])"), "nodes[0].notes[1]: an object where a string belongs"},
      {one_node(R"("cores": "64")"), "nodes[0].cores: a string where a whole number belongs"},
      {R"({"nodes": [{}, 5]})", "nodes[1]: a number where an object belongs"},
      {R"({"nodes": {}})", "nodes: an object where an array belongs"},
      {R"({"schema": 1, "nodes": []})", "schema: a number where a string belongs"},
  };
  for (const auto& [text, message] : cases) {
    const std::string error = error_of(text);
    EXPECT_EQ(error, message) << text;
  }
}

TEST(TopologyJson, NewerSchemaIsRefused) {
  EXPECT_EQ(error_of(R"({"schema": "ccscope.topo/2", "nodes": []})"),
            "schema: \"ccscope.topo/2\" is newer than this ccscope reads (ccscope.topo/1)");
  EXPECT_NE(error_of(R"({"schema": "ccscope.topo/10", "nodes": []})").find("is newer"),
            std::string::npos);
  for (const char* other : {"ccscope.bench/3", "ccscope.topo/", "ccscope.topo/1.1",
                            "ccscope.topo/01", "ccscope.topo/99999999999999999999"})
    EXPECT_NE(error_of(std::string(R"({"schema": ")") + other + R"(", "nodes": []})")
                  .find("is not ccscope.topo/<version>"),
              std::string::npos)
        << other;
  EXPECT_EQ(error_of(R"({"schema": "ccscope.topo/1", "nodes": []})"), "");
  EXPECT_EQ(error_of(R"({"nodes": []})"), "");  // before the schema had a name
  EXPECT_NE(error_of(R"({"schema": "ccscope.topo/1"})").find("no \"nodes\" array"),
            std::string::npos);
}

TEST(TopologyJson, ANodeHoldsAtMost1024Gpus) {
  EXPECT_EQ(error_of(one_node(R"("gpus": [)" + repeated("{}", 1024) + "]")), "");
  EXPECT_EQ(error_of(one_node(R"("gpus": [)" + repeated("{}", 1025) + "]")),
            "nodes[0].gpus: 1025 GPUs, more than the 1024 ccscope reads");
}

TEST(TopologyJson, ANodeHoldsAtMost4096Nics) {
  EXPECT_EQ(error_of(one_node(R"("nics": [)" + repeated("{}", 4096) + "]")), "");
  EXPECT_EQ(error_of(one_node(R"("nics": [)" + repeated("{}", 4097) + "]")),
            "nodes[0].nics: 4097 NICs, more than the 4096 ccscope reads");
}

TEST(TopologyJson, ADocumentHoldsAtMost100000Nvlinks) {
  // In all, over GPUs and nodes: 50000 + 50000 reads, one more does not.
  const std::string half = R"({"nvlinks": [)" + repeated("{}", 50000) + "]}";
  const std::string both = R"({"nodes": [{"gpus": [)" + half + "]}, {\"gpus\": [" + half;
  EXPECT_EQ(error_of(both + "]}]}"), "");
  EXPECT_EQ(error_of(both + R"(, {"nvlinks": [{}]}]}]})"),
            "nodes[1].gpus[1].nvlinks: more than the 100000 NVLinks ccscope reads in one document");
}

TEST(TopologyJson, APciPathHasAtMost64Hops) {
  const std::string hops = repeated(R"("bridge:0000:01:00.0")", 64);
  EXPECT_EQ(error_of(one_node(R"("gpus": [{"pci_path": [)" + hops + "]}]")), "");
  EXPECT_EQ(error_of(one_node(R"("nics": [{"pci_path": [)" + hops + R"(, "host:x"]}])")),
            "nodes[0].nics[0].pci_path: 65 hops, more than the 64 ccscope reads");
}

TEST(TopologyJson, ANodeHasAtMostOneCommonAncestorPerGpuPair) {
  const size_t most = 1024 * 1023 / 2;
  EXPECT_EQ(error_of(one_node(R"("gpu_ancestors": [)" + repeated("{}", most) + "]")), "");
  EXPECT_EQ(error_of(one_node(R"("gpu_ancestors": [)" + repeated("{}", most + 1) + "]")),
            "nodes[0].gpu_ancestors: 523777 entries, more than the 523776 ccscope reads");
}

// Fuzz findings, each with the input (reduced) that showed it.

// crash-970cf5fa: a number beyond a double ("1e400") made nlohmann throw
// out_of_range, which is not a parse_error, so it left the reader as such.
TEST(TopologyJsonFuzz, NumberBeyondADoubleIsATopologyError) {
  for (const char* number : {"1e400", "-1e400"}) {
    const std::string error = error_of(one_node(std::string(R"("cores": )") + number));
    EXPECT_EQ(error.rfind("not valid JSON: ", 0), 0u) << error;
    EXPECT_NE(error.find(number), std::string::npos) << error;
  }
}

// Integers outside int: nlohmann's get<int> wraps a large integer and leaves a
// large float's conversion undefined; a fraction was cut, a boolean read as 1.
TEST(TopologyJsonFuzz, IntegerOutOfRangeIsATopologyError) {
  const std::string range = " is out of range (-2147483648 to 2147483647)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"2147483648", "2147483648" + range},
      {"-2147483649", "-2147483649" + range},
      {"18446744073709551615", "18446744073709551615" + range},
      {"18446744073709551616", "1.8446744073709552e+19" + range},
      {"1e300", "1e+300" + range},
      {"-1e300", "-1e+300" + range},
      {"2.5", "2.5 is not a whole number"},
  };
  for (const auto& [number, message] : cases)
    EXPECT_EQ(error_of(one_node(R"("gpus": [{"index": )" + number + "}]")),
              "nodes[0].gpus[0].index: " + message)
        << number;
  const std::vector<HostTopology> nodes = read_topology_json(
      one_node(R"("cores": 2147483647, "gpus": [{"index": -2147483648, "pcie_width": 16.0}])"));
  EXPECT_EQ(nodes[0].cores, 2147483647);
  EXPECT_EQ(nodes[0].gpus[0].index, -2147483648);
  EXPECT_EQ(nodes[0].gpus[0].pcie_current.width, 16);
}

// A figure of 1e300 GB/s: the NVLink count a bandwidth implies (links_in) was
// an undefined float-to-int conversion. The reader refuses such figures now...
TEST(TopologyJsonFuzz, RateOutOfRangeIsATopologyError) {
  EXPECT_EQ(error_of(one_node(R"("gpus": [{"nvlinks": [{"bandwidth_GBps": 1e300}]}])")),
            "nodes[0].gpus[0].nvlinks[0].bandwidth_GBps: 1e+300 is out of range (0 to 1e6)");
  EXPECT_EQ(error_of(one_node(R"("nics": [{"rate_Gbps": -1}])")),
            "nodes[0].nics[0].rate_Gbps: -1 is out of range (0 to 1e6)");
  EXPECT_EQ(error_of(one_node(R"("nics": [{"shaped_Gbps": 1000001}])")),
            "nodes[0].nics[0].shaped_Gbps: 1000001 is out of range (0 to 1e6)");
  EXPECT_EQ(error_of(one_node(R"("nics": [{"rate_Gbps": 1e6, "shaped_Gbps": 0}])")), "");
}

// ... and the paths bound the count, whatever another reader (hwloc's matrix
// of u64 MB/s) stated.
TEST(TopologyJsonFuzz, HugeNvlinkBandwidthGivesABoundedLinkCount) {
  HostTopology host;
  host.gpus.resize(2);
  host.gpus[0].index = 0;
  host.gpus[0].pci.bus_id = "0000:01:00.0";
  host.gpus[0].nvlinks = {nvlink(0, true, 2, "0000:02:00.0", false, 1e300)};
  host.gpus[1].index = 1;
  host.gpus[1].pci.bus_id = "0000:02:00.0";
  const GpuPairPath path = gpu_pair_path(host, host.gpus[0], host.gpus[1], {});
  EXPECT_EQ(path.level, PathLevel::kNvLink);
  EXPECT_EQ(path.nvlinks, 1000000000);
}

// A message quoted the document's text as it was: a newline in a PCI path
// entry, a source's name or the schema split the one line ccscope prints.
TEST(TopologyJsonFuzz, MessageStaysOneShortLine) {
  const std::vector<std::string> cases = {
      one_node(R"("gpus": [{"pci_path": ["bridge:1", "over\nthere"]}])"),
      one_node(R"("sources": {"hw\nloc": {"read": 1}})"),
      R"({"schema": "ccscope.topo/1\nccscope.topo/2", "nodes": []})",
      one_node(R"("nics": [{"pci_path": [")" + std::string(5000, 'x') + R"("]}])"),
      R"({"nodes": [{"hostname": ")" + std::string(50000, 'y'),  // unterminated
  };
  for (const std::string& text : cases) {
    const std::string error = error_of(text);
    EXPECT_FALSE(error.empty()) << text.substr(0, 80);
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_LT(error.size(), 300u) << error;
  }
  EXPECT_EQ(error_of(one_node(R"("sources": {"hw\nloc": {"read": 1}})")),
            "nodes[0].sources.\"hw?loc\".read: a number where true/false belongs");
}

// The notes of a node were written but not read back, so a node gathered from
// another rank (bench/src/cluster_topology.cpp) or --from lost them.
TEST(TopologyJsonFuzz, NotesReadBack) {
  const std::vector<HostTopology> nodes = read_topology_json(one_node(R"("notes": ["a", "b"])"));
  EXPECT_EQ(nodes[0].notes, (std::vector<std::string>{"a", "b"}));
}

// A GPU whose only PCIe figure is a generation (no width) read back with it in
// pcie_current, which the writer passed over for the placement's empty link:
// the second round trip lost the generation.
TEST(TopologyJsonFuzz, PartialPcieFigureSurvivesTwoRoundTrips) {
  TopologyReport report;
  report.nodes = read_topology_json(one_node(R"("gpus": [{"pcie_generation": 4}])"));
  ASSERT_EQ(report.nodes[0].gpus[0].pcie_current.generation, 4);
  report.nodes = read_topology_json(topology_json(report));
  EXPECT_EQ(report.nodes[0].gpus[0].pcie_current.generation, 4);
  EXPECT_EQ(report.nodes[0].gpus[0].pcie_current.width, 0);
  // Where a source read the link at the placement only, it travels as the
  // link the GPU runs at (the only figure the document has).
  TopologyReport hwloc_only;
  hwloc_only.nodes.resize(1);
  hwloc_only.nodes[0].gpus.resize(1);
  hwloc_only.nodes[0].gpus[0].pci.link = {3, 16};
  const std::vector<HostTopology> read = read_topology_json(topology_json(hwloc_only));
  EXPECT_EQ(read[0].gpus[0].pcie_current.generation, 3);
  EXPECT_EQ(read[0].gpus[0].pcie_current.width, 16);
}

// The pair loops look a pair's common-ancestor level up in an index; the
// answer is the single pair's (the last entry of a pair wins, either order).
TEST(TopologyJsonFuzz, PairLoopsAgreeWithTheSinglePairOnAncestors) {
  HostTopology host;
  for (int i = 0; i < 4; ++i) {
    Gpu gpu;
    gpu.index = i;
    host.gpus.push_back(gpu);
  }
  host.gpu_ancestors = {{0, 1, "PIX"}, {1, 0, "SYS"}, {2, 0, "NODE"}, {0, 2, "PHB"}, {3, 1, "PXB"}};
  const std::vector<GpuPairPath> paths = gpu_pair_paths(host, {});
  ASSERT_EQ(paths.size(), 6u);
  for (const GpuPairPath& path : paths)
    EXPECT_EQ(path.token(), gpu_pair_path(host, host.gpus[static_cast<size_t>(path.gpu_a)],
                                          host.gpus[static_cast<size_t>(path.gpu_b)], {})
                                .token())
        << path.gpu_a << "-" << path.gpu_b;
  EXPECT_EQ(paths[0].token(), "SYS");  // 0-1
  EXPECT_EQ(paths[1].token(), "PHB");  // 0-2
  EXPECT_EQ(paths[2].token(), "?");    // 0-3
  EXPECT_EQ(paths[4].token(), "PXB");  // 1-3
  const std::string matrix = render_path_matrix(host, {});
  EXPECT_NE(matrix.find("GPU0  X     SYS   PHB   ?"), std::string::npos) << matrix;
  EXPECT_NE(matrix.find("GPU3  ?     PXB   ?     X"), std::string::npos) << matrix;
}

// topo --csv's records: every GPU pair of every node, then every node pair; a measured pair
// carries its figure, round and share of the expected, an unmeasured one none of them.
TEST(PathRecords, EveryGpuPairThenEveryNodePairWithTheMeasuredFigureWhereMeasured) {
  TopologyReport report;
  report.nodes.push_back(hand_built_node());
  HostTopology second = hand_built_node();
  second.hostname = "gpu-node-08";
  report.nodes.push_back(second);
  complete_report(report);
  ASSERT_EQ(report.node_pairs.size(), 1u);
  MeasuredPair nodes{"gpu-node-07", "gpu-node-08", "socket", 2, 0, 1.5, true};
  MeasuredPair gpus{"gpu-node-08/GPU1", "gpu-node-08/GPU0", "NV4", 1, 0, 20, false};
  report.measured = {nodes, gpus};

  const std::vector<records::TopologyPathRecord> records = path_records(report);
  const size_t gpu_pairs = gpu_pair_paths(report.nodes[0], report.env).size();
  ASSERT_GT(gpu_pairs, 0u);
  ASSERT_EQ(records.size(), 2 * gpu_pairs + 1);
  for (size_t i = 0; i < 2 * gpu_pairs; ++i) {
    const records::TopologyPathRecord& r = records[i];
    SCOPED_TRACE(r.host_a + " " + r.endpoint_a + "-" + r.endpoint_b);
    EXPECT_EQ(r.kind, "gpu_pair");
    EXPECT_EQ(r.host_a, i < gpu_pairs ? "gpu-node-07" : "gpu-node-08");
    EXPECT_EQ(r.host_b, r.host_a);
    // The pair measured in either order, on its own node only.
    const bool measured =
        r.host_a == "gpu-node-08" && ((r.endpoint_a == "GPU0" && r.endpoint_b == "GPU1") ||
                                      (r.endpoint_a == "GPU1" && r.endpoint_b == "GPU0"));
    EXPECT_EQ(r.measured_GBps.has_value(), measured);
    if (measured) {
      EXPECT_EQ(*r.measured_GBps, 20);
      EXPECT_EQ(r.round, 1);
      ASSERT_TRUE(r.expected_GBps.has_value());
      EXPECT_DOUBLE_EQ(*r.percent_of_expected, 100 * 20 / *r.expected_GBps);
      EXPECT_EQ(r.below_threshold, false);
    }
  }
  const records::TopologyPathRecord& pair = records.back();
  EXPECT_EQ(pair.kind, "node_pair");
  EXPECT_EQ(pair.host_a, "gpu-node-07");
  EXPECT_EQ(pair.host_b, "gpu-node-08");
  EXPECT_EQ(pair.path, transport_name(report.node_pairs[0].transport));
  EXPECT_EQ(pair.basis, report.node_pairs[0].basis);
  EXPECT_EQ(pair.measured_GBps, 1.5);
  EXPECT_EQ(pair.round, 2);
  if (report.node_pairs[0].expected_GBps > 0) {
    EXPECT_EQ(pair.below_threshold, true);
    EXPECT_DOUBLE_EQ(*pair.percent_of_expected, 100 * 1.5 / report.node_pairs[0].expected_GBps);
  } else {
    EXPECT_FALSE(pair.percent_of_expected.has_value());
  }
}

// Every key topology_json writes is in the ccscope.topo/1 table (docs/records.md), with the
// table's type, and every key of the table is written: two hand-built nodes with their node
// pair, measured pairs, an NCCL variable, an ancestor level and a finding.
TEST(TopologyJson, KeysAreTheDocumentKindTable) {
  TopologyReport report;
  report.nodes.push_back(hand_built_node());
  HostTopology second = hand_built_node();
  second.hostname = "gpu-node-08";
  second.gpu_ancestors.push_back({0, 1, "PIX"});
  report.nodes.push_back(second);
  report.env["NCCL_P2P_LEVEL"] = "NVL";
  report.measured = {{"gpu-node-07", "gpu-node-08", "socket", 0, 0, 1.5, true}};
  complete_report(report);
  report.findings.push_back({Finding::Severity::kWarn, "gpu-node-07", "a.check", "seen", "do"});
  const std::vector<std::string> differences =
      records::document_key_differences(records::topology_document_kind(), {topology_json(report)});
  EXPECT_TRUE(differences.empty()) << ::testing::PrintToString(differences);
}

}  // namespace
}  // namespace ccscope::topo
