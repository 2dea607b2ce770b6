// The XML reader, the hwloc XML and NCCL topology-dump readers and format
// detection, on the fixtures in data/ (hwloc's own test data for the DGX-2
// and the 2-socket server, lstopo and NCCL on the H200 VM) and on small
// inline documents for what the fixtures do not show.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../src/xml.h"
#include "ccscope/topo/readers.h"

namespace ccscope::topo {
namespace {

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(CCSCOPE_TOPO_TEST_DATA) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The message of the TopologyError `parse` throws; "" (and a failure) if none.
template <typename Parse>
std::string error_of(Parse parse) {
  try {
    parse();
  } catch (const TopologyError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no TopologyError";
  return "";
}

bool names_a_line(const std::string& message) {
  return std::regex_search(message, std::regex("line [0-9]+: "));
}

std::vector<std::string> hop_ids(const PciPlacement& placement) {
  std::vector<std::string> ids;
  for (const PciHop& hop : placement.path)
    ids.push_back((hop.kind == PciHop::Kind::kHostBridge ? "host " : "") + hop.id);
  return ids;
}

// A v2/v3 hwloc document: one Machine holding `body`.
std::string hwloc_document(const std::string& version, const std::string& body) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
         "<topology version=\"" +
         version +
         "\">\n"
         "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x00000003\" nodeset=\"0x00000003\" "
         "gp_index=\"1\">\n" +
         body + "  </object>\n</topology>\n";
}

// ---------------------------------------------------------------- XML reader

TEST(XmlReader, ReadsElementsAttributesTextAndEntities) {
  const XmlElement root = parse_xml(
      "\xEF\xBB\xBF<?xml version=\"1.0\"?>\n"
      "<!DOCTYPE doc [ <!ENTITY x \"a>b\"> ]>\n"
      "<!-- a comment with <tags> -->\n"
      "<doc a=\"1\" b='two &amp; &lt;3&gt;' c=\"&quot;&apos;&#65;&#x42;&#x20AC;\">\n"
      "  <empty/>\n"
      "  <item  name = \"x\" >some &amp; text<![CDATA[ <raw> & ]]></item>\n"
      "  <?pi inside?>\n"
      "</doc>\n"
      "<!-- after -->\n");
  EXPECT_EQ(root.name, "doc");
  EXPECT_EQ(root.line, 4u);
  ASSERT_EQ(root.attributes.size(), 3u);
  EXPECT_EQ(*root.attribute("a"), "1");
  EXPECT_EQ(*root.attribute("b"), "two & <3>");
  EXPECT_EQ(*root.attribute("c"), "\"'AB\xE2\x82\xAC");
  EXPECT_EQ(root.attribute("missing"), nullptr);
  EXPECT_EQ(root.text, "");  // white space between children is dropped
  ASSERT_EQ(root.children.size(), 2u);
  EXPECT_EQ(root.children[0].name, "empty");
  EXPECT_EQ(root.children[0].line, 5u);
  EXPECT_TRUE(root.children[0].children.empty());
  EXPECT_EQ(root.children[1].name, "item");
  EXPECT_EQ(root.children[1].line, 6u);
  EXPECT_EQ(*root.children[1].attribute("name"), "x");
  EXPECT_EQ(root.children[1].text, "some & text <raw> & ");
}

TEST(XmlReader, MismatchedEndTagNamesBothLines) {
  EXPECT_EQ(error_of([] { parse_xml("<system>\n  <gpu>\n    <pci>\n  </gpu>\n</system>"); }),
            "line 4: end tag </gpu> does not match <pci> opened on line 3");
}

TEST(XmlReader, TruncatedInputSaysWhereItEnds) {
  EXPECT_EQ(error_of([] { parse_xml("<a>\n<b>\n"); }),
            "line 3: the file ends inside <b> opened on line 2");
  EXPECT_EQ(error_of([] { parse_xml("<a>\n<b x=\"1\""); }),
            "line 2: the file ends inside the start tag <b opened on line 2");
  EXPECT_EQ(error_of([] { parse_xml("<a>\n<b x=\"1"); }),
            "line 2: the file ends inside the value of attribute x of <b>");
  EXPECT_EQ(error_of([] { parse_xml("<a><!-- x\n"); }),
            "line 2: the file ends inside a comment opened on line 1");
  EXPECT_EQ(error_of([] { parse_xml("<a></a"); }), "line 1: end tag </a is not closed by '>'");
}

TEST(XmlReader, RejectsMalformedAttributes) {
  for (const char* text :
       {"<a b=1/>", "<a b/>", "<a b=\"<\"/>", "<a b=\"1\" b=\"2\"/>", "<a b=\"1\"c=\"2\"/>",
        "<a b=\"&nbsp;\"/>", "<a b=\"&amp\"/>", "<a b=\"&#0;\"/>", "<a b=\"&#xD800;\"/>",
        "<a b=\"&#99999999;\"/>", "<a b=\"&#x;\"/>", "<a \"b\"/>", "<a / >"}) {
    const std::string message = error_of([text] { parse_xml(text); });
    EXPECT_TRUE(names_a_line(message)) << text << ": " << message;
  }
  EXPECT_EQ(error_of([] { parse_xml("<a\n b=\"1\"\n b=\"2\"/>"); }),
            "line 3: attribute b of <a> appears twice");
  std::string many = "<a";
  for (size_t i = 0; i <= kMaxXmlAttributes; ++i) many += " b" + std::to_string(i) + "=\"\"";
  EXPECT_EQ(error_of([&] { parse_xml(many + "/>"); }), "line 1: more than 1024 attributes in <a>");
}

TEST(XmlReader, RejectsJunkAroundAndInsideTheRoot) {
  EXPECT_EQ(error_of([] { parse_xml(""); }),
            "line 1: no root element (the file is empty or only comments)");
  EXPECT_EQ(error_of([] { parse_xml("  \n <!-- only -->\n"); }),
            "line 3: no root element (the file is empty or only comments)");
  EXPECT_EQ(error_of([] { parse_xml("junk<a/>"); }),
            "line 1: text or markup before the root element where a tag was expected");
  EXPECT_EQ(error_of([] { parse_xml("<a/>\n<b/>"); }),
            "line 2: content after the end of the root element <a>");
  EXPECT_EQ(error_of([] { parse_xml("<a></a>x"); }),
            "line 1: content after the end of the root element <a>");
  EXPECT_EQ(error_of([] { parse_xml("<a><!DOCTYPE a></a>"); }),
            "line 1: unexpected markup '<!' inside <a>");
  EXPECT_EQ(error_of([] { parse_xml("<a>< b/></a>"); }), "line 1: expected a name after '<'");
  EXPECT_EQ(error_of([] { parse_xml("<a>&bogus;</a>"); }), "line 1: unknown entity &bogus;");
}

TEST(XmlReader, LimitsNesting) {
  auto nested = [](size_t depth) {
    std::string text;
    for (size_t i = 0; i < depth; ++i) text += "<e>";
    for (size_t i = 0; i < depth; ++i) text += "</e>";
    return text;
  };
  EXPECT_NO_THROW(parse_xml(nested(kMaxXmlDepth)));
  EXPECT_EQ(error_of([&] { parse_xml(nested(kMaxXmlDepth + 1)); }),
            "line 1: elements nested deeper than 200");
  // Far deeper than any stack could recurse: refused, not a crash.
  EXPECT_TRUE(names_a_line(error_of([&] { parse_xml(std::string(1000000, '<') + "e>"); })));
  EXPECT_TRUE(names_a_line(error_of([&] {
    std::string text;
    for (int i = 0; i < 200000; ++i) text += "<e>";
    parse_xml(text);
  })));
}

TEST(XmlReader, ValueHelpers) {
  EXPECT_EQ(parse_xml_integer("42"), 42);
  EXPECT_EQ(parse_xml_integer(" -1 "), -1);
  EXPECT_EQ(parse_xml_integer("0x10de"), 0x10de);
  EXPECT_EQ(parse_xml_integer("12a"), std::nullopt);
  EXPECT_EQ(parse_xml_integer(""), std::nullopt);
  EXPECT_EQ(parse_xml_integer("99999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_xml_number("15.753846"), 15.753846);
  EXPECT_EQ(parse_xml_number("inf"), std::nullopt);
  EXPECT_EQ(parse_xml_number("1.5x"), std::nullopt);
  EXPECT_EQ(quoted_for_message(std::string("a\nb\0c", 5)), "\"a?b?c\"");
  EXPECT_EQ(quoted_for_message("abcdef", 3), "\"abc...\"");
}

// ------------------------------------------------------------ hwloc: DGX-2

class HwlocDgx2 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    topology_ = read_hwloc_xml(read_fixture("hwloc-nvidia-dgx2.xml"));
  }
  static HostTopology topology_;
};
HostTopology HwlocDgx2::topology_;

TEST_F(HwlocDgx2, CpusAndSource) {
  EXPECT_EQ(topology_.numa_nodes, 2);
  EXPECT_EQ(topology_.packages, 2);
  EXPECT_EQ(topology_.cores, 4);  // hwloc's test file keeps two cores per package
  EXPECT_EQ(topology_.pus, 4);
  EXPECT_EQ(topology_.cpu_model, "Intel(R) Xeon(R) Platinum 8174 CPU @ 3.10GHz");
  EXPECT_EQ(topology_.hostname, "");  // the file has no HostName
  ASSERT_EQ(topology_.sources.size(), 1u);
  EXPECT_EQ(topology_.sources[0].name, "hwloc");
  EXPECT_TRUE(topology_.sources[0].read);
  EXPECT_EQ(topology_.sources[0].detail, "hwloc XML version 3.0");
  EXPECT_TRUE(topology_.notes.empty()) << topology_.notes.front();
  EXPECT_TRUE(topology_.nics.empty());
}

TEST_F(HwlocDgx2, SixteenV100sWithNvmlNamesUuidsAndLinks) {
  ASSERT_EQ(topology_.gpus.size(), 16u);
  for (size_t i = 0; i < topology_.gpus.size(); ++i) {
    const Gpu& gpu = topology_.gpus[i];
    EXPECT_EQ(gpu.index, static_cast<int>(i));  // nvml0..nvml15
    EXPECT_EQ(gpu.name, "Tesla V100-SXM3-32GB-H");
    EXPECT_EQ(gpu.uuid.substr(0, 4), "GPU-");
    EXPECT_EQ(gpu.pcie_current.generation, 3);  // 15.753846 GB/s = gen3 x16
    EXPECT_EQ(gpu.pcie_current.width, 16);
    EXPECT_EQ(gpu.pci.link.generation, 3);
    EXPECT_EQ(gpu.pci.numa_node, i < 8 ? 0 : 1);
    EXPECT_EQ(gpu.pci.package, i < 8 ? 0 : 1);
  }
  EXPECT_EQ(topology_.gpus[0].pci.bus_id, "0000:34:00.0");
  EXPECT_EQ(topology_.gpus[0].uuid, "GPU-d3977428-7a30-086b-2e20-5c1eeed647c6");
  EXPECT_EQ(topology_.gpus[1].pci.bus_id, "0000:36:00.0");
  EXPECT_EQ(topology_.gpus[15].pci.bus_id, "0000:e7:00.0");
  EXPECT_EQ(topology_.find_gpu_by_bus_id("0000:3b:00.0"), &topology_.gpus[3]);
}

TEST_F(HwlocDgx2, EachGpuHasSixNvlinksToSwitchesOf25GBps) {
  const std::set<std::string> lower_board = {"0000:61:00.0", "0000:62:00.0", "0000:63:00.0",
                                             "0000:65:00.0", "0000:66:00.0", "0000:67:00.0"};
  const std::set<std::string> upper_board = {"0000:c1:00.0", "0000:c2:00.0", "0000:c3:00.0",
                                             "0000:c5:00.0", "0000:c6:00.0", "0000:c7:00.0"};
  for (const Gpu& gpu : topology_.gpus) {
    ASSERT_EQ(gpu.nvlinks.size(), 6u) << gpu.pci.bus_id;
    double total = 0;
    std::set<std::string> remotes;
    for (const NvLink& link : gpu.nvlinks) {
      EXPECT_TRUE(link.remote_is_switch);
      EXPECT_EQ(link.bandwidth_GBps, 25.0);
      EXPECT_EQ(link.link, -1);
      total += link.bandwidth_GBps;
      remotes.insert(link.remote_bus_id);
    }
    EXPECT_EQ(total, 150.0);
    EXPECT_EQ(remotes, gpu.index < 8 ? lower_board : upper_board) << gpu.pci.bus_id;
  }
}

TEST_F(HwlocDgx2, PciPathsRunThroughTheSwitchesToTheHostBridge) {
  const Gpu& gpu0 = topology_.gpus[0];
  const Gpu& gpu1 = topology_.gpus[1];
  const Gpu& gpu2 = topology_.gpus[2];
  const Gpu& gpu4 = topology_.gpus[4];
  EXPECT_EQ(hop_ids(gpu0.pci),
            (std::vector<std::string>{"0000:33:00.0", "0000:32:00.0", "0000:2d:04.0",
                                      "0000:2c:00.0", "0000:2b:00.0", "host pci0000:2b"}));
  EXPECT_EQ(hop_ids(gpu1.pci),
            (std::vector<std::string>{"0000:33:10.0", "0000:32:00.0", "0000:2d:04.0",
                                      "0000:2c:00.0", "0000:2b:00.0", "host pci0000:2b"}));
  ASSERT_EQ(gpu0.pci.path.size(), 6u);
  EXPECT_EQ(gpu0.pci.path[0].kind, PciHop::Kind::kBridge);
  EXPECT_EQ(gpu0.pci.path[5].kind, PciHop::Kind::kHostBridge);
  // GPU0 and GPU2 meet one switch level higher (2c:00.0), GPU0 and GPU4 only
  // at the package: different host bridges.
  EXPECT_EQ(hop_ids(gpu2.pci)[2], "0000:2d:0c.0");
  EXPECT_EQ(hop_ids(gpu2.pci)[3], "0000:2c:00.0");
  EXPECT_EQ(gpu4.pci.path.back().id, "pci0000:4e");
  EXPECT_NE(gpu4.pci.path.back().id, gpu0.pci.path.back().id);
}

// --------------------------------------------------------- hwloc: 2 sockets

class HwlocTwoSocket : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    topology_ = read_hwloc_xml(read_fixture("hwloc-2socket-pci-ib.xml"));
  }
  static HostTopology topology_;
};
HostTopology HwlocTwoSocket::topology_;

TEST_F(HwlocTwoSocket, CpusAndHostname) {
  EXPECT_EQ(topology_.hostname, "conan");  // a <topology>-level info in 3.0
  EXPECT_EQ(topology_.numa_nodes, 2);
  EXPECT_EQ(topology_.packages, 2);
  EXPECT_EQ(topology_.cores, 16);
  EXPECT_EQ(topology_.pus, 32);
  EXPECT_EQ(topology_.cpu_model, "Intel(R) Xeon(R) CPU E5-2650 0 @ 2.00GHz");
  EXPECT_TRUE(topology_.notes.empty()) << topology_.notes.front();
}

TEST_F(HwlocTwoSocket, InfinibandHcaAndEthernetPorts) {
  ASSERT_EQ(topology_.nics.size(), 4u);
  const Nic* hca = topology_.find_nic("mlx5_0:1");
  ASSERT_NE(hca, nullptr);
  EXPECT_EQ(hca->kind, NicKind::kInfiniband);
  EXPECT_EQ(hca->state, "active");  // Port1State 4
  EXPECT_TRUE(hca->has_gid);
  EXPECT_EQ(hca->netdev, "ib0");
  EXPECT_EQ(hca->pci.bus_id, "0000:04:00.0");
  EXPECT_EQ(hop_ids(hca->pci), (std::vector<std::string>{"0000:80:03.0", "host pci0000:80"}));
  EXPECT_EQ(hca->pci.numa_node, 1);
  EXPECT_EQ(hca->pci.package, 1);

  const Nic* ipoib = topology_.find_nic("ib0");
  ASSERT_NE(ipoib, nullptr);
  EXPECT_EQ(ipoib->kind, NicKind::kInfiniband);
  EXPECT_EQ(ipoib->rdma_device, "mlx5_0");
  EXPECT_EQ(ipoib->pci.bus_id, "0000:04:00.0");

  for (const char* name : {"eth0", "eth1"}) {
    const Nic* ethernet = topology_.find_nic(name);
    ASSERT_NE(ethernet, nullptr) << name;
    EXPECT_EQ(ethernet->kind, NicKind::kEthernet);
    EXPECT_EQ(ethernet->rdma_device, "");
    EXPECT_EQ(hop_ids(ethernet->pci),
              (std::vector<std::string>{"0000:80:01.0", "host pci0000:80"}));
  }
  EXPECT_EQ(topology_.find_nic("eth1")->pci.bus_id, "0000:81:00.1");
}

TEST_F(HwlocTwoSocket, NvidiaGpusButNotTheVgaCards) {
  // Three NVIDIA 3D controllers; the Matrox VGA (05:03.0) and the AMD
  // Radeon (84:00.1, class 0300) are not GPUs here.
  ASSERT_EQ(topology_.gpus.size(), 3u);
  const Gpu& cuda0 = topology_.gpus[0];
  EXPECT_EQ(cuda0.index, 0);
  EXPECT_EQ(cuda0.name, "Tesla K40m");  // the CUDA device's GPUModel wins over PCIDevice
  EXPECT_EQ(cuda0.pci.bus_id, "0000:84:00.0");
  EXPECT_EQ(hop_ids(cuda0.pci), (std::vector<std::string>{"0000:80:03.0", "host pci0000:80"}));
  EXPECT_EQ(cuda0.pci.numa_node, 1);
  EXPECT_FALSE(cuda0.pcie_current.known());  // pci_link_speed 0.000000
  // Without a CUDA/NVML device: the free numbers, in order of appearance.
  EXPECT_EQ(topology_.gpus[1].index, 1);
  EXPECT_EQ(topology_.gpus[1].pci.bus_id, "0000:03:00.0");
  EXPECT_EQ(topology_.gpus[1].name, "Tesla M2075 Dual-Slot Computing Processor Module");
  EXPECT_EQ(topology_.gpus[1].pci.numa_node, 0);
  EXPECT_EQ(topology_.gpus[1].pci.package, 0);
  EXPECT_EQ(topology_.gpus[2].index, 2);
  EXPECT_EQ(topology_.gpus[2].pci.bus_id, "0000:83:00.0");
  EXPECT_EQ(topology_.find_gpu_by_bus_id("0000:84:00.1"), nullptr);
  EXPECT_EQ(topology_.find_gpu_by_bus_id("0000:05:03.0"), nullptr);
}

// ------------------------------------------------------------- hwloc: H200

TEST(HwlocH200Vm, GpuWithoutOsDeviceAndEth0) {
  const HostTopology topology = read_hwloc_xml(read_fixture("hwloc-h200-vm.xml"));
  EXPECT_EQ(topology.hostname, "vm");
  EXPECT_EQ(topology.numa_nodes, 1);
  EXPECT_EQ(topology.packages, 1);
  EXPECT_EQ(topology.cores, 16);
  EXPECT_EQ(topology.sources.at(0).detail, "hwloc XML version 2.0");
  ASSERT_EQ(topology.gpus.size(), 1u);
  const Gpu& gpu = topology.gpus[0];
  EXPECT_EQ(gpu.index, 0);
  EXPECT_EQ(gpu.pci.bus_id, "0000:00:06.0");
  EXPECT_EQ(gpu.name, "NVIDIA GPU [10de:2335]");  // no OS device, no PCIDevice info
  EXPECT_EQ(gpu.uuid, "");
  EXPECT_EQ(gpu.pcie_current.generation, 5);  // 63.015385 GB/s
  EXPECT_EQ(gpu.pcie_current.width, 16);
  EXPECT_EQ(hop_ids(gpu.pci), (std::vector<std::string>{"host pci0000:00"}));
  EXPECT_EQ(gpu.pci.numa_node, 0);
  EXPECT_EQ(gpu.pci.package, 0);  // hangs from the Machine; the one package covers its cpuset
  EXPECT_TRUE(gpu.nvlinks.empty());
  ASSERT_EQ(topology.nics.size(), 1u);
  EXPECT_EQ(topology.nics[0].name, "eth0");  // osdev_type 2: network in 2.x
  EXPECT_EQ(topology.nics[0].kind, NicKind::kEthernet);
  EXPECT_EQ(topology.nics[0].pci.bus_id, "0000:00:03.0");
}

// ---------------------------------------------------------- hwloc: inline

std::string pci_device(int gp, const std::string& bus, const std::string& type,
                       const std::string& speed = "0.000000", const std::string& inside = "") {
  return "<object type=\"PCIDev\" gp_index=\"" + std::to_string(gp) + "\" pci_busid=\"" + bus +
         "\" pci_type=\"" + type + "\" pci_link_speed=\"" + speed + "\"" +
         (inside.empty() ? "/>\n" : ">" + inside + "</object>\n");
}

TEST(HwlocXml, OnlyNvidiaDisplayAnd3dControllersAreGpus) {
  const std::string body =
      "<object type=\"Package\" os_index=\"0\" cpuset=\"0x00000003\" nodeset=\"0x00000001\" "
      "gp_index=\"2\">\n"
      "<object type=\"Bridge\" gp_index=\"10\" bridge_type=\"0-1\" depth=\"0\" "
      "bridge_pci=\"0000:[00-03]\">\n" +
      pci_device(11, "0000:01:00.0", "0300 [102b:0532] [00d9:0062] 0a") +  // Matrox VGA
      pci_device(12, "0000:02:00.0", "0302 [10de:2330] [10de:16c1] a1") +  // H100, no OS device
      pci_device(13, "0000:03:00.0", "0300 [10de:1eb8] [10de:12a2] a1") +  // NVIDIA VGA
      pci_device(14, "0000:03:00.1", "0403 [10de:10f8] [10de:12a2] a1") +  // its audio
      "</object></object>\n";
  const HostTopology topology = read_hwloc_xml(hwloc_document("2.0", body));
  ASSERT_EQ(topology.gpus.size(), 2u);
  EXPECT_EQ(topology.gpus[0].pci.bus_id, "0000:02:00.0");
  EXPECT_EQ(topology.gpus[0].name, "NVIDIA GPU [10de:2330]");
  EXPECT_EQ(topology.gpus[1].pci.bus_id, "0000:03:00.0");
  EXPECT_EQ(topology.gpus[1].index, 1);
}

TEST(HwlocXml, WithoutHostBridgeObjectsTheAttachmentPointStandsForOne) {
  auto package = [](int os_index, int gp, const std::string& cpuset, const std::string& inside) {
    return "<object type=\"Package\" os_index=\"" + std::to_string(os_index) + "\" cpuset=\"" +
           cpuset + "\" nodeset=\"0x0000000" + std::to_string(1 << os_index) + "\" gp_index=\"" +
           std::to_string(gp) + "\">\n" + inside + "</object>\n";
  };
  auto root_port = [](int gp, const std::string& bus, const std::string& inside) {
    return "<object type=\"Bridge\" gp_index=\"" + std::to_string(gp) +
           "\" bridge_type=\"1-1\" depth=\"0\" pci_busid=\"" + bus + "\">\n" + inside +
           "</object>\n";
  };
  const std::string gpu_type = "0302 [10de:20b0] [10de:134f] a1";
  const std::string body =
      package(0, 2, "0x00000001",
              root_port(20, "0000:00:01.0", pci_device(21, "0000:01:00.0", gpu_type)) +
                  root_port(22, "0000:00:02.0", pci_device(23, "0000:02:00.0", gpu_type))) +
      package(1, 3, "0x00000002",
              root_port(30, "0000:80:01.0", pci_device(31, "0000:81:00.0", gpu_type))) +
      root_port(40, "0000:c0:01.0", pci_device(41, "0000:c1:00.0", gpu_type));  // on the Machine
  const HostTopology topology = read_hwloc_xml(hwloc_document("3.0", body));
  ASSERT_EQ(topology.gpus.size(), 4u);
  EXPECT_EQ(hop_ids(topology.gpus[0].pci),
            (std::vector<std::string>{"0000:00:01.0", "host hostbridge@2"}));
  EXPECT_EQ(topology.gpus[0].pci.numa_node, 0);
  EXPECT_EQ(topology.gpus[0].pci.package, 0);
  EXPECT_EQ(hop_ids(topology.gpus[1].pci),
            (std::vector<std::string>{"0000:00:02.0", "host hostbridge@2"}));
  EXPECT_EQ(hop_ids(topology.gpus[2].pci),
            (std::vector<std::string>{"0000:80:01.0", "host hostbridge@3"}));
  EXPECT_EQ(topology.gpus[2].pci.numa_node, 1);
  EXPECT_EQ(topology.gpus[2].pci.package, 1);
  // Hanging from the whole Machine: neither one NUMA node's nor one package's.
  EXPECT_EQ(hop_ids(topology.gpus[3].pci),
            (std::vector<std::string>{"0000:c0:01.0", "host hostbridge@1"}));
  EXPECT_EQ(topology.gpus[3].pci.numa_node, -1);
  EXPECT_EQ(topology.gpus[3].pci.package, -1);
}

TEST(HwlocXml, PcieLinkFromTheGBpsFigure) {
  const std::string gpu_type = "0302 [10de:2330] [10de:16c1] a1";
  const std::vector<std::pair<std::string, PcieLink>> cases = {
      {"15.753846", {3, 16}},  {"31.507692", {4, 16}}, {"63.015385", {5, 16}},
      {"121.000000", {6, 16}}, {"7.876923", {3, 8}},   {"4.000000", {1, 16}},
      {"3.938462", {3, 4}},  // also gen5 x1: the widest reading wins
      {"0.250000", {1, 1}},    {"12.300000", {0, 0}},  {"0.000000", {0, 0}},
  };
  std::string devices;
  for (size_t i = 0; i < cases.size(); ++i) {
    char bus[32];
    std::snprintf(bus, sizeof bus, "0000:%02zx:00.0", i + 1);
    devices += pci_device(static_cast<int>(100 + i), bus, gpu_type, cases[i].first);
  }
  const HostTopology topology = read_hwloc_xml(hwloc_document(
      "2.0",
      "<object type=\"Bridge\" gp_index=\"10\" bridge_type=\"0-1\" bridge_pci=\"0000:[00-ff]\">\n" +
          devices + "</object>\n"));
  ASSERT_EQ(topology.gpus.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(topology.gpus[i].pcie_current.generation, cases[i].second.generation)
        << cases[i].first;
    EXPECT_EQ(topology.gpus[i].pcie_current.width, cases[i].second.width) << cases[i].first;
  }
}

TEST(HwlocXml, Version1File) {
  // hwloc 1.x: no version attribute, Socket, NUMANode as a parent, the v2
  // osdev_type numbers (1 GPU, 2 network, 3 OpenFabrics), no gp_index.
  const std::string text =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<!DOCTYPE topology SYSTEM \"hwloc.dtd\">\n"
      "<topology>\n"
      "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x00000003\" nodeset=\"0x00000001\">\n"
      "    <info name=\"HostName\" value=\"old\"/>\n"
      "    <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00000003\" nodeset=\"0x00000001\" "
      "local_memory=\"1024\">\n"
      "      <object type=\"Socket\" os_index=\"0\" cpuset=\"0x00000003\" nodeset=\"0x00000001\">\n"
      "        <info name=\"CPUModel\" value=\"Old CPU\"/>\n"
      "        <object type=\"Cache\" cpuset=\"0x00000003\" cache_size=\"1\" depth=\"2\">\n"
      "          <object type=\"Core\" os_index=\"0\" cpuset=\"0x00000001\"><object type=\"PU\" "
      "os_index=\"0\" cpuset=\"0x00000001\"/></object>\n"
      "          <object type=\"Core\" os_index=\"1\" cpuset=\"0x00000002\"><object type=\"PU\" "
      "os_index=\"1\" cpuset=\"0x00000002\"/></object>\n"
      "        </object>\n"
      "      </object>\n"
      "      <object type=\"Bridge\" os_index=\"0\" bridge_type=\"0-1\" depth=\"0\" "
      "bridge_pci=\"0000:[00-04]\">\n"
      "        <object type=\"PCIDev\" os_index=\"4096\" pci_busid=\"0000:03:00.0\" "
      "pci_type=\"0302 [10de:1094] [10de:0888] a1\" pci_link_speed=\"7.876923\">\n"
      "          <object type=\"OSDev\" name=\"cuda0\" osdev_type=\"1\"><info name=\"GPUModel\" "
      "value=\"Tesla M2075\"/></object>\n"
      "        </object>\n"
      "        <object type=\"PCIDev\" os_index=\"16384\" pci_busid=\"0000:04:00.0\" "
      "pci_type=\"0200 [8086:1521] [8086:0000] 01\" pci_link_speed=\"0.000000\">\n"
      "          <object type=\"OSDev\" name=\"eth0\" osdev_type=\"2\"/>\n"
      "          <object type=\"OSDev\" name=\"mlx4_0\" osdev_type=\"3\"><info name=\"Port1State\" "
      "value=\"1\"/><info name=\"Port2State\" value=\"4\"/></object>\n"
      "        </object>\n"
      "      </object>\n"
      "    </object>\n"
      "  </object>\n"
      "  <distances nbobjs=\"1\" relative_depth=\"1\" latency_base=\"10.0\"><latency "
      "value=\"1.0\"/></distances>\n"
      "</topology>\n";
  const HostTopology topology = read_hwloc_xml(text);
  EXPECT_EQ(topology.sources.at(0).detail, "hwloc XML version 1.x");
  EXPECT_EQ(topology.hostname, "old");
  EXPECT_EQ(topology.numa_nodes, 1);
  EXPECT_EQ(topology.packages, 1);
  EXPECT_EQ(topology.cores, 2);
  EXPECT_EQ(topology.pus, 2);
  EXPECT_EQ(topology.cpu_model, "Old CPU");
  ASSERT_EQ(topology.gpus.size(), 1u);
  EXPECT_EQ(topology.gpus[0].name, "Tesla M2075");
  EXPECT_EQ(topology.gpus[0].pcie_current.generation, 3);
  EXPECT_EQ(topology.gpus[0].pcie_current.width, 8);
  EXPECT_EQ(hop_ids(topology.gpus[0].pci), (std::vector<std::string>{"host pci0000:00"}));
  EXPECT_EQ(topology.gpus[0].pci.numa_node, 0);
  EXPECT_EQ(topology.gpus[0].pci.package, 0);  // the one Socket covers the NUMA node's cpuset
  ASSERT_EQ(topology.nics.size(), 3u);
  EXPECT_EQ(topology.nics[0].name, "eth0");
  EXPECT_EQ(topology.nics[1].name, "mlx4_0:1");
  EXPECT_EQ(topology.nics[1].state, "down");
  EXPECT_EQ(topology.nics[1].netdev, "");  // two ports, one interface: which is not known
  EXPECT_EQ(topology.nics[2].name, "mlx4_0:2");
  EXPECT_EQ(topology.nics[2].state, "active");
  EXPECT_EQ(topology.nics[2].kind, NicKind::kInfiniband);
}

TEST(HwlocXml, OsDeviceTypesDependOnTheVersion) {
  // 2 is "network" up to 2.x and "memory" in 3.0; 16 is network in 3.0.
  const std::string devices =
      "<object type=\"Bridge\" gp_index=\"10\" bridge_type=\"0-1\" bridge_pci=\"0000:[00-01]\">\n" +
      pci_device(11, "0000:01:00.0", "0200 [15b3:1017] [15b3:0020] 00", "0.000000",
                 "<object type=\"OSDev\" gp_index=\"12\" name=\"dev2\" osdev_type=\"2\"/>"
                 "<object type=\"OSDev\" gp_index=\"13\" name=\"dev16\" osdev_type=\"16\"/>"
                 "<object type=\"OSDev\" gp_index=\"14\" name=\"roce0\" osdev_type=\"48\">"
                 "<info name=\"Port1LinkLayer\" value=\"Ethernet\"/></object>") +
      "</object>\n";
  const HostTopology v2 = read_hwloc_xml(hwloc_document("2.0", devices));
  ASSERT_EQ(v2.nics.size(), 1u);
  EXPECT_EQ(v2.nics[0].name, "dev2");
  const HostTopology v3 = read_hwloc_xml(hwloc_document("3.0", devices));
  ASSERT_EQ(v3.nics.size(), 2u);
  EXPECT_EQ(v3.nics[0].name, "dev16");
  EXPECT_EQ(v3.nics[1].name, "roce0:1");
  EXPECT_EQ(v3.nics[1].kind, NicKind::kRoce);
  EXPECT_EQ(v3.nics[1].netdev, "dev16");  // the only interface and the only port
  EXPECT_EQ(v3.nics[0].rdma_device, "roce0");
}

TEST(HwlocXml, GarbledValuesAreNotesNotErrors) {
  const std::string body =
      "<object type=\"Bridge\" gp_index=\"x\" bridge_type=\"0-1\" bridge_pci=\"junk\">\n" +
      pci_device(11, "zz:top", "0302 [10de:2330] [10de:16c1] a1", "fast") +
      pci_device(12, "0000:02:00.0", "garbage") +
      "<object type=\"OSDev\" gp_index=\"13\" name=\"eth9\" osdev_type=\"many\"/>\n"
      "</object>\n";
  HostTopology topology;
  ASSERT_NO_THROW(topology = read_hwloc_xml(hwloc_document("abc", body)));
  ASSERT_EQ(topology.gpus.size(), 1u);
  EXPECT_EQ(topology.gpus[0].pci.bus_id, "");
  EXPECT_FALSE(topology.gpus[0].pcie_current.known());
  EXPECT_EQ(hop_ids(topology.gpus[0].pci), (std::vector<std::string>{"host hostbridge@#1"}));
  auto noted = [&](const std::string& part) {
    return std::any_of(topology.notes.begin(), topology.notes.end(), [&](const std::string& note) {
      return note.find(part) != std::string::npos;
    });
  };
  EXPECT_TRUE(noted("topology version \"abc\" not understood")) << topology.notes.size();
  EXPECT_TRUE(noted("gp_index \"x\" is not a number"));
  EXPECT_TRUE(noted("pci_busid \"zz:top\" is not a PCI bus id"));
  EXPECT_TRUE(noted("pci_link_speed \"fast\" is not a number"));
  EXPECT_TRUE(noted("pci_type \"garbage\" not understood"));
  EXPECT_TRUE(noted("osdev_type \"many\" not understood"));
}

TEST(HwlocXml, NvlinkMatrixOfTheWrongSizeIsANote) {
  const std::string body =
      "<object type=\"Bridge\" gp_index=\"10\" bridge_type=\"0-1\" bridge_pci=\"0000:[00-02]\">\n" +
      pci_device(11, "0000:01:00.0", "0302 [10de:2330] [10de:16c1] a1") +
      pci_device(12, "0000:02:00.0", "0302 [10de:2330] [10de:16c1] a1") + "</object>\n";
  const std::string good =
      "<distances2hetero nbobjs=\"2\" kind=\"25\" name=\"NVLinkBandwidth\">"
      "<indexes length=\"20\">PCIDev:11 PCIDev:12 </indexes>"
      "<u64values length=\"4\">0 300000 </u64values><u64values length=\"4\">300000 0 </u64values>"
      "</distances2hetero>\n";
  std::string text = hwloc_document("3.0", body);
  text.insert(text.rfind("</topology>"), good);
  HostTopology topology = read_hwloc_xml(text);
  ASSERT_EQ(topology.gpus.size(), 2u);
  ASSERT_EQ(topology.gpus[0].nvlinks.size(), 1u);
  EXPECT_EQ(topology.gpus[0].nvlinks[0].remote_bus_id, "0000:02:00.0");
  EXPECT_FALSE(topology.gpus[0].nvlinks[0].remote_is_switch);
  EXPECT_EQ(topology.gpus[0].nvlinks[0].bandwidth_GBps, 300.0);

  std::string short_matrix = hwloc_document("3.0", body);
  std::string bad = good;
  bad.replace(bad.find("300000 0 "), 9, "300000 ");
  short_matrix.insert(short_matrix.rfind("</topology>"), bad);
  topology = read_hwloc_xml(short_matrix);
  EXPECT_TRUE(topology.gpus[0].nvlinks.empty());
  ASSERT_EQ(topology.notes.size(), 1u);
  EXPECT_NE(topology.notes[0].find("2 indexes and 3 values for 2 objects"), std::string::npos)
      << topology.notes[0];
}

TEST(HwlocXml, MalformedFilesThrowWithTheLine) {
  const std::string dgx2 = read_fixture("hwloc-nvidia-dgx2.xml");
  const std::string truncated = error_of([&] { read_hwloc_xml(dgx2.substr(0, dgx2.size() / 2)); });
  EXPECT_TRUE(names_a_line(truncated)) << truncated;
  EXPECT_NE(truncated.find("the file ends inside"), std::string::npos) << truncated;
  EXPECT_EQ(truncated.rfind("hwloc XML: ", 0), 0u) << truncated;

  std::string mismatched = dgx2;
  mismatched.replace(mismatched.find("</object>"), 9, "</objekt>");
  const std::string mismatch = error_of([&] { read_hwloc_xml(mismatched); });
  EXPECT_NE(mismatch.find("end tag </objekt> does not match <object> opened on line"),
            std::string::npos)
      << mismatch;

  EXPECT_EQ(error_of([] { read_hwloc_xml(read_fixture("nccl-topo-dump-h200-vm.xml")); }),
            "hwloc XML: line 1: the root element is <system>, not hwloc's <topology>");
  EXPECT_EQ(error_of([] { read_hwloc_xml(""); }),
            "hwloc XML: line 1: no root element (the file is empty or only comments)");
}

// ------------------------------------------------------------- NCCL dump

TEST(NcclTopologyDump, H200Vm) {
  const HostTopology topology = read_nccl_topology_xml(read_fixture("nccl-topo-dump-h200-vm.xml"));
  ASSERT_EQ(topology.sources.size(), 1u);
  EXPECT_EQ(topology.sources[0].name, "nccl");
  EXPECT_TRUE(topology.sources[0].read);
  EXPECT_EQ(topology.sources[0].detail, "NCCL topology dump");
  EXPECT_TRUE(topology.notes.empty()) << topology.notes.front();
  ASSERT_EQ(topology.gpus.size(), 1u);
  const Gpu& gpu = topology.gpus[0];
  EXPECT_EQ(gpu.index, 0);
  EXPECT_EQ(gpu.cuda_compute_capability, 90);
  EXPECT_EQ(gpu.pci.bus_id, "0000:00:06.0");
  EXPECT_EQ(gpu.pcie_current.generation, 5);  // "32.0 GT/s PCIe"
  EXPECT_EQ(gpu.pcie_current.width, 0);       // link_width="0": NCCL did not know
  EXPECT_EQ(hop_ids(gpu.pci), (std::vector<std::string>{"host cpu"}));  // numaid -1
  EXPECT_EQ(gpu.pci.numa_node, -1);
  EXPECT_TRUE(gpu.nvlinks.empty());
  ASSERT_EQ(topology.nics.size(), 1u);
  const Nic& nic = topology.nics[0];
  EXPECT_EQ(nic.name, "eth0");
  EXPECT_EQ(nic.kind, NicKind::kEthernet);
  EXPECT_EQ(nic.rate_Gbps, 10.0);
  EXPECT_EQ(nic.state, "up");
  EXPECT_EQ(nic.pci.bus_id, "");  // the dump puts it under the <cpu>, not a <pci>
}

TEST(NcclTopologyDump, SwitchesNvlinksAndInfinibandNets) {
  const std::string text = R"(<system version="1">
  <cpu numaid="1" arch="x86_64" vendor="GenuineIntel">
    <pci busid="0000:1a:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0000:1B:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="1" sm="80" rank="1" gdr="1">
          <nvlink target="0000:c3:00.0" count="12" tclass="0x068000"/>
        </gpu>
      </pci>
      <pci busid="0000:1c:00.0" class="0x020700" link_speed="8.0 GT/s PCIe" link_width="8">
        <nic><net name="mlx5_0" dev="0" speed="200000" port="1" latency="0" gdr="1"/></nic>
      </pci>
    </pci>
    <pci busid="0000:2a:00.0" class="0x030200" link_speed="" link_width="16">
      <gpu dev="0" sm="80" rank="0" gdr="1">
        <nvlink target="0000:1b:00.0" count="2" tclass="0x030200"/>
        <c2c bw="0" count="0"/>
      </gpu>
    </pci>
  </cpu>
</system>)";
  const HostTopology topology = read_nccl_topology_xml(text);
  EXPECT_TRUE(topology.notes.empty()) << topology.notes.front();
  ASSERT_EQ(topology.gpus.size(), 2u);
  const Gpu& gpu0 = topology.gpus[0];
  const Gpu& gpu1 = topology.gpus[1];
  EXPECT_EQ(gpu0.index, 0);
  EXPECT_EQ(gpu0.pci.bus_id, "0000:2a:00.0");
  EXPECT_EQ(gpu0.pcie_current.generation, 0);
  ASSERT_EQ(gpu0.nvlinks.size(), 2u);
  EXPECT_EQ(gpu0.nvlinks[0].remote_bus_id, "0000:1b:00.0");
  EXPECT_FALSE(gpu0.nvlinks[0].remote_is_switch);
  EXPECT_EQ(gpu1.index, 1);
  EXPECT_EQ(gpu1.cuda_compute_capability, 80);
  EXPECT_EQ(gpu1.pci.bus_id, "0000:1b:00.0");
  EXPECT_EQ(gpu1.pcie_current.generation, 4);
  EXPECT_EQ(gpu1.pcie_current.width, 16);
  EXPECT_EQ(hop_ids(gpu1.pci), (std::vector<std::string>{"0000:1a:00.0", "host cpu1"}));
  EXPECT_EQ(gpu1.pci.numa_node, 1);
  ASSERT_EQ(gpu1.nvlinks.size(), 12u);
  for (const NvLink& link : gpu1.nvlinks) {
    EXPECT_TRUE(link.remote_is_switch);
    EXPECT_EQ(link.remote_bus_id, "0000:c3:00.0");
  }
  ASSERT_EQ(topology.nics.size(), 1u);
  const Nic& hca = topology.nics[0];
  EXPECT_EQ(hca.name, "mlx5_0:1");
  EXPECT_EQ(hca.kind, NicKind::kInfiniband);
  EXPECT_EQ(hca.rate_Gbps, 200.0);
  EXPECT_EQ(hca.pci.bus_id, "0000:1c:00.0");
  EXPECT_EQ(hca.pci.link.generation, 3);
  EXPECT_EQ(hca.pci.link.width, 8);
  EXPECT_EQ(hop_ids(hca.pci), (std::vector<std::string>{"0000:1a:00.0", "host cpu1"}));
}

TEST(NcclTopologyDump, GarbledValuesAreNotes) {
  const HostTopology topology = read_nccl_topology_xml(
      "<system><cpu numaid=\"x\"><pci busid=\"0000:01:00.0\" link_speed=\"fast\" "
      "link_width=\"wide\">"
      "<gpu dev=\"zero\" sm=\"90\"><nvlink target=\"fffffff:ffff:ff\" count=\"1000000000\"/></gpu>"
      "</pci></cpu></system>");
  ASSERT_EQ(topology.gpus.size(), 1u);
  EXPECT_EQ(topology.gpus[0].index, 0);
  ASSERT_EQ(topology.gpus[0].nvlinks.size(), 1u);
  EXPECT_EQ(topology.gpus[0].nvlinks[0].remote_bus_id, "fffffff:ffff:ff");
  EXPECT_EQ(topology.notes.size(), 5u);
}

TEST(NcclTopologyDump, MalformedFilesThrowWithTheLine) {
  const std::string dump = read_fixture("nccl-topo-dump-h200-vm.xml");
  const std::string truncated =
      error_of([&] { read_nccl_topology_xml(dump.substr(0, dump.size() / 2)); });
  EXPECT_TRUE(names_a_line(truncated)) << truncated;
  EXPECT_EQ(truncated.rfind("NCCL topology dump: ", 0), 0u) << truncated;
  EXPECT_EQ(error_of([] { read_nccl_topology_xml(read_fixture("hwloc-h200-vm.xml")); }),
            "NCCL topology dump: line 3: the root element is <topology>, not NCCL's <system>");
  EXPECT_EQ(error_of([] { read_nccl_topology_xml("<system>\n<cpu>\n</pci>\n</system>"); }),
            "NCCL topology dump: line 3: end tag </pci> does not match <cpu> opened on line 2");
  EXPECT_TRUE(names_a_line(error_of([] { read_nccl_topology_xml(""); })));
}

// ------------------------------------------------------- format detection

TEST(TopologyFormat, FromTheFirstElement) {
  for (const char* name :
       {"hwloc-nvidia-dgx2.xml", "hwloc-2socket-pci-ib.xml", "hwloc-h200-vm.xml"})
    EXPECT_EQ(detect_topology_format(read_fixture(name)), TopologyFormat::kHwlocXml) << name;
  EXPECT_EQ(detect_topology_format(read_fixture("nccl-topo-dump-h200-vm.xml")),
            TopologyFormat::kNcclXml);
  EXPECT_EQ(detect_topology_format("<?xml version='1.0'?>\n<!-- c -->\n<system version=\"1\">"),
            TopologyFormat::kNcclXml);
  EXPECT_EQ(detect_topology_format("  \n{\"gpus\": []}"), TopologyFormat::kCcscopeJson);
  EXPECT_EQ(detect_topology_format(""), TopologyFormat::kUnknown);
  EXPECT_EQ(detect_topology_format("   \n"), TopologyFormat::kUnknown);
  EXPECT_EQ(detect_topology_format("<topologyx>"), TopologyFormat::kUnknown);
  EXPECT_EQ(detect_topology_format("<!-- never ends <topology>"), TopologyFormat::kUnknown);
  EXPECT_EQ(detect_topology_format("GPU0 X NV12"), TopologyFormat::kUnknown);
}

}  // namespace
}  // namespace ccscope::topo
