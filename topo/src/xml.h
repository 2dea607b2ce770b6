#pragma once
// A small XML reader for topology files (hwloc's export, NCCL's topology
// dump), so that reading them needs no library: elements, attributes,
// character data, comments, CDATA, the <?xml?> declaration and a DOCTYPE
// (skipped). No namespaces, no DTD-defined entities: the files we read use
// neither. Iterative, with a nesting limit, so damaged input cannot exhaust
// the stack; malformed input throws TopologyError naming the line.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccscope::topo {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // in file order, entities decoded
  std::vector<XmlElement> children;
  // Character data directly inside this element, entities decoded; runs of
  // only whitespace between child elements are dropped.
  std::string text;
  size_t line = 0;  // where the start tag begins, 1-based

  // The value of attribute `attribute_name`, nullptr when absent.
  const std::string* attribute(std::string_view attribute_name) const;
};

// Deeper nesting than this is refused (hwloc files nest about 15 deep).
inline constexpr size_t kMaxXmlDepth = 200;
// More attributes on one element than this are refused (hwloc writes ~15);
// it keeps the check for repeated attributes cheap.
inline constexpr size_t kMaxXmlAttributes = 1024;

// The document's root element. Throws TopologyError, "line N: what", for
// anything that is not one well-formed element (with optional prolog,
// comments and processing instructions around it).
XmlElement parse_xml(std::string_view text);

// Helpers of the readers for attribute values.
// A whole decimal integer ("-1", "42"), or hexadecimal with "0x"; surrounding
// white space allowed; nullopt for anything else or out of range.
std::optional<long long> parse_xml_integer(std::string_view text);
// A whole decimal number ("15.753846", "1e3"); nullopt otherwise (also inf/nan).
std::optional<double> parse_xml_number(std::string_view text);
// `text` quoted for a note or an error message: at most `max_chars` of it,
// control and non-ASCII bytes as '?'.
std::string quoted_for_message(std::string_view text, size_t max_chars = 40);
// Adds "READER: TEXT" to a reader's notes, the first 50 of them, then one "READER: more
// problems not listed": a damaged file should not bury the report in notes.
void add_reader_note(std::vector<std::string>& notes, std::string_view reader,
                     const std::string& text);

}  // namespace ccscope::topo
