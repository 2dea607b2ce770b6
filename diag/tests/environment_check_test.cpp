#include "ccscope/diag/environment_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ccscope::diag {
namespace {

topo::Nic nic(std::string name, topo::NicKind kind, std::string state) {
  topo::Nic n;
  n.name = std::move(name);
  n.kind = kind;
  n.state = std::move(state);
  return n;
}

std::vector<topo::Nic> node_nics() {
  return {nic("lo", topo::NicKind::kOther, "unknown"), nic("eth0", topo::NicKind::kEthernet, "up"),
          nic("docker0", topo::NicKind::kEthernet, "up"),
          nic("mlx5_0:1", topo::NicKind::kInfiniband, "active"),
          nic("mlx5_1:1", topo::NicKind::kInfiniband, "active")};
}

// Two nodes of two ranks each, configured alike, one GPU per local rank.
std::vector<RankEnvironment> healthy_cluster() {
  std::vector<RankEnvironment> ranks;
  for (int r = 0; r < 4; ++r) {
    RankEnvironment rank;
    rank.rank = r;
    rank.host = r < 2 ? "node1" : "node2";
    rank.local_rank = r % 2;
    rank.variables = {{"CUDA_VISIBLE_DEVICES", "0,1"},
                      {"NCCL_IB_HCA", "mlx5"},
                      {"NCCL_SOCKET_IFNAME", "eth0"},
                      {"OMPI_COMM_WORLD_RANK", std::to_string(r)},
                      {"UCX_TLS", "rc,self"}};
    rank.nics = node_nics();
    rank.gpu_uuids = {"GPU-a-" + rank.host, "GPU-b-" + rank.host};
    rank.gpu_in_use = rank.gpu_uuids[static_cast<size_t>(rank.local_rank)];
    rank.nccl_version = "2.28.3";
    rank.mpi_library = "MPICH Version: 4.0.2";
    rank.ccscope_version = "0.9.0";
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

void set_variable(RankEnvironment& rank, const std::string& name, const std::string& value) {
  for (auto& [n, v] : rank.variables)
    if (n == name) {
      v = value;
      return;
    }
  rank.variables.emplace_back(name, value);
}

void unset_variable(RankEnvironment& rank, const std::string& name) {
  std::erase_if(rank.variables, [&](const auto& entry) { return entry.first == name; });
}

void set_everywhere(std::vector<RankEnvironment>& ranks, const std::string& name,
                    const std::string& value) {
  for (RankEnvironment& rank : ranks) set_variable(rank, name, value);
}

// "name STATUS host" per check, for whole-list comparisons.
std::vector<std::string> summary(const std::vector<Check>& checks) {
  std::vector<std::string> lines;
  for (const Check& check : checks) {
    EXPECT_EQ(check.stage, Stage::kCluster) << check.name;
    EXPECT_FALSE(check.message.empty()) << check.name;
    EXPECT_EQ(check.remedy.empty(), check.status == Status::kPass || check.status == Status::kSkip)
        << check.name;
    lines.push_back(check.name + " " + status_name(check.status) +
                    (check.host.empty() ? "" : " " + check.host));
  }
  return lines;
}

using Lines = std::vector<std::string>;

TEST(EnvironmentCheck, HealthyClusterGivesOnlyTheConsistentPass) {
  const std::vector<Check> checks = check_environment(healthy_cluster());
  EXPECT_EQ(summary(checks), Lines{"env.consistent PASS"});
  EXPECT_EQ(checks[0].message,
            "4 ranks on 2 nodes: variables, versions, interfaces, HCAs and GPUs per rank agree");
}

TEST(EnvironmentCheck, NoRanksIsSkip) {
  EXPECT_EQ(summary(check_environment({})), Lines{"env.consistent SKIP"});
}

TEST(EnvironmentCheck, SocketIfnameNamingNoInterfaceFails) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  set_everywhere(ranks, "NCCL_SOCKET_IFNAME", "=eth9");
  const std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks),
            (Lines{"env.socket_ifname FAIL node1", "env.socket_ifname FAIL node2"}));
  EXPECT_EQ(checks[1].message,
            "NCCL_SOCKET_IFNAME==eth9 matches no running interface on node2 (ranks 2-3) (it "
            "has: lo, eth0, docker0)");
  EXPECT_EQ(checks[1].rank, -1);
}

TEST(EnvironmentCheck, LocalOnlySocketInterfacesAcrossNodes) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  set_everywhere(ranks, "NCCL_SOCKET_IFNAME", "lo");
  EXPECT_EQ(summary(check_environment(ranks)),
            (Lines{"env.socket_ifname FAIL node1", "env.socket_ifname FAIL node2"}));

  set_everywhere(ranks, "NCCL_SOCKET_IFNAME", "docker");
  const std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks),
            (Lines{"env.socket_ifname WARN node1", "env.socket_ifname WARN node2"}));
  EXPECT_NE(checks[0].message.find("docker0 only"), std::string::npos) << checks[0].message;

  // One node: loopback reaches every rank.
  ranks.resize(2);
  set_everywhere(ranks, "NCCL_SOCKET_IFNAME", "lo");
  EXPECT_EQ(summary(check_environment(ranks)), Lines{"env.consistent PASS"});
}

TEST(EnvironmentCheck, UnknownNicsAreNotJudged) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  set_everywhere(ranks, "NCCL_SOCKET_IFNAME", "eth9");
  for (RankEnvironment& rank : ranks) rank.nics.clear();
  EXPECT_EQ(summary(check_environment(ranks)), Lines{"env.consistent PASS"});
}

TEST(EnvironmentCheck, IbHcaMatchingNoRdmaPortFails) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  set_everywhere(ranks, "NCCL_IB_HCA", "mlx4_0");
  const std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks), (Lines{"env.ib_hca FAIL node1", "env.ib_hca FAIL node2"}));
  EXPECT_EQ(checks[0].message,
            "NCCL_IB_HCA=mlx4_0 matches none of the RDMA ports of node1 (ranks 0-1) "
            "(mlx5_0:1, mlx5_1:1): NCCL falls back to sockets");

  set_everywhere(ranks, "NCCL_IB_HCA", "=mlx5_0:2");  // the device has port 1 only
  EXPECT_EQ(summary(check_environment(ranks)),
            (Lines{"env.ib_hca FAIL node1", "env.ib_hca FAIL node2"}));
  set_everywhere(ranks, "NCCL_IB_HCA", "^mlx5_1");
  EXPECT_EQ(summary(check_environment(ranks)), Lines{"env.consistent PASS"});
}

TEST(EnvironmentCheck, IbSwitchedOffWhilePortsAreActiveWarns) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  set_everywhere(ranks, "NCCL_IB_DISABLE", "1");
  const std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks), (Lines{"env.ib_disabled WARN node1", "env.ib_disabled WARN node2"}));
  EXPECT_EQ(checks[0].message,
            "NCCL_IB_DISABLE=1 on node1 (ranks 0-1) with active IB ports (mlx5_0:1, mlx5_1:1): "
            "NCCL uses socket instead");

  ranks = healthy_cluster();
  set_everywhere(ranks, "NCCL_NET", "Socket");
  EXPECT_EQ(summary(check_environment(ranks)),
            (Lines{"env.ib_disabled WARN node1", "env.ib_disabled WARN node2"}));

  // No active port: nothing is lost.
  for (RankEnvironment& rank : ranks)
    for (topo::Nic& n : rank.nics)
      if (n.name.find(':') != std::string::npos) n.state = "down";
  EXPECT_EQ(summary(check_environment(ranks)), Lines{"env.consistent PASS"});
}

TEST(EnvironmentCheck, NcclDebugOnSomeRanksOnlyWarns) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  set_variable(ranks[0], "NCCL_DEBUG", "INFO");
  const std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks), Lines{"env.nccl_debug WARN"});
  EXPECT_EQ(checks[0].message,
            "NCCL_DEBUG is not alike on every rank: INFO on node1 (rank 0); unset on node1 "
            "(rank 1), node2 (ranks 2-3); the NCCL log shows only part of the cluster");
  set_everywhere(ranks, "NCCL_DEBUG", "WARN");
  EXPECT_EQ(summary(check_environment(ranks)), Lines{"env.consistent PASS"});
}

TEST(EnvironmentCheck, VariableDifferingBetweenRanksWarnsOncePerVariable) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  for (RankEnvironment& rank : ranks)
    set_variable(rank, "NCCL_IB_TIMEOUT", rank.host == "node1" ? "22" : "20");
  unset_variable(ranks[3], "UCX_TLS");
  const std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks), (Lines{"env.variable_mismatch WARN", "env.variable_mismatch WARN"}));
  EXPECT_EQ(checks[0].message,
            "NCCL_IB_TIMEOUT differs between ranks: 22 on node1 (ranks 0-1); 20 on node2 "
            "(ranks 2-3)");
  EXPECT_EQ(checks[1].message,
            "UCX_TLS differs between ranks: rc,self on node1 (ranks 0-1), node2 (rank 2); "
            "unset on node2 (rank 3)");
}

TEST(EnvironmentCheck, PerRankVariablesAreNotMismatches) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  for (RankEnvironment& rank : ranks) {
    set_variable(rank, "CUDA_VISIBLE_DEVICES", std::to_string(rank.local_rank));
    set_variable(rank, "NCCL_HOSTID", "h" + std::to_string(rank.rank));
    set_variable(rank, "OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank.local_rank));
  }
  set_variable(ranks[2], "CCSCOPE_TEST_CLOCK_OFFSET", "node2=50");
  EXPECT_EQ(summary(check_environment(ranks)), Lines{"env.consistent PASS"});
}

TEST(EnvironmentCheck, TwoRanksOnOneGpuFail) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  ranks[1].gpu_in_use = ranks[0].gpu_in_use;
  std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks), Lines{"env.gpu_shared FAIL node1"});
  EXPECT_EQ(checks[0].message,
            "node1 (ranks 0-1) share one GPU (GPU GPU-a-node1): NCCL refuses two ranks on one "
            "GPU (\"Duplicate GPU detected\")");

  // One NCCL_HOSTID for both is still one host to NCCL.
  set_variable(ranks[0], "NCCL_HOSTID", "same");
  set_variable(ranks[1], "NCCL_HOSTID", "same");
  EXPECT_EQ(summary(check_environment(ranks)), Lines{"env.gpu_shared FAIL node1"});
}

TEST(EnvironmentCheck, SharedGpuWithAHostIdPerRankWarns) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  ranks[1].gpu_in_use = ranks[0].gpu_in_use;
  for (RankEnvironment& rank : ranks)
    set_variable(rank, "NCCL_HOSTID", "ccscope-rank-" + std::to_string(rank.rank));
  const std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks), Lines{"env.gpu_shared WARN node1"});
  EXPECT_NE(checks[0].message.find("--isolate-ranks"), std::string::npos) << checks[0].message;
}

TEST(EnvironmentCheck, SharedGpuFromCudaVisibleDevices) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  for (RankEnvironment& rank : ranks) rank.gpu_in_use.clear();
  EXPECT_EQ(summary(check_environment(ranks)), Lines{"env.consistent PASS"});  // "0,1": 0 and 1

  set_everywhere(ranks, "CUDA_VISIBLE_DEVICES", "1");
  const std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks), (Lines{"env.gpu_shared FAIL node1", "env.gpu_shared FAIL node2"}));
  EXPECT_NE(checks[0].message.find("(CUDA_VISIBLE_DEVICES entry 1)"), std::string::npos)
      << checks[0].message;

  // A CPU node: nothing to share.
  for (RankEnvironment& rank : ranks) rank.gpu_uuids.clear();
  EXPECT_EQ(summary(check_environment(ranks)), Lines{"env.consistent PASS"});
}

TEST(EnvironmentCheck, VersionsDifferingBetweenRanks) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  ranks[3].nccl_version = "2.21.5";
  ranks[2].mpi_library = "Open MPI v4.1.4";
  ranks[0].ccscope_version = "";
  const std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks),
            (Lines{"env.nccl_version FAIL", "env.mpi_version WARN", "env.ccscope_version WARN"}));
  EXPECT_EQ(checks[0].message,
            "NCCL differs between ranks: 2.28.3 on node1 (ranks 0-1), node2 (rank 2); 2.21.5 on "
            "node2 (rank 3)");
  EXPECT_EQ(checks[2].message,
            "ccscope differs between ranks: none on node1 (rank 0); 0.9.0 on node1 (rank 1), "
            "node2 (ranks 2-3)");
}

TEST(EnvironmentCheck, SlowPathSwitchesWarn) {
  std::vector<RankEnvironment> ranks = healthy_cluster();
  set_everywhere(ranks, "NCCL_P2P_DISABLE", "1");
  set_everywhere(ranks, "NCCL_SHM_DISABLE", "1");
  const std::vector<Check> checks = check_environment(ranks);
  EXPECT_EQ(summary(checks), (Lines{"env.p2p_disabled WARN", "env.shm_disabled WARN"}));
  EXPECT_EQ(checks[0].message,
            "NCCL_P2P_DISABLE=1 on node1 (ranks 0-1), node2 (ranks 2-3): GPUs of a node talk "
            "through host memory instead of NVLink/PCIe P2P (slower)");

  set_everywhere(ranks, "NCCL_P2P_DISABLE", "0");
  set_everywhere(ranks, "NCCL_SHM_DISABLE", "0");
  EXPECT_EQ(summary(check_environment(ranks)), Lines{"env.consistent PASS"});
}

}  // namespace
}  // namespace ccscope::diag
