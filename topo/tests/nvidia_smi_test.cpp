// nvidia-smi topo -m and nvlink -s text as pasted into bug reports
// (topo/tests/data/nvidia-smi-*, written from what nvidia-smi prints: the
// tab-aligned matrix with escapes, NIC rows and legend, GPU NUMA ID; the old
// space-aligned one with SOC and a device-named NIC column inside collect_env
// output; the GPU machine's own 1-GPU matrix): the matrix, the model, findings.
#include "ccscope/topo/nvidia_smi.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ccscope/topo/nccl_env.h"
#include "ccscope/topo/paths.h"
#include "test_files.h"

namespace ccscope::topo {
namespace {

using test::slurp;
std::string data(const std::string& name) {
  return slurp(std::string(CCSCOPE_TOPO_TEST_DATA) + "/" + name);
}

std::vector<std::string> checks(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  for (const auto& f : findings) out.push_back(f.check + ":" + severity_name(f.severity));
  return out;
}

using Strings = std::vector<std::string>;

TEST(NvidiaSmi, HgxMatrixWithNicsAndNvlinkStatus) {
  const auto m = find_nvidia_smi_topo(data("nvidia-smi-topo-m-hgx4-nic.txt"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->devices, (Strings{"GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1"}));
  EXPECT_EQ(m->cells[0][3], "NV16");
  EXPECT_EQ(m->cpu_affinity.at("GPU2"), "48-95,144-191");
  EXPECT_EQ(m->numa_affinity.at("GPU2"), "1");
  EXPECT_EQ(m->nic_names.at("NIC1"), "mlx5_1");
  const auto links = find_nvidia_smi_nvlink_status(data("nvidia-smi-nvlink-s-hgx4.txt"));
  ASSERT_EQ(links.size(), 4u);
  EXPECT_EQ(links[3].link_GBps, (std::vector<double>{26.562, 0, 26.562}));
  // GPU3 has 48 NVLinks in the matrix, the others 52; GPU3's link 1 is down.
  EXPECT_EQ(checks(check_nvidia_smi(*m, links)),
            (Strings{"nvidia_smi.uneven_nvlinks:warn", "nvidia_smi.uneven_nvlinks:warn",
                     "nvidia_smi.nvlink_inactive:warn"}));
  EXPECT_NE(check_nvidia_smi(*m, links)[0].message.find("GPU3 48"), std::string::npos);
  const auto host = topology_from_nvidia_smi(*m, links);
  ASSERT_EQ(host.gpus.size(), 4u);
  EXPECT_EQ(host.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(host.nics.size(), 2u);
  EXPECT_EQ(host.nics[1].name, "mlx5_1");
  const auto paths = gpu_pair_paths(host, NcclEnvironment{});
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths[0].token(), "NV18");  // GPU0-GPU1
  EXPECT_GT(paths[0].expected_GBps, 400.0);
}

TEST(NvidiaSmi, OldPcieTwoSocketMatrixInsideCollectEnv) {
  const auto text = data("nvidia-smi-topo-m-pcie-2socket-collect-env.txt");
  const auto m = find_nvidia_smi_topo(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->devices, (Strings{"GPU0", "GPU1", "GPU2", "GPU3", "mlx5_0"}));
  const auto findings = check_nvidia_smi(*m, find_nvidia_smi_nvlink_status(text));
  EXPECT_EQ(checks(findings),
            (Strings{"nvidia_smi.pcie_only:warn", "nvidia_smi.gpus_across_sockets:warn",
                     "nvidia_smi.nic_far_from_gpu:warn"}));
  EXPECT_NE(findings[1].message.find("4 GPU pair(s)"), std::string::npos) << findings[1].message;
  EXPECT_NE(findings[2].message.find("GPU2, GPU3: the nearest NIC is on the other CPU socket"),
            std::string::npos)
      << findings[2].message;
  const auto host = topology_from_nvidia_smi(*m);
  const auto paths = gpu_pair_paths(host, NcclEnvironment{});
  ASSERT_EQ(paths.size(), 6u);
  EXPECT_EQ(paths[0].token(), "PIX");  // GPU0-GPU1
  EXPECT_EQ(paths[1].token(), "SYS");  // GPU0-GPU2, SOC in the old words
  EXPECT_EQ(host.nics[0].name, "mlx5_0");
}

// The GPU machine's matrix (one H200): read, nothing to say.
TEST(NvidiaSmi, TheGpuMachinesOneGpuMatrix) {
  const auto m = find_nvidia_smi_topo(data("nvidia-smi-topo-m-h200-vm.txt"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->devices, Strings{"GPU0"});
  EXPECT_EQ(m->cpu_affinity.at("GPU0"), "0-15");
  EXPECT_TRUE(check_nvidia_smi(*m).empty());
  EXPECT_EQ(topology_from_nvidia_smi(*m).gpus.size(), 1u);
}

TEST(NvidiaSmi, NoMatrixInOtherTextOrACutOne) {
  EXPECT_FALSE(find_nvidia_smi_topo("hello\nGPU0 is fine\n"));
  EXPECT_FALSE(find_nvidia_smi_topo("\tGPU0\tGPU1\nGPU0\t X \tNV4\n"));  // row GPU1 missing
  EXPECT_FALSE(find_nvidia_smi_topo("\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X \n"));
  EXPECT_TRUE(find_nvidia_smi_nvlink_status("no links here").empty());
}

// nvlink -s's per-link speeds into the model: the signalling rate taken as the
// generation's data rate, a link trained slower lowering its GPU's paths, and named.
TEST(NvidiaSmi, NvlinkSpeedsFeedTheExpectedBandwidth) {
  EXPECT_DOUBLE_EQ(nvlink_effective_GBps(26.562, 4), 25.0);  // H100: NVLink4's 25 GB/s
  EXPECT_DOUBLE_EQ(nvlink_effective_GBps(26.562, 0), 25.0);  // model unknown: nearest below
  EXPECT_DOUBLE_EQ(nvlink_effective_GBps(53.125, 0), 50.0);
  EXPECT_DOUBLE_EQ(nvlink_effective_GBps(13.281, 4), 13.281);  // trained slower
  EXPECT_DOUBLE_EQ(nvlink_effective_GBps(0, 4), 0.0);
  const std::string matrix =
      "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
      "GPU0\t X \tNV2\t0-31\t0\n"
      "GPU1\tNV2\t X \t0-31\t0\n";
  const std::string healthy =
      "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n"
      "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 "
      "GB/s\n";
  std::string degraded = healthy;
  degraded.replace(degraded.rfind("26.562"), 6, "13.281");  // GPU1 link 1 at half speed
  const auto m = find_nvidia_smi_topo(matrix);
  ASSERT_TRUE(m);
  const auto expected = [&](const std::string& nvlink_s) {
    const auto paths = gpu_pair_paths(
        topology_from_nvidia_smi(*m, find_nvidia_smi_nvlink_status(nvlink_s)), NcclEnvironment{});
    EXPECT_EQ(paths.at(0).token(), "NV2");
    return paths.at(0).expected_GBps;
  };
  EXPECT_DOUBLE_EQ(expected(healthy), 50.0);  // 2 x 25
  // GPU1's links average 19.14 GB/s: the pair's 2 links 38.3 GB/s.
  EXPECT_NEAR(expected(degraded), 2 * (25 + 13.281) / 2, 1e-9);
  EXPECT_EQ(checks(check_nvidia_smi(*m, find_nvidia_smi_nvlink_status(healthy))), Strings{});
  const auto findings = check_nvidia_smi(*m, find_nvidia_smi_nvlink_status(degraded));
  EXPECT_EQ(checks(findings), (Strings{"nvidia_smi.nvlink_slow:warn"}));
  EXPECT_NE(findings.at(0).message.find("GPU1 link 1 13.3 GB/s"), std::string::npos)
      << findings.at(0).message;
}

}  // namespace
}  // namespace ccscope::topo
