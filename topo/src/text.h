#pragma once
// Small text helpers the topology views share (internal to topo/).
#include <cstddef>
#include <cstdio>
#include <string>

namespace ccscope::topo::text {

// printf's %g: the shortest plain form of a rate ("1", "0.2", "2.5", "400").
inline std::string general(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

// `value` left-aligned in a column of `width`, at least one space after it.
inline std::string padded(const std::string& value, size_t width) {
  return value.size() >= width ? value + " " : value + std::string(width - value.size(), ' ');
}

}  // namespace ccscope::topo::text
