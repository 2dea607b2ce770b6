// NCCL's choices re-derived: interface lists, socket interfaces, the network
// transport, P2P levels (rules of NCCL 2.30.7, see nccl_env.cpp).
#include "ccscope/topo/nccl_env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

namespace ccscope::topo {
namespace {

using Names = std::vector<std::string>;

Nic interface(const std::string& name, const std::string& state = "up",
              NicKind kind = NicKind::kEthernet) {
  Nic nic;
  nic.name = name;
  nic.state = state;
  nic.kind = kind;
  return nic;
}

Nic rdma_port(const std::string& name, NicKind kind, const std::string& state = "active") {
  Nic nic;
  nic.name = name;
  nic.kind = kind;
  nic.state = state;
  nic.has_gid = true;
  return nic;
}

// ---------------------------------------------------------------- filters

TEST(InterfaceFilter, PrefixList) {
  const InterfaceFilter filter = parse_interface_filter("eth");
  EXPECT_FALSE(filter.exclude);
  EXPECT_FALSE(filter.exact);
  ASSERT_EQ(filter.entries.size(), 1u);
  EXPECT_EQ(filter.entries[0].name, "eth");
  EXPECT_EQ(filter.entries[0].port, -1);
  EXPECT_TRUE(filter.matches("eth0"));
  EXPECT_TRUE(filter.matches("eth10"));
  EXPECT_TRUE(filter.matches("eth"));
  EXPECT_FALSE(filter.matches("veth0"));
  EXPECT_FALSE(filter.matches("et"));
}

TEST(InterfaceFilter, ExcludeList) {
  const InterfaceFilter filter = parse_interface_filter("^docker,lo");
  EXPECT_TRUE(filter.exclude);
  EXPECT_FALSE(filter.exact);
  ASSERT_EQ(filter.entries.size(), 2u);
  EXPECT_EQ(filter.entries[0].name, "docker");
  EXPECT_EQ(filter.entries[1].name, "lo");
  EXPECT_TRUE(filter.matches("eth0"));
  EXPECT_FALSE(filter.matches("docker0"));
  EXPECT_FALSE(filter.matches("lo"));
  EXPECT_FALSE(filter.matches("loopy"));  // a prefix
}

TEST(InterfaceFilter, ExactList) {
  const InterfaceFilter filter = parse_interface_filter("=eth0");
  EXPECT_TRUE(filter.exact);
  EXPECT_FALSE(filter.exclude);
  EXPECT_TRUE(filter.matches("eth0"));
  EXPECT_FALSE(filter.matches("eth00"));
  EXPECT_FALSE(filter.matches("eth"));
}

TEST(InterfaceFilter, HcaListWithPorts) {
  const InterfaceFilter filter = parse_interface_filter("mlx5_0:1,mlx5_1");
  ASSERT_EQ(filter.entries.size(), 2u);
  EXPECT_EQ(filter.entries[0].name, "mlx5_0");
  EXPECT_EQ(filter.entries[0].port, 1);
  EXPECT_EQ(filter.entries[1].name, "mlx5_1");
  EXPECT_EQ(filter.entries[1].port, -1);
  EXPECT_TRUE(filter.matches("mlx5_0", 1));
  EXPECT_FALSE(filter.matches("mlx5_0", 2));
  EXPECT_TRUE(filter.matches("mlx5_0"));  // "any port" on our side matches
  EXPECT_TRUE(filter.matches("mlx5_1", 2));
  EXPECT_TRUE(filter.matches("mlx5_10", 1));  // prefix: NCCL's own surprise
  EXPECT_FALSE(filter.matches("mlx5_2", 1));
}

TEST(InterfaceFilter, ExcludeExact) {
  const InterfaceFilter filter = parse_interface_filter("^=mlx5_2");
  EXPECT_TRUE(filter.exclude);
  EXPECT_TRUE(filter.exact);
  ASSERT_EQ(filter.entries.size(), 1u);
  EXPECT_EQ(filter.entries[0].name, "mlx5_2");
  EXPECT_FALSE(filter.matches("mlx5_2", 1));
  EXPECT_TRUE(filter.matches("mlx5_20", 1));
  EXPECT_TRUE(filter.matches("mlx5_0", 1));
}

TEST(InterfaceFilter, EmptyEntriesAndEmptyLists) {
  const InterfaceFilter filter = parse_interface_filter(",eth0,,:3,ib0:");
  ASSERT_EQ(filter.entries.size(), 2u);  // empty entries and a nameless one dropped
  EXPECT_EQ(filter.entries[1].name, "ib0");
  EXPECT_EQ(filter.entries[1].port, -1);
  EXPECT_TRUE(parse_interface_filter("").matches("anything"));
  EXPECT_TRUE(parse_interface_filter("").empty());
  EXPECT_FALSE(parse_interface_filter("^").matches("anything"));  // as in NCCL
}

// ---------------------------------------------------------------- sockets

TEST(SocketInterfaces, IbInterfacesFirst) {
  const std::vector<Nic> nics = {interface("lo", "unknown", NicKind::kOther), interface("eth0"),
                                 interface("ib0", "up", NicKind::kInfiniband), interface("docker0"),
                                 interface("ib1", "up", NicKind::kInfiniband)};
  EXPECT_EQ(nccl_socket_interfaces(nics, {}), (Names{"ib0", "ib1"}));
}

TEST(SocketInterfaces, AnyButDockerLoAndVirbrNext) {
  const std::vector<Nic> nics = {interface("lo", "unknown", NicKind::kOther), interface("docker0"),
                                 interface("virbr0"), interface("eth0"), interface("enp3s0")};
  EXPECT_EQ(nccl_socket_interfaces(nics, {}), (Names{"eth0", "enp3s0"}));
}

TEST(SocketInterfaces, DockerThenLoOnlyAsLastResort) {
  std::vector<Nic> nics = {interface("lo", "unknown", NicKind::kOther), interface("docker0"),
                           interface("eth0", "down")};
  EXPECT_EQ(nccl_socket_interfaces(nics, {}), (Names{"docker0"}));
  nics[1].state = "down";
  EXPECT_EQ(nccl_socket_interfaces(nics, {}), (Names{"lo"}));  // operstate unknown runs
  nics[0].state = "down";
  EXPECT_TRUE(nccl_socket_interfaces(nics, {}).empty());
}

TEST(SocketInterfaces, DownInterfacesAndRdmaPortsAreSkipped) {
  const std::vector<Nic> nics = {interface("ib0", "down", NicKind::kInfiniband),
                                 rdma_port("mlx5_0:1", NicKind::kInfiniband),
                                 interface("eth0", "down"), interface("eth1")};
  EXPECT_EQ(nccl_socket_interfaces(nics, {}), (Names{"eth1"}));
}

TEST(SocketInterfaces, SocketIfnameDecidesWithoutFallback) {
  const std::vector<Nic> nics = {interface("ib0", "up", NicKind::kInfiniband), interface("eth0"),
                                 interface("eth1", "down"), interface("docker0")};
  EXPECT_EQ(nccl_socket_interfaces(nics, {{"NCCL_SOCKET_IFNAME", "eth"}}), (Names{"eth0"}));
  EXPECT_EQ(nccl_socket_interfaces(nics, {{"NCCL_SOCKET_IFNAME", "^ib,eth"}}), (Names{"docker0"}));
  EXPECT_EQ(nccl_socket_interfaces(nics, {{"NCCL_SOCKET_IFNAME", "=docker0"}}), (Names{"docker0"}));
  EXPECT_TRUE(nccl_socket_interfaces(nics, {{"NCCL_SOCKET_IFNAME", "enp"}}).empty());
  // One character is not taken as a list (strlen(env) > 1 in NCCL).
  EXPECT_EQ(nccl_socket_interfaces(nics, {{"NCCL_SOCKET_IFNAME", "e"}}), (Names{"ib0"}));
}

// ---------------------------------------------------------------- network

std::vector<Nic> ib_node() {
  return {interface("eth0"), interface("ib0", "up", NicKind::kInfiniband),
          rdma_port("mlx5_0:1", NicKind::kInfiniband),
          rdma_port("mlx5_1:1", NicKind::kInfiniband, "down")};
}

TEST(ChooseNetwork, InfinibandWhenAnActivePortPassesIbHca) {
  NetworkChoice choice = choose_network(ib_node(), {});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kInfiniband);
  EXPECT_EQ(choice.devices, (Names{"mlx5_0:1"}));  // the down port is not used
  EXPECT_STREQ(transport_name(choice.transport), "IB");
  choice = choose_network(ib_node(), {{"NCCL_IB_HCA", "=mlx5_0:1"}});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kInfiniband);
  EXPECT_NE(choice.reason.find("NCCL_IB_HCA"), std::string::npos) << choice.reason;
}

TEST(ChooseNetwork, RoceForAnEthernetLinkLayerPort) {
  const std::vector<Nic> nics = {interface("eth2"), rdma_port("mlx5_1:1", NicKind::kRoce)};
  const NetworkChoice choice = choose_network(nics, {});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kRoce);
  EXPECT_EQ(choice.devices, (Names{"mlx5_1:1"}));
  EXPECT_STREQ(transport_name(choice.transport), "RoCE");
}

TEST(ChooseNetwork, IbDisableMeansSockets) {
  NetworkChoice choice = choose_network(ib_node(), {{"NCCL_IB_DISABLE", "1"}});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kSocket);
  EXPECT_EQ(choice.devices, (Names{"ib0"}));  // IPoIB, "ib" first
  EXPECT_EQ(choice.reason, "NCCL_IB_DISABLE=1");
  // NCCL_PARAM reads it with strtoll: 0 keeps IB.
  choice = choose_network(ib_node(), {{"NCCL_IB_DISABLE", "0"}});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kInfiniband);
}

TEST(ChooseNetwork, NcclNetSocketMeansSockets) {
  const NetworkChoice choice = choose_network(ib_node(), {{"NCCL_NET", "Socket"}});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kSocket);
  EXPECT_EQ(choice.devices, (Names{"ib0"}));
  EXPECT_STREQ(transport_name(choice.transport), "socket");
  EXPECT_EQ(choose_network(ib_node(), {{"NCCL_NET", "socket"}}).transport,
            NetworkChoice::Transport::kSocket);  // case-insensitive
}

TEST(ChooseNetwork, IbHcaExcludingTheOnlyHcaMeansSockets) {
  const NetworkChoice choice = choose_network(ib_node(), {{"NCCL_IB_HCA", "^mlx5_0"}});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kSocket);
  EXPECT_NE(choice.reason.find("NCCL_IB_HCA=^mlx5_0"), std::string::npos) << choice.reason;
  EXPECT_EQ(choose_network(ib_node(), {{"NCCL_IB_HCA", "mlx5_0:2"}}).transport,
            NetworkChoice::Transport::kSocket);  // the wrong port
}

TEST(ChooseNetwork, NoRdmaPortMeansSockets) {
  const std::vector<Nic> nics = {interface("lo", "unknown", NicKind::kOther), interface("eth0")};
  const NetworkChoice choice = choose_network(nics, {});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kSocket);
  EXPECT_EQ(choice.devices, (Names{"eth0"}));
  EXPECT_EQ(choice.reason, "no active RDMA port");
}

TEST(ChooseNetwork, NothingToUse) {
  // NCCL_NET=IB forbids the socket fallback.
  NetworkChoice choice =
      choose_network({interface("eth0"), rdma_port("mlx5_0:1", NicKind::kInfiniband, "down")},
                     {{"NCCL_NET", "IB"}});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kNone);
  EXPECT_STREQ(transport_name(choice.transport), "none");
  // An external plugin's name: not ours to predict.
  choice = choose_network(ib_node(), {{"NCCL_NET", "AWS Libfabric"}});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kNone);
  // No running interface: IB lacks its out-of-band socket, sockets lack everything.
  choice = choose_network({rdma_port("mlx5_0:1", NicKind::kInfiniband)}, {});
  EXPECT_EQ(choice.transport, NetworkChoice::Transport::kNone);
  EXPECT_TRUE(choice.devices.empty());
}

// ---------------------------------------------------------------- P2P

TEST(NcclP2p, NvlinkUnlessDisabled) {
  EXPECT_TRUE(nccl_uses_p2p("NV4", {}));
  EXPECT_TRUE(nccl_uses_p2p("NV18", {{"NCCL_P2P_LEVEL", "PIX"}}));
  EXPECT_TRUE(nccl_uses_p2p("NV4", {{"NCCL_P2P_DISABLE", "0"}}));
  EXPECT_FALSE(nccl_uses_p2p("NV4", {{"NCCL_P2P_DISABLE", "1"}}));
  EXPECT_FALSE(nccl_uses_p2p("NV4", {{"NCCL_P2P_LEVEL", "LOC"}}));  // LOC: not even NVLink
}

TEST(NcclP2p, DefaultStopsAtPxb) {
  EXPECT_TRUE(nccl_uses_p2p("PIX", {}));
  EXPECT_TRUE(nccl_uses_p2p("PXB", {}));
  EXPECT_FALSE(nccl_uses_p2p("PHB", {}));
  EXPECT_FALSE(nccl_uses_p2p("NODE", {}));
  EXPECT_FALSE(nccl_uses_p2p("SYS", {}));
  EXPECT_FALSE(nccl_uses_p2p("PIX", {{"NCCL_P2P_DISABLE", "1"}}));
  EXPECT_FALSE(nccl_uses_p2p("bogus", {}));
  EXPECT_TRUE(nccl_uses_p2p("PXB", {{"NCCL_P2P_LEVEL", "nonsense"}}));  // ignored: default
}

TEST(NcclP2p, NamedLevels) {
  EXPECT_FALSE(nccl_uses_p2p("SYS", {{"NCCL_P2P_LEVEL", "PHB"}}));
  EXPECT_TRUE(nccl_uses_p2p("PHB", {{"NCCL_P2P_LEVEL", "PHB"}}));
  EXPECT_TRUE(nccl_uses_p2p("NODE", {{"NCCL_P2P_LEVEL", "PHB"}}));
  EXPECT_TRUE(nccl_uses_p2p("SYS", {{"NCCL_P2P_LEVEL", "SYS"}}));
  EXPECT_FALSE(nccl_uses_p2p("PXB", {{"NCCL_P2P_LEVEL", "PIX"}}));
  EXPECT_FALSE(nccl_uses_p2p("PIX", {{"NCCL_P2P_LEVEL", "NVL"}}));
  EXPECT_TRUE(nccl_uses_p2p("NV2", {{"NCCL_P2P_LEVEL", "NVL"}}));
  EXPECT_FALSE(nccl_uses_p2p("SYS", {{"NCCL_P2P_LEVEL", "sys"}}));  // case-sensitive in NCCL
  // NCCL_P2P_DISABLE=1 wins over a level.
  EXPECT_FALSE(nccl_uses_p2p("PIX", {{"NCCL_P2P_DISABLE", "1"}, {"NCCL_P2P_LEVEL", "SYS"}}));
}

TEST(NcclP2p, NumericLevels) {
  // Old numbering: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 SYS, 5 (and above) SYS.
  EXPECT_FALSE(nccl_uses_p2p("NV4", {{"NCCL_P2P_LEVEL", "0"}}));
  EXPECT_TRUE(nccl_uses_p2p("PIX", {{"NCCL_P2P_LEVEL", "1"}}));
  EXPECT_FALSE(nccl_uses_p2p("PXB", {{"NCCL_P2P_LEVEL", "1"}}));
  EXPECT_TRUE(nccl_uses_p2p("PXB", {{"NCCL_P2P_LEVEL", "2"}}));
  EXPECT_FALSE(nccl_uses_p2p("PHB", {{"NCCL_P2P_LEVEL", "2"}}));
  EXPECT_TRUE(nccl_uses_p2p("PHB", {{"NCCL_P2P_LEVEL", "3"}}));
  EXPECT_FALSE(nccl_uses_p2p("SYS", {{"NCCL_P2P_LEVEL", "3"}}));
  EXPECT_TRUE(nccl_uses_p2p("SYS", {{"NCCL_P2P_LEVEL", "4"}}));
  EXPECT_TRUE(nccl_uses_p2p("SYS", {{"NCCL_P2P_LEVEL", "9"}}));
}

// ---------------------------------------------------------------- environment

TEST(NcclEnvironment, ReadsOnlyNcclVariablesOfTheProcess) {
  ASSERT_EQ(::setenv("NCCL_CCSCOPE_TEST_VARIABLE", "a=b", 1), 0);
  ASSERT_EQ(::setenv("CCSCOPE_NOT_NCCL_TEST", "1", 1), 0);
  const NcclEnvironment env = nccl_environment_from_process();
  ::unsetenv("NCCL_CCSCOPE_TEST_VARIABLE");
  ::unsetenv("CCSCOPE_NOT_NCCL_TEST");
  ASSERT_EQ(env.count("NCCL_CCSCOPE_TEST_VARIABLE"), 1u);
  EXPECT_EQ(env.at("NCCL_CCSCOPE_TEST_VARIABLE"), "a=b");
  EXPECT_EQ(env.count("CCSCOPE_NOT_NCCL_TEST"), 0u);
  for (const auto& [name, value] : env) EXPECT_EQ(name.rfind("NCCL_", 0), 0u) << name;
}

}  // namespace
}  // namespace ccscope::topo
