// read_nvml through the NVML stand-in (standin/nvml/): the machines of
// data/nvml/*.conf, merging with GPUs another source found, and the ways a
// machine can fail to have NVML.
#include "ccscope/topo/nvml.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace ccscope::topo {
namespace {

const std::string kFakeNvml = CCSCOPE_FAKE_NVML_LIBRARY;

std::string config_path(const std::string& name) {
  return std::string(CCSCOPE_TOPO_TEST_DATA) + "/nvml/" + name;
}

// Sets an environment variable for one test and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// What NVML says about the machine of data/nvml/<config>, read into `into`.
SourceStatus read_fake(const std::string& config, HostTopology& into) {
  ScopedEnv env("CCSCOPE_STANDIN_NVML", config_path(config));
  ScopedEnv old_name("CCSCOPE_FAKE_NVML_CONFIG", std::nullopt);
  return read_nvml(into, kFakeNvml);
}

const HostTopology::GpuAncestor* find_ancestor(const HostTopology& topology, int a, int b) {
  for (const HostTopology::GpuAncestor& ancestor : topology.gpu_ancestors)
    if ((ancestor.gpu_a == a && ancestor.gpu_b == b) ||
        (ancestor.gpu_a == b && ancestor.gpu_b == a))
      return &ancestor;
  return nullptr;
}

TEST(Nvml, ReadsTheH200MachineCompletely) {
  HostTopology topology;
  const SourceStatus status = read_fake("h200-vm.conf", topology);
  EXPECT_TRUE(status.read) << status.detail;
  EXPECT_EQ(status.name, "nvml");
  EXPECT_EQ(status.detail, "NVML, driver 580.159.04, 1 GPU");
  EXPECT_EQ(topology.driver_version, "580.159.04");
  EXPECT_EQ(topology.cuda_version, "13.0");
  ASSERT_EQ(topology.gpus.size(), 1u);
  const Gpu& gpu = topology.gpus[0];
  EXPECT_EQ(gpu.index, 0);
  EXPECT_EQ(gpu.name, "NVIDIA H200");
  EXPECT_EQ(gpu.uuid, "GPU-65ab6dfb-face-c420-70e5-561e9c3d3860");
  EXPECT_EQ(gpu.pci.bus_id, "0000:00:06.0");
  EXPECT_EQ(gpu.pcie_current.generation, 5);
  EXPECT_EQ(gpu.pcie_current.width, 16);
  EXPECT_EQ(gpu.pcie_max.generation, 5);
  EXPECT_EQ(gpu.pcie_max.width, 16);
  EXPECT_EQ(gpu.pci.link.generation, 5);
  EXPECT_EQ(gpu.pci.link.width, 16);
  EXPECT_EQ(gpu.cuda_compute_capability, 90);
  EXPECT_TRUE(gpu.nvlinks.empty());
  EXPECT_TRUE(topology.gpu_ancestors.empty());
  EXPECT_TRUE(topology.notes.empty());
  // The status is also the topology's one "nvml" source, however often NVML is read.
  read_fake("h200-vm.conf", topology);
  ASSERT_EQ(topology.sources.size(), 1u);
  EXPECT_EQ(topology.sources[0].name, "nvml");
  EXPECT_TRUE(topology.sources[0].read);
  EXPECT_EQ(topology.gpus.size(), 1u);
}

TEST(Nvml, ShutsNvmlDownAfterReading) {
  // The test's own reference keeps the stand-in (and its counter) loaded across read_nvml.
  void* fake = dlopen(kFakeNvml.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(fake, nullptr) << dlerror();
  auto init_count = reinterpret_cast<int (*)()>(dlsym(fake, "ccscope_standin_nvml_init_count"));
  ASSERT_NE(init_count, nullptr);
  HostTopology topology;
  EXPECT_TRUE(read_fake("a100-nvlink-4gpu.conf", topology).read);
  EXPECT_EQ(init_count(), 0);
  dlclose(fake);
}

TEST(Nvml, ReadsNvLinksAncestorsAndPcieFigures) {
  HostTopology topology;
  const SourceStatus status = read_fake("a100-nvlink-4gpu.conf", topology);
  EXPECT_TRUE(status.read) << status.detail;
  EXPECT_EQ(status.detail, "NVML, driver 535.129.03, 4 GPUs");
  EXPECT_EQ(topology.cuda_version, "12.2");
  ASSERT_EQ(topology.gpus.size(), 4u);
  const char* bus_ids[] = {"0000:18:00.0", "0000:2a:00.0", "0000:ba:00.0", "0000:db:00.0"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(topology.gpus[i].index, i);
    EXPECT_EQ(topology.gpus[i].pci.bus_id, bus_ids[i]);
    EXPECT_EQ(topology.gpus[i].cuda_compute_capability, 80);
  }

  // GPU0: links 0 and 1 to GPU1, link 2 to GPU2; NVML_NVLINK_VERSION_3_1 is NVLink 3.
  const Gpu& gpu0 = topology.gpus[0];
  ASSERT_EQ(gpu0.nvlinks.size(), 3u);
  for (int link = 0; link < 3; ++link) {
    EXPECT_EQ(gpu0.nvlinks[link].link, link);
    EXPECT_TRUE(gpu0.nvlinks[link].active);
    EXPECT_EQ(gpu0.nvlinks[link].version, 3);
    EXPECT_FALSE(gpu0.nvlinks[link].remote_is_switch);
    EXPECT_EQ(gpu0.nvlinks[link].bandwidth_GBps, 0);  // NVML does not state it
  }
  EXPECT_EQ(gpu0.nvlinks[0].remote_bus_id, "0000:2a:00.0");
  EXPECT_EQ(gpu0.nvlinks[1].remote_bus_id, "0000:2a:00.0");
  EXPECT_EQ(gpu0.nvlinks[2].remote_bus_id, "0000:ba:00.0");

  // GPU1's link 3 is down but leads to GPU2: kept, inactive. Its links 4..17
  // (down, leading nowhere) are not.
  const Gpu& gpu1 = topology.gpus[1];
  ASSERT_EQ(gpu1.nvlinks.size(), 4u);
  EXPECT_EQ(gpu1.nvlinks[3].link, 3);
  EXPECT_FALSE(gpu1.nvlinks[3].active);
  EXPECT_EQ(gpu1.nvlinks[3].remote_bus_id, "0000:ba:00.0");
  EXPECT_EQ(topology.gpus[2].nvlinks.size(), 3u);
  EXPECT_EQ(topology.gpus[3].nvlinks.size(), 3u);

  // GPU3 trained at x8 in an x16 slot: both figures kept.
  const Gpu& gpu3 = topology.gpus[3];
  EXPECT_EQ(gpu3.pcie_current.generation, 4);
  EXPECT_EQ(gpu3.pcie_current.width, 8);
  EXPECT_EQ(gpu3.pcie_max.generation, 4);
  EXPECT_EQ(gpu3.pcie_max.width, 16);
  EXPECT_EQ(gpu3.pci.link.width, 8);

  // Every pair NVML answered for, in nvidia-smi's words; 35 is no level.
  EXPECT_EQ(topology.gpu_ancestors.size(), 5u);
  auto level = [&](int a, int b) -> std::string {
    const HostTopology::GpuAncestor* ancestor = find_ancestor(topology, a, b);
    return ancestor ? ancestor->level : "(none)";
  };
  EXPECT_EQ(level(0, 1), "PIX");
  EXPECT_EQ(level(0, 2), "NODE");
  EXPECT_EQ(level(0, 3), "SYS");
  EXPECT_EQ(level(1, 2), "(none)");
  EXPECT_EQ(level(1, 3), "PHB");
  EXPECT_EQ(level(2, 3), "PXB");
  ASSERT_EQ(topology.notes.size(), 1u);
  EXPECT_NE(topology.notes[0].find("unknown common-ancestor level 35"), std::string::npos)
      << topology.notes[0];
}

TEST(Nvml, SkipsAGpuItCannotOpenAndNamesBoardInternalPairsPix) {
  HostTopology topology;
  const SourceStatus status = read_fake("tesla-k80-2board.conf", topology);
  EXPECT_TRUE(status.read) << status.detail;
  EXPECT_EQ(status.detail, "NVML, driver 470.256.02, 3 GPUs");
  ASSERT_EQ(topology.gpus.size(), 3u);
  EXPECT_EQ(topology.gpus[2].index, 2);
  EXPECT_EQ(topology.gpus[2].pci.bus_id, "0000:84:00.0");
  EXPECT_EQ(topology.gpus[2].cuda_compute_capability, 37);
  ASSERT_EQ(topology.notes.size(), 1u);
  EXPECT_EQ(topology.notes[0], "NVML: GPU 3: GPU is lost");
  // NVML_TOPOLOGY_INTERNAL: the two GPUs of one board, behind its own switch.
  EXPECT_EQ(topology.gpu_ancestors.size(), 3u);
  const HostTopology::GpuAncestor* same_board = find_ancestor(topology, 0, 1);
  ASSERT_NE(same_board, nullptr);
  EXPECT_EQ(same_board->level, "PIX");
  const HostTopology::GpuAncestor* other_board = find_ancestor(topology, 1, 2);
  ASSERT_NE(other_board, nullptr);
  EXPECT_EQ(other_board->level, "PHB");
}

TEST(Nvml, ADriverWithoutAGpuIsNotRead) {
  HostTopology topology;
  const SourceStatus status = read_fake("no-gpu.conf", topology);
  EXPECT_FALSE(status.read);
  EXPECT_EQ(status.detail, "NVML, driver 580.159.04: no GPU");
  EXPECT_EQ(topology.driver_version, "580.159.04");  // still true of the machine
  EXPECT_TRUE(topology.gpus.empty());
}

TEST(Nvml, TellsNvSwitchesFromGpusByTheRemoteDeviceType) {
  HostTopology topology;
  EXPECT_TRUE(read_fake("h100-nvswitch.conf", topology).read);
  ASSERT_EQ(topology.gpus.size(), 2u);
  const Gpu& gpu0 = topology.gpus[0];
  ASSERT_EQ(gpu0.nvlinks.size(), 3u);
  EXPECT_TRUE(gpu0.nvlinks[0].remote_is_switch);
  EXPECT_EQ(gpu0.nvlinks[0].remote_bus_id, "0000:c1:00.0");
  EXPECT_TRUE(gpu0.nvlinks[1].remote_is_switch);
  EXPECT_FALSE(gpu0.nvlinks[2].remote_is_switch);
  EXPECT_EQ(gpu0.nvlinks[2].version, 4);  // NVML_NVLINK_VERSION_4_0
  const HostTopology::GpuAncestor* ancestor = find_ancestor(topology, 0, 1);
  ASSERT_NE(ancestor, nullptr);
  EXPECT_EQ(ancestor->level, "SYS");
}

TEST(Nvml, WithoutTheRemoteDeviceTypeAFarEndThatIsNoGpuIsASwitch) {
  // The old-driver file declares the types the wrong way round: they must not be read.
  HostTopology topology;
  const SourceStatus status = read_fake("h100-nvswitch-old-driver.conf", topology);
  EXPECT_TRUE(status.read) << status.detail;
  EXPECT_EQ(topology.cuda_version, "");  // nvmlSystemGetCudaDriverVersion missing: unknown
  ASSERT_EQ(topology.gpus.size(), 2u);
  for (const Gpu& gpu : topology.gpus) {
    ASSERT_EQ(gpu.nvlinks.size(), 3u);
    EXPECT_TRUE(gpu.nvlinks[0].remote_is_switch);
    EXPECT_TRUE(gpu.nvlinks[1].remote_is_switch);
    EXPECT_FALSE(gpu.nvlinks[2].remote_is_switch);
  }
  // Figures NVML does not support stay unknown.
  const Gpu& gpu1 = topology.gpus[1];
  EXPECT_EQ(gpu1.name, "NVIDIA H100 80GB HBM3");
  EXPECT_FALSE(gpu1.pcie_current.known());
  EXPECT_FALSE(gpu1.pcie_max.known());
  EXPECT_FALSE(gpu1.pci.link.known());
  EXPECT_EQ(gpu1.cuda_compute_capability, 0);
}

TEST(Nvml, WithoutTheRemoteDeviceTypeAGpuNvmlCannotOpenIsNoSwitch) {
  // Three A100s joined directly (no NVSwitch), GPUs 0 and 1 each only to GPU 2,
  // which NVML lists but cannot open; an old driver gives no remote type. GPU 2
  // is on the PCI bus, where hwloc finds it: its far ends are a GPU's, so GPUs
  // 0 and 1 have no NVLink path to each other (not "NV2 via NVSwitch").
  const std::filesystem::path config = std::filesystem::temp_directory_path() /
                                       ("nvml-lost-peer-" + std::to_string(getpid()) + ".conf");
  std::ofstream(config) << "driver 470.256.02\n"
                           "missing nvmlDeviceGetNvLinkRemoteDeviceType\n"
                           "gpu 00000000:18:00.0 GPU-0 4 4 16 16 8 0 NVIDIA A100-SXM4-40GB\n"
                           "gpu 00000000:2A:00.0 GPU-1 4 4 16 16 8 0 NVIDIA A100-SXM4-40GB\n"
                           "gpu 00000000:BA:00.0 GPU-2 4 4 16 16 8 0 NVIDIA A100-SXM4-40GB\n"
                           "nvlink 0-1 0-1 1 5 00000000:BA:00.0 gpu\n"
                           "lost 2\n";
  HostTopology topology;
  Gpu from_hwloc;
  from_hwloc.pci.bus_id = "0000:ba:00.0";
  topology.gpus.push_back(from_hwloc);
  SourceStatus status;
  {
    ScopedEnv env("CCSCOPE_STANDIN_NVML", config.string());
    ScopedEnv old_name("CCSCOPE_FAKE_NVML_CONFIG", std::nullopt);
    status = read_nvml(topology, kFakeNvml);
  }
  std::filesystem::remove(config);
  EXPECT_TRUE(status.read) << status.detail;
  ASSERT_EQ(topology.gpus.size(), 3u);  // NVML's two, then hwloc's
  for (int index : {0, 1}) {
    const Gpu& gpu = topology.gpus[static_cast<size_t>(index)];
    EXPECT_EQ(gpu.index, index);
    ASSERT_EQ(gpu.nvlinks.size(), 2u);
    for (const NvLink& link : gpu.nvlinks) {
      EXPECT_EQ(link.remote_bus_id, "0000:ba:00.0");
      EXPECT_FALSE(link.remote_is_switch) << "GPU " << index << " link " << link.link;
    }
  }
}

TEST(Nvml, CompletesAGpuAnotherSourceFoundInsteadOfAddingIt) {
  // As the hwloc reader leaves the H200 VM: placement and link, no NVML figures.
  HostTopology topology;
  Gpu from_hwloc;
  from_hwloc.pci.bus_id = "0000:00:06.0";
  from_hwloc.pci.path = {{PciHop::Kind::kHostBridge, "hostbridge0"}};
  from_hwloc.pci.numa_node = 0;
  from_hwloc.pci.link = {5, 16};
  from_hwloc.name = "GH100 [H200 SXM 141GB]";
  topology.gpus.push_back(from_hwloc);
  Gpu other;  // a GPU NVML does not list (another source's): kept, after NVML's
  other.pci.bus_id = "0000:80:00.0";
  topology.gpus.push_back(other);

  const SourceStatus status = read_fake("h200-vm.conf", topology);
  EXPECT_TRUE(status.read) << status.detail;
  ASSERT_EQ(topology.gpus.size(), 2u);
  const Gpu& gpu = topology.gpus[0];
  EXPECT_EQ(gpu.pci.bus_id, "0000:00:06.0");
  EXPECT_EQ(gpu.index, 0);
  EXPECT_EQ(gpu.name, "NVIDIA H200");
  EXPECT_EQ(gpu.uuid, "GPU-65ab6dfb-face-c420-70e5-561e9c3d3860");
  EXPECT_EQ(gpu.pcie_current.width, 16);
  EXPECT_EQ(gpu.pcie_max.generation, 5);
  EXPECT_EQ(gpu.cuda_compute_capability, 90);
  ASSERT_EQ(gpu.pci.path.size(), 1u);  // what hwloc knew stays
  EXPECT_EQ(gpu.pci.path[0].id, "hostbridge0");
  EXPECT_EQ(gpu.pci.numa_node, 0);
  EXPECT_EQ(topology.gpus[1].pci.bus_id, "0000:80:00.0");
  EXPECT_EQ(topology.gpus[1].index, -1);
}

TEST(Nvml, MergedGpusEndInNvmlOrder) {
  // Found by another source in the opposite order, with no index.
  HostTopology topology;
  for (const char* bus_id : {"0000:db:00.0", "0000:2a:00.0"}) {
    Gpu gpu;
    gpu.pci.bus_id = bus_id;
    topology.gpus.push_back(gpu);
  }
  EXPECT_TRUE(read_fake("a100-nvlink-4gpu.conf", topology).read);
  ASSERT_EQ(topology.gpus.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(topology.gpus[i].index, i);
  EXPECT_EQ(topology.gpus[1].pci.bus_id, "0000:2a:00.0");
  EXPECT_EQ(topology.gpus[3].pci.bus_id, "0000:db:00.0");
}

TEST(Nvml, AMissingLibraryIsNamed) {
  HostTopology topology;
  const SourceStatus status = read_nvml(topology, "libccscope-no-such-nvml.so.1");
  EXPECT_FALSE(status.read);
  EXPECT_EQ(status.name, "nvml");
  EXPECT_EQ(status.detail.rfind("libccscope-no-such-nvml.so.1 not found (", 0), 0u)
      << status.detail;
  EXPECT_TRUE(topology.gpus.empty());
  ASSERT_NE(topology.source("nvml"), nullptr);
  EXPECT_FALSE(topology.source("nvml")->read);
}

TEST(Nvml, ALibraryWithoutNvmlInitIsNotNvml) {
  HostTopology topology;
  const SourceStatus status = read_nvml(topology, "libc.so.6");
  EXPECT_FALSE(status.read);
  EXPECT_EQ(status.detail, "libc.so.6 has no nvmlInit_v2");
}

TEST(Nvml, AFailedInitGivesNvmlsOwnMessage) {
  HostTopology topology;
  const SourceStatus status = read_fake("fail-init.conf", topology);
  EXPECT_FALSE(status.read);
  EXPECT_EQ(status.detail, "nvmlInit failed: Driver Not Loaded");
  EXPECT_TRUE(topology.gpus.empty());
  EXPECT_EQ(topology.driver_version, "");
}

TEST(Nvml, TheStandInRefusesAMissingOrMalformedConfig) {
  HostTopology topology;
  SourceStatus status = read_fake("no-such.conf", topology);
  EXPECT_FALSE(status.read);
  EXPECT_NE(status.detail.find("cannot open"), std::string::npos) << status.detail;
  status = read_fake("malformed.conf", topology);
  EXPECT_FALSE(status.read);
  EXPECT_NE(status.detail.find("malformed.conf:2"), std::string::npos) << status.detail;
  {
    ScopedEnv env("CCSCOPE_STANDIN_NVML", std::nullopt);
    ScopedEnv old_name("CCSCOPE_FAKE_NVML_CONFIG", std::nullopt);
    status = read_nvml(topology, kFakeNvml);
  }
  EXPECT_FALSE(status.read);
  EXPECT_NE(status.detail.find("CCSCOPE_STANDIN_NVML is not set"), std::string::npos)
      << status.detail;
  {
    // The old name and the documented one naming different machines: neither is guessed.
    ScopedEnv env("CCSCOPE_STANDIN_NVML", config_path("h200-vm.conf"));
    ScopedEnv old_name("CCSCOPE_FAKE_NVML_CONFIG", config_path("no-gpu.conf"));
    status = read_nvml(topology, kFakeNvml);
  }
  EXPECT_FALSE(status.read);
  EXPECT_NE(status.detail.find("name different files"), std::string::npos) << status.detail;
  EXPECT_TRUE(topology.gpus.empty());
}

TEST(Nvml, TheStandInStillReadsItsConfigByTheOldName) {
  ScopedEnv env("CCSCOPE_STANDIN_NVML", std::nullopt);
  ScopedEnv old_name("CCSCOPE_FAKE_NVML_CONFIG", config_path("h200-vm.conf"));
  HostTopology topology;
  EXPECT_TRUE(read_nvml(topology, kFakeNvml).read);
  ASSERT_EQ(topology.gpus.size(), 1u);
  EXPECT_EQ(topology.gpus[0].name, "NVIDIA H200");
}

TEST(Nvml, LibraryNameHonoursTheEnvironment) {
  {
    ScopedEnv env("CCSCOPE_NVML_LIBRARY", std::nullopt);
    EXPECT_EQ(nvml_library_name(), "libnvidia-ml.so.1");
  }
  {
    ScopedEnv env("CCSCOPE_NVML_LIBRARY", "/opt/test/libfake-nvml.so");
    EXPECT_EQ(nvml_library_name(), "/opt/test/libfake-nvml.so");
  }
  {
    ScopedEnv env("CCSCOPE_NVML_LIBRARY", "");  // set but empty: the driver's library
    EXPECT_EQ(nvml_library_name(), "libnvidia-ml.so.1");
  }
  {
    // The default argument goes through it: the stand-in answers.
    ScopedEnv library("CCSCOPE_NVML_LIBRARY", kFakeNvml);
    ScopedEnv config("CCSCOPE_STANDIN_NVML", config_path("h200-vm.conf"));
    ScopedEnv old_name("CCSCOPE_FAKE_NVML_CONFIG", std::nullopt);
    HostTopology topology;
    EXPECT_TRUE(read_nvml(topology).read);
    EXPECT_EQ(topology.gpus.size(), 1u);
  }
}

}  // namespace
}  // namespace ccscope::topo
