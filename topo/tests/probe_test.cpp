// The live probe without hwloc (as on the GPU machine): NVML (the stand-in)
// finds the GPU, sysfs the NIC, and sysfs' device paths place both in the PCI
// tree, so the GPU/NIC path is known.
#include "ccscope/topo/probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ccscope/topo/paths.h"

namespace ccscope::topo {
namespace {

namespace fs = std::filesystem;

class ProbeWithoutHwloc : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ccscope-probe-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    // /sys/devices/pci0000:00/0000:00:01.0/{0000:02:00.0 (GPU), 0000:03:00.0 (NIC)}
    // hang from one bridge; 0000:80:02.0 (a second NIC) from another host bridge.
    const fs::path bridge = root_ / "devices/pci0000:00/0000:00:01.0";
    const fs::path far = root_ / "devices/pci0000:80/0000:80:02.0";
    for (const fs::path& device : {bridge / "0000:02:00.0", bridge / "0000:03:00.0", far}) {
      fs::create_directories(device);
      std::ofstream(device / "numa_node") << (device == far ? "1\n" : "0\n");
      fs::create_directories(root_ / "bus/pci/devices");
      fs::create_symlink(device, root_ / "bus/pci/devices" / device.filename());
    }
    nic("eth0", bridge / "0000:03:00.0");
    nic("eth1", far);
    std::ofstream(root_ / "nvml.conf") << "driver 580.159.04\ncuda 13000\n"
                                          "gpu 00000000:02:00.0 GPU-1 5 5 16 16 9 0 NVIDIA H200\n";
    setenv("CCSCOPE_FAKE_NVML_CONFIG", (root_ / "nvml.conf").c_str(), 1);
  }
  void TearDown() override {
    unsetenv("CCSCOPE_FAKE_NVML_CONFIG");
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void nic(const std::string& name, const fs::path& device) {
    const fs::path dir = root_ / "class/net" / name;
    fs::create_directories(dir);
    fs::create_symlink(device, dir / "device");
    std::ofstream(dir / "speed") << "100000\n";
    std::ofstream(dir / "operstate") << "up\n";
    std::ofstream(dir / "type") << "1\n";
    std::ofstream(dir / "mtu") << "9000\n";
  }
  fs::path root_;
};

TEST_F(ProbeWithoutHwloc, SysfsPlacesNvmlsGpuAndTheNicsInThePciTree) {
  ProbeOptions options;
  options.use_hwloc = false;
  options.nvml_library = CCSCOPE_FAKE_NVML_LIBRARY;
  options.sysfs_root = root_.string();
  const HostTopology host = probe_host(options);
  ASSERT_EQ(host.gpus.size(), 1u);
  const Gpu& gpu = host.gpus[0];
  EXPECT_EQ(gpu.pci.bus_id, "0000:02:00.0");
  ASSERT_EQ(gpu.pci.path.size(), 2u);
  EXPECT_EQ(gpu.pci.path[0].id, "0000:00:01.0");
  EXPECT_EQ(gpu.pci.path[1].kind, PciHop::Kind::kHostBridge);
  EXPECT_EQ(gpu.pci.path[1].id, "pci0000:00");
  EXPECT_EQ(gpu.pci.numa_node, 0);
  const Nic* eth0 = host.find_nic("eth0");
  const Nic* eth1 = host.find_nic("eth1");
  ASSERT_TRUE(eth0 && eth1);
  EXPECT_EQ(pci_path_level(gpu.pci, eth0->pci), PathLevel::kPix);
  EXPECT_EQ(pci_path_level(gpu.pci, eth1->pci), PathLevel::kSys);  // other host bridge, NUMA 1
  EXPECT_EQ(eth1->rate_Gbps, 100);
  const std::string matrix = render_path_matrix(host, {});
  EXPECT_NE(matrix.find("GPU0  X     PIX   SYS"), std::string::npos) << matrix;
  bool hwloc_reported = false;
  for (const SourceStatus& s : host.sources)
    if (s.name == "hwloc") hwloc_reported = !s.read;
  EXPECT_TRUE(hwloc_reported);
}

}  // namespace
}  // namespace ccscope::topo
