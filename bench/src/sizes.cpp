#include "sizes.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

namespace ccscope::bench {

std::optional<size_t> parse_size(std::string_view text) {
  size_t position = 0;
  size_t value = 0;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  while (position < text.size() && std::isdigit(static_cast<unsigned char>(text[position]))) {
    const size_t digit = static_cast<size_t>(text[position] - '0');
    if (value > (std::numeric_limits<size_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++position;
  }
  std::string_view suffix = text.substr(position);
  size_t multiplier = 1;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K':
        multiplier = size_t{1} << 10;
        break;
      case 'M':
        multiplier = size_t{1} << 20;
        break;
      case 'G':
        multiplier = size_t{1} << 30;
        break;
      case 'T':
        multiplier = size_t{1} << 40;
        break;
      case 'B':
        multiplier = 1;
        break;
      default:
        return std::nullopt;
    }
    if (std::toupper(static_cast<unsigned char>(suffix[0])) != 'B') suffix.remove_prefix(1);
    if (!(suffix.empty() || suffix == "B" || suffix == "b" || suffix == "iB" || suffix == "ib"))
      return std::nullopt;
  }
  if (value > std::numeric_limits<size_t>::max() / multiplier) return std::nullopt;
  return value * multiplier;
}

std::string format_size(size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (value == std::floor(value))
    std::snprintf(text, sizeof text, "%.0f %s", value, kUnits[unit]);
  else
    std::snprintf(text, sizeof text, "%.3g %s", value, kUnits[unit]);
  return text;
}

std::vector<size_t> size_sequence(size_t min_bytes, size_t max_bytes, size_t factor,
                                  size_t step_bytes) {
  std::vector<size_t> sizes;
  if (min_bytes == 0 || min_bytes > max_bytes) return sizes;
  for (size_t size = min_bytes; size <= max_bytes;) {
    sizes.push_back(size);
    size_t next = 0;
    const bool overflow = factor > 1 ? __builtin_mul_overflow(size, factor, &next)
                                     : __builtin_add_overflow(size, step_bytes, &next);
    if (overflow || next <= size) break;  // past size_t, or a zero step
    size = next;
  }
  return sizes;
}

}  // namespace ccscope::bench
