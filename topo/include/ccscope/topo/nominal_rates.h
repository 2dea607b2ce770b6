#pragma once
// The one table of nominal link rates every expected figure comes from
// (docs/topo.md, "Expected bandwidth"). Figures are per direction, in GB/s (1e9 B/s),
// after line encoding; what a link delivers in practice is lower (protocol
// headers, flow control), which is why bench reports a percentage, not a pass.
#include <string>
#include <vector>

namespace ccscope::topo {

struct NominalRate {
  std::string link;   // "PCIe gen4 (per lane)", "NVLink3 (per link)", "Ethernet/IB port"
  double GBps;        // per direction
  std::string basis;  // "16 GT/s, 128b/130b"
};
const std::vector<NominalRate>& nominal_rate_table();

// PCIe: lanes x per-lane rate of the generation; 0 for an unknown generation/width.
double pcie_lane_GBps(int generation);
double pcie_GBps(int generation, int width);
// NVLink: per link, per direction, of a generation (1-5); 0 unknown.
double nvlink_link_GBps(int version);
// The NVLink generation of a GPU model by name ("Tesla V100-SXM3-32GB" -> 2,
// "NVIDIA H200" -> 4); 0 when the name says nothing.
int nvlink_version_of_model(const std::string& gpu_name);
// A network port of `Gbps` line rate (Ethernet speed, IB port rate), in GB/s.
double port_GBps(double Gbps);

}  // namespace ccscope::topo
