#include "faults.h"

#include <charconv>

namespace ccscope::standin {
namespace {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    const size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

template <typename T>
bool parse_number(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

FaultParse parse_faults(std::string_view text) {
  FaultParse result;
  if (text.empty()) return result;
  for (std::string_view item : split(text, ';')) {
    if (item.empty()) continue;
    const std::vector<std::string_view> fields = split(item, ':');
    Fault fault;
    const std::string_view kind = fields[0];
    if (kind == "async_error") fault.kind = FaultKind::kAsyncError;
    else if (kind == "hang") fault.kind = FaultKind::kHang;
    else if (kind == "corrupt") fault.kind = FaultKind::kCorrupt;
    else if (kind == "init_hang") fault.kind = FaultKind::kInitHang;
    else if (kind == "vanish") fault.kind = FaultKind::kVanish;
    else if (kind == "call_hang") fault.kind = FaultKind::kCallHang;
    else {
      result.error = "unknown fault kind '" + std::string(kind) +
                     "' (async_error, hang, corrupt, init_hang, vanish, call_hang)";
      return result;
    }
    bool has_rank = false;
    for (size_t i = 1; i < fields.size(); ++i) {
      const std::string_view field = fields[i];
      const size_t eq = field.find('=');
      const std::string_view key = field.substr(0, eq);
      const std::string_view value = eq == std::string_view::npos ? "" : field.substr(eq + 1);
      bool ok = false;
      if (key == "rank") ok = has_rank = parse_number(value, fault.rank) && fault.rank >= 0;
      else if (key == "op") ok = parse_number(value, fault.op) && fault.op >= 1;
      else if (key == "element") ok = parse_number(value, fault.element);
      if (!ok) {
        result.error = "bad field '" + std::string(field) + "' in fault '" + std::string(item) +
                       "' (rank=R, op=N from 1, element=I)";
        return result;
      }
    }
    if (!has_rank) {
      result.error = "fault '" + std::string(item) + "' names no rank (rank=R)";
      return result;
    }
    result.faults.push_back(fault);
  }
  return result;
}

std::optional<Fault> find_fault(const std::vector<Fault>& faults, FaultKind kind, int rank,
                                uint64_t op) {
  for (const Fault& f : faults) {
    if (f.kind == kind && f.rank == rank && (kind == FaultKind::kInitHang || f.op == op)) return f;
  }
  return std::nullopt;
}

}  // namespace ccscope::standin
