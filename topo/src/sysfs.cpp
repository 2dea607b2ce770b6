// NICs from sysfs: ROOT/class/net (every network interface of this network
// namespace) and ROOT/class/infiniband (RDMA devices and their ports).
// Every read is forgiving: a missing, unreadable or garbled file leaves that
// figure unknown; nothing here throws.
#include "ccscope/topo/sysfs.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ccscope/common/small_file.h"
#include "ccscope/common/text.h"

namespace ccscope::topo {
namespace {

namespace fs = std::filesystem;

// A sysfs attribute's content without surrounding blanks; "" when it cannot
// be read.
std::string read_attribute(const fs::path& file) { return trim_blanks(read_small_file(file)); }

// The whole text as a decimal integer, or `fallback` when it is not one.
long long parse_integer(const std::string& text, long long fallback) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end || text.empty()) return fallback;
  return value;
}

int read_int_attribute(const fs::path& file, int fallback) {
  const long long value = parse_integer(read_attribute(file), fallback);
  return value < INT_MIN || value > INT_MAX ? fallback : static_cast<int>(value);
}

// The leading decimal number of "400 Gb/sec (4X NDR)" / "2.5 Gb/sec (1X SDR)"; 0 if none.
double parse_leading_number(const std::string& text) {
  double value = 0;
  const auto [stop, error] =
      std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::fixed);
  if (error != std::errc() || stop == text.data() || value < 0) return 0;
  return value;
}

// The entries of a directory sorted by name; none when it cannot be listed.
std::vector<std::string> list_directory(const fs::path& directory) {
  std::vector<std::string> names;
  std::error_code error;
  fs::directory_iterator it(directory, error);
  for (; !error && it != fs::directory_iterator(); it.increment(error))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool has_link(const fs::path& path) {
  std::error_code error;
  return fs::is_symlink(fs::symlink_status(path, error));
}

// The PCI function behind a `device` link: the link's target when it is a PCI
// function; for virtio-net (".../0000:00:03.0/virtio2") the PCI function the
// virtio device sits on, which is the NIC as far as PCI is concerned. Other
// buses (USB, platform) yield "": the nearest PCI ancestor would be a
// controller, not the NIC.
struct DevicePlacement {
  std::string bus_id;
  fs::path pci_directory;  // empty when bus_id is
};
DevicePlacement pci_function_of(const fs::path& device_link) {
  std::error_code error;
  const fs::path target = fs::canonical(device_link, error);
  if (error) return {};
  std::string bus_id = normalize_bus_id(target.filename().string());
  if (!bus_id.empty()) return {bus_id, target};
  const std::string leaf = target.filename().string();
  if (leaf.rfind("virtio", 0) == 0) {
    bus_id = normalize_bus_id(target.parent_path().filename().string());
    if (!bus_id.empty()) return {bus_id, target.parent_path()};
  }
  return {};
}

// Basename of the target of DEVICE/driver ("mlx5_core", "virtio_net"); "" none.
std::string driver_of(const fs::path& device_link) {
  std::error_code error;
  const fs::path target = fs::read_symlink(device_link / "driver", error);
  return error ? "" : target.filename().string();
}

// The NUMA node of a device: its own numa_node, else that of the PCI function
// it sits on (a virtio device has none of its own); -1 unknown.
int numa_node_of(const fs::path& device_link, const DevicePlacement& placement) {
  int node = read_int_attribute(device_link / "numa_node", -1);
  if (node < 0 && !placement.pci_directory.empty())
    node = read_int_attribute(placement.pci_directory / "numa_node", -1);
  return node < 0 ? -1 : node;
}

// ARPHRD_* of ROOT/class/net/X/type.
NicKind kind_of_link_type(int arp_type) {
  constexpr int kArpEther = 1;        // ARPHRD_ETHER
  constexpr int kArpInfiniband = 32;  // ARPHRD_INFINIBAND: IPoIB
  if (arp_type == kArpEther) return NicKind::kEthernet;
  if (arp_type == kArpInfiniband) return NicKind::kInfiniband;
  return NicKind::kOther;  // loopback (772), tunnels, ...
}

// "4: ACTIVE" -> "active"; "1: DOWN" -> "down"; a bare word is taken as it is.
std::string ib_port_state(const std::string& text) {
  const size_t colon = text.find(':');
  std::string word = colon == std::string::npos ? text : text.substr(colon + 1);
  const size_t first = word.find_first_not_of(' ');
  return first == std::string::npos ? "" : ascii_lower(word.substr(first));
}

// GID 0 "fe80:0000:...:0001" is set; all zeros (or unreadable) is not.
bool gid_is_set(const std::string& text) {
  bool any_digit = false;
  for (char c : text) {
    if (c == ':') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    if (c != '0') any_digit = true;
  }
  return any_digit;
}

Nic& find_or_append(std::vector<Nic>& nics, const std::string& name) {
  for (Nic& nic : nics)
    if (nic.name == name) return nic;
  Nic& added = nics.emplace_back();
  added.name = name;
  return added;
}

// Joins what sysfs read into a NIC another source may already have described:
// sysfs' own figures (rate, state, MTU, driver) win, the rest only fills gaps.
void complete(Nic& nic, const Nic& read) {
  if (read.rate_Gbps > 0) nic.rate_Gbps = read.rate_Gbps;
  if (!read.state.empty()) nic.state = read.state;
  if (read.mtu > 0) nic.mtu = read.mtu;
  if (!read.driver.empty()) nic.driver = read.driver;
  if (nic.kind == NicKind::kOther) nic.kind = read.kind;
  if (nic.netdev.empty()) nic.netdev = read.netdev;
  if (nic.rdma_device.empty()) nic.rdma_device = read.rdma_device;
  nic.has_gid = nic.has_gid || read.has_gid;
  nic.is_virtual = read.is_virtual;
  if (nic.pci.bus_id.empty()) nic.pci.bus_id = read.pci.bus_id;
  if (nic.pci.numa_node < 0) nic.pci.numa_node = read.pci.numa_node;
}

// A NIC without a `device` link is virtual; with one, its driver, PCI function and
// NUMA node come from what the link points at.
void place_device(Nic& nic, const fs::path& device) {
  nic.is_virtual = !has_link(device);
  if (nic.is_virtual) return;
  nic.driver = driver_of(device);
  const DevicePlacement placement = pci_function_of(device);
  nic.pci.bus_id = placement.bus_id;
  nic.pci.numa_node = numa_node_of(device, placement);
}

Nic read_network_interface(const fs::path& interface_directory) {
  Nic nic;
  nic.name = interface_directory.filename().string();
  // speed is Mb/s; -1 (no link, virtual) and unreadable mean unknown.
  const long long speed_Mbps = parse_integer(read_attribute(interface_directory / "speed"), 0);
  nic.rate_Gbps = speed_Mbps > 0 ? static_cast<double>(speed_Mbps) / 1000.0 : 0;
  nic.state = ascii_lower(read_attribute(interface_directory / "operstate"));
  nic.mtu = std::max(0, read_int_attribute(interface_directory / "mtu", 0));
  nic.kind = kind_of_link_type(read_int_attribute(interface_directory / "type", -1));
  // lo, veth, bridges, ifb, tunnels: no device link.
  place_device(nic, interface_directory / "device");
  return nic;
}

// The kernel's order (ifindex), which is the order NCCL meets interfaces in
// (getifaddrs); name order where ifindex cannot be read.
std::vector<std::string> interfaces_in_kernel_order(const fs::path& class_net) {
  std::vector<std::pair<int, std::string>> ordered;
  for (const std::string& name : list_directory(class_net))
    ordered.emplace_back(read_int_attribute(class_net / name / "ifindex", INT_MAX), name);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> names;
  for (auto& [index, name] : ordered) names.push_back(std::move(name));
  return names;
}

// The network interface of an RDMA port: the GID table's netdev (RoCE), else
// the device's only network interface (IPoIB, or a single-port RoCE device of a
// kernel without gid_attrs/ndevs); "" when none or ambiguous.
std::string netdev_of_port(const fs::path& device_directory, const fs::path& port_directory) {
  const std::string from_gid = read_attribute(port_directory / "gid_attrs" / "ndevs" / "0");
  if (!from_gid.empty()) return from_gid;
  const std::vector<std::string> netdevs = list_directory(device_directory / "device" / "net");
  return netdevs.size() == 1 ? netdevs.front() : "";
}

Nic read_rdma_port(const fs::path& device_directory, const std::string& port) {
  const fs::path port_directory = device_directory / "ports" / port;
  Nic nic;
  nic.name = device_directory.filename().string() + ":" + port;
  nic.state = ib_port_state(read_attribute(port_directory / "state"));
  nic.rate_Gbps = parse_leading_number(read_attribute(port_directory / "rate"));
  const std::string link_layer = read_attribute(port_directory / "link_layer");
  if (link_layer == "InfiniBand")
    nic.kind = NicKind::kInfiniband;
  else if (link_layer == "Ethernet")
    nic.kind = NicKind::kRoce;
  nic.has_gid = gid_is_set(read_attribute(port_directory / "gids" / "0"));
  nic.netdev = netdev_of_port(device_directory, port_directory);
  // Soft RDMA devices (rxe, siw) have no device link of their own.
  place_device(nic, device_directory / "device");
  return nic;
}

}  // namespace

SourceStatus read_sysfs_nics(HostTopology& into, const std::string& root) {
  SourceStatus status{"sysfs", false, ""};
  const fs::path class_net = fs::path(root) / "class" / "net";
  std::error_code error;
  if (!fs::is_directory(class_net, error)) {
    status.detail = class_net.string() + " is missing";
    return status;
  }
  size_t interfaces = 0;
  for (const std::string& name : interfaces_in_kernel_order(class_net)) {
    const Nic read = read_network_interface(class_net / name);
    complete(find_or_append(into.nics, name), read);
    ++interfaces;
  }

  size_t rdma_ports = 0;
  const fs::path class_infiniband = fs::path(root) / "class" / "infiniband";
  for (const std::string& device_name : list_directory(class_infiniband)) {
    const fs::path device_directory = class_infiniband / device_name;
    for (const std::string& port : list_directory(device_directory / "ports")) {
      const Nic read = read_rdma_port(device_directory, port);
      complete(find_or_append(into.nics, read.name), read);
      ++rdma_ports;
      if (read.netdev.empty()) continue;
      for (Nic& nic : into.nics)
        if (nic.name == read.netdev) nic.rdma_device = device_name;
    }
  }
  status.read = true;
  status.detail =
      std::to_string(interfaces) + " interfaces, " + std::to_string(rdma_ports) + " RDMA ports";
  return status;
}

}  // namespace ccscope::topo
