// `nvidia-smi topo -m` and `nvidia-smi nvlink -s` as users paste them. The
// matrix's header names the devices (GPUn, NICn; old drivers name NICs by
// their device, "mlx5_0"), then "CPU Affinity", "NUMA Affinity" and (newer)
// "GPU NUMA ID"; each row is a device, its cells, and for GPUs the affinities.
// Cells are single words (X, NV#, PIX, PXB, PHB, NODE, SYS; SOC in old
// output), so tab- or space-aligned rows split the same way.
#include "ccscope/topo/nvidia_smi.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "ccscope/topo/nominal_rates.h"

namespace ccscope::topo {
namespace {

// The line without colour escapes ("\x1b[4m"), CRs and a markdown quote or
// table border, its words.
std::vector<std::string> words_of(std::string_view line) {
  std::string clean;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b') {
      while (i < line.size() && !std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
      continue;
    }
    if (line[i] != '\r') clean += line[i];
  }
  for (const auto& [from, to] :
       {std::pair{"CPU Affinity", "CPU_Affinity"}, std::pair{"NUMA Affinity", "NUMA_Affinity"},
        std::pair{"GPU NUMA ID", "GPU_NUMA_ID"}})
    for (size_t at; (at = clean.find(from)) != std::string::npos;)
      clean.replace(at, std::string_view(from).size(), to);
  std::vector<std::string> out;
  size_t i = 0;
  while (i < clean.size()) {
    while (i < clean.size() && std::isspace(static_cast<unsigned char>(clean[i]))) ++i;
    size_t j = i;
    while (j < clean.size() && !std::isspace(static_cast<unsigned char>(clean[j]))) ++j;
    if (j > i) out.push_back(clean.substr(i, j - i));
    i = j;
  }
  while (!out.empty() && (out.front() == ">" || out.front() == "|")) out.erase(out.begin());
  return out;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool is_column_word(const std::string& w) {
  return w == "CPU_Affinity" || w == "NUMA_Affinity" || w == "GPU_NUMA_ID";
}

// PCIe distance, nearest first; NVLink below all; -1 not a level.
int level_rank(const std::string& cell) {
  if (cell.rfind("NV", 0) == 0) return 0;
  static const char* kLevels[] = {"PIX", "PXB", "PHB", "NODE", "SYS"};
  for (int i = 0; i < 5; ++i)
    if (cell == kLevels[i]) return i + 1;
  if (cell == "SOC") return 5;  // old drivers' word for SYS
  return -1;
}
int nvlinks_in(const std::string& cell) {
  if (cell.rfind("NV", 0) != 0) return 0;
  return std::atoi(cell.c_str() + 2);
}
int gpu_number(const std::string& device) { return std::atoi(device.c_str() + 3); }

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

std::optional<NvidiaSmiMatrix> find_nvidia_smi_topo(std::string_view text) {
  const auto lines = lines_of(text);
  for (size_t h = 0; h < lines.size(); ++h) {
    const auto header = words_of(lines[h]);
    if (header.empty() || header[0] != "GPU0") continue;
    NvidiaSmiMatrix m;
    for (const auto& w : header) {
      if (is_column_word(w)) break;
      m.devices.push_back(w);
    }
    // The rows, in the header's order.
    size_t row = 0;
    for (size_t l = h + 1; l < lines.size() && row < m.devices.size(); ++l) {
      const auto w = words_of(lines[l]);
      if (w.empty()) continue;
      if (w[0] != m.devices[row] || w.size() < m.devices.size() + 1) break;
      m.cells.emplace_back(w.begin() + 1, w.begin() + 1 + m.devices.size());
      if (w.size() > m.devices.size() + 1) m.cpu_affinity[w[0]] = w[m.devices.size() + 1];
      if (w.size() > m.devices.size() + 2) m.numa_affinity[w[0]] = w[m.devices.size() + 2];
      ++row;
    }
    if (row != m.devices.size()) continue;  // not a whole matrix: look further
    bool cells_ok = true;
    for (size_t r = 0; r < row; ++r)
      for (size_t c = 0; c < row; ++c)
        cells_ok &= r == c ? m.cells[r][c] == "X" : level_rank(m.cells[r][c]) >= 0;
    if (!cells_ok) continue;
    // "NIC Legend:" then "  NIC0: mlx5_0".
    for (size_t l = h + row + 1; l < lines.size() && l < h + row + 80; ++l) {
      const auto w = words_of(lines[l]);
      if (w.size() == 2 && w[0].size() > 4 && w[0].rfind("NIC", 0) == 0 && w[0].back() == ':')
        m.nic_names[w[0].substr(0, w[0].size() - 1)] = w[1];
    }
    return m;
  }
  return std::nullopt;
}

std::vector<NvidiaSmiNvlinkStatus> find_nvidia_smi_nvlink_status(std::string_view text) {
  std::vector<NvidiaSmiNvlinkStatus> out;
  for (const auto line : lines_of(text)) {
    const auto w = words_of(line);
    // "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"
    if (w.size() >= 3 && w[0] == "GPU" && !w[1].empty() && w[1].back() == ':' &&
        std::isdigit(static_cast<unsigned char>(w[1][0]))) {
      NvidiaSmiNvlinkStatus s;
      s.gpu = std::atoi(w[1].c_str());
      for (size_t i = 2; i < w.size() && w[i].rfind("(UUID", 0) != 0; ++i)
        s.name += (s.name.empty() ? "" : " ") + w[i];
      out.push_back(s);
      continue;
    }
    // "Link 0: 26.562 GB/s" or "Link 3: <inactive>"
    if (!out.empty() && w.size() >= 3 && w[0] == "Link" && !w[1].empty() && w[1].back() == ':')
      out.back().link_GBps.push_back(w[2] == "<inactive>" ? 0.0 : std::atof(w[2].c_str()));
  }
  return out;
}

double nvlink_effective_GBps(double stated_GBps, int model_version) {
  if (!(stated_GBps > 0)) return 0;
  double nominal = nvlink_link_GBps(model_version);
  if (nominal <= 0)
    // The signalling rate is up to ~7% above the data rate (26.5625 for 25 GB/s).
    for (int version = 1; version <= 5; ++version)
      if (nvlink_link_GBps(version) <= stated_GBps / 0.93)
        nominal = std::max(nominal, nvlink_link_GBps(version));
  return nominal > 0 ? std::min(stated_GBps, nominal) : stated_GBps;
}

HostTopology topology_from_nvidia_smi(const NvidiaSmiMatrix& m,
                                      const std::vector<NvidiaSmiNvlinkStatus>& nvlinks) {
  HostTopology host;
  const auto bus_of = [](int gpu) { return fmt::format("ffff:{:02x}:00.0", gpu); };
  for (size_t i = 0; i < m.devices.size(); ++i) {
    if (m.is_gpu(i)) {
      Gpu g;
      g.index = gpu_number(m.devices[i]);
      g.pci.bus_id = bus_of(g.index);
      for (const auto& s : nvlinks)
        if (s.gpu == g.index) g.name = s.name;
      for (size_t j = 0; j < m.devices.size(); ++j)
        if (j != i && m.is_gpu(j))
          for (int k = 0; k < nvlinks_in(m.cells[i][j]); ++k) {
            NvLink link;
            // nvlink -s's per-link speed is not the per-direction rate the
            // paths expect: the model (from the GPU's name) gives the rate.
            link.remote_bus_id = bus_of(gpu_number(m.devices[j]));
            g.nvlinks.push_back(link);
          }
      // nvlink -s's speeds, as the mean effective speed of the GPU's active links.
      const int version = nvlink_version_of_model(g.name);
      for (const auto& s : nvlinks) {
        if (s.gpu != g.index) continue;
        double sum = 0;
        size_t active = 0;
        for (double stated : s.link_GBps)
          if (stated > 0) {
            sum += nvlink_effective_GBps(stated, version);
            ++active;
          }
        if (active == 0) continue;
        for (NvLink& link : g.nvlinks) {
          link.bandwidth_GBps = sum / static_cast<double>(active);
          link.version = version;
        }
      }
      host.gpus.push_back(g);
    } else {
      Nic n;
      const auto legend = m.nic_names.find(m.devices[i]);
      n.name = legend != m.nic_names.end() ? legend->second : m.devices[i];
      n.rdma_device = n.name;
      host.nics.push_back(n);
    }
  }
  for (size_t i = 0; i < m.devices.size(); ++i)
    for (size_t j = i + 1; j < m.devices.size(); ++j)
      if (m.is_gpu(i) && m.is_gpu(j) && nvlinks_in(m.cells[i][j]) == 0)
        host.gpu_ancestors.push_back({gpu_number(m.devices[i]), gpu_number(m.devices[j]),
                                      m.cells[i][j] == "SOC" ? "SYS" : m.cells[i][j]});
  host.notes.push_back("from nvidia-smi topo -m: no PCI bus ids, GPU N stands as ffff:NN:00.0");
  host.sources.push_back({"nvidia-smi", true, "topo -m"});
  number_unindexed_gpus(host);
  return host;
}

std::vector<Finding> check_nvidia_smi(const NvidiaSmiMatrix& m,
                                      const std::vector<NvidiaSmiNvlinkStatus>& nvlinks) {
  std::vector<Finding> out;
  const auto add = [&](Finding::Severity severity, const char* check, std::string message,
                       std::string remedy) {
    out.push_back(
        {severity, "", std::string("nvidia_smi.") + check, std::move(message), std::move(remedy)});
  };
  std::vector<size_t> gpus, nics;
  for (size_t i = 0; i < m.devices.size(); ++i) (m.is_gpu(i) ? gpus : nics).push_back(i);
  // NVLink between GPUs, per GPU and at all.
  std::map<std::string, int> links_of;
  bool any_nvlink = false;
  std::vector<std::string> across;
  for (const size_t i : gpus)
    for (const size_t j : gpus) {
      if (i == j) continue;
      links_of[m.devices[i]] += nvlinks_in(m.cells[i][j]);
      any_nvlink |= nvlinks_in(m.cells[i][j]) > 0;
      if (i < j && level_rank(m.cells[i][j]) == 5)
        across.push_back(m.devices[i] + "-" + m.devices[j]);
    }
  if (gpus.size() >= 2 && !any_nvlink)
    add(Finding::Severity::kWarn, "pcie_only",
        fmt::format("{} GPUs and no NVLink between any two: PCIe only", gpus.size()),
        "on SXM/HGX boards NVLink is expected: check nvidia-smi nvlink -s, nvidia-fabricmanager "
        "and the NVSwitch driver; on PCIe cards expect PCIe rates between GPUs");
  if (!across.empty())
    add(Finding::Severity::kWarn, "gpus_across_sockets",
        fmt::format("{} GPU pair(s) meet only across the CPU sockets (SYS): {}", across.size(),
                    join(across)),
        "their traffic crosses the CPU interconnect (QPI/UPI/xGMI): keep a job's GPUs on one "
        "socket (CUDA_VISIBLE_DEVICES) or expect lower GPU-GPU bandwidth");
  // Each GPU's nearest NIC.
  if (!nics.empty()) {
    std::map<int, std::vector<std::string>> by_level;  // 3 PHB, 4 NODE, 5 SYS
    for (const size_t g : gpus) {
      int best = 99;
      for (const size_t n : nics) best = std::min(best, level_rank(m.cells[g][n]));
      if (best >= 3 && best <= 5) by_level[best].push_back(m.devices[g]);
    }
    for (const auto& [level, names] : by_level)
      add(Finding::Severity::kWarn, "nic_far_from_gpu",
          level == 5 ? fmt::format("{}: the nearest NIC is on the other CPU socket (SYS): "
                                   "GPUDirect RDMA is off and NCCL needs PXN (through a GPU "
                                   "near a NIC) or host memory",
                                   join(names))
                     : fmt::format("{}: the nearest NIC is past a PCIe host bridge ({}): "
                                   "GPUDirect RDMA is off by default (NCCL_NET_GDR_LEVEL PXB)",
                                   join(names), level == 3 ? "PHB" : "NODE"),
          level == 5 ? "use NICs on the GPUs' socket (NCCL_IB_HCA), keep NCCL_PXN_DISABLE unset"
                     : "NCCL_NET_GDR_LEVEL=PHB (or SYS) if the platform supports peer-to-peer "
                       "across the host bridge; check ACS/IOMMU settings");
  }
  // Links trained slower than the rest (nvlink -s), against the median active link.
  std::vector<double> speeds;
  for (const auto& s : nvlinks)
    for (double stated : s.link_GBps)
      if (stated > 0) speeds.push_back(stated);
  if (speeds.size() >= 2) {
    std::vector<double> sorted = speeds;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    std::vector<std::string> slow;
    for (const auto& s : nvlinks)
      for (size_t l = 0; l < s.link_GBps.size(); ++l)
        if (s.link_GBps[l] > 0 && s.link_GBps[l] < 0.9 * median)
          slow.push_back(fmt::format("GPU{} link {} {:.3g} GB/s", s.gpu, l, s.link_GBps[l]));
    if (!slow.empty())
      add(Finding::Severity::kWarn, "nvlink_slow",
          fmt::format("{} NVLink(s) slower than the others' {:.3g} GB/s: {}", slow.size(), median,
                      join(slow)),
          "a link trained at a lower speed: nvidia-smi nvlink -e (errors), nvidia-smi -q "
          "(NVLink state); a GPU reset or node reboot, else hardware service; NCCL's rings run "
          "at the slowest link");
  }
  // Uneven NVLink counts: in the matrix, and active links in nvlink -s.
  const auto uneven = [&](const std::map<std::string, int>& count, const char* what) {
    int most = 0;
    for (const auto& [gpu, n] : count) most = std::max(most, n);
    std::vector<std::string> fewer;
    for (const auto& [gpu, n] : count)
      if (n < most) fewer.push_back(fmt::format("{} {}", gpu, n));
    if (most > 0 && !fewer.empty())
      add(Finding::Severity::kWarn, "uneven_nvlinks",
          fmt::format("GPUs with fewer {} than the others ({}): {}", what, most, join(fewer)),
          "a link down or a GPU seated badly: nvidia-smi nvlink -s / -e (errors), "
          "reseat or RMA; NCCL's rings run at the slowest GPU's links");
  };
  if (gpus.size() >= 2 && any_nvlink) uneven(links_of, "NVLinks in topo -m");
  std::map<std::string, int> active;
  std::vector<std::string> inactive;
  for (const auto& s : nvlinks) {
    const std::string gpu = "GPU" + std::to_string(s.gpu);
    active[gpu] = 0;
    for (size_t l = 0; l < s.link_GBps.size(); ++l) {
      if (s.link_GBps[l] > 0)
        ++active[gpu];
      else
        inactive.push_back(fmt::format("{} link {}", gpu, l));
    }
  }
  if (active.size() >= 2) uneven(active, "active NVLinks in nvlink -s");
  if (!inactive.empty())
    add(Finding::Severity::kWarn, "nvlink_inactive",
        fmt::format("{} NVLink(s) inactive: {}", inactive.size(), join(inactive)),
        "nvidia-smi nvlink -e for errors; a GPU reset or node reboot, else hardware service");
  return out;
}

}  // namespace ccscope::topo
