#include "xml.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "ccscope/topo/topology.h"

namespace ccscope::topo {

const std::string* XmlElement::attribute(std::string_view attribute_name) const {
  for (const auto& [key, value] : attributes)
    if (key == attribute_name) return &value;
  return nullptr;
}

namespace {

bool is_xml_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// XML name characters, simplified: ASCII letters, '_' and ':' start a name,
// digits, '-' and '.' may follow; any non-ASCII byte is taken as part of a
// (UTF-8) name without checking it further.
bool is_name_start(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_' || u == ':' || u >= 0x80;
}
bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

bool all_space(std::string_view text) {
  return std::all_of(text.begin(), text.end(), is_xml_space);
}

void append_utf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xc0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xe0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  }
}

// Builds the tree with an explicit stack of open elements (no recursion), so
// the only limit on nesting is kMaxXmlDepth.
class XmlParser {
 public:
  explicit XmlParser(std::string_view text) : text_(text) {}

  XmlElement parse() {
    if (starts_with("\xEF\xBB\xBF")) pos_ = 3;  // a UTF-8 byte-order mark
    skip_prolog();
    std::vector<XmlElement> open;  // open[0] is the root
    {
      XmlElement root;
      if (read_start_tag(root)) {
        skip_epilog(root.name);
        return root;
      }
      open.push_back(std::move(root));
    }
    for (;;) {
      if (at_end())
        fail_at(pos_, "the file ends inside <" + open.back().name + "> opened on line " +
                          std::to_string(open.back().line));
      if (text_[pos_] != '<') {
        read_text(open.back().text);
      } else if (starts_with("</")) {
        const size_t tag_pos = pos_;
        pos_ += 2;
        const std::string name = read_name("in an end tag");
        skip_space();
        if (at_end() || text_[pos_] != '>')
          fail_at(pos_, "end tag </" + name + " is not closed by '>'");
        ++pos_;
        if (name != open.back().name)
          fail_at(tag_pos, "end tag </" + name + "> does not match <" + open.back().name +
                               "> opened on line " + std::to_string(open.back().line));
        XmlElement done = std::move(open.back());
        open.pop_back();
        if (open.empty()) {
          skip_epilog(done.name);
          return done;
        }
        open.back().children.push_back(std::move(done));
      } else if (starts_with("<!--")) {
        skip_comment();
      } else if (starts_with("<![CDATA[")) {
        read_cdata(open.back().text);
      } else if (starts_with("<?")) {
        skip_processing_instruction();
      } else if (starts_with("<!")) {
        fail_at(pos_, "unexpected markup '<!' inside <" + open.back().name + ">");
      } else {
        if (open.size() >= kMaxXmlDepth)
          fail_at(pos_, "elements nested deeper than " + std::to_string(kMaxXmlDepth));
        XmlElement child;
        if (read_start_tag(child))
          open.back().children.push_back(std::move(child));
        else
          open.push_back(std::move(child));
      }
    }
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  bool starts_with(std::string_view prefix) const {
    return text_.substr(std::min(pos_, text_.size())).substr(0, prefix.size()) == prefix;
  }

  // 1-based line of byte `pos`. Positions mostly grow, so the count goes on
  // from the last one asked; an earlier position (an error) counts again.
  size_t line_at(size_t pos) {
    pos = std::min(pos, text_.size());
    if (pos < counted_to_) {
      counted_to_ = 0;
      counted_line_ = 1;
    }
    counted_line_ +=
        static_cast<size_t>(std::count(text_.begin() + static_cast<std::ptrdiff_t>(counted_to_),
                                       text_.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
    counted_to_ = pos;
    return counted_line_;
  }

  [[noreturn]] void fail_at(size_t pos, const std::string& what) {
    throw TopologyError("line " + std::to_string(line_at(pos)) + ": " + what);
  }

  // Returns true when there was any.
  bool skip_space() {
    const size_t start = pos_;
    while (!at_end() && is_xml_space(text_[pos_])) ++pos_;
    return pos_ != start;
  }

  // Moves past `terminator`, which must come before the end of the file.
  void skip_past(std::string_view terminator, const char* inside) {
    const size_t start = pos_;
    const size_t found = text_.find(terminator, pos_);
    if (found == std::string_view::npos)
      fail_at(text_.size(), std::string("the file ends inside ") + inside + " opened on line " +
                                std::to_string(line_at(start)));
    pos_ = found + terminator.size();
  }
  void skip_comment() { skip_past("-->", "a comment"); }
  void skip_processing_instruction() { skip_past("?>", "a processing instruction <?...?>"); }

  // <!DOCTYPE name SYSTEM "uri" [internal subset]>: '>' inside quotes or the
  // internal subset does not end it.
  void skip_doctype() {
    const size_t start = pos_;
    char quote = 0;
    bool in_subset = false;
    for (pos_ += 2; !at_end(); ++pos_) {
      const char c = text_[pos_];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '[') {
        in_subset = true;
      } else if (c == ']') {
        in_subset = false;
      } else if (c == '>' && !in_subset) {
        ++pos_;
        return;
      }
    }
    fail_at(text_.size(),
            "the file ends inside <!DOCTYPE opened on line " + std::to_string(line_at(start)));
  }

  void read_cdata(std::string& into) {
    const size_t content = pos_ + 9;  // after "<![CDATA["
    skip_past("]]>", "a CDATA section");
    into.append(text_.substr(content, pos_ - 3 - content));
  }

  // Before the root: white space, the declaration, comments, one DOCTYPE.
  void skip_prolog() {
    bool seen_doctype = false;
    for (;;) {
      skip_space();
      if (at_end()) fail_at(pos_, "no root element (the file is empty or only comments)");
      if (starts_with("<?")) {
        skip_processing_instruction();
      } else if (starts_with("<!--")) {
        skip_comment();
      } else if (starts_with("<!DOCTYPE")) {
        if (seen_doctype) fail_at(pos_, "a second <!DOCTYPE");
        seen_doctype = true;
        skip_doctype();
      } else if (text_[pos_] == '<' && pos_ + 1 < text_.size() && is_name_start(text_[pos_ + 1])) {
        return;
      } else {
        fail_at(pos_, "text or markup before the root element where a tag was expected");
      }
    }
  }

  // After the root: only white space, comments and processing instructions.
  void skip_epilog(const std::string& root_name) {
    for (;;) {
      skip_space();
      if (at_end()) return;
      if (starts_with("<?"))
        skip_processing_instruction();
      else if (starts_with("<!--"))
        skip_comment();
      else
        fail_at(pos_, "content after the end of the root element <" + root_name + ">");
    }
  }

  std::string read_name(const char* where) {
    const size_t start = pos_;
    if (at_end() || !is_name_start(text_[pos_])) {
      if (at_end()) fail_at(pos_, std::string("the file ends where a name was expected ") + where);
      fail_at(pos_, std::string("expected a name ") + where);
    }
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // Reads "<name attr="value" ...>" or "<name .../>" at pos_ into `element`;
  // returns true for a self-closing tag.
  bool read_start_tag(XmlElement& element) {
    element.line = line_at(pos_);
    ++pos_;  // '<'
    element.name = read_name("after '<'");
    for (;;) {
      const bool had_space = skip_space();
      if (at_end())
        fail_at(pos_, "the file ends inside the start tag <" + element.name + " opened on line " +
                          std::to_string(element.line));
      const char c = text_[pos_];
      if (c == '>') {
        ++pos_;
        return false;
      }
      if (c == '/') {
        if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '>') {
          pos_ += 2;
          return true;
        }
        fail_at(pos_, "'/' not followed by '>' in the tag <" + element.name + ">");
      }
      if (!is_name_start(c))
        fail_at(pos_, "unexpected character '" + std::string(1, c) + "' in the tag <" +
                          element.name + ">");
      if (!had_space) fail_at(pos_, "no white space before an attribute of <" + element.name + ">");
      if (element.attributes.size() >= kMaxXmlAttributes)
        fail_at(pos_, "more than " + std::to_string(kMaxXmlAttributes) + " attributes in <" +
                          element.name + ">");
      read_attribute(element);
    }
  }

  void read_attribute(XmlElement& element) {
    const size_t attribute_pos = pos_;
    std::string name = read_name("for an attribute");
    const std::string where = "attribute " + name + " of <" + element.name + ">";
    skip_space();
    if (at_end() || text_[pos_] != '=') fail_at(attribute_pos, where + " has no '=value'");
    ++pos_;
    skip_space();
    if (at_end() || (text_[pos_] != '"' && text_[pos_] != '\''))
      fail_at(pos_, "the value of " + where + " is not quoted");
    const char quote = text_[pos_++];
    const size_t value_start = pos_;
    const size_t value_end = text_.find(quote, value_start);
    if (value_end == std::string_view::npos)
      fail_at(text_.size(), "the file ends inside the value of " + where);
    const std::string_view raw = text_.substr(value_start, value_end - value_start);
    if (const size_t bad = raw.find('<'); bad != std::string_view::npos)
      fail_at(value_start + bad, "'<' in the value of " + where);
    pos_ = value_end + 1;
    if (element.attribute(name)) fail_at(attribute_pos, where + " appears twice");
    element.attributes.emplace_back(std::move(name), decode(raw, value_start));
  }

  // Character data up to the next '<' (or the end, which the caller reports).
  void read_text(std::string& into) {
    const size_t start = pos_;
    const size_t end = std::min(text_.find('<', pos_), text_.size());
    pos_ = end;
    const std::string_view raw = text_.substr(start, end - start);
    if (all_space(raw)) return;
    into += decode(raw, start);
  }

  // `raw` with its entity and character references replaced; `raw_pos` is
  // where raw starts in the file, for the line of an error.
  std::string decode(std::string_view raw, size_t raw_pos) {
    std::string out;
    out.reserve(raw.size());
    for (size_t at = 0; at < raw.size();) {
      if (raw[at] != '&') {
        out += raw[at++];
        continue;
      }
      // The longest reference we accept is "&#x10FFFF;" / "&#1114111;".
      const size_t semicolon = raw.substr(at, 12).find(';');
      if (semicolon == std::string_view::npos)
        fail_at(raw_pos + at, "'&' that does not start an entity such as &amp;");
      const std::string_view entity = raw.substr(at + 1, semicolon - 1);
      if (entity == "lt") {
        out += '<';
      } else if (entity == "gt") {
        out += '>';
      } else if (entity == "amp") {
        out += '&';
      } else if (entity == "quot") {
        out += '"';
      } else if (entity == "apos") {
        out += '\'';
      } else if (!entity.empty() && entity[0] == '#') {
        append_utf8(out, character_reference(entity, raw_pos + at));
      } else {
        fail_at(raw_pos + at, "unknown entity &" + std::string(entity) + ";");
      }
      at += semicolon + 1;
    }
    return out;
  }

  // "#65" or "#x41" -> the code point; throws for anything else or for a
  // value that is not an XML character.
  uint32_t character_reference(std::string_view entity, size_t pos) {
    const bool hex = entity.size() > 1 && (entity[1] == 'x' || entity[1] == 'X');
    const std::string_view digits = entity.substr(hex ? 2 : 1);
    uint32_t value = 0;
    bool ok = !digits.empty() && digits.size() <= 8;
    for (const char c : digits) {
      if (!ok) break;
      uint32_t digit = 0;
      if (c >= '0' && c <= '9')
        digit = static_cast<uint32_t>(c - '0');
      else if (hex && c >= 'a' && c <= 'f')
        digit = static_cast<uint32_t>(c - 'a' + 10);
      else if (hex && c >= 'A' && c <= 'F')
        digit = static_cast<uint32_t>(c - 'A' + 10);
      else
        ok = false;
      value = value * (hex ? 16 : 10) + digit;  // at most 8 digits: no overflow of 32 bits
      if (value > 0x10FFFF) ok = false;
    }
    const bool is_char =
        value == 0x9 || value == 0xA || value == 0xD || (value >= 0x20 && value <= 0xD7FF) ||
        (value >= 0xE000 && value <= 0xFFFD) || (value >= 0x10000 && value <= 0x10FFFF);
    if (!ok || !is_char)
      fail_at(pos, "&" + std::string(entity) + "; is not a valid character reference");
    return value;
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t counted_to_ = 0;    // line_at: the position counted up to
  size_t counted_line_ = 1;  // and the line there
};

}  // namespace

XmlElement parse_xml(std::string_view text) { return XmlParser(text).parse(); }

namespace {
std::string_view trim_space(std::string_view text) {
  while (!text.empty() && is_xml_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_xml_space(text.back())) text.remove_suffix(1);
  return text;
}
}  // namespace

std::optional<long long> parse_xml_integer(std::string_view text) {
  text = trim_space(text);
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    text.remove_prefix(2);
    base = 16;
  }
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value, base);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return value;
}

std::optional<double> parse_xml_number(std::string_view text) {
  text = trim_space(text);
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || !std::isfinite(value))
    return std::nullopt;
  return value;
}

void add_reader_note(std::vector<std::string>& notes, std::string_view reader,
                     const std::string& text) {
  constexpr size_t kMaxNotes = 50;
  if (notes.size() < kMaxNotes)
    notes.push_back(std::string(reader) + ": " + text);
  else if (notes.size() == kMaxNotes)
    notes.push_back(std::string(reader) + ": more problems not listed");
}

std::string quoted_for_message(std::string_view text, size_t max_chars) {
  std::string out = "\"";
  for (size_t at = 0; at < text.size() && at < max_chars; ++at) {
    const auto c = static_cast<unsigned char>(text[at]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (text.size() > max_chars) out += "...";
  return out + "\"";
}

}  // namespace ccscope::topo
