// The NCCL log analysis over real and synthetic logs (diag/tests/nccl_logs/,
// written from the INFO/WARN strings of NCCL 2.12-2.28 and logs quoted in
// NCCL's GitHub issues): exact ranks, transports and findings per format and
// failure; damaged input gives a partial result; the fuzz entry over the seeds.
#include "ccscope/diag/nccl_log.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../fuzz/nccl_log_fuzz_entry.h"
#include "ccscope/records/document_kind.h"

namespace ccscope::diag {
namespace {

namespace fs = std::filesystem;

std::string logs_dir() { return std::string(CCSCOPE_DIAG_TEST_DATA) + "/nccl_logs"; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

NcclLogAnalysis analyze_file(const std::string& name) {
  return analyze_nccl_logs({{name, slurp(logs_dir() + "/" + name)}});
}

// "code:severity" of every finding, in order.
std::vector<std::string> codes(const NcclLogAnalysis& a) {
  std::vector<std::string> out;
  for (const auto& f : a.findings) out.push_back(f.code + ":" + nccl_severity_name(f.severity));
  return out;
}

const NcclLogFinding* find(const NcclLogAnalysis& a, const std::string& code) {
  for (const auto& f : a.findings)
    if (f.code == code) return &f;
  return nullptr;
}

// "from->to transport" of every link of the first communicator.
std::vector<std::string> matrix(const NcclLogAnalysis& a) {
  std::vector<std::string> out;
  if (a.communicators.empty()) return out;
  for (const auto& l : a.communicators[0].links)
    out.push_back(std::to_string(l.from) + "->" + std::to_string(l.to) + " " + l.transport);
  return out;
}

using Strings = std::vector<std::string>;

TEST(NcclLogPrefix, FindsThePrefixBehindLauncherOutput) {
  const auto p = parse_nccl_line("[1,0]<stderr>:node-a:2001:2010 [3] NCCL INFO Using network IB");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->host, "node-a");
  EXPECT_EQ(p->pid, 2001);
  EXPECT_EQ(p->tid, 2010);
  EXPECT_EQ(p->cuda_device, 3);
  EXPECT_EQ(p->level, "INFO");
  EXPECT_EQ(p->message, "Using network IB");
  const auto w = parse_nccl_line(
      "2025-02-18T12:54:09Z 0: h1:7:8 [0] misc/socket.cc:71 NCCL WARN socketProgress: x");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->host, "h1");
  EXPECT_EQ(w->level, "WARN");
  EXPECT_EQ(w->location, "misc/socket.cc:71");
  EXPECT_EQ(w->message, "socketProgress: x");
  EXPECT_FALSE(parse_nccl_line("vm:478 [0] NCCL INFO no tid"));
  EXPECT_FALSE(parse_nccl_line("NCCL INFO without prefix"));
  EXPECT_FALSE(parse_nccl_line("just text"));
  // Two ranks' lines written over each other: the first one is cut.
  EXPECT_FALSE(
      parse_nccl_line("vm:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [sevm:2:2 [0] "
                      "NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0"));
}

// The real log of the GPU machine (shared fixture): 2 ranks, NCCL_HOSTID per rank.
TEST(NcclLog, RealH200TwoRankSocketLog) {
  const auto a = analyze_file("nccl-2.28.3-h200-2rank-socket.log");
  ASSERT_EQ(a.ranks.size(), 2u);
  EXPECT_EQ(a.ranks[0].rank, 0);
  EXPECT_EQ(a.ranks[0].host, "vm");
  EXPECT_EQ(a.ranks[0].pid, 478);
  EXPECT_EQ(a.ranks[1].pid, 479);
  EXPECT_EQ(a.ranks[0].cuda_device, 0);
  EXPECT_EQ(a.ranks[0].nccl_version, "2.28.3");
  EXPECT_EQ(a.ranks[0].nccl_cuda, "13.0");
  EXPECT_EQ(a.ranks[0].cuda_driver, "13.0");
  EXPECT_EQ(a.ranks[0].init, NcclInitState::kDestroyed);  // completed, then destroyed
  EXPECT_TRUE(a.ranks[0].ib_no_device);
  EXPECT_EQ(a.ranks[0].bootstrap_interface, "eth0");
  EXPECT_EQ(a.ranks[0].bootstrap_address, "192.0.2.2");
  EXPECT_EQ(a.ranks[0].environment.at("NCCL_HOSTID"), "probehost0");
  EXPECT_EQ(a.hosts, Strings{"vm"});
  EXPECT_EQ(a.nodes, 2);
  EXPECT_EQ(a.nodes_source, "nNodes");
  EXPECT_EQ(a.network, "Socket");
  EXPECT_EQ(a.network_source, "Using network");
  EXPECT_EQ(a.socket_interfaces, Strings{"eth0"});
  EXPECT_TRUE(a.ib_devices.empty());
  ASSERT_EQ(a.communicators.size(), 1u);
  EXPECT_EQ(a.communicators[0].id, "0x8a143a0b90d98ea4");
  EXPECT_EQ(a.communicators[0].nranks, 2);
  EXPECT_EQ(matrix(a), (Strings{"0->1 NET/Socket", "1->0 NET/Socket"}));
  EXPECT_EQ(a.communicators[0].links[0].channels, 2u);
  EXPECT_EQ(a.communicators[0].links[0].gdrdma_send, false);
  EXPECT_EQ(a.communicators[0].links[0].gdrdma_receive, false);
  EXPECT_EQ(codes(a), (Strings{"net.socket_between_nodes:warn", "env.hostid_differs:info",
                               "net.plugin_not_loaded:info"}));
  ASSERT_EQ(a.inputs.size(), 1u);
  EXPECT_EQ(a.inputs[0].other_lines, 6u);  // the program's own lines
  EXPECT_EQ(a.inputs[0].garbled_lines, 0u);
}

TEST(NcclLog, TwoNodesIbWithGdrAndPxnUnderOpenMpi) {
  const auto a = analyze_file("ib-2node-gdr-openmpi.log");
  ASSERT_EQ(a.ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(a.ranks[r].rank, r);
    EXPECT_EQ(a.ranks[r].init, NcclInitState::kInitComplete);
    EXPECT_EQ(a.ranks[r].network, "IB");
  }
  EXPECT_EQ(a.ranks[2].host, "node-b");
  EXPECT_EQ(a.hosts, (Strings{"node-a", "node-b"}));
  EXPECT_EQ(a.nodes, 2);
  EXPECT_EQ(a.ib_devices, (Strings{"mlx5_0:1/IB", "mlx5_1:1/RoCE"}));
  EXPECT_EQ(a.gdr, "enabled");
  EXPECT_EQ(matrix(a), (Strings{"0->1 P2P/CUMEM", "1->0 P2P/CUMEM", "1->2 NET/IB", "2->3 P2P/CUMEM",
                                "3->0 NET/IB", "3->2 P2P/CUMEM"}));
  const auto& l12 = a.communicators[0].links[2];
  EXPECT_EQ(l12.details, Strings{"NET/IB/GDRDMA"});
  EXPECT_EQ(l12.channels, 2u);
  EXPECT_EQ(l12.gdrdma_send, true);
  EXPECT_EQ(l12.gdrdma_receive, true);
  EXPECT_EQ(l12.pxn_proxies, std::vector<int>{0});
  EXPECT_EQ(a.communicators[0].links[0].details, Strings{"P2P/CUMEM/read"});
  // Nothing wrong: only the (normal) missing external plugin.
  EXPECT_EQ(codes(a), Strings{"net.plugin_not_loaded:info"});
  EXPECT_EQ(worst_severity(a), NcclSeverity::kInfo);
}

TEST(NcclLog, SocketAlthoughIbFoundDockerInterfaceEnvDiffers) {
  const auto a = analyze_file("socket-with-ib-srun.log");
  ASSERT_EQ(a.ranks.size(), 2u);
  EXPECT_EQ(a.nccl_versions, Strings{"2.18.1"});  // the bare "0: NCCL version" line
  EXPECT_EQ(a.network, "Socket");
  EXPECT_EQ(matrix(a), (Strings{"0->1 NET/Socket", "1->0 NET/Socket"}));
  EXPECT_EQ(codes(a),
            (Strings{"env.differs:warn", "net.socket_with_ib:warn", "net.virtual_interface:warn",
                     "net.virtual_interface:warn", "net.plugin_not_loaded:info"}));
  const auto* socket = find(a, "net.socket_with_ib");
  ASSERT_TRUE(socket);
  EXPECT_NE(socket->cause.find("NCCL_IB_DISABLE=1"), std::string::npos) << socket->cause;
  EXPECT_EQ(socket->ranks, (std::vector<int>{0, 1}));
  EXPECT_NE(find(a, "env.differs")->message.find("NCCL_SOCKET_NTHREADS"), std::string::npos);
}

TEST(NcclLog, OldFormatGdrDisabledAsymmetricVersionMismatch) {
  const auto a = analyze_file("gdr-disabled-asymmetric-2.12.log");
  ASSERT_EQ(a.ranks.size(), 3u);
  EXPECT_EQ(a.nccl_versions, (Strings{"2.12.10", "2.12.12"}));
  ASSERT_EQ(a.communicators.size(), 1u);
  EXPECT_EQ(a.communicators[0].id, "");  // no commId before 2.12's later releases
  EXPECT_EQ(matrix(a), (Strings{"0->1 P2P/IPC", "1->0 SHM", "1->2 NET/IB", "2->0 NET/IB"}));
  EXPECT_EQ(a.communicators[0].links[1].details, Strings{"SHM/direct/direct"});
  EXPECT_EQ(a.gdr, "disabled");
  EXPECT_EQ(codes(a), (Strings{"version.nccl_mismatch:fail", "version.cuda_mismatch:warn",
                               "net.gdr_not_used:warn", "transport.asymmetric:warn",
                               "net.plugin_not_loaded:info"}));
  const auto* asym = find(a, "transport.asymmetric");
  EXPECT_EQ(asym->message, "ranks 0 -> 1 use P2P/IPC but 1 -> 0 use SHM");
  EXPECT_EQ(asym->peer, "rank 1");
}

TEST(NcclLog, PeerClosedIsSecondaryAndTheRootLogIsMissing) {
  const auto a = analyze_file("peer-closed-ib-error-kubectl.log");
  ASSERT_EQ(a.ranks.size(), 2u);
  EXPECT_EQ(a.ranks[0].init, NcclInitState::kAborted);
  EXPECT_EQ(a.ranks[1].init, NcclInitState::kAborted);
  EXPECT_EQ(codes(a), (Strings{"error.peer_closed:fail", "error.ib_completion:fail",
                               "error.watchdog_timeout:fail", "init.incomplete:fail",
                               "log.ranks_missing:warn", "nccl.warn:warn", "nccl.warn:warn"}));
  const auto* closed = find(a, "error.peer_closed");
  EXPECT_EQ(closed->role, NcclRole::kSecondary);
  EXPECT_EQ(closed->rank, 0);
  EXPECT_EQ(closed->peer, "node3");
  EXPECT_NE(closed->remedy.find("node3 is not among the inputs"), std::string::npos);
  const auto* ib = find(a, "error.ib_completion");
  EXPECT_EQ(ib->count, 2u);
  EXPECT_EQ(ib->rank, 1);
  EXPECT_NE(ib->cause.find("retry counter exceeded"), std::string::npos);
  const auto* watchdog = find(a, "error.watchdog_timeout");
  EXPECT_EQ(watchdog->ranks, (std::vector<int>{0, 1}));
  EXPECT_NE(watchdog->message.find("SeqNum 215 on ranks 1; SeqNum 216 on ranks 0"),
            std::string::npos);
  EXPECT_NE(watchdog->remedy.find("(2,3)"), std::string::npos) << watchdog->remedy;
  EXPECT_EQ(find(a, "log.ranks_missing")->message,
            "communicator 0xfeedfacecafebeef has 4 ranks; the logs show 2 (missing: 2,3)");
  ASSERT_EQ(a.warnings.size(), 2u);
  EXPECT_EQ(a.warnings[1].count, 2u);  // the same text modulo numbers
  EXPECT_EQ(a.warnings[1].ranks, std::vector<int>{1});
  EXPECT_EQ(a.warnings[1].first_seen, "peer-closed-ib-error-kubectl.log:15");
}

// The peer's log given too: the finding points at it.
TEST(NcclLog, PeerClosedPointsAtThePeersLogWhenGiven) {
  const std::string here =
      "node1:7:7 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
      "node1:7:7 [0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer "
      "10.0.0.2<42830>\n";
  const std::string there = "node2:9:9 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n";
  const auto a = analyze_nccl_logs({{"node1.log", here}, {"node2.log", there}});
  const auto* closed = find(a, "error.peer_closed");
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->peer, "node2");
  EXPECT_NE(closed->remedy.find("should be in the log of node2"), std::string::npos);
  EXPECT_EQ(a.ranks[0].sources, Strings{"node1.log"});
}

TEST(NcclLog, InvalidUsageIsRootConnectionRefusedIsNot) {
  const auto a = analyze_file("invalid-usage-refused.log");
  EXPECT_EQ(codes(a), (Strings{"error.connection_refused:fail", "error.invalid_usage:fail",
                               "init.incomplete:fail", "log.ranks_missing:warn", "nccl.warn:warn",
                               "nccl.warn:warn"}));
  const auto* usage = find(a, "error.invalid_usage");
  EXPECT_EQ(usage->role, NcclRole::kRoot);
  EXPECT_EQ(usage->rank, 0);
  EXPECT_EQ(usage->count, 2u);  // the WARN and PyTorch's ncclInvalidUsage line
  EXPECT_EQ(find(a, "error.connection_refused")->role, NcclRole::kSecondary);
  EXPECT_EQ(find(a, "error.connection_refused")->host, "host8");
}

TEST(NcclLog, AwsLibfabricNvlsCollnetOneFilePerRank) {
  const std::string rank0 =
      "ip-1:10:10 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.7.4-aws\n"
      "ip-1:10:10 [0] NCCL INFO Using network AWS Libfabric\n"
      "ip-1:10:10 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
      "busId 10 commId 0x77 - Init START\n"
      "ip-1:10:10 [0] NCCL INFO NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 16)\n"
      "ip-1:10:10 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/AWS Libfabric/0/GDRDMA\n"
      "ip-1:10:10 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA\n"
      "ip-1:10:10 [0] NCCL INFO Connected NVLS\n"
      "ip-1:10:10 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
      "busId 10 commId 0x77 - Init COMPLETE\n";
  const std::string rank1 =
      "ip-2:20:20 [0] NCCL INFO Using network AWS Libfabric\n"
      "ip-2:20:20 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 cudaDev 0 nvmlDev 0 "
      "busId 10 commId 0x77 - Init START\n"
      "ip-2:20:20 [0] NCCL INFO NVLS multicast support is not available on dev 0\n"
      "ip-2:20:20 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/AWS Libfabric/0\n"
      "ip-2:20:20 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/AWS Libfabric/0/GDRDMA\n"
      "ip-2:20:20 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 cudaDev 0 nvmlDev 0 "
      "busId 10 commId 0x77 - Init COMPLETE\n";
  const auto a = analyze_nccl_logs({{"r0.log", rank0}, {"r1.log", rank1}});
  EXPECT_EQ(a.network, "AWS Libfabric");
  EXPECT_EQ(a.net_plugin, "aws-ofi-nccl 1.7.4-aws");
  EXPECT_EQ(matrix(a), (Strings{"0->1 NET/AWS Libfabric", "1->0 NET/AWS Libfabric"}));
  EXPECT_EQ(a.communicators[0].links[0].gdrdma_send, true);
  EXPECT_EQ(a.communicators[0].links[0].gdrdma_receive, false);
  EXPECT_EQ(a.ranks[0].nvls_support, true);
  EXPECT_TRUE(a.ranks[0].nvls_connected);
  EXPECT_EQ(a.ranks[1].nvls_support, false);
  EXPECT_EQ(a.ranks[0].collnet, Strings{"COLLNET/SHARP/0/GDRDMA"});
  EXPECT_EQ(a.ranks[1].sources, Strings{"r1.log"});
  EXPECT_TRUE(a.findings.empty()) << codes(a).front();
}

TEST(NcclLog, GarbledInterleavedAndCutLinesGiveAPartialResult) {
  const auto a = analyze_file("garbled-interleaved.log");
  ASSERT_EQ(a.inputs.size(), 1u);
  // Two lines with a second rank's line glued in, a prefix without tid, and
  // rank 1's Init COMPLETE cut inside its commId.
  EXPECT_EQ(a.inputs[0].garbled_lines, 4u);
  EXPECT_TRUE(a.inputs[0].truncated_last_line);
  EXPECT_FALSE(a.inputs[0].binary);
  ASSERT_EQ(a.ranks.size(), 2u);                     // no rank made of a cut prefix
  EXPECT_EQ(a.ranks[0].network, "Socket");           // behind a colour escape
  EXPECT_EQ(matrix(a), Strings{"1->0 NET/Socket"});  // the CRLF line; the cut ones dropped
  // Rank 1's cut line may be its Init COMPLETE: not called incomplete, and
  // the garbled finding says what the lost lines could have said.
  EXPECT_EQ(codes(a), (Strings{"log.garbled_lines:info", "log.truncated:info"}));
  EXPECT_NE(find(a, "log.garbled_lines")->message.find("Init COMPLETE of rank 1 (vm:479 GPU 0)"),
            std::string::npos)
      << find(a, "log.garbled_lines")->message;
  // Without rank 1's cut line, and ending with a newline: rank 1 never
  // completed, whatever else was cut.
  auto text = slurp(logs_dir() + "/garbled-interleaved.log");
  const size_t cut = text.find(
      "vm:479:479 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 "
      "cudaDev 0 nvmlDev 0 busId 60 commId 0xa\n");
  ASSERT_NE(cut, std::string::npos);
  text.erase(cut, text.find('\n', cut) + 1 - cut);
  text += "\n";
  EXPECT_EQ(codes(analyze_nccl_logs({{"x.log", text}})).front(), "init.incomplete:fail");
}

// "code:severity:role" of every finding, in order.
std::vector<std::string> causes(const NcclLogAnalysis& a) {
  std::vector<std::string> out;
  for (const auto& f : a.findings)
    out.push_back(f.code + ":" + nccl_severity_name(f.severity) + ":" + nccl_role_name(f.role));
  return out;
}

// NCCL 2.29, P2P and SHM off, each rank calling ncclSend before ncclRecv
// outside a group (NVIDIA/nccl#2057): NET/Socket is handed the peer's AF_UNIX
// address. API misuse at the root, the internal error its echo.
TEST(NcclLog, UngroupedSendRecvIsApiMisuseNotTheNetwork) {
  const auto a = analyze_file("ungrouped-sendrecv-2.29.log");
  EXPECT_EQ(causes(a), (Strings{"error.ungrouped_send_recv:fail:root",
                                "error.internal:fail:secondary", "nccl.warn:warn:"}));
  EXPECT_EQ(find(a, "error.ungrouped_send_recv")->ranks, (std::vector<int>{0, 1}));
  EXPECT_NE(find(a, "error.ungrouped_send_recv")->message.find("not a network fault"),
            std::string::npos);
  EXPECT_NE(find(a, "error.internal")->cause.find("ungrouped"), std::string::npos);
}

// PyTorch's watchdog on 3 of 4 ranks (ProcessGroupNCCL.cpp's WorkNCCL text),
// no NCCL_DEBUG: world size from ProcessGroupNCCL's options line, the NCCL
// version from DistBackendError's text, rank 3 behind, rank 2 the suspect.
TEST(NcclLog, PyTorchWatchdogNamesTheRankBehindAndTheVersion) {
  const auto a = analyze_file("pytorch-watchdog-2.20.log");
  EXPECT_EQ(causes(a), (Strings{"error.watchdog_timeout:fail:secondary", "log.no_nccl_lines:warn:",
                                "version.from_framework:info:", "job.from_framework:info:"}));
  EXPECT_NE(find(a, "job.from_framework")->message.find("world size 4 (PyTorch)"),
            std::string::npos)
      << find(a, "job.from_framework")->message;
  EXPECT_EQ(a.nccl_versions, Strings{"2.20.5"});
  const auto* w = find(a, "error.watchdog_timeout");
  EXPECT_EQ(w->ranks, (std::vector<int>{0, 1, 3}));
  EXPECT_NE(w->message.find("ALLREDUCE, NumelIn 26214400"), std::string::npos) << w->message;
  EXPECT_NE(w->cause.find("rank(s) 3 at SeqNum 411 are behind"), std::string::npos) << w->cause;
  EXPECT_NE(w->remedy.find("ranks without a timeout (2)"), std::string::npos) << w->remedy;
  EXPECT_NE(find(a, "version.from_framework")->message.find("2.20.5 (PyTorch)"), std::string::npos);
}

// The job's size from DeepSpeed's launcher, vLLM's distributed init and
// Megatron's arguments (as they print them): the watchdog's suspects are the
// ranks of that world without a timeout.
TEST(NcclLog, WorldSizeAndRanksFromFrameworkBanners) {
  const std::string watchdog =
      "[rank{0}]:[E1018 10:40:12.345678 415{0} ProcessGroupNCCL.cpp:616] [Rank {0}] Watchdog "
      "caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLGATHER, NumelIn=1024, "
      "NumelOut=4096, Timeout(ms)=600000) ran for 600083 milliseconds before timing out.\n";
  std::string timeouts;
  for (int r : {0, 1, 2}) timeouts += fmt::format(fmt::runtime(watchdog), r);
  struct Case {
    std::string banner, source;
  };
  for (const Case& c : std::vector<Case>{
           {"[2024-09-15 00:13:10,097] [INFO] [launch.py:164:main] dist_world_size=4\n",
            "DeepSpeed"},
           {"(VllmWorkerProcess pid=7001) DEBUG 03-18 10:00:04 [parallel_state.py:953] "
            "world_size=4 rank=2 local_rank=2 distributed_init_method=tcp://10.0.0.1:29500 "
            "backend=nccl\n",
            "vLLM"},
           {"using world size: 4, data-parallel size: 2, context-parallel size: 1, "
            "tensor-model-parallel size: 2, pipeline-model-parallel size: 1\n",
            "Megatron"}}) {
    SCOPED_TRACE(c.source);
    const auto a = analyze_nccl_logs({{"job.log", c.banner + timeouts}});
    const auto* job = find(a, "job.from_framework");
    ASSERT_NE(job, nullptr);
    EXPECT_NE(job->message.find("world size 4 (" + c.source + ")"), std::string::npos)
        << job->message;
    EXPECT_EQ(job->message.find("rank(s) 2 printed") != std::string::npos, c.source == "vLLM")
        << job->message;
    EXPECT_NE(find(a, "error.watchdog_timeout")->remedy.find("ranks without a timeout (3)"),
              std::string::npos)
        << find(a, "error.watchdog_timeout")->remedy;
  }
}

// aws-ofi-nccl installed on IB nodes: its WARNs are one harmless finding, not
// WARN groups nor errors (init is not called aborted).
TEST(NcclLog, OfiPluginWarningsOnAnIbClusterAreOneHarmlessFinding) {
  const auto a = analyze_file("ofi-plugin-harmless-ib.log");
  EXPECT_EQ(causes(a), Strings{"net.ofi_plugin_warnings:info:"});
  EXPECT_EQ(find(a, "net.ofi_plugin_warnings")->count, 4u);
  EXPECT_EQ(find(a, "net.ofi_plugin_warnings")->ranks, (std::vector<int>{0, 1}));
  EXPECT_TRUE(a.warnings.empty());
  EXPECT_EQ(a.net_plugin, "");
  for (const auto& r : a.ranks) EXPECT_EQ(r.init, NcclInitState::kInitComplete);
}

// vLLM's banner gives the version; PyTorch's "Last error:" under
// ncclRemoteError names the peer, whose log is missing.
TEST(NcclLog, VllmBannerAndRemoteErrorWithItsPeer) {
  const auto a = analyze_file("vllm-remote-error.log");
  EXPECT_EQ(causes(a), (Strings{"error.remote:fail:secondary",
                                "log.no_nccl_lines:warn:", "version.from_framework:info:"}));
  EXPECT_EQ(a.nccl_versions, Strings{"2.21.5"});
  EXPECT_EQ(find(a, "error.remote")->peer, "worker-2");
  EXPECT_NE(find(a, "error.remote")->remedy.find("the log of worker-2 is not among the inputs"),
            std::string::npos);
  EXPECT_NE(find(a, "version.from_framework")->message.find("2.21.5 (vLLM)"), std::string::npos);
}

// A bug report's log with the user's nvidia-smi topo -m pasted in (old
// words, a device-named NIC column): its topology findings join the log's.
TEST(NcclLog, NvidiaSmiMatrixInTheLogGivesTopologyFindings) {
  const std::string matrix =
      "        GPU0    GPU1    mlx5_0  CPU Affinity    NUMA Affinity\n"
      "GPU0     X      SYS     PIX     0-23            0\n"
      "GPU1    SYS      X      SYS     24-47           1\n"
      "mlx5_0  PIX     SYS      X\n";
  const auto a = analyze_nccl_logs(
      {{"report.log", slurp(logs_dir() + "/nccl-2.28.3-h200-2rank-socket.log") + matrix}});
  EXPECT_EQ(codes(a), (Strings{"net.socket_between_nodes:warn", "topo.nvidia_smi.pcie_only:warn",
                               "topo.nvidia_smi.gpus_across_sockets:warn",
                               "topo.nvidia_smi.nic_far_from_gpu:warn", "env.hostid_differs:info",
                               "net.plugin_not_loaded:info"}));
  EXPECT_NE(find(a, "topo.nvidia_smi.nic_far_from_gpu")->message.find("GPU1: the nearest NIC"),
            std::string::npos);
}

TEST(NcclLog, BinaryAndEmptyInputsAreReportedNotFatal) {
  const auto a = analyze_file("binary-core.bin");
  ASSERT_EQ(a.inputs.size(), 1u);
  EXPECT_TRUE(a.inputs[0].binary);
  EXPECT_EQ(codes(a), (Strings{"log.binary:warn", "log.truncated:info"}));
  const auto none = analyze_nccl_logs({{"empty.log", ""}, {"text.log", "hello\nworld\n"}});
  EXPECT_EQ(codes(none), (Strings{"log.no_nccl_lines:warn", "log.no_nccl_lines:warn"}));
  EXPECT_TRUE(none.ranks.empty());
  const auto nothing = analyze_nccl_logs({});
  EXPECT_TRUE(nothing.findings.empty());
  EXPECT_NE(nccl_log_text(nothing).find("0 input(s)"), std::string::npos);
}

// Every key the JSON writes is in the ccscope.nccl_log/1 table (docs/records.md), with the
// table's type, and every key of the table is written by one of the logs.
TEST(NcclLog, JsonKeysAreTheDocumentKindTable) {
  std::vector<std::string> documents;
  for (const char* file :
       {"ib-2node-gdr-openmpi.log", "gdr-disabled-asymmetric-2.12.log", "garbled-interleaved.log",
        "peer-closed-ib-error-kubectl.log", "socket-with-ib-srun.log", "invalid-usage-refused.log",
        "nccl-2.28.3-h200-2rank-socket.log"})
    documents.push_back(nccl_log_json(analyze_file(file)));
  const std::vector<std::string> differences =
      records::document_key_differences(records::nccl_log_document_kind(), documents);
  EXPECT_TRUE(differences.empty()) << ::testing::PrintToString(differences);
}

TEST(NcclLog, JsonHasTheDocumentedLayout) {
  const auto a = analyze_file("ib-2node-gdr-openmpi.log");
  const auto j = nlohmann::json::parse(nccl_log_json(a));
  EXPECT_EQ(j["schema"], "ccscope.nccl_log/1");
  for (const char* key :
       {"inputs", "summary", "ranks", "communicators", "warnings", "findings", "worst"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["summary"]["ranks"], 4);
  EXPECT_EQ(j["summary"]["nodes"], 2);
  EXPECT_EQ(j["summary"]["network"], "IB");
  EXPECT_EQ(j["ranks"][2]["host"], "node-b");
  EXPECT_EQ(j["ranks"][2]["init"], "init_complete");
  EXPECT_EQ(j["communicators"][0]["links"][2]["transport"], "NET/IB");
  EXPECT_EQ(j["communicators"][0]["links"][2]["pxn_proxies"], nlohmann::json::array({0}));
  EXPECT_EQ(j["communicators"][0]["links"][0]["gdrdma_send"], nullptr);  // not NET
  EXPECT_EQ(j["findings"][0]["code"], "net.plugin_not_loaded");
  EXPECT_EQ(j["findings"][0]["severity"], "info");
  EXPECT_EQ(j["worst"], "info");
  // Invalid UTF-8 from a damaged file still gives valid JSON.
  const auto bad = analyze_nccl_logs({{"bad\xff.log", "h\xfe:1:1 [0] NCCL WARN \xff\xfe oops\n"}});
  EXPECT_NO_THROW((void)nlohmann::json::parse(nccl_log_json(bad)));
}

TEST(NcclLog, ChecksCarryTheFindings) {
  const auto a = analyze_file("gdr-disabled-asymmetric-2.12.log");
  const auto checks = nccl_log_checks(a, Stage::kCluster);
  ASSERT_EQ(checks.size(), a.findings.size());
  EXPECT_EQ(checks[0].name, "nccl_log.version.nccl_mismatch");
  EXPECT_EQ(checks[0].status, Status::kFail);
  EXPECT_EQ(checks[0].stage, Stage::kCluster);
  EXPECT_NE(checks[0].remedy.find("likely"), std::string::npos);
  EXPECT_EQ(checks.back().status, Status::kPass);  // info
  EXPECT_EQ(checks.back().remedy, "");
  EXPECT_EQ(worst_status(checks), Status::kFail);
}

TEST(NcclLog, TextShowsTheMatrixAndFindings) {
  const auto text = nccl_log_text(analyze_file("gdr-disabled-asymmetric-2.12.log"));
  EXPECT_NE(text.find("transports, communicator ? (3 ranks)"), std::string::npos) << text;
  EXPECT_NE(text.find("FAIL version.nccl_mismatch"), std::string::npos) << text;
  EXPECT_NE(text.find("SHM"), std::string::npos) << text;
}

// The libFuzzer target's entry over every seed, then random edits of them.
std::vector<std::string> seeds() {
  std::vector<std::string> out;
  for (const std::string dir : {logs_dir(), std::string(CCSCOPE_DIAG_TEST_DATA) + "/../fuzz/seeds"})
    if (fs::is_directory(dir))
      for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file()) out.push_back(slurp(e.path().string()));
  return out;
}

TEST(NcclLogFuzz, EverySeedIsRead) {
  const auto all = seeds();
  ASSERT_GE(all.size(), 8u);
  for (const auto& s : all) EXPECT_EQ(nccl_log_fuzz::check_one_input(s), "");
}

TEST(NcclLogFuzz, MutatedAndTruncatedSeedsAreRead) {
  const auto all = seeds();
  std::mt19937 random(20250218);
  static constexpr char kBytes[] = " :[]<>/-0123456789x\n\r\t\0\xff\x1b";
  const std::string alphabet(kBytes, sizeof kBytes - 1);
  const std::vector<std::string> tokens = {" NCCL INFO ",
                                           " NCCL WARN ",
                                           "h:1:2 [0] ",
                                           "Channel 00/0 : ",
                                           " -> ",
                                           " via NET/IB/0(",
                                           "[send] via ",
                                           "comm 0x",
                                           " - Init START",
                                           " - Init COMPLETE",
                                           "nNodes 99999999999999",
                                           "rank -5 nranks 2147483648 ",
                                           "status=",
                                           "SeqNum=",
                                           "[Rank ",
                                           "Using network ",
                                           "set by environment to ",
                                           "NET/IB : Using [",
                                           "GPU Direct RDMA ",
                                           "'"};
  size_t runs = 0;
  for (const auto& seed : all) {
    // 20 rounds per seed: under ASan (where CI runs it) 40 took 24 s; the libFuzzer target
    // (diag/fuzz) fuzzes longer.
    for (int round = 0; round < 20; ++round, ++runs) {
      std::string s = seed;
      const int edits = 1 + static_cast<int>(random() % 8);
      for (int e = 0; e < edits && !s.empty(); ++e) {
        const size_t at = random() % (s.size() + 1);
        switch (random() % 4) {
          case 0:
            s.insert(at, 1, alphabet[random() % alphabet.size()]);
            break;
          case 1:
            s.insert(at, tokens[random() % tokens.size()]);
            break;
          case 2:
            s.erase(at, random() % 16);
            break;
          default:
            s.resize(at);  // cut short
            break;
        }
      }
      ASSERT_EQ(nccl_log_fuzz::check_one_input(s), "") << "round " << round;
    }
  }
  EXPECT_GE(runs, 160u);
}

}  // namespace
}  // namespace ccscope::diag
