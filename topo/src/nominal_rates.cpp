#include "ccscope/topo/nominal_rates.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "ccscope/common/text.h"
#include "text.h"

namespace ccscope::topo {
namespace {

// GT/s per lane and the encoding's payload share: gen1/2 8b/10b, gen3-5
// 128b/130b, gen6 PAM4 with 256-byte FLITs of which 242 carry payload (the
// rest CRC and FEC), the usual nominal figure.
struct PcieGeneration {
  int generation;
  double gigatransfers;
  double payload_share;
  const char* encoding;
};
constexpr PcieGeneration kPcie[] = {
    {1, 2.5, 8.0 / 10.0, "8b/10b"},        {2, 5.0, 8.0 / 10.0, "8b/10b"},
    {3, 8.0, 128.0 / 130.0, "128b/130b"},  {4, 16.0, 128.0 / 130.0, "128b/130b"},
    {5, 32.0, 128.0 / 130.0, "128b/130b"}, {6, 64.0, 242.0 / 256.0, "PAM4 FLIT 242/256"},
};

// Per link and direction: NVLink1 (P100) 20 GB/s; NVLink2 (V100), 3 (A100) and
// 4 (H100/H200) 25 GB/s; NVLink5 (B200) 50 GB/s.
constexpr double kNvlinkGBps[] = {0, 20, 25, 25, 25, 50};

}  // namespace

double pcie_lane_GBps(int generation) {
  for (const PcieGeneration& g : kPcie)
    if (g.generation == generation) return g.gigatransfers * g.payload_share / 8.0;
  return 0;
}

double pcie_GBps(int generation, int width) {
  return width > 0 ? pcie_lane_GBps(generation) * width : 0;
}

double nvlink_link_GBps(int version) {
  return version >= 1 && version <= 5 ? kNvlinkGBps[version] : 0;
}

int nvlink_version_of_model(const std::string& gpu_name) {
  const std::string name = ascii_lower(gpu_name);
  // Longest, most specific markers first ("gh200" before "h200").
  static const std::pair<const char*, int> kModels[] = {
      {"gb200", 5}, {"b200", 5}, {"b100", 5}, {"gh200", 4}, {"h200", 4}, {"h100", 4},
      {"h800", 4},  {"a100", 3}, {"a800", 3}, {"v100", 2},  {"p100", 1},
  };
  for (const auto& [marker, version] : kModels)
    if (name.find(marker) != std::string::npos) return version;
  return 0;
}

double port_GBps(double Gbps) { return Gbps > 0 ? Gbps / 8.0 : 0; }

const std::vector<NominalRate>& nominal_rate_table() {
  static const std::vector<NominalRate> table = [] {
    std::vector<NominalRate> rows;
    for (const PcieGeneration& g : kPcie)
      rows.push_back({"PCIe gen" + std::to_string(g.generation) + " (per lane)",
                      g.gigatransfers * g.payload_share / 8.0,
                      text::general(g.gigatransfers) + " GT/s, " + g.encoding});
    const char* kNvlinkGpus[] = {"", "P100", "V100", "A100", "H100/H200", "B200"};
    for (int v = 1; v <= 5; ++v)
      rows.push_back(
          {"NVLink" + std::to_string(v) + " (per link)", kNvlinkGBps[v], kNvlinkGpus[v]});
    rows.push_back({"network port (Ethernet speed, IB rate)", 0,
                    "line rate in Gbit/s / 8, the lower of it and a tc shaper's rate"});
    return rows;
  }();
  return table;
}

}  // namespace ccscope::topo
