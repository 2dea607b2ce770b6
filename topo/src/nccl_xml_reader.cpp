// NCCL's topology dump (NCCL_TOPO_DUMP_FILE, src/graph/xml.cc writes it):
//   <system version="1">
//     <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" ...>
//       <pci busid="0000:1a:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
//         <pci busid="0000:1b:00.0" class="0x030200" vendor="0x10de" ...>
//           <gpu dev="0" sm="90" rank="0" gdr="1">
//             <nvlink target="0000:c3:00.0" count="18" tclass="0x068000"/>
//         ...
//       <nic><net name="mlx5_0" dev="0" speed="200000" port="1" .../></nic>
// A <pci> holding a <gpu> or <nic> is that device's own; the enclosing ones
// are the switches above it; the <cpu> is where the tree meets the host.
// Also detect_topology_format, for both readers.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/common/text.h"
#include "ccscope/topo/nvidia_smi.h"
#include "ccscope/topo/readers.h"
#include "xml.h"

namespace ccscope::topo {
namespace {

constexpr long long kMaxLinksPerTarget = 64;  // NVLink count of one target (18 on H100)
constexpr const char* kNvSwitchClass = "0x068000";

class NcclDumpReader {
 public:
  HostTopology read(const XmlElement& system) {
    Context context;
    visit_children(system, context, 1);
    // GPUs without a usable dev take the lowest free numbers, in order.
    number_unindexed_gpus(topology_);
    topology_.sources.push_back({"nccl", true, "NCCL topology dump"});
    return std::move(topology_);
  }

 private:
  // Where the walk is: the <cpu> and the <pci> elements around it, outermost first.
  struct Context {
    const XmlElement* cpu = nullptr;
    std::vector<const XmlElement*> pcis;
  };

  void note(const std::string& text) {
    add_reader_note(topology_.notes, "NCCL topology dump", text);
  }

  // An integer attribute; `fallback` when absent, and a note when garbled.
  long long integer(const XmlElement& element, std::string_view key, long long fallback) {
    const std::string* text = element.attribute(key);
    if (!text) return fallback;
    const std::optional<long long> value = parse_xml_integer(*text);
    if (!value) {
      note("<" + element.name + "> at line " + std::to_string(element.line) + ": " +
           std::string(key) + "=" + quoted_for_message(*text) + " is not a number");
      return fallback;
    }
    return *value;
  }

  // Recursion over the tree is bounded: parse_xml refuses nesting deeper
  // than kMaxXmlDepth.
  void visit_children(const XmlElement& element, Context& context, size_t depth) {
    for (const XmlElement& child : element.children) visit(child, context, depth + 1);
  }

  void visit(const XmlElement& element, Context& context, size_t depth) {
    if (depth > kMaxXmlDepth) return;
    if (element.name == "cpu") {
      const XmlElement* outer = context.cpu;
      std::vector<const XmlElement*> outer_pcis;
      outer_pcis.swap(context.pcis);  // a <cpu> starts a new tree
      context.cpu = &element;
      visit_children(element, context, depth);
      context.cpu = outer;
      context.pcis.swap(outer_pcis);
    } else if (element.name == "pci") {
      context.pcis.push_back(&element);
      visit_children(element, context, depth);
      context.pcis.pop_back();
    } else if (element.name == "gpu") {
      read_gpu(element, context);
    } else if (element.name == "net") {
      read_net(element, context);
    } else {
      visit_children(element, context, depth);  // <nic>, and what newer NCCLs add
    }
  }

  std::string bus_id(const XmlElement& pci) {
    const std::string* text = pci.attribute("busid");
    if (!text) return "";
    std::string normalized = normalize_bus_id(*text);
    if (normalized.empty()) {
      // NCCL's stand-ins ("fffffff:ffff:ff" for a device it cannot see) are
      // names, not errors; kept as they are, lower case.
      return ascii_lower(*text);
    }
    return normalized;
  }

  // "32.0 GT/s PCIe" -> 5; 0 when empty or not one of PCIe's rates.
  static int generation_from_speed(const std::string& text) {
    static constexpr double kGTps[] = {2.5, 5, 8, 16, 32, 64};
    const size_t end = text.find_first_not_of("0123456789.");
    const std::optional<double> GTps = parse_xml_number(text.substr(0, end));
    if (!GTps) return 0;
    for (size_t generation = 0; generation < std::size(kGTps); ++generation)
      if (std::fabs(*GTps - kGTps[generation]) < 0.01) return static_cast<int>(generation) + 1;
    return 0;
  }

  // The device's own <pci> (the innermost), the ones above it, the <cpu>.
  PciPlacement placement(const Context& context) {
    PciPlacement placement;
    if (!context.pcis.empty()) {
      const XmlElement& own = *context.pcis.back();
      placement.bus_id = bus_id(own);
      if (const std::string* speed = own.attribute("link_speed"); speed && !speed->empty()) {
        placement.link.generation = generation_from_speed(*speed);
        if (placement.link.generation == 0)
          note("<pci> at line " + std::to_string(own.line) + ": link_speed " +
               quoted_for_message(*speed) + " not understood");
      }
      const long long width = integer(own, "link_width", 0);
      static constexpr long long kWidths[] = {1, 2, 4, 8, 12, 16, 32};
      if (std::find(std::begin(kWidths), std::end(kWidths), width) != std::end(kWidths))
        placement.link.width = static_cast<int>(width);  // 0: NCCL did not know
      for (size_t up = context.pcis.size() - 1; up-- > 0;)
        placement.path.push_back({PciHop::Kind::kBridge, bus_id(*context.pcis[up])});
    }
    if (context.cpu) {
      const long long numa = integer(*context.cpu, "numaid", -1);
      const bool known = numa >= 0 && numa <= 1 << 20;
      placement.path.push_back(
          {PciHop::Kind::kHostBridge, known ? "cpu" + std::to_string(numa) : std::string("cpu")});
      if (known) placement.numa_node = static_cast<int>(numa);
    }
    return placement;
  }

  void read_gpu(const XmlElement& element, const Context& context) {
    Gpu gpu;
    const long long dev = integer(element, "dev", -1);
    gpu.index = dev >= 0 && dev < 1 << 20 ? static_cast<int>(dev) : -1;
    const long long sm = integer(element, "sm", 0);
    gpu.cuda_compute_capability = sm > 0 && sm < 1000 ? static_cast<int>(sm) : 0;
    gpu.pci = placement(context);
    gpu.pcie_current = gpu.pci.link;
    if (context.pcis.empty())
      note("<gpu> at line " + std::to_string(element.line) + " is not inside a <pci>");
    for (const XmlElement& link : element.children) {
      if (link.name != "nvlink") continue;
      const std::string* target = link.attribute("target");
      if (!target) {
        note("<nvlink> at line " + std::to_string(link.line) + " without a target, left out");
        continue;
      }
      long long count = integer(link, "count", 1);
      if (count < 0 || count > kMaxLinksPerTarget) {
        note("<nvlink> at line " + std::to_string(link.line) + ": count " + std::to_string(count) +
             " out of range, read as 1");
        count = 1;
      }
      const std::string* target_class = link.attribute("tclass");
      NvLink nvlink;
      nvlink.remote_bus_id = normalize_bus_id(*target);
      if (nvlink.remote_bus_id.empty()) nvlink.remote_bus_id = ascii_lower(*target);
      nvlink.remote_is_switch = target_class && ascii_lower(*target_class) == kNvSwitchClass;
      // NCCL counts the links to one target; one entry per link, as NVML lists them.
      for (long long i = 0; i < count; ++i) gpu.nvlinks.push_back(nvlink);
    }
    topology_.gpus.push_back(std::move(gpu));
  }

  void read_net(const XmlElement& element, const Context& context) {
    const std::string* name = element.attribute("name");
    if (!name || name->empty()) {
      note("<net> at line " + std::to_string(element.line) + " without a name, left out");
      return;
    }
    Nic nic;
    nic.name = *name;
    const std::string lower_name = ascii_lower(*name);
    // NCCL's IB transport names its devices after the HCA (mlx5_0); its
    // socket transport after the interface (eth0, ib0 for IPoIB).
    const bool rdma = lower_name.rfind("mlx", 0) == 0;
    nic.kind = rdma || lower_name.rfind("ib", 0) == 0 ? NicKind::kInfiniband : NicKind::kEthernet;
    const long long port = integer(element, "port", 0);
    if (rdma && port > 0 && port < 1000 && name->find(':') == std::string::npos)
      nic.name += ":" + std::to_string(port);
    const long long Mbps = integer(element, "speed", 0);
    if (Mbps > 0) nic.rate_Gbps = static_cast<double>(Mbps) / 1000.0;
    nic.state = "up";  // NCCL lists the devices it can use
    nic.pci = placement(context);
    topology_.nics.push_back(std::move(nic));
  }

  HostTopology topology_;
};

// Past white space, a byte-order mark, <?...?>, comments and a DOCTYPE;
// npos when one of them does not end.
size_t skip_xml_prolog(std::string_view text) {
  size_t at = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  for (;;) {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
    const std::string_view rest = text.substr(at);
    std::string_view terminator;
    if (rest.substr(0, 2) == "<?")
      terminator = "?>";
    else if (rest.substr(0, 4) == "<!--")
      terminator = "-->";
    else if (rest.substr(0, 9) == "<!DOCTYPE")
      terminator = ">";  // hwloc's has no internal subset
    else
      return at;
    const size_t end = text.find(terminator, at + 2);
    if (end == std::string_view::npos) return std::string_view::npos;
    at = end + terminator.size();
  }
}

bool opens_element(std::string_view text, std::string_view name) {
  if (text.substr(0, name.size() + 1) != "<" + std::string(name)) return false;
  if (text.size() == name.size() + 1) return true;  // cut short, still says what it is
  const char after = text[name.size() + 1];
  return after == '>' || after == '/' || std::isspace(static_cast<unsigned char>(after));
}

}  // namespace

HostTopology read_nccl_topology_xml(std::string_view text) {
  XmlElement root;
  try {
    root = parse_xml(text);
  } catch (const TopologyError& error) {
    throw TopologyError(std::string("NCCL topology dump: ") + error.what());
  }
  if (root.name != "system")
    throw TopologyError("NCCL topology dump: line " + std::to_string(root.line) +
                        ": the root element is <" + root.name.substr(0, 40) +
                        ">, not NCCL's <system>");
  return NcclDumpReader().read(root);
}

TopologyFormat detect_topology_format(std::string_view text) {
  size_t at = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
  if (at < text.size() && text[at] == '{') return TopologyFormat::kCcscopeJson;
  const auto text_format = [&] {
    return find_nvidia_smi_topo(text) ? TopologyFormat::kNvidiaSmiText : TopologyFormat::kUnknown;
  };
  at = skip_xml_prolog(text);
  if (at == std::string_view::npos) return text_format();
  const std::string_view rest = text.substr(at);
  if (opens_element(rest, "topology")) return TopologyFormat::kHwlocXml;
  if (opens_element(rest, "system")) return TopologyFormat::kNcclXml;
  return text_format();
}

}  // namespace ccscope::topo
