#pragma once
// Conversions between a record member and a Cell, by the member's C++ type:
// the one codec every field of every record kind goes through.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ccscope/records/schema.h"

namespace ccscope::records::cells {

template <typename T>
struct Unwrapped {
  using type = T;
};
template <typename T>
struct Unwrapped<std::optional<T>> {
  using type = T;
};
template <typename T>
using value_type = typename Unwrapped<T>::type;

using Entries = std::vector<std::pair<std::string, std::string>>;

template <typename T>
constexpr FieldType type_of() {
  using V = value_type<T>;
  if constexpr (std::is_same_v<V, std::string>) return FieldType::kText;
  else if constexpr (std::is_same_v<V, bool>) return FieldType::kFlag;
  else if constexpr (std::is_floating_point_v<V>) return FieldType::kNumber;
  else if constexpr (std::is_integral_v<V>) return FieldType::kInteger;
  else if constexpr (std::is_same_v<V, std::vector<std::string>>) return FieldType::kList;
  else {
    static_assert(std::is_same_v<V, Entries>, "a record member of a type the schema cannot hold");
    return FieldType::kMap;
  }
}

double parse_number(const std::string& text);
long long parse_integer(const std::string& text, long long min_value, long long max_value);
bool parse_flag(const std::string& text);

template <typename V>
Cell cell_of_value(const V& v) {
  Cell c;
  c.present = true;
  if constexpr (std::is_same_v<V, std::string>) {
    c.present = !v.empty();
    c.text = v;
  } else if constexpr (std::is_same_v<V, bool>) {
    c.text.assign(1, v ? '1' : '0');  // (not a literal: GCC 12 -O3 warns of -Wrestrict there)
  } else if constexpr (std::is_floating_point_v<V>) {
    c.text = number_text(v);
  } else if constexpr (std::is_integral_v<V>) {
    c.text = std::to_string(v);
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    c.present = !v.empty();
    c.items = v;
  } else {
    c.present = !v.empty();
    c.entries = v;
  }
  return c;
}

template <typename T>
Cell cell_of(const T& member) {
  if constexpr (std::is_same_v<T, value_type<T>>) {
    return cell_of_value(member);
  } else {
    if (!member) return Cell{};
    return cell_of_value(*member);
  }
}

// Values below MinValue are refused (counts, sizes, times and bandwidths are
// never negative).
template <typename T, long long MinValue>
void set_from(T& member, const Cell& c) {
  using V = value_type<T>;
  if (!c.present) {
    member = T{};
    return;
  }
  V v{};
  if constexpr (std::is_same_v<V, std::string>) {
    v = c.text;
  } else if constexpr (std::is_same_v<V, bool>) {
    v = parse_flag(c.text);
  } else if constexpr (std::is_floating_point_v<V>) {
    v = parse_number(c.text);
    if (v < MinValue) throw FieldError(c.text + " is negative");
  } else if constexpr (std::is_integral_v<V>) {
    constexpr long long kMax = std::numeric_limits<V>::max() > std::numeric_limits<long long>::max()
                                   ? std::numeric_limits<long long>::max()
                                   : static_cast<long long>(std::numeric_limits<V>::max());
    v = static_cast<V>(parse_integer(c.text, MinValue, kMax));
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    v = c.items;
  } else {
    v = c.entries;
  }
  member = std::move(v);
}

}  // namespace ccscope::records::cells
