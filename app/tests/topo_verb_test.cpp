// `ccscope topo --from FILE` (app/src/topo_verb.cpp) on the saved topologies of
// ../shared/fixtures/topo (copied to topo/tests/data): the text view, the JSON
// docs/topo.md documents, the path records, and bad input (one line, exit 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/records/topology_record.h"
#include "compare_test_util.h"
#include "verb_run.h"

namespace ccscope::app {
namespace {

using nlohmann::json;
using reports::testing::slurp;
using reports::testing::spit;

std::string data(const std::string& name) {
  return std::string(CCSCOPE_TOPO_TEST_DATA) + "/" + name;
}

using verb_testing::VerbRun;

VerbRun topo(const std::vector<std::string>& args) {
  return verb_testing::run_verb(topo_verb, args);
}

// Result files in a temporary folder (reports' test helpers: TempDir, slurp, spit).
class TopoVerb : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_.file(name); }
  reports::testing::TempDir dir_;
};

TEST_F(TopoVerb, Dgx2MatrixIsNvidiaSmisWithSixNvlinksBetweenEveryPair) {
  const VerbRun run = topo({"--from", data("hwloc-nvidia-dgx2.xml")});
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_NE(run.out.find("16 GPUs"), std::string::npos);
  EXPECT_NE(run.out.find("GPU0  X     NV6   NV6"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("NV#  = Connection traversing a bonded set of # NVLinks"),
            std::string::npos);
  EXPECT_NE(run.out.find("0-15      NV6   P2P        150"), std::string::npos) << run.out;
}

TEST_F(TopoVerb, JsonHasTheDocumentedKeys) {
  const VerbRun run = topo({"--from", data("hwloc-2socket-pci-ib.xml"), "--json"});
  ASSERT_EQ(run.rc, 0) << run.err;
  const json doc = json::parse(run.out);
  EXPECT_EQ(doc.at("schema"), "ccscope.topo/1");
  ASSERT_EQ(doc.at("nodes").size(), 1u);
  const json& node = doc["nodes"][0];
  EXPECT_TRUE(node.contains("hostname"));
  for (const json& gpu : node.at("gpus"))
    for (const char* key : {"index", "name", "pci_bus_id", "pcie_generation", "pcie_width"})
      EXPECT_TRUE(gpu.contains(key)) << key;
  std::vector<std::string> names;
  for (const json& nic : node.at("nics")) {
    for (const char* key : {"name", "kind", "rate_Gbps", "state"})
      EXPECT_TRUE(nic.contains(key)) << key;
    names.push_back(nic["name"].get<std::string>() + "=" + nic["kind"].get<std::string>());
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "mlx5_0:1=infiniband"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "eth0=ethernet"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "eth1=ethernet"), names.end());
  ASSERT_FALSE(node.at("gpu_pairs").empty());
  EXPECT_TRUE(node["gpu_pairs"][0].contains("path"));
  EXPECT_EQ(node.at("sources").at("hwloc").at("read"), true);
}

TEST_F(TopoVerb, OwnJsonReadsBackToTheSameView) {
  const VerbRun first = topo({"--from", data("hwloc-nvidia-dgx2.xml"), "--json"});
  ASSERT_EQ(first.rc, 0) << first.err;
  spit(file("dgx2.json"), first.out);
  const VerbRun again = topo({"--from", file("dgx2.json"), "--json"});
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(again.out, first.out);
}

TEST_F(TopoVerb, H200MachineAndNcclDumpAgree) {
  const VerbRun run = topo({"--from", data("hwloc-h200-vm.xml"), "--nccl-topo",
                            data("nccl-topo-dump-h200-vm.xml"), "--json"});
  ASSERT_EQ(run.rc, 0) << run.err;
  const json doc = json::parse(run.out);
  const json& node = doc["nodes"][0];
  ASSERT_EQ(node["gpus"].size(), 1u);
  EXPECT_EQ(node["gpus"][0]["pci_bus_id"], "0000:00:06.0");
  EXPECT_EQ(node["nics"].size(), 1u);
  EXPECT_EQ(node["sources"]["nccl"]["read"], true);
  for (const json& f : doc["findings"])  // same GPU, same NIC, no NVLink on either side
    EXPECT_EQ(f["check"].get<std::string>().rfind("sources.", 0), std::string::npos) << f.dump();
}

TEST_F(TopoVerb, CsvPathRecordsThroughTheSchema) {
  const VerbRun run = topo({"--from", data("hwloc-nvidia-dgx2.xml"), "--csv", file("paths.csv")});
  ASSERT_EQ(run.rc, 0) << run.err;
  const std::vector<records::TopologyPathRecord> rows =
      records::read_topology_path_csv(slurp(file("paths.csv")));
  ASSERT_EQ(rows.size(), 120u);  // 16 x 15 / 2 GPU pairs, no node pair
  EXPECT_EQ(rows[0].kind, "gpu_pair");
  EXPECT_EQ(rows[0].path, "NV6");
  EXPECT_EQ(rows[0].expected_GBps, 150);
  EXPECT_FALSE(rows[0].measured_GBps.has_value());
}

TEST_F(TopoVerb, SeveralFilesAreACluster) {
  const VerbRun run =
      topo({"--from", data("hwloc-h200-vm.xml"), "--from", data("hwloc-2socket-pci-ib.xml")});
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_NE(run.out.find("node pairs:"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("gpu_count differs between nodes with no majority: vm: 1; conan: 3"),
            std::string::npos)
      << run.out;
}

TEST_F(TopoVerb, BadInputIsOneLineAndExit2) {
  const std::string dgx2 = slurp(data("hwloc-nvidia-dgx2.xml"));
  spit(file("truncated.xml"), dgx2.substr(0, dgx2.size() / 2));
  spit(file("bad.json"), "{\"schema\": \"ccscope.topo/1\", \"nodes\": [{\"gpus\": 3}]}");
  spit(file("broken.json"), "{\"nodes\": [");
  spit(file("other.txt"), "hello\n");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--from", file("missing.xml")},
           {"--from", file("truncated.xml")},
           {"--from", file("bad.json")},
           {"--from", file("broken.json")},
           {"--from", file("other.txt")},
           {"--from", dir_.path().string()},
           {"--from", data("hwloc-h200-vm.xml"), "--measure"},
           {"--threshold", "2"},
           {"-b", "lots"},
       }) {
    const VerbRun run = topo(args);
    EXPECT_EQ(run.rc, 2) << args.back() << ": " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_NE(run.err.find("ccscope topo: error:"), std::string::npos) << run.err;
  }
  EXPECT_NE(topo({"--from", file("truncated.xml")}).err.find("line"), std::string::npos);
  EXPECT_NE(topo({"--from", file("bad.json")}).err.find("nodes[0].gpus"), std::string::npos);
}

}  // namespace
}  // namespace ccscope::app
