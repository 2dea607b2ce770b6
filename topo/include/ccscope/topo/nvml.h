#pragma once
// GPUs through NVML, loaded with dlopen at run time (no link-time dependency:
// a machine without the NVIDIA driver is a normal case).
#include <string>

#include "ccscope/topo/topology.h"

namespace ccscope::topo {

// The library tried: $CCSCOPE_NVML_LIBRARY when set (tests point it at a
// stand-in), else "libnvidia-ml.so.1".
std::string nvml_library_name();

// Adds what NVML says to `into`: driver and CUDA driver version; per GPU its
// index, name, UUID, PCI bus id, PCIe generation/width current and maximum,
// NVLinks (state, version, remote bus id, remote is an NVSwitch); the common
// ancestor level of every GPU pair. A GPU already in `into` (same bus id, from
// hwloc) is completed, not duplicated. Returns the "nvml" SourceStatus (read
// false with the reason: library not found, nvmlInit failed with NVML's own
// message, no GPU). Symbols a driver lacks leave their figures unknown.
SourceStatus read_nvml(HostTopology& into, const std::string& library = nvml_library_name());

}  // namespace ccscope::topo
