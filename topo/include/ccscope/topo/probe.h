#pragma once
// The live probe of this node: hwloc (the PCI tree, CPUs), NVML (GPUs and
// NVLinks), sysfs (NICs), the kernel's shapers (tc), each optional.
#include <string>

#include "ccscope/topo/nvml.h"
#include "ccscope/topo/topology.h"

namespace ccscope::topo {

struct ProbeOptions {
  bool use_hwloc = true;
  bool use_nvml = true;
  std::string nvml_library = nvml_library_name();
  std::string sysfs_root = "/sys";
  bool read_shapers = true;  // tc shapers of this network namespace's interfaces
};

// Whether this build has hwloc (the GPU machine has none: then its PCI tree
// comes from NVML's ancestor levels and sysfs only).
bool hwloc_compiled();

// Probes this node. Never throws for a missing source: each source's status
// says whether it was read and why not. `hostname` from gethostname.
HostTopology probe_host(const ProbeOptions& options = {});

}  // namespace ccscope::topo
