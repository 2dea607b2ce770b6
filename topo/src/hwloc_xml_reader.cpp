// hwloc's XML (v1.x, 2.x, 3.0) read without hwloc: the hwloc 2.9 library of
// the distributions cannot load a 3.0 file, and a saved file should read the
// same on a machine without hwloc.
//
// What the format says, as far as it matters here:
//  - <topology version="2.0"|"3.0"> (no version: 1.x) holds one tree of
//    <object type=...>: Machine, Package (v1: Socket), NUMANode (v2+: a
//    memory child), Core, PU, caches, and an I/O tree of Bridge, PCIDev and
//    OSDev objects hanging from a CPU-side object;
//  - a Bridge with bridge_type "0-1" is a host bridge (no pci_busid), others
//    are PCI-to-PCI bridges with their own pci_busid;
//  - pci_type "0302 [10de:2335] [10de:18bf] a1" is class, [vendor:device],
//    [subsystem], revision; pci_link_speed is the link's GB/s;
//  - OSDev osdev_type is an enum up to 2.x (2 network, 3 OpenFabrics) and a
//    bit set from 3.0 (16 network, 32 OpenFabrics, 4 GPU, 8 co-processor);
//  - <distances2hetero name="NVLinkBandwidth"> is a matrix of MB/s between
//    objects named "OSDev:<gp_index>" / "PCIDev:<gp_index>", its indexes and
//    values split over several <indexes> / <u64values> elements.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/topo/readers.h"
#include "xml.h"

namespace ccscope::topo {
namespace {

// A cpuset / nodeset: "0x0000ffff", "0xffffffff,0x00000001" (32-bit words,
// most significant first), "0xf...f,..." for an infinite set.
struct HwlocBitmap {
  std::vector<uint32_t> words;  // least significant first
  bool infinite = false;        // all bits above `words` are set

  bool contains(const HwlocBitmap& other) const {
    if (other.infinite && !infinite) return false;
    const size_t count = std::max(words.size(), other.words.size());
    for (size_t i = 0; i < count; ++i) {
      const uint32_t mine = i < words.size() ? words[i] : (infinite ? ~0u : 0u);
      const uint32_t theirs = i < other.words.size() ? other.words[i] : (other.infinite ? ~0u : 0u);
      if (theirs & ~mine) return false;
    }
    return true;
  }
  bool empty() const {
    return !infinite && std::all_of(words.begin(), words.end(), [](uint32_t w) { return w == 0; });
  }
  // The index of the only set bit, -1 when none or several.
  int single_bit() const {
    if (infinite) return -1;
    int found = -1;
    for (size_t i = 0; i < words.size(); ++i) {
      for (int bit = 0; bit < 32; ++bit) {
        if (!(words[i] >> bit & 1u)) continue;
        if (found >= 0) return -1;
        found = static_cast<int>(i * 32) + bit;
      }
    }
    return found;
  }
};

std::optional<HwlocBitmap> parse_bitmap(std::string_view text) {
  HwlocBitmap bitmap;
  if (text.substr(0, 7) == "0xf...f") {
    bitmap.infinite = true;
    text.remove_prefix(7);
    if (text.empty()) return bitmap;
    if (text[0] != ',') return std::nullopt;
    text.remove_prefix(1);
  }
  std::vector<uint32_t> most_significant_first;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view word = text.substr(0, comma);
    if (word.size() < 3 || word.size() > 10 || word.substr(0, 2) != "0x") return std::nullopt;
    const std::optional<long long> value = parse_xml_integer(word);
    if (!value || *value < 0) return std::nullopt;
    most_significant_first.push_back(static_cast<uint32_t>(*value));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return std::nullopt;  // a trailing comma
  }
  bitmap.words.assign(most_significant_first.rbegin(), most_significant_first.rend());
  return bitmap;
}

// pci_type "CCCC [VVVV:DDDD] ..." -> class, vendor, device (-1 unknown).
struct PciType {
  int class_id = -1;
  int vendor = -1;
  int device = -1;
};

std::optional<PciType> parse_pci_type(std::string_view text) {
  auto hex4 = [](std::string_view digits) -> int {
    if (digits.size() != 4) return -1;
    const std::optional<long long> value = parse_xml_integer("0x" + std::string(digits));
    return value && *value >= 0 ? static_cast<int>(*value) : -1;
  };
  PciType type;
  type.class_id = hex4(text.substr(0, 4));
  const size_t bracket = text.find('[');
  if (type.class_id < 0 || bracket == std::string_view::npos) return std::nullopt;
  const std::string_view ids = text.substr(bracket + 1);
  if (ids.size() < 10 || ids[4] != ':' || ids[9] != ']') return std::nullopt;
  type.vendor = hex4(ids.substr(0, 4));
  type.device = hex4(ids.substr(5, 4));
  if (type.vendor < 0 || type.device < 0) return std::nullopt;
  return type;
}

// A PCIe link from hwloc's GB/s figure (lanes x GT/s x encoding / 8): the
// widest standard width whose per-lane figure is one generation's within 1%.
// Several pairs can give the same figure (gen5 x1 = gen3 x4), hence "widest".
PcieLink link_from_GBps(double link_GBps) {
  static constexpr double kLaneGBps[] = {0.25,
                                         0.5,
                                         8.0 * 128 / 130 / 8,
                                         16.0 * 128 / 130 / 8,
                                         32.0 * 128 / 130 / 8,
                                         64.0 * 242 / 256 / 8};
  static constexpr int kWidths[] = {16, 8, 4, 2, 1};
  if (!(link_GBps > 0)) return {};
  for (const int width : kWidths) {
    const double lane = link_GBps / width;
    for (size_t generation = 0; generation < std::size(kLaneGBps); ++generation)
      if (std::fabs(lane - kLaneGBps[generation]) <= 0.01 * kLaneGBps[generation])
        return {static_cast<int>(generation) + 1, width};
  }
  return {};
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// "cuda3" / "nvml3" -> 3 when `name` is `prefix` and digits; -1 otherwise.
int numbered_name(std::string_view name, std::string_view prefix) {
  if (!starts_with(name, prefix)) return -1;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.empty() || digits.size() > 6 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return static_cast<int>(parse_xml_integer(digits).value_or(-1));
}

// One <object> of the file.
struct HwlocObject {
  const XmlElement* element = nullptr;
  std::string type;              // v1's "Socket" is "Package"
  int parent = -1;               // index in objects, -1 for the root object
  std::vector<size_t> children;  // indexes in objects, in document order
  long long gp_index = -1;
  int os_index = -1;
  std::string name;
  std::string subtype;
  std::optional<PciType> pci_type;  // PCIDev and PCI bridges

  const std::string* attribute(std::string_view key) const { return element->attribute(key); }
  // The value of child <info name="key" value="..."/>, nullptr when absent.
  const std::string* info(std::string_view key) const {
    for (const XmlElement& child : element->children) {
      if (child.name != "info") continue;
      const std::string* info_name = child.attribute("name");
      if (info_name && *info_name == key) return child.attribute("value");
    }
    return nullptr;
  }
  bool is_io() const { return type == "Bridge" || type == "PCIDev" || type == "OSDev"; }
};

class HwlocReader {
 public:
  explicit HwlocReader(const XmlElement& root) : root_(root) {}

  HostTopology read() {
    const std::string* version = root_.attribute("version");
    read_version(version);
    flatten_objects();
    count_and_describe_cpus();
    find_gpus();
    read_nvlink_bandwidth();
    find_nics();
    number_gpus();
    topology_.sources.push_back(
        {"hwloc", true, "hwloc XML version " + (version ? *version : std::string("1.x"))});
    return std::move(topology_);
  }

 private:
  enum class OsDevKind { kOther, kGpu, kNetwork, kOpenFabrics };

  void note(const std::string& text) { add_reader_note(topology_.notes, "hwloc XML", text); }
  std::string where(const HwlocObject& object) const {
    return object.type + " at line " + std::to_string(object.element->line);
  }

  void read_version(const std::string* version) {
    if (!version) {
      version_major_ = 1;
      return;
    }
    const std::optional<long long> major =
        parse_xml_integer(version->substr(0, version->find('.')));
    if (!major || *major < 1) {
      note("topology version " + quoted_for_message(*version) + " not understood; read as 2.x");
      version_major_ = 2;
    } else {
      if (*major > 3) note("topology version " + *version + " is newer than 3.0; read as 3.0");
      version_major_ = static_cast<int>(std::min<long long>(*major, 3));
    }
  }

  // All <object>s in document order with their parents. Depth-first with an
  // explicit stack (the parser already bounds the depth; this keeps it flat).
  void flatten_objects() {
    struct Pending {
      const XmlElement* element;
      int parent;
    };
    std::vector<Pending> pending;
    auto push_children = [&pending](const XmlElement& element, int parent) {
      for (auto child = element.children.rbegin(); child != element.children.rend(); ++child)
        if (child->name == "object") pending.push_back({&*child, parent});
    };
    push_children(root_, -1);
    while (!pending.empty()) {
      const Pending next = pending.back();
      pending.pop_back();
      HwlocObject object;
      object.element = next.element;
      object.parent = next.parent;
      if (const std::string* type = next.element->attribute("type")) object.type = *type;
      if (object.type == "Socket") object.type = "Package";
      if (object.type.empty())
        note("object at line " + std::to_string(next.element->line) + " has no type");
      if (const std::string* gp = next.element->attribute("gp_index")) {
        const std::optional<long long> value = parse_xml_integer(*gp);
        if (value && *value >= 0)
          object.gp_index = *value;
        else
          note(where(object) + ": gp_index " + quoted_for_message(*gp) + " is not a number");
      }
      if (const std::string* os_index = next.element->attribute("os_index")) {
        const std::optional<long long> value = parse_xml_integer(*os_index);
        if (value && *value >= 0 && *value <= INT32_MAX)
          object.os_index = static_cast<int>(*value);
        else
          note(where(object) + ": os_index " + quoted_for_message(*os_index) + " is not a number");
      }
      if (const std::string* name = next.element->attribute("name")) object.name = *name;
      if (const std::string* subtype = next.element->attribute("subtype"))
        object.subtype = *subtype;
      if (const std::string* pci_type = next.element->attribute("pci_type")) {
        object.pci_type = parse_pci_type(*pci_type);
        if (!object.pci_type)
          note(where(object) + ": pci_type " + quoted_for_message(*pci_type) + " not understood");
      }
      const int index = static_cast<int>(objects_.size());
      if (object.gp_index >= 0) by_gp_index_.emplace(object.gp_index, static_cast<size_t>(index));
      if (next.parent >= 0)
        objects_[static_cast<size_t>(next.parent)].children.push_back(objects_.size());
      objects_.push_back(std::move(object));
      push_children(*next.element, index);
    }
  }

  void count_and_describe_cpus() {
    for (const HwlocObject& object : objects_) {
      if (object.type == "NUMANode") ++topology_.numa_nodes;
      if (object.type == "Package") ++topology_.packages;
      if (object.type == "Core") ++topology_.cores;
      if (object.type == "PU") ++topology_.pus;
      if (topology_.cpu_model.empty() && object.type == "Package")
        if (const std::string* model = object.info("CPUModel")) topology_.cpu_model = *model;
      if (topology_.hostname.empty() && object.type == "Machine")
        if (const std::string* host = object.info("HostName")) topology_.hostname = *host;
    }
    // Some exports (hwloc 3.0) put the machine's infos at the <topology> level.
    HwlocObject top_level;
    top_level.element = &root_;
    if (topology_.hostname.empty())
      if (const std::string* host = top_level.info("HostName")) topology_.hostname = *host;
    for (const HwlocObject& object : objects_) {
      if (!topology_.cpu_model.empty()) break;
      if (const std::string* model = object.info("CPUModel")) topology_.cpu_model = *model;
    }
  }

  OsDevKind osdev_kind(const HwlocObject& object) {
    const std::string* type_text = object.attribute("osdev_type");
    if (!type_text) return OsDevKind::kOther;
    const std::optional<long long> type = parse_xml_integer(*type_text);
    if (!type || *type < 0) {
      // Not hwloc's own writing, but a name says what it is.
      if (*type_text == "Network") return OsDevKind::kNetwork;
      if (*type_text == "OpenFabrics") return OsDevKind::kOpenFabrics;
      if (*type_text == "GPU" || *type_text == "CoProc") return OsDevKind::kGpu;
      note(where(object) + ": osdev_type " + quoted_for_message(*type_text) + " not understood");
      return OsDevKind::kOther;
    }
    if (version_major_ >= 3) {
      // hwloc_obj_osdev_type_e bits; an HCA is network and OpenFabrics.
      constexpr long long kGpuBit = 1 << 2, kCoprocessorBit = 1 << 3, kNetworkBit = 1 << 4,
                          kOpenFabricsBit = 1 << 5;
      if (*type & kOpenFabricsBit) return OsDevKind::kOpenFabrics;
      if (*type & kNetworkBit) return OsDevKind::kNetwork;
      if (*type & (kGpuBit | kCoprocessorBit)) return OsDevKind::kGpu;
      return OsDevKind::kOther;
    }
    // 1.x and 2.x: 0 block, 1 GPU, 2 network, 3 OpenFabrics, 4 DMA, 5 co-processor.
    switch (*type) {
      case 1:
      case 5:
        return OsDevKind::kGpu;
      case 2:
        return OsDevKind::kNetwork;
      case 3:
        return OsDevKind::kOpenFabrics;
      default:
        return OsDevKind::kOther;
    }
  }

  std::string object_label(const HwlocObject& object, size_t index) const {
    return object.gp_index >= 0 ? std::to_string(object.gp_index) : "#" + std::to_string(index);
  }

  bool is_host_bridge(const HwlocObject& bridge) const {
    const std::string* bridge_type = bridge.attribute("bridge_type");
    if (bridge_type) return starts_with(*bridge_type, "0");
    return bridge.attribute("pci_busid") == nullptr;  // a host bridge has no bus id of its own
  }

  // A host bridge by the root bus it opens, "pci0000:2b" (the name Linux
  // gives the root bus in sysfs), from bridge_pci "0000:[2b-3b]".
  std::string host_bridge_id(const HwlocObject& bridge, size_t index) const {
    if (const std::string* range = bridge.attribute("bridge_pci")) {
      const std::string_view text = *range;
      const bool shaped = text.size() >= 9 && text[4] == ':' && text[5] == '[' &&
                          parse_xml_integer("0x" + std::string(text.substr(0, 4))) &&
                          parse_xml_integer("0x" + std::string(text.substr(6, 2)));
      if (shaped) {
        std::string id = "pci" + std::string(text.substr(0, 5)) + std::string(text.substr(6, 2));
        std::transform(id.begin(), id.end(), id.begin(), [](char c) {
          return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        });
        return id;
      }
    }
    return "hostbridge@" + object_label(bridge, index);
  }

  std::string bus_id_of(const HwlocObject& object, size_t index) {
    const std::string* bus = object.attribute("pci_busid");
    if (!bus) return "";
    std::string normalized = normalize_bus_id(*bus);
    if (normalized.empty())
      note(where(object) + " (gp_index " + object_label(object, index) + "): pci_busid " +
           quoted_for_message(*bus) + " is not a PCI bus id");
    return normalized;
  }

  // NUMA node: the only bit of the nodeset of the attachment point (or of its
  // nearest ancestor that has one), else a NUMANode ancestor (v1). Package:
  // a Package ancestor, else the one Package whose cpuset covers it.
  void locate(int attachment, PciPlacement& placement) {
    for (int at = attachment; at >= 0; at = objects_[static_cast<size_t>(at)].parent) {
      const HwlocObject& object = objects_[static_cast<size_t>(at)];
      if (const std::string* nodeset = object.attribute("nodeset")) {
        if (const std::optional<HwlocBitmap> bits = parse_bitmap(*nodeset))
          placement.numa_node = bits->single_bit();
        break;
      }
      if (object.type == "NUMANode") {
        placement.numa_node = object.os_index;
        break;
      }
    }
    for (int at = attachment; at >= 0; at = objects_[static_cast<size_t>(at)].parent) {
      if (objects_[static_cast<size_t>(at)].type == "Package") {
        placement.package = objects_[static_cast<size_t>(at)].os_index;
        return;
      }
    }
    if (attachment < 0) return;
    const std::string* cpuset_text = objects_[static_cast<size_t>(attachment)].attribute("cpuset");
    const std::optional<HwlocBitmap> cpuset =
        cpuset_text ? parse_bitmap(*cpuset_text) : std::nullopt;
    if (!cpuset || cpuset->empty()) return;
    int covering = -1;
    for (const HwlocObject& object : objects_) {
      if (object.type != "Package") continue;
      const std::string* package_text = object.attribute("cpuset");
      const std::optional<HwlocBitmap> package_set =
          package_text ? parse_bitmap(*package_text) : std::nullopt;
      if (!package_set || !package_set->contains(*cpuset)) continue;
      if (covering >= 0) return;  // two packages cover it: not one package's
      covering = object.os_index;
    }
    placement.package = covering;
  }

  // Bus id, bridges up to the host bridge, NUMA node and package, and link of
  // the PCI device `device`.
  PciPlacement placement_of(size_t device) {
    const HwlocObject& object = objects_[device];
    PciPlacement placement;
    placement.bus_id = bus_id_of(object, device);
    if (const std::string* speed = object.attribute("pci_link_speed")) {
      if (const std::optional<double> GBps = parse_xml_number(*speed))
        placement.link = link_from_GBps(*GBps);
      else
        note(where(object) + ": pci_link_speed " + quoted_for_message(*speed) + " is not a number");
    }
    int at = object.parent;
    for (; at >= 0; at = objects_[static_cast<size_t>(at)].parent) {
      const size_t index = static_cast<size_t>(at);
      const HwlocObject& above = objects_[index];
      if (above.type == "Bridge") {
        if (is_host_bridge(above)) {
          placement.path.push_back({PciHop::Kind::kHostBridge, host_bridge_id(above, index)});
          at = above.parent;
          break;
        }
        std::string bus = bus_id_of(above, index);
        if (bus.empty()) bus = "bridge@" + object_label(above, index);
        placement.path.push_back({PciHop::Kind::kBridge, std::move(bus)});
      } else if (!above.is_io()) {
        // No host bridge object (hwloc 2.x may leave it out): the CPU-side
        // object the tree hangs from stands for it, one id per attachment.
        placement.path.push_back(
            {PciHop::Kind::kHostBridge, "hostbridge@" + object_label(above, index)});
        break;
      }
    }
    while (at >= 0 && objects_[static_cast<size_t>(at)].is_io())
      at = objects_[static_cast<size_t>(at)].parent;
    locate(at, placement);
    return placement;
  }

  bool is_nvidia_gpu(const HwlocObject& object) const {
    if (object.type != "PCIDev" || !object.pci_type) return false;
    return object.pci_type->vendor == 0x10de &&
           (object.pci_type->class_id == 0x0300 || object.pci_type->class_id == 0x0302);
  }
  bool is_nvswitch(const HwlocObject& object) const {
    if (object.type != "PCIDev") return false;
    if (object.subtype == "NVSwitch") return true;
    return object.pci_type && object.pci_type->vendor == 0x10de &&
           object.pci_type->class_id == 0x0680;
  }

  void find_gpus() {
    gpu_of_object_.assign(objects_.size(), -1);
    for (size_t index = 0; index < objects_.size(); ++index) {
      const HwlocObject& device = objects_[index];
      if (!is_nvidia_gpu(device)) continue;
      Gpu gpu;
      gpu.pci = placement_of(index);
      gpu.pcie_current = gpu.pci.link;
      int cuda_number = -1, nvml_number = -1;
      std::string model, uuid;
      for (const size_t child : device.children) {
        const HwlocObject* osdev = &objects_[child];
        if (osdev->type != "OSDev") continue;
        const int cuda = numbered_name(osdev->name, "cuda");
        const int nvml = numbered_name(osdev->name, "nvml");
        if (cuda < 0 && nvml < 0) continue;
        if (cuda >= 0 && cuda_number < 0) cuda_number = cuda;
        if (nvml >= 0 && nvml_number < 0) nvml_number = nvml;
        if (const std::string* value = osdev->info("GPUModel"); value && model.empty())
          model = *value;
        if (const std::string* value = osdev->info("NVIDIAUUID"); value && uuid.empty())
          uuid = *value;
      }
      if (model.empty())
        if (const std::string* value = device.info("PCIDevice")) model = *value;
      if (model.empty()) {
        char ids[32];
        std::snprintf(ids, sizeof ids, "[%04x:%04x]",
                      static_cast<unsigned>(device.pci_type->vendor),
                      static_cast<unsigned>(device.pci_type->device));
        model = std::string("NVIDIA GPU ") + ids;
      }
      if (uuid.empty())
        if (const std::string* value = device.info("NVIDIAUUID")) uuid = *value;
      gpu.name = model;
      gpu.uuid = uuid;
      // CUDA's number is what a program passes to cudaSetDevice; NVML's when no CUDA device.
      gpu.index = cuda_number >= 0 ? cuda_number : nvml_number;
      gpu_of_object_[index] = static_cast<int>(topology_.gpus.size());
      topology_.gpus.push_back(std::move(gpu));
    }
  }

  // GPUs without a CUDA/NVML number take the lowest free numbers.
  void number_gpus() { number_unindexed_gpus(topology_); }

  // The PCI device an object of the matrix stands for: itself, or an OS
  // device's PCI parent.
  int pci_device_of(size_t index) const {
    const HwlocObject& object = objects_[index];
    if (object.type == "PCIDev") return static_cast<int>(index);
    if (object.type == "OSDev" && object.parent >= 0 &&
        objects_[static_cast<size_t>(object.parent)].type == "PCIDev")
      return object.parent;
    return -1;
  }

  static std::vector<std::string_view> split_words(const std::string& text) {
    std::vector<std::string_view> words;
    const std::string_view view = text;
    size_t at = 0;
    while (at < view.size()) {
      while (at < view.size() && std::isspace(static_cast<unsigned char>(view[at]))) ++at;
      const size_t start = at;
      while (at < view.size() && !std::isspace(static_cast<unsigned char>(view[at]))) ++at;
      if (at > start) words.push_back(view.substr(start, at - start));
    }
    return words;
  }

  // The object an index of a distances matrix names: "OSDev:802" (gp_index,
  // hetero matrices), "802" with indexing="gp", or an os_index of `type`.
  int resolve_distance_index(std::string_view word, bool by_os_index, const std::string& type) {
    std::string_view number = word;
    std::string_view word_type = type;
    if (const size_t colon = word.find(':'); colon != std::string_view::npos) {
      word_type = word.substr(0, colon);
      number = word.substr(colon + 1);
    }
    const std::optional<long long> value = parse_xml_integer(number);
    if (!value || *value < 0) return -1;
    if (!by_os_index) {
      const auto found = by_gp_index_.find(*value);
      return found == by_gp_index_.end() ? -1 : static_cast<int>(found->second);
    }
    for (size_t index = 0; index < objects_.size(); ++index)
      if (objects_[index].type == word_type && objects_[index].os_index == *value)
        return static_cast<int>(index);
    return -1;
  }

  void read_nvlink_bandwidth() {
    for (const XmlElement& matrix : root_.children) {
      if (matrix.name != "distances2hetero" && matrix.name != "distances2") continue;
      const std::string* name = matrix.attribute("name");
      if (!name || *name != "NVLinkBandwidth") continue;
      const std::string context = "NVLinkBandwidth at line " + std::to_string(matrix.line);
      const std::string* count_text = matrix.attribute("nbobjs");
      const std::optional<long long> count =
          count_text ? parse_xml_integer(*count_text) : std::nullopt;
      if (!count || *count <= 0 || *count > 100000) {
        note(context + ": nbobjs missing or not a sensible count; matrix skipped");
        continue;
      }
      std::string index_text, value_text;
      for (const XmlElement& part : matrix.children) {
        if (part.name == "indexes") index_text += part.text + " ";
        if (part.name == "u64values") value_text += part.text + " ";
      }
      const std::vector<std::string_view> indexes = split_words(index_text);
      const std::vector<std::string_view> values = split_words(value_text);
      const size_t objects = static_cast<size_t>(*count);
      if (indexes.size() != objects || values.size() != objects * objects) {
        note(context + ": " + std::to_string(indexes.size()) + " indexes and " +
             std::to_string(values.size()) + " values for " + std::to_string(objects) +
             " objects; matrix skipped");
        continue;
      }
      const std::string* indexing = matrix.attribute("indexing");
      const bool by_os_index = indexing && *indexing == "os";
      const std::string* type_attribute = matrix.attribute("type");
      const std::string type = type_attribute ? *type_attribute : "";
      std::vector<int> members(objects, -1);
      for (size_t i = 0; i < objects; ++i) {
        members[i] = resolve_distance_index(indexes[i], by_os_index, type);
        if (members[i] < 0)
          note(context + ": index " + quoted_for_message(indexes[i]) + " names no object");
      }
      bool noted_value = false;
      for (size_t row = 0; row < objects; ++row) {
        if (members[row] < 0) continue;
        const int device = pci_device_of(static_cast<size_t>(members[row]));
        if (device < 0 || gpu_of_object_[static_cast<size_t>(device)] < 0) continue;
        Gpu& gpu = topology_.gpus[static_cast<size_t>(gpu_of_object_[static_cast<size_t>(device)])];
        for (size_t column = 0; column < objects; ++column) {
          if (column == row || members[column] < 0) continue;
          const std::optional<long long> MBps = parse_xml_integer(values[row * objects + column]);
          if (!MBps || *MBps < 0) {
            if (!noted_value)
              note(context + ": value " + quoted_for_message(values[row * objects + column]) +
                   " is not a number");
            noted_value = true;
            continue;
          }
          if (*MBps == 0) continue;
          const int remote = pci_device_of(static_cast<size_t>(members[column]));
          if (remote < 0) {
            note(context + ": NVLink to " + quoted_for_message(indexes[column]) +
                 ", not a PCI device, left out");
            continue;
          }
          NvLink link;
          link.remote_bus_id =
              bus_id_of(objects_[static_cast<size_t>(remote)], static_cast<size_t>(remote));
          link.remote_is_switch = is_nvswitch(objects_[static_cast<size_t>(remote)]);
          link.bandwidth_GBps = static_cast<double>(*MBps) / 1000.0;
          gpu.nvlinks.push_back(std::move(link));
        }
      }
    }
  }

  static std::string ib_port_state(long long state) {
    switch (state) {
      case 1:
        return "down";
      case 2:
        return "init";
      case 3:
        return "armed";
      case 4:
        return "active";
      case 5:
        return "active_defer";
      default:
        return "unknown";
    }
  }

  // The port numbers an OpenFabrics device's infos mention (Port1State,
  // Port1LID, Port1GID0, ...); port 1 when none.
  static std::vector<int> rdma_ports(const HwlocObject& device) {
    constexpr size_t kMaxPorts = 64;  // HCAs have one or two
    std::set<int> ports;
    for (const XmlElement& child : device.element->children) {
      if (child.name != "info") continue;
      const std::string* info_name = child.attribute("name");
      if (!info_name || !starts_with(*info_name, "Port")) continue;
      size_t end = 4;  // at most 5 digits: no overflow
      while (end < info_name->size() && end < 9 &&
             std::isdigit(static_cast<unsigned char>((*info_name)[end])))
        ++end;
      if (end > 4) ports.insert(std::stoi(info_name->substr(4, end - 4)));
    }
    if (ports.empty()) return {1};
    std::vector<int> numbers(ports.begin(), ports.end());
    if (numbers.size() > kMaxPorts) numbers.resize(kMaxPorts);
    return numbers;
  }

  static bool nonzero_gid(const std::string& gid) {
    return std::any_of(gid.begin(), gid.end(), [](char c) { return c != '0' && c != ':'; });
  }

  void find_nics() {
    struct NicSource {
      size_t nic;          // in topology_.nics
      int pci_device;      // object index, -1 none
      std::string device;  // the OS device's name
      int port;            // RDMA port; netdev: its "Port" info, -1 none
      bool rdma;
    };
    std::vector<NicSource> sources;
    for (size_t index = 0; index < objects_.size(); ++index) {
      const HwlocObject& osdev = objects_[index];
      if (osdev.type != "OSDev") continue;
      const OsDevKind kind = osdev_kind(osdev);
      if (kind != OsDevKind::kNetwork && kind != OsDevKind::kOpenFabrics) continue;
      if (osdev.name.empty()) {
        note(where(osdev) + ": a network device without a name, left out");
        continue;
      }
      const int pci_device =
          osdev.parent >= 0 && objects_[static_cast<size_t>(osdev.parent)].type == "PCIDev"
              ? osdev.parent
              : -1;
      const PciPlacement placement =
          pci_device >= 0 ? placement_of(static_cast<size_t>(pci_device)) : PciPlacement{};
      if (kind == OsDevKind::kNetwork) {
        Nic nic;
        nic.name = osdev.name;
        const std::string* address = osdev.info("Address");
        // IPoIB interfaces: named ib*, with a 20-byte hardware address.
        const bool ipoib = starts_with(osdev.name, "ib") || (address && address->size() > 40);
        nic.kind = osdev.subtype == "BXI" ? NicKind::kOther
                                          : (ipoib ? NicKind::kInfiniband : NicKind::kEthernet);
        nic.pci = placement;
        int port = -1;
        if (const std::string* port_text = osdev.info("Port"))
          if (const std::optional<long long> value = parse_xml_integer(*port_text);
              value && *value >= 0 && *value < 1000)
            port = static_cast<int>(*value);
        sources.push_back({topology_.nics.size(), pci_device, osdev.name, port, false});
        topology_.nics.push_back(std::move(nic));
        continue;
      }
      for (const int port : rdma_ports(osdev)) {
        const std::string prefix = "Port" + std::to_string(port);
        Nic nic;
        nic.name = osdev.name + ":" + std::to_string(port);
        nic.kind = NicKind::kInfiniband;
        if (const std::string* layer = osdev.info(prefix + "LinkLayer");
            layer && *layer == "Ethernet")
          nic.kind = NicKind::kRoce;
        if (const std::string* state = osdev.info(prefix + "State")) {
          const std::optional<long long> value = parse_xml_integer(*state);
          nic.state = value ? ib_port_state(*value) : "unknown";
          if (!value)
            note(where(osdev) + ": " + prefix + "State " + quoted_for_message(*state) +
                 " is not a number");
        }
        if (const std::string* gid = osdev.info(prefix + "GID0")) nic.has_gid = nonzero_gid(*gid);
        nic.pci = placement;
        sources.push_back({topology_.nics.size(), pci_device, osdev.name, port, true});
        topology_.nics.push_back(std::move(nic));
      }
    }
    // A network interface and an RDMA port of the same PCI function belong
    // together: by the interface's Port info, or when each is the only one.
    std::map<int, std::vector<const NicSource*>> by_pci_device;
    for (const NicSource& source : sources)
      if (source.pci_device >= 0) by_pci_device[source.pci_device].push_back(&source);
    for (const NicSource& rdma : sources) {
      if (!rdma.rdma || rdma.pci_device < 0) continue;
      std::vector<const NicSource*> netdevs, ports;
      for (const NicSource* other : by_pci_device[rdma.pci_device])
        (other->rdma ? ports : netdevs).push_back(other);
      const NicSource* match = nullptr;
      for (const NicSource* netdev : netdevs)
        if (netdev->port == rdma.port) match = netdev;
      if (!match && netdevs.size() == 1 && ports.size() == 1) match = netdevs[0];
      if (!match) continue;
      topology_.nics[rdma.nic].netdev = match->device;
      topology_.nics[match->nic].rdma_device = rdma.device;
    }
  }

  const XmlElement& root_;
  HostTopology topology_;
  int version_major_ = 2;
  std::vector<HwlocObject> objects_;
  std::map<long long, size_t> by_gp_index_;
  std::vector<int> gpu_of_object_;  // object index -> index in topology_.gpus, -1
};

}  // namespace

HostTopology read_hwloc_xml(std::string_view text) {
  XmlElement root;
  try {
    root = parse_xml(text);
  } catch (const TopologyError& error) {
    throw TopologyError(std::string("hwloc XML: ") + error.what());
  }
  if (root.name != "topology")
    throw TopologyError("hwloc XML: line " + std::to_string(root.line) + ": the root element is <" +
                        root.name.substr(0, 40) + ">, not hwloc's <topology>");
  return HwlocReader(root).read();
}

}  // namespace ccscope::topo
