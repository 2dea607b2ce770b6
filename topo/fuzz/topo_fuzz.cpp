// libFuzzer target over the topology readers: read_hwloc_xml,
// read_nccl_topology_xml, read_topology_json (ccscope's own JSON, --from) and
// detect_topology_format. A TopologyError is the
// expected answer to damaged input (one short line for the JSON reader);
// anything else thrown, a sanitizer report or a broken promise of the result
// (checked below: for the JSON reader, that what it read writes out and reads
// back the same) is a finding.
// Build: cmake --preset fuzz && cmake --build build-fuzz --target topo_fuzz
// Run:   build-fuzz/topo/fuzz/topo_fuzz -dict=topo/fuzz/topo.dict \
//          -max_total_time=300 <new-corpus-dir> topo/fuzz/seeds
// (seeds/: the four fixtures of topo/tests/data, ccscope topo --json of the DGX-2
// one, and a small hand-written two-node document with NICs, PCI paths,
// common ancestors and notes.)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/topo/readers.h"
#include "ccscope/topo/report.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "topo_fuzz: %s\n", what);
  std::abort();  // libFuzzer saves the input as crash-*
}

// What every successful read promises, whatever the input.
void check(const ccscope::topo::HostTopology& topology, const char* source) {
  using ccscope::topo::normalize_bus_id;
  if (topology.sources.size() != 1 || topology.sources[0].name != source ||
      !topology.sources[0].read)
    finding("a read without its source status");
  if (topology.notes.size() > 51) finding("notes not capped");
  for (const ccscope::topo::Gpu& gpu : topology.gpus) {
    if (gpu.index < 0) finding("a GPU without an index");
    if (std::string_view(source) == "hwloc" && normalize_bus_id(gpu.pci.bus_id) != gpu.pci.bus_id)
      finding("a GPU bus id that is not normalized");
    if (gpu.nvlinks.size() > 100000) finding("NVLinks out of all proportion");
  }
  for (const ccscope::topo::Nic& nic : topology.nics)
    if (nic.name.empty()) finding("a NIC without a name");
}

// A reader's error is one line naming what and where (ccscope prints it after
// the file name) and short, whatever the input quoted.
void check_message(const ccscope::topo::TopologyError& e) {
  const std::string_view what = e.what();
  if (what.empty() || what.find('\n') != std::string_view::npos || what.size() > 400)
    finding("a TopologyError that is not one short line");
}

bool same_link(const ccscope::topo::PcieLink& a, const ccscope::topo::PcieLink& b) {
  return a.generation == b.generation && a.width == b.width;
}

bool same_placement(const ccscope::topo::PciPlacement& a, const ccscope::topo::PciPlacement& b) {
  if (a.bus_id != b.bus_id || a.numa_node != b.numa_node || a.package != b.package ||
      !same_link(a.link, b.link) || a.path.size() != b.path.size())
    return false;
  for (size_t i = 0; i < a.path.size(); ++i)
    if (a.path[i].kind != b.path[i].kind || a.path[i].id != b.path[i].id) return false;
  return true;
}

// Every field of HostTopology that the JSON carries (all of them).
bool same_node(const ccscope::topo::HostTopology& a, const ccscope::topo::HostTopology& b) {
  if (a.hostname != b.hostname || a.numa_nodes != b.numa_nodes || a.packages != b.packages ||
      a.cores != b.cores || a.pus != b.pus || a.cpu_model != b.cpu_model ||
      a.driver_version != b.driver_version || a.cuda_version != b.cuda_version ||
      a.nccl_version != b.nccl_version || a.notes != b.notes || a.gpus.size() != b.gpus.size() ||
      a.nics.size() != b.nics.size() || a.gpu_ancestors.size() != b.gpu_ancestors.size() ||
      a.sources.size() != b.sources.size())
    return false;
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    const ccscope::topo::Gpu &x = a.gpus[i], &y = b.gpus[i];
    if (x.index != y.index || x.name != y.name || x.uuid != y.uuid ||
        !same_placement(x.pci, y.pci) || !same_link(x.pcie_current, y.pcie_current) ||
        !same_link(x.pcie_max, y.pcie_max) ||
        x.cuda_compute_capability != y.cuda_compute_capability ||
        x.nvlinks.size() != y.nvlinks.size())
      return false;
    for (size_t l = 0; l < x.nvlinks.size(); ++l) {
      const ccscope::topo::NvLink &m = x.nvlinks[l], &n = y.nvlinks[l];
      if (m.link != n.link || m.active != n.active || m.version != n.version ||
          m.remote_bus_id != n.remote_bus_id || m.remote_is_switch != n.remote_is_switch ||
          m.bandwidth_GBps != n.bandwidth_GBps)
        return false;
    }
  }
  for (size_t i = 0; i < a.nics.size(); ++i) {
    const ccscope::topo::Nic &x = a.nics[i], &y = b.nics[i];
    if (x.name != y.name || x.kind != y.kind || x.rate_Gbps != y.rate_Gbps ||
        x.shaped_Gbps != y.shaped_Gbps || x.state != y.state || x.mtu != y.mtu ||
        x.driver != y.driver || x.netdev != y.netdev || x.rdma_device != y.rdma_device ||
        x.has_gid != y.has_gid || x.is_virtual != y.is_virtual || !same_placement(x.pci, y.pci))
      return false;
  }
  for (size_t i = 0; i < a.gpu_ancestors.size(); ++i)
    if (a.gpu_ancestors[i].gpu_a != b.gpu_ancestors[i].gpu_a ||
        a.gpu_ancestors[i].gpu_b != b.gpu_ancestors[i].gpu_b ||
        a.gpu_ancestors[i].level != b.gpu_ancestors[i].level)
      return false;
  for (size_t i = 0; i < a.sources.size(); ++i)
    if (a.sources[i].name != b.sources[i].name || a.sources[i].read != b.sources[i].read ||
        a.sources[i].detail != b.sources[i].detail)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ccscope::topo::detect_topology_format(text);
  try {
    check(ccscope::topo::read_hwloc_xml(text), "hwloc");
  } catch (const ccscope::topo::TopologyError&) {
  }
  try {
    check(ccscope::topo::read_nccl_topology_xml(text), "nccl");
  } catch (const ccscope::topo::TopologyError&) {
  }
  try {
    // Whatever a document holds, reading it back must give data the paths
    // and the text view can use (they run over every pair).
    // And what it read, written out again, reads back the same: the cluster
    // gather (bench/src/cluster_topology.cpp) sends nodes this way.
    ccscope::topo::TopologyReport report;
    report.nodes = ccscope::topo::read_topology_json(text);
    if (report.nodes.size() <= 64) {
      const std::vector<ccscope::topo::HostTopology> again =
          ccscope::topo::read_topology_json(ccscope::topo::topology_json(report));
      if (again.size() != report.nodes.size()) finding("a written document with other nodes");
      for (size_t i = 0; i < again.size(); ++i)
        if (!same_node(again[i], report.nodes[i]))
          finding("a node that does not read back the same");
      ccscope::topo::complete_report(report);
      (void)ccscope::topo::render_topology_text(report);
    }
  } catch (const ccscope::topo::TopologyError& e) {
    check_message(e);
  }
  return 0;
}
