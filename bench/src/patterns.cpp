#include "patterns.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace ccscope::bench {
namespace {

// splitmix64's finaliser: a cheap bijection whose outputs look independent.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t mix2(uint64_t a, uint64_t b) { return mix(a ^ mix(b)); }

// A double holds every integer up to 2^53; patterns stay below it.
constexpr double kLargestDoubleInteger = 9007199254740992.0;

// The largest e such that 2^(2e) is exact and in range for the type.
int largest_product_exponent(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUInt8:
      return 3;  // 2^6 = 64 (int8), 2^7 would be the largest for uint8
    case DataType::kFloat8E4M3:
      return 4;  // 2^8 = 256 <= 448
    case DataType::kFloat16:
    case DataType::kFloat8E5M2:
      return 7;  // 2^14 <= 65504 / 57344
    case DataType::kInt32:
    case DataType::kUInt32:
      return 15;  // 2^30
    case DataType::kInt64:
    case DataType::kUInt64:
      return 31;  // 2^62
    case DataType::kBFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      return 30;
  }
  return 3;
}

int mantissa_bits(DataType type) {
  switch (type) {
    case DataType::kFloat8E5M2:
      return 2;
    case DataType::kFloat8E4M3:
      return 3;
    case DataType::kBFloat16:
      return 7;
    case DataType::kFloat16:
      return 10;
    case DataType::kFloat32:
      return 23;
    case DataType::kFloat64:
      return 52;
    default:
      return 0;
  }
}

int min_normal_exponent(DataType type) {
  switch (type) {
    case DataType::kFloat8E5M2:
    case DataType::kFloat16:
      return -14;
    case DataType::kFloat8E4M3:
      return -6;
    case DataType::kBFloat16:
    case DataType::kFloat32:
      return -126;
    default:
      return -1022;
  }
}

}  // namespace

uint64_t pattern_seed(Collective collective, DataType type, ReduceOp op, size_t size_bytes,
                      bool in_place, int repeat, int check_iteration) {
  uint64_t seed = mix(static_cast<uint64_t>(collective) + 1);
  seed = mix2(seed, static_cast<uint64_t>(type));
  seed = mix2(seed, static_cast<uint64_t>(op));
  seed = mix2(seed, size_bytes);
  seed = mix2(seed, in_place ? 1 : 0);
  seed = mix2(seed, static_cast<uint64_t>(repeat));
  return mix2(seed, static_cast<uint64_t>(check_iteration) + 0x1000);
}

double unit_in_last_place(DataType type, double value) {
  if (!is_floating(type)) return 1;
  int exponent = 0;
  std::frexp(std::fabs(value), &exponent);  // |value| in [2^(e-1), 2^e)
  const int binade = std::max(exponent - 1, min_normal_exponent(type));
  return std::ldexp(1.0, binade - mantissa_bits(type));
}

DataPattern::DataPattern(Collective collective, DataType type, ReduceOp op, int ranks, int root,
                         size_t block, uint64_t seed, int ulps, bool in_place)
    : collective_(collective),
      type_(type),
      op_(op),
      ranks_(ranks),
      root_(root),
      block_(block),
      seed_(seed),
      ulps_(ulps),
      in_place_(in_place),
      element_bytes_(element_size(type)) {
  largest_ = std::min(largest_exact_integer(type), kLargestDoubleInteger);
  // Two contributions v1 + v2 (mulsum: each times a scalar of at most 2) stay exact.
  const double parts = op == ReduceOp::kMulSum ? 4 : 2;
  contribution_ = static_cast<uint64_t>(std::max(1.0, std::floor(largest_ / parts)));
  max_exponent_ = largest_product_exponent(type);
}

double DataPattern::typed(double value) const {
  unsigned char bytes[8];
  store_element(bytes, type_, 0, value);
  return load_element(bytes, type_, 0);
}

DataPattern::Contributors DataPattern::contributors(size_t element) const {
  Contributors c;
  c.hash = mix2(seed_, element);
  const uint64_t n = static_cast<uint64_t>(ranks_);
  c.first = static_cast<int>(c.hash % n);
  if (n > 1) c.second = static_cast<int>((c.hash % n + 1 + (c.hash >> 32) % (n - 1)) % n);
  return c;
}

double DataPattern::reduction_input(int rank, size_t element) const {
  const Contributors c = contributors(element);
  const bool first = rank == c.first, second = rank == c.second;
  switch (op_) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
    case ReduceOp::kMulSum:
      if (!first && !second) return 0;
      return static_cast<double>(1 + mix(c.hash + (first ? 1 : 2)) % contribution_);
    case ReduceOp::kProd:
      if (!first && !second) return 1;
      return std::ldexp(1.0, 1 + static_cast<int>(mix(c.hash + (first ? 1 : 2)) %
                                                  static_cast<uint64_t>(max_exponent_)));
    case ReduceOp::kMax:
    case ReduceOp::kMin: {
      // The extreme m sits on rank `first`; the others are strictly below
      // (max) or above (min) it.
      const uint64_t span = static_cast<uint64_t>(largest_);  // values 0..largest_
      const uint64_t extreme =
          op_ == ReduceOp::kMax ? 1 + mix(c.hash + 1) % span : mix(c.hash + 1) % span;
      if (first) return static_cast<double>(extreme);
      const uint64_t other = mix2(c.hash, static_cast<uint64_t>(rank) + 3);
      if (op_ == ReduceOp::kMax) return static_cast<double>(other % extreme);
      return static_cast<double>(extreme + 1 + other % (span - extreme));
    }
  }
  return 0;
}

double DataPattern::reduction_result(size_t element) const {
  const Contributors c = contributors(element);
  const double a = reduction_input(c.first, element);
  const double b = c.second >= 0 ? reduction_input(c.second, element) : 0;
  switch (op_) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kAvg:
      // Integers truncate (as NCCL and C); floats round the exact quotient once.
      return is_floating(type_) ? (a + b) / ranks_ : std::trunc((a + b) / ranks_);
    case ReduceOp::kMulSum:
      return premul_scalar(c.first) * a + (c.second >= 0 ? premul_scalar(c.second) * b : 0);
    case ReduceOp::kProd:
      return a * (c.second >= 0 ? b : 1);
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      return a;  // the extreme
  }
  return 0;
}

double DataPattern::movement_value(size_t source, size_t index) const {
  const uint64_t span = static_cast<uint64_t>(largest_) + 1;  // 0..largest_
  return static_cast<double>(mix2(mix2(seed_, source), index) % span);
}

double DataPattern::input_unrounded(int rank, size_t index) const {
  if (has_reduction(collective_)) return reduction_input(rank, index);
  return movement_value(static_cast<size_t>(rank), index);
}

double DataPattern::input_value(int rank, size_t index) const {
  return typed(input_unrounded(rank, index));
}

Layout DataPattern::layout_of(int rank) const {
  return layout_of_param_count(collective_, block_, element_bytes_, ranks_, rank);
}

// The collective's rule (records/collective.h), in the pattern's values.
DataPattern::Expected DataPattern::expected_unrounded(const Layout& layout, int rank,
                                                      size_t index) const {
  const OutputSource source = output_source(collective_, {layout, ranks_, rank, root_}, index);
  switch (source.kind) {
    case OutputSource::Kind::kReduced:
      return {false, reduction_result(source.element)};
    case OutputSource::Kind::kInput:
      return {false, input_unrounded(source.rank, source.element)};
    case OutputSource::Kind::kUnchanged:
      break;
  }
  // Left alone: in place, an output element inside the input still holds it.
  const size_t at = layout.recv_in_place_offset + index;
  if (in_place_ && at >= layout.send_in_place_offset &&
      at < layout.send_in_place_offset + layout.send_count)
    return {false, input_unrounded(rank, at - layout.send_in_place_offset)};
  return {true, 0};
}

double DataPattern::expected_value(int rank, size_t index) const {
  const Expected e = expected_unrounded(layout_of(rank), rank, index);
  if (!e.fill) return typed(e.value);
  std::vector<unsigned char> fill(element_bytes_, kOutputFill);
  return load_element(fill.data(), type_, 0);
}

void DataPattern::fill_input(int rank, size_t first, size_t count, void* out) const {
  if (has_reduction(collective_)) {
    for (size_t i = 0; i < count; ++i)
      store_element(out, type_, i, reduction_input(rank, first + i));
  } else {
    for (size_t i = 0; i < count; ++i)
      store_element(out, type_, i, movement_value(static_cast<size_t>(rank), first + i));
  }
}

CheckResult DataPattern::check_output(int rank, size_t first, size_t count,
                                      const void* received) const {
  CheckResult result;
  const Layout layout = layout_of(rank);
  const auto* bytes = static_cast<const unsigned char*>(received);
  unsigned char expected_bytes[8];
  for (size_t i = 0; i < count; ++i) {
    // Stored once in the type (rounding it), read back only for a mismatch.
    const Expected e = expected_unrounded(layout, rank, first + i);
    if (e.fill) {
      std::memset(expected_bytes, kOutputFill, element_bytes_);
    } else {
      store_element(expected_bytes, type_, 0, e.value);
    }
    bool ok = std::memcmp(bytes + i * element_bytes_, expected_bytes, element_bytes_) == 0;
    double got = 0, expected = 0;
    if (!ok) {
      expected = load_element(expected_bytes, type_, 0);
      got = load_element(received, type_, i);
      if (ulps_ > 0 && !e.fill)
        ok = std::fabs(got - expected) <= ulps_ * unit_in_last_place(type_, expected);
    }
    if (ok) continue;
    if (!result.has_first) {
      result.has_first = true;
      result.first_index = first + i;
      result.expected = expected;
      result.received = got;
    }
    ++result.wrong;
  }
  return result;
}

}  // namespace ccscope::bench
