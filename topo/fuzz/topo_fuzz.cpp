// libFuzzer target over the topology readers: read_hwloc_xml,
// read_nccl_topology_xml and detect_topology_format. A TopologyError is the
// expected answer to damaged input; anything else thrown, a sanitizer report
// or a broken promise of the result (checked below) is a finding.
// Build: cmake --preset fuzz && cmake --build build-fuzz --target topo_fuzz
// Run:   build-fuzz/topo/fuzz/topo_fuzz -dict=topo/fuzz/topo.dict \
//          -max_total_time=300 <new-corpus-dir> topo/fuzz/seeds
// (seeds/: the four fixtures of topo/tests/data.)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ccscope/topo/readers.h"

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
  return 0;
}
