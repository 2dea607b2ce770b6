#include "ccscope/topo/topology.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

namespace ccscope::topo {

const char* nic_kind_name(NicKind kind) {
  switch (kind) {
    case NicKind::kEthernet:
      return "ethernet";
    case NicKind::kInfiniband:
      return "infiniband";
    case NicKind::kRoce:
      return "roce";
    case NicKind::kOther:
      break;
  }
  return "other";
}

double Nic::effective_Gbps() const {
  if (rate_Gbps > 0 && shaped_Gbps > 0) return std::min(rate_Gbps, shaped_Gbps);
  return rate_Gbps > 0 ? rate_Gbps : shaped_Gbps;
}

const Gpu* HostTopology::find_gpu_by_bus_id(const std::string& bus_id) const {
  const std::string wanted = normalize_bus_id(bus_id);
  for (const Gpu& gpu : gpus)
    if (!wanted.empty() && gpu.pci.bus_id == wanted) return &gpu;
  return nullptr;
}

const Nic* HostTopology::find_nic(const std::string& nic_name) const {
  for (const Nic& nic : nics)
    if (nic.name == nic_name) return &nic;
  return nullptr;
}

SourceStatus* HostTopology::source(const std::string& source_name) {
  for (SourceStatus& status : sources)
    if (status.name == source_name) return &status;
  return nullptr;
}

void number_unindexed_gpus(HostTopology& host) {
  std::set<int> taken;
  for (const Gpu& gpu : host.gpus)
    if (gpu.index >= 0) taken.insert(gpu.index);
  int next = 0;
  for (Gpu& gpu : host.gpus) {
    if (gpu.index >= 0) continue;
    while (taken.count(next)) ++next;
    gpu.index = next++;
  }
  std::stable_sort(host.gpus.begin(), host.gpus.end(),
                   [](const Gpu& a, const Gpu& b) { return a.index < b.index; });
}

namespace {
// Hex digits at `at` up to `max_digits`; false if none or the value exceeds `limit`.
bool hex_field(const std::string& text, size_t& at, size_t max_digits, unsigned limit,
               unsigned& value) {
  size_t digits = 0;
  value = 0;
  while (at < text.size() && std::isxdigit(static_cast<unsigned char>(text[at]))) {
    if (++digits > max_digits) return false;
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[at++])));
    value = value * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  return digits > 0 && value <= limit;
}
}  // namespace

std::string normalize_bus_id(const std::string& text) {
  // [domain:]bus:device.function in hex; NVML writes an 8-digit domain.
  const size_t colons = static_cast<size_t>(std::count(text.begin(), text.end(), ':'));
  if (colons < 1 || colons > 2) return "";
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  size_t at = 0;
  if (colons == 2 && !(hex_field(text, at, 8, 0xffff, domain) && text[at++] == ':')) return "";
  if (!(hex_field(text, at, 2, 0xff, bus) && at < text.size() && text[at++] == ':')) return "";
  if (!(hex_field(text, at, 2, 0x1f, device) && at < text.size() && text[at++] == '.')) return "";
  if (!hex_field(text, at, 1, 7, function) || at != text.size()) return "";
  char out[16];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", domain, bus, device, function);
  return out;
}

}  // namespace ccscope::topo
