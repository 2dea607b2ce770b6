#include "ccscope/common/sizes.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>

namespace ccscope {

std::optional<size_t> parse_size(std::string_view text) {
  // nccl-tests reads a double and truncates (`-b 0.5M` is 524288 B): digits,
  // an optional fraction, then an optional K/M/G/T suffix. The arithmetic is in
  // integers so that every size below 2^64 is exact.
  size_t position = 0;
  unsigned __int128 whole = 0;
  const auto digit_at = [&](size_t i) {
    return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));
  };
  if (!digit_at(0)) return std::nullopt;
  for (; digit_at(position); ++position) {
    whole = whole * 10 + static_cast<unsigned>(text[position] - '0');
    if (whole > std::numeric_limits<size_t>::max()) return std::nullopt;
  }
  unsigned __int128 fraction = 0, scale = 1;  // fraction / scale, below 1
  if (position < text.size() && text[position] == '.') {
    ++position;
    if (!digit_at(position)) return std::nullopt;
    for (; digit_at(position); ++position) {
      if (scale < static_cast<unsigned __int128>(1e20)) {  // later digits are below a byte
        fraction = fraction * 10 + static_cast<unsigned>(text[position] - '0');
        scale *= 10;
      }
    }
  }
  std::string_view suffix = text.substr(position);
  unsigned __int128 multiplier = 1;
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
        break;
      default:
        return std::nullopt;
    }
    if (std::toupper(static_cast<unsigned char>(suffix[0])) != 'B') suffix.remove_prefix(1);
    if (!(suffix.empty() || suffix == "B" || suffix == "b" || suffix == "iB" || suffix == "ib"))
      return std::nullopt;
  }
  const unsigned __int128 bytes = whole * multiplier + fraction * multiplier / scale;
  if (bytes > std::numeric_limits<size_t>::max()) return std::nullopt;
  return static_cast<size_t>(bytes);
}

std::string format_size(size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof text, "%.2f", value);
  std::string number = text;
  while (number.back() == '0') number.pop_back();
  if (number.back() == '.') number.pop_back();
  return number + " " + kUnits[unit];
}

std::string format_exact_size(size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (bytes >= 1024 && bytes % 1024 == 0 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + kUnits[unit];
}

std::string format_exact_sizes(const std::vector<size_t>& sizes) {
  std::string out;
  for (size_t size : sizes) out += (out.empty() ? "" : ", ") + format_exact_size(size);
  return out;
}

}  // namespace ccscope
