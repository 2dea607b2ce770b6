#include "ccscope/topo/probe.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ccscope/topo/readers.h"
#include "ccscope/topo/sysfs.h"

#ifdef CCSCOPE_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace ccscope::topo {
namespace {

std::string this_hostname() {
  std::string name(256, '\0');
  if (gethostname(name.data(), name.size()) != 0) return "";
  name.resize(name.find('\0') == std::string::npos ? name.size() : name.find('\0'));
  return name;
}

#ifdef CCSCOPE_HAVE_HWLOC
// hwloc's own topology exported as XML and read by the one hwloc-XML reader, so
// that a live probe and a saved file (`--from`) cannot disagree in how they are read.
SourceStatus read_hwloc_live(HostTopology& into) {
  SourceStatus status{"hwloc", false, ""};
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) {
    status.detail = "hwloc_topology_init failed";
    return status;
  }
  std::unique_ptr<hwloc_topology, void (*)(hwloc_topology_t)> guard(topology,
                                                                    hwloc_topology_destroy);
  hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topology) != 0) {
    status.detail = "hwloc_topology_load failed";
    return status;
  }
  char* buffer = nullptr;
  int length = 0;
  if (hwloc_topology_export_xmlbuffer(topology, &buffer, &length, 0) != 0 || !buffer) {
    status.detail = "hwloc_topology_export_xmlbuffer failed";
    return status;
  }
  std::string xml(buffer, length > 0 ? static_cast<size_t>(length - 1) : 0);
  hwloc_free_xmlbuffer(topology, buffer);
  HostTopology read;
  try {
    read = read_hwloc_xml(xml);
  } catch (const TopologyError& e) {
    status.detail = std::string("hwloc's own XML did not read: ") + e.what();
    return status;
  }
  // The release the headers are of (hwloc_get_api_version gives the API
  // version: 2.8.0 for hwloc 2.9).
  status.read = true;
  status.detail = std::string("hwloc ") + HWLOC_VERSION + " (live), " +
                  std::to_string(read.gpus.size()) + " GPUs, " + std::to_string(read.nics.size()) +
                  " NICs";
  if (read.gpus.empty() && read.nics.empty())
    status.detail += " (no I/O devices: hwloc's PCI discovery is missing or filtered out)";
  const std::string hostname = into.hostname;
  into = std::move(read);
  if (!hostname.empty()) into.hostname = hostname;
  into.sources.erase(std::remove_if(into.sources.begin(), into.sources.end(),
                                    [](const SourceStatus& s) { return s.name == "hwloc"; }),
                     into.sources.end());
  return status;
}
#endif

// Where hwloc did not place a PCI device (no hwloc, as on the GPU machine), its
// sysfs path does: /sys/devices/pci0000:00/0000:00:01.0/0000:02:00.0 is the
// device under bridge 0000:00:01.0 under host bridge pci0000:00 (the id the
// hwloc reader gives host bridges too).
void place_from_sysfs(PciPlacement& pci, const std::string& sysfs_root) {
  if (pci.bus_id.empty() || !pci.path.empty()) return;
  std::error_code error;
  const std::filesystem::path device =
      std::filesystem::canonical(sysfs_root + "/bus/pci/devices/" + pci.bus_id, error);
  if (error) return;
  std::vector<PciHop> hops;
  for (const std::filesystem::path& part : device.parent_path()) {
    const std::string name = part.string();
    if (name.rfind("pci", 0) == 0 && name.size() > 3)
      hops.insert(hops.begin(), {PciHop::Kind::kHostBridge, name});
    else if (!normalize_bus_id(name).empty() && !hops.empty())
      hops.insert(hops.begin(), {PciHop::Kind::kBridge, normalize_bus_id(name)});
  }
  if (hops.empty()) return;  // not under a PCI host bridge
  pci.path = std::move(hops);
  std::ifstream numa(device / "numa_node");
  int node = -1;
  if (numa >> node && node >= 0) pci.numa_node = node;
}

// A source's status, replacing one a reader already put there under its name.
void set_source(HostTopology& host, SourceStatus status) {
  if (SourceStatus* held = host.source(status.name))
    *held = std::move(status);
  else
    host.sources.push_back(std::move(status));
}

}  // namespace

bool hwloc_compiled() {
#ifdef CCSCOPE_HAVE_HWLOC
  return true;
#else
  return false;
#endif
}

HostTopology probe_host(const ProbeOptions& options) {
  HostTopology host;
  host.hostname = this_hostname();
  if (!options.use_hwloc) {
    set_source(host, {"hwloc", false, "not asked for (--no-hwloc)"});
  } else {
#ifdef CCSCOPE_HAVE_HWLOC
    set_source(host, read_hwloc_live(host));
#else
    set_source(host, {"hwloc", false, "this ccscope was built without hwloc"});
#endif
  }
  if (options.use_nvml)
    set_source(host, read_nvml(host, options.nvml_library));
  else
    set_source(host, {"nvml", false, "not asked for (--no-nvml)"});
  set_source(host, read_sysfs_nics(host, options.sysfs_root));
  for (Gpu& gpu : host.gpus) place_from_sysfs(gpu.pci, options.sysfs_root);
  for (Nic& nic : host.nics) place_from_sysfs(nic.pci, options.sysfs_root);
  if (options.read_shapers && options.sysfs_root == "/sys")
    for (Nic& nic : host.nics)
      if (nic.name.find(':') == std::string::npos) nic.shaped_Gbps = egress_shaped_Gbps(nic.name);
  set_source(host, {"nccl", false, "no NCCL topology dump given (--nccl-topo FILE)"});
  return host;
}

}  // namespace ccscope::topo
