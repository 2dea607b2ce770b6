#pragma once
// Readers of saved topology files. Each returns what the file says about one
// node, with a "hwloc" or "nccl" SourceStatus marked read; they throw
// TopologyError (one line: what was wrong and where) for a file that is not
// well-formed or not of their format, never crash on damaged input.
#include <string>
#include <string_view>

#include "ccscope/topo/topology.h"

namespace ccscope::topo {

// hwloc XML, versions 1.x, 2.x and 3.0 (`lstopo --of xml`, hwloc_topology_export_xml):
// NUMA nodes, packages, cores, PUs, the PCI tree (bridges, host bridges),
// GPUs (NVIDIA PCI devices of class 0300/0302 with or without CUDA/NVML OS
// devices; a VGA card of another vendor is not one), NICs (network and
// OpenFabrics OS devices, with PCI placement), and NVLinks (an NVLinkBandwidth
// distances matrix, and NVSwitch PCI devices).
HostTopology read_hwloc_xml(std::string_view text);

// NCCL's topology dump (NCCL_TOPO_DUMP_FILE): <system><cpu><pci><gpu/>...
// <nic><net/></nic>: GPUs with their PCI bus id and link, NVLinks, NICs with speed.
HostTopology read_nccl_topology_xml(std::string_view text);

enum class TopologyFormat { kUnknown, kHwlocXml, kNcclXml, kCcscopeJson, kNvidiaSmiText };
// From the first non-blank content: "<topology" (after an optional <?xml?> and
// DOCTYPE) is hwloc, "<system" NCCL, "{" ccscope's JSON; else text holding an
// `nvidia-smi topo -m` matrix anywhere (nvidia_smi.h).
TopologyFormat detect_topology_format(std::string_view text);

}  // namespace ccscope::topo
