// read_sysfs_nics over fake sysfs trees built in a temporary directory (real
// symlinks for device and device/driver, as the kernel has them), once over
// this machine's /sys, and egress_shaped_Gbps where no root is needed.
#include "ccscope/topo/sysfs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ccscope::topo {
namespace {

namespace fs = std::filesystem;

// A temporary sysfs root, removed with the object.
class FakeSysfs {
 public:
  FakeSysfs() {
    root_ = fs::temp_directory_path() /
            ("ccscope-sysfs-" + std::to_string(::getpid()) + "-" + std::to_string(next_id_++));
    fs::create_directories(root_);
  }
  ~FakeSysfs() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  std::string root() const { return root_.string(); }

  // ROOT/relative with `content` and the kernel's trailing newline.
  void write(const std::string& relative, const std::string& content) const {
    const fs::path file = root_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << content;
  }
  // ROOT/link -> ROOT/target (absolute, so that canonical() lands inside ROOT).
  void link(const std::string& link, const std::string& target) const {
    fs::create_directories((root_ / target));
    fs::create_directories((root_ / link).parent_path());
    fs::create_directory_symlink(root_ / target, root_ / link);
  }
  void make_directory(const std::string& relative) const {
    fs::create_directories(root_ / relative);
  }

  // A network interface directory with the usual attributes.
  void add_interface(const std::string& name, int ifindex, int arp_type, const std::string& speed,
                     const std::string& operstate, const std::string& mtu) const {
    const std::string dir = "class/net/" + name + "/";
    write(dir + "ifindex", std::to_string(ifindex) + "\n");
    write(dir + "type", std::to_string(arp_type) + "\n");
    if (!speed.empty()) write(dir + "speed", speed + "\n");
    write(dir + "operstate", operstate + "\n");
    write(dir + "mtu", mtu + "\n");
  }
  // A PCI function with a driver and a NUMA node.
  void add_pci_function(const std::string& bus_id, const std::string& driver, int numa_node) const {
    const std::string dir = "devices/pci0000:00/" + bus_id;
    link(dir + "/driver", "bus/pci/drivers/" + driver);
    write(dir + "/numa_node", std::to_string(numa_node) + "\n");
  }

 private:
  static inline int next_id_ = 0;
  fs::path root_;
};

// The node of the tests: a virtio eth0, a veth, lo, garbled eth1, three RDMA
// devices (IB with IPoIB ib0, RoCE with eth2, a down IB port).
void build_node(const FakeSysfs& sys) {
  // eth0: virtio-net, like this machine's: device -> .../0000:00:03.0/virtio2.
  sys.add_interface("eth0", 2, 1, "10000", "up", "1500");
  sys.add_pci_function("0000:00:03.0", "virtio-pci", 0);
  sys.link("devices/pci0000:00/0000:00:03.0/virtio2/driver", "bus/virtio/drivers/virtio_net");
  sys.link("class/net/eth0/device", "devices/pci0000:00/0000:00:03.0/virtio2");

  sys.add_interface("veth0", 5, 1, "10000", "up", "1500");  // no device link
  sys.add_interface("lo", 1, 772, "", "unknown", "65536");
  sys.add_interface("eth1", 3, 1, "abc", "down", "");  // damaged: garbage speed, empty mtu

  // mlx5_0: InfiniBand, 400 Gb/s, IPoIB netdev ib0.
  sys.add_pci_function("0000:17:00.0", "mlx5_core", 1);
  sys.add_interface("ib0", 6, 32, "400000", "up", "4092");
  sys.link("class/net/ib0/device", "devices/pci0000:00/0000:17:00.0");
  sys.make_directory("devices/pci0000:00/0000:17:00.0/net/ib0");
  sys.link("class/infiniband/mlx5_0/device", "devices/pci0000:00/0000:17:00.0");
  sys.write("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  sys.write("class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)\n");
  sys.write("class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
  sys.write("class/infiniband/mlx5_0/ports/1/gids/0", "fe80:0000:0000:0000:0002:c903:00f1:a2b3\n");

  // mlx5_1: RoCE on eth2, 100 Gb/s; eth2 is the PCI function's netdev.
  sys.add_pci_function("0000:17:00.1", "mlx5_core", 1);
  sys.add_interface("eth2", 4, 1, "100000", "up", "9000");
  sys.link("class/net/eth2/device", "devices/pci0000:00/0000:17:00.1");
  sys.link("class/infiniband/mlx5_1/device", "devices/pci0000:00/0000:17:00.1");
  sys.write("class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE\n");
  sys.write("class/infiniband/mlx5_1/ports/1/rate", "100 Gb/sec (4X EDR)\n");
  sys.write("class/infiniband/mlx5_1/ports/1/link_layer", "Ethernet\n");
  sys.write("class/infiniband/mlx5_1/ports/1/gids/0", "fe80:0000:0000:0000:ba3f:d2ff:fe11:2233\n");
  sys.write("class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/0", "eth2\n");

  // mlx5_2: a down InfiniBand port, 200 Gb/s, no GID yet.
  sys.add_pci_function("0000:31:00.0", "mlx5_core", 0);
  sys.link("class/infiniband/mlx5_2/device", "devices/pci0000:00/0000:31:00.0");
  sys.write("class/infiniband/mlx5_2/ports/1/state", "1: DOWN\n");
  sys.write("class/infiniband/mlx5_2/ports/1/rate", "200 Gb/sec (4X HDR)\n");
  sys.write("class/infiniband/mlx5_2/ports/1/link_layer", "InfiniBand\n");
  sys.write("class/infiniband/mlx5_2/ports/1/gids/0", "0000:0000:0000:0000:0000:0000:0000:0000\n");
}

// One node tree and one read of it for all tests of the suite (they only look).
class SysfsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sys_ = new FakeSysfs;
    build_node(*sys_);
    host_ = new HostTopology;
    status_ = new SourceStatus(read_sysfs_nics(*host_, sys_->root()));
  }
  static void TearDownTestSuite() {
    delete status_;
    delete host_;
    delete sys_;  // removes the tree
  }
  static const Nic& nic(const std::string& name) {
    const Nic* found = host_->find_nic(name);
    if (found == nullptr) throw std::runtime_error("no NIC " + name);
    return *found;
  }
  static inline FakeSysfs* sys_ = nullptr;
  static inline HostTopology* host_ = nullptr;
  static inline SourceStatus* status_ = nullptr;
};

TEST_F(SysfsTest, StatusCountsInterfacesAndRdmaPorts) {
  EXPECT_EQ(status_->name, "sysfs");
  EXPECT_TRUE(status_->read);
  EXPECT_EQ(status_->detail, "6 interfaces, 3 RDMA ports");
  EXPECT_EQ(host_->nics.size(), 9u);
}

TEST_F(SysfsTest, InterfacesComeInIfindexOrder) {
  ASSERT_GE(host_->nics.size(), 6u);
  const char* expected[] = {"lo", "eth0", "eth1", "eth2", "veth0", "ib0"};
  for (size_t i = 0; i < std::size(expected); ++i) EXPECT_EQ(host_->nics[i].name, expected[i]);
}

TEST_F(SysfsTest, ReadsAVirtioEthernetInterface) {
  const Nic& eth0 = nic("eth0");
  EXPECT_EQ(eth0.kind, NicKind::kEthernet);
  EXPECT_DOUBLE_EQ(eth0.rate_Gbps, 10);
  EXPECT_EQ(eth0.state, "up");
  EXPECT_EQ(eth0.mtu, 1500);
  EXPECT_EQ(eth0.driver, "virtio_net");
  EXPECT_FALSE(eth0.is_virtual);
  // The virtio device's PCI function, and its NUMA node (virtio2 has none).
  EXPECT_EQ(eth0.pci.bus_id, "0000:00:03.0");
  EXPECT_EQ(eth0.pci.numa_node, 0);
  EXPECT_EQ(eth0.rdma_device, "");
}

TEST_F(SysfsTest, VethHasNoDeviceAndIsVirtual) {
  const Nic& veth = nic("veth0");
  EXPECT_TRUE(veth.is_virtual);
  EXPECT_DOUBLE_EQ(veth.rate_Gbps, 10);
  EXPECT_EQ(veth.state, "up");
  EXPECT_EQ(veth.driver, "");
  EXPECT_EQ(veth.pci.bus_id, "");
  EXPECT_EQ(veth.pci.numa_node, -1);
}

TEST_F(SysfsTest, LoopbackIsVirtualOfKindOther) {
  const Nic& lo = nic("lo");
  EXPECT_EQ(lo.kind, NicKind::kOther);
  EXPECT_TRUE(lo.is_virtual);
  EXPECT_EQ(lo.state, "unknown");
  EXPECT_EQ(lo.mtu, 65536);
  EXPECT_DOUBLE_EQ(lo.rate_Gbps, 0);  // no speed file
}

TEST_F(SysfsTest, DamagedFilesLeaveFiguresUnknown) {
  const Nic& eth1 = nic("eth1");
  EXPECT_DOUBLE_EQ(eth1.rate_Gbps, 0);  // "abc"
  EXPECT_EQ(eth1.mtu, 0);               // empty file
  EXPECT_EQ(eth1.state, "down");
  EXPECT_TRUE(eth1.is_virtual);
}

TEST_F(SysfsTest, ReadsAnActiveInfinibandPortAndItsIpoibInterface) {
  const Nic& port = nic("mlx5_0:1");
  EXPECT_EQ(port.kind, NicKind::kInfiniband);
  EXPECT_EQ(port.state, "active");
  EXPECT_DOUBLE_EQ(port.rate_Gbps, 400);
  EXPECT_TRUE(port.has_gid);
  EXPECT_EQ(port.netdev, "ib0");  // the device's only netdev
  EXPECT_EQ(port.driver, "mlx5_core");
  EXPECT_EQ(port.pci.bus_id, "0000:17:00.0");
  EXPECT_EQ(port.pci.numa_node, 1);
  EXPECT_FALSE(port.is_virtual);
  const Nic& ib0 = nic("ib0");
  EXPECT_EQ(ib0.kind, NicKind::kInfiniband);  // ARPHRD_INFINIBAND
  EXPECT_EQ(ib0.rdma_device, "mlx5_0");
  EXPECT_DOUBLE_EQ(ib0.rate_Gbps, 400);
}

TEST_F(SysfsTest, ReadsARocePortAndItsNetdev) {
  const Nic& port = nic("mlx5_1:1");
  EXPECT_EQ(port.kind, NicKind::kRoce);
  EXPECT_EQ(port.state, "active");
  EXPECT_DOUBLE_EQ(port.rate_Gbps, 100);
  EXPECT_TRUE(port.has_gid);
  EXPECT_EQ(port.netdev, "eth2");  // from gid_attrs/ndevs/0
  EXPECT_EQ(port.pci.bus_id, "0000:17:00.1");
  const Nic& eth2 = nic("eth2");
  EXPECT_EQ(eth2.rdma_device, "mlx5_1");
  EXPECT_EQ(eth2.kind, NicKind::kEthernet);
  EXPECT_EQ(eth2.mtu, 9000);
  EXPECT_EQ(eth2.driver, "mlx5_core");
}

TEST_F(SysfsTest, ReadsADownPortWithoutGid) {
  const Nic& port = nic("mlx5_2:1");
  EXPECT_EQ(port.kind, NicKind::kInfiniband);
  EXPECT_EQ(port.state, "down");
  EXPECT_DOUBLE_EQ(port.rate_Gbps, 200);
  EXPECT_FALSE(port.has_gid);  // all zeros
  EXPECT_EQ(port.netdev, "");  // no netdev at all
}

TEST(Sysfs, MissingClassNetIsNotRead) {
  FakeSysfs sys;
  sys.make_directory("class/infiniband");
  HostTopology host;
  const SourceStatus status = read_sysfs_nics(host, sys.root());
  EXPECT_EQ(status.name, "sysfs");
  EXPECT_FALSE(status.read);
  EXPECT_NE(status.detail.find("class/net"), std::string::npos) << status.detail;
  EXPECT_TRUE(host.nics.empty());
}

TEST(Sysfs, OddRatesAndStatesOfRdmaPorts) {
  FakeSysfs sys;
  sys.make_directory("class/net");
  sys.write("class/infiniband/rxe0/ports/1/state", "4: ACTIVE\n");
  sys.write("class/infiniband/rxe0/ports/1/rate", "2.5 Gb/sec (1X SDR)\n");
  sys.write("class/infiniband/rxe0/ports/1/link_layer", "Ethernet\n");
  sys.write("class/infiniband/mlx4_0/ports/2/state", "2: INIT\n");
  sys.write("class/infiniband/mlx4_0/ports/2/rate", "garbage\n");
  sys.write("class/infiniband/mlx4_0/ports/2/link_layer", "Unknown\n");
  sys.write("class/infiniband/mlx4_0/ports/2/gids/0", "\n");
  HostTopology host;
  EXPECT_TRUE(read_sysfs_nics(host, sys.root()).read);
  const Nic* soft = host.find_nic("rxe0:1");
  ASSERT_NE(soft, nullptr);
  EXPECT_DOUBLE_EQ(soft->rate_Gbps, 2.5);
  EXPECT_TRUE(soft->is_virtual);  // soft RoCE: no device link
  EXPECT_FALSE(soft->has_gid);    // no gids file
  const Nic* odd = host.find_nic("mlx4_0:2");
  ASSERT_NE(odd, nullptr);
  EXPECT_EQ(odd->state, "init");
  EXPECT_DOUBLE_EQ(odd->rate_Gbps, 0);
  EXPECT_EQ(odd->kind, NicKind::kOther);
  EXPECT_FALSE(odd->has_gid);
}

// sysfs fails some reads (EINVAL for the speed of a down NIC); a directory in
// place of the file fails the read likewise, and must not throw.
TEST(Sysfs, UnreadableAttributesAreUnknown) {
  FakeSysfs sys;
  sys.add_interface("eth9", 2, 1, "", "down", "1500");
  sys.make_directory("class/net/eth9/speed");
  HostTopology host;
  EXPECT_TRUE(read_sysfs_nics(host, sys.root()).read);
  ASSERT_NE(host.find_nic("eth9"), nullptr);
  EXPECT_DOUBLE_EQ(host.find_nic("eth9")->rate_Gbps, 0);
  EXPECT_EQ(host.find_nic("eth9")->state, "down");
}

TEST(Sysfs, CompletesNicsAnotherSourceDescribed) {
  FakeSysfs sys;
  build_node(sys);
  HostTopology host;
  Nic from_hwloc;
  from_hwloc.name = "eth0";
  from_hwloc.rate_Gbps = 1;  // sysfs' figure wins
  from_hwloc.state = "down";
  from_hwloc.pci.bus_id = "0000:00:03.0";
  from_hwloc.pci.path.push_back({PciHop::Kind::kHostBridge, "hostbridge0"});
  host.nics.push_back(from_hwloc);
  read_sysfs_nics(host, sys.root());
  ASSERT_EQ(host.nics.size(), 9u);  // completed, not appended
  const Nic& eth0 = host.nics.front();
  EXPECT_EQ(eth0.name, "eth0");
  EXPECT_DOUBLE_EQ(eth0.rate_Gbps, 10);
  EXPECT_EQ(eth0.state, "up");
  EXPECT_EQ(eth0.driver, "virtio_net");
  EXPECT_EQ(eth0.pci.numa_node, 0);
  ASSERT_EQ(eth0.pci.path.size(), 1u);  // hwloc's PCI path is kept
  EXPECT_EQ(eth0.pci.path[0].id, "hostbridge0");
}

// This machine's /sys: its eth0, when it has one, read as the files say.
TEST(Sysfs, ReadsThisMachinesEth0) {
  if (!fs::exists("/sys/class/net/eth0")) GTEST_SKIP() << "no eth0 here";
  HostTopology host;
  const SourceStatus status = read_sysfs_nics(host);
  EXPECT_TRUE(status.read) << status.detail;
  const Nic* eth0 = host.find_nic("eth0");
  ASSERT_NE(eth0, nullptr);
  EXPECT_FALSE(eth0->state.empty());
  EXPECT_GT(eth0->mtu, 0);
  // A virtio NIC may report speed -1 (unknown); then the rate is unknown too.
  std::string speed;
  std::ifstream("/sys/class/net/eth0/speed") >> speed;
  const long long speed_Mbps = speed.empty() ? -1 : std::atoll(speed.c_str());
  if (speed_Mbps > 0)
    EXPECT_DOUBLE_EQ(eth0->rate_Gbps, static_cast<double>(speed_Mbps) / 1000);
  else
    EXPECT_DOUBLE_EQ(eth0->rate_Gbps, 0);
  if (fs::exists("/sys/class/net/eth0/device")) {
    EXPECT_FALSE(eth0->is_virtual);
    EXPECT_FALSE(eth0->driver.empty());
  }
  const Nic* lo = host.find_nic("lo");
  ASSERT_NE(lo, nullptr);
  EXPECT_TRUE(lo->is_virtual);
  EXPECT_EQ(lo->kind, NicKind::kOther);
}

// Shaping over rtnetlink without root: what is not there reads as no shaper.
TEST(Shaping, NoShaperOnAMissingInterfaceOrLoopback) {
  EXPECT_EQ(egress_shaped_Gbps("ccscope-none0"), 0);
  EXPECT_EQ(egress_shaped_Gbps(""), 0);
  EXPECT_EQ(egress_shaped_Gbps("lo"), 0);  // lo has noqueue, no tbf
}

}  // namespace
}  // namespace ccscope::topo
