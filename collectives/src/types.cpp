#include "ccscope/collectives/types.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

namespace ccscope {
namespace {

struct TypeName {
  DataType type;
  std::string_view name;  // the first spelling of a type is its printed name
};
constexpr std::array kTypeNames{
    TypeName{DataType::kFloat32, "float"},       TypeName{DataType::kFloat32, "float32"},
    TypeName{DataType::kFloat32, "fp32"},        TypeName{DataType::kFloat32, "f32"},
    TypeName{DataType::kFloat64, "double"},      TypeName{DataType::kFloat64, "float64"},
    TypeName{DataType::kFloat64, "fp64"},        TypeName{DataType::kFloat16, "half"},
    TypeName{DataType::kFloat16, "float16"},     TypeName{DataType::kFloat16, "fp16"},
    TypeName{DataType::kBFloat16, "bfloat16"},   TypeName{DataType::kBFloat16, "bf16"},
    TypeName{DataType::kInt32, "int32"},         TypeName{DataType::kInt32, "int"},
    TypeName{DataType::kInt8, "int8"},           TypeName{DataType::kInt8, "char"},
    TypeName{DataType::kUInt8, "uint8"},         TypeName{DataType::kUInt32, "uint32"},
    TypeName{DataType::kInt64, "int64"},         TypeName{DataType::kUInt64, "uint64"},
    TypeName{DataType::kFloat8E4M3, "f8e4m3"},   TypeName{DataType::kFloat8E4M3, "fp8_e4m3"},
    TypeName{DataType::kFloat8E4M3, "e4m3"},     TypeName{DataType::kFloat8E5M2, "f8e5m2"},
    TypeName{DataType::kFloat8E5M2, "fp8_e5m2"}, TypeName{DataType::kFloat8E5M2, "e5m2"},
};

struct OpName {
  ReduceOp op;
  std::string_view name;
};
constexpr std::array kOpNames{OpName{ReduceOp::kSum, "sum"}, OpName{ReduceOp::kProd, "prod"},
                              OpName{ReduceOp::kMin, "min"}, OpName{ReduceOp::kMax, "max"},
                              OpName{ReduceOp::kAvg, "avg"}, OpName{ReduceOp::kMulSum, "mulsum"}};

// A small float format: `mantissa_bits` stored bits, exponent bias `bias`,
// `has_infinity` (IEEE-like e5m2) or not (e4m3: only S.1111.111 is NaN).
struct MiniFloat {
  int mantissa_bits;
  int bias;
  bool has_infinity;
  int max_exponent_field;  // e4m3: 15 (normal numbers use it), e5m2: 30
};
constexpr MiniFloat kE4M3{3, 7, false, 15};
constexpr MiniFloat kE5M2{2, 15, true, 30};

uint8_t nan_bits(const MiniFloat& f) {
  return f.has_infinity ? static_cast<uint8_t>(0x7e) : static_cast<uint8_t>(0x7f);
}

uint8_t encode_minifloat(float value, const MiniFloat& f) {
  if (std::isnan(value)) return nan_bits(f);
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  const double magnitude = std::fabs(static_cast<double>(value));
  if (magnitude == 0) return sign;
  if (std::isinf(magnitude))  // e5m2 keeps it; e4m3 has no infinity: NaN, as an overflow
    return f.has_infinity ? static_cast<uint8_t>(sign | (0x1f << 2))
                          : static_cast<uint8_t>(sign | 0x7f);
  const int min_exponent = 1 - f.bias;
  int exponent = 0;
  std::frexp(magnitude, &exponent);
  exponent = std::max(exponent - 1, min_exponent);  // magnitude in [2^e, 2^(e+1)) or subnormal
  const double quantum = std::ldexp(1.0, exponent - f.mantissa_bits);
  double steps = std::nearbyint(magnitude / quantum);  // round to nearest even
  const double implicit = std::ldexp(1.0, f.mantissa_bits);
  if (steps >= 2 * implicit) {  // rounded up into the next binade
    steps /= 2;
    ++exponent;
  }
  const bool subnormal = steps < implicit;
  const int field = subnormal ? 0 : exponent + f.bias;
  const int mantissa = static_cast<int>(subnormal ? steps : steps - implicit);
  const bool too_large =
      field > f.max_exponent_field ||
      (!f.has_infinity && field == f.max_exponent_field && mantissa == (1 << f.mantissa_bits) - 1);
  if (too_large)
    return f.has_infinity ? static_cast<uint8_t>(sign | (0x1f << 2))
                          : static_cast<uint8_t>(sign | 0x7f);
  return static_cast<uint8_t>(sign | (field << f.mantissa_bits) | mantissa);
}

float decode_minifloat(uint8_t bits, const MiniFloat& f) {
  const bool negative = (bits & 0x80) != 0;
  const int field = (bits & 0x7f) >> f.mantissa_bits;
  const int mantissa = bits & ((1 << f.mantissa_bits) - 1);
  float magnitude = 0;
  if (f.has_infinity && field == f.max_exponent_field + 1)
    magnitude = mantissa == 0 ? INFINITY : NAN;
  else if (!f.has_infinity && field == f.max_exponent_field &&
           mantissa == (1 << f.mantissa_bits) - 1)
    magnitude = NAN;
  else if (field == 0)
    magnitude = static_cast<float>(std::ldexp(mantissa, 1 - f.bias - f.mantissa_bits));
  else
    magnitude = static_cast<float>(
        std::ldexp((1 << f.mantissa_bits) + mantissa, field - f.bias - f.mantissa_bits));
  return negative ? -magnitude : magnitude;
}

}  // namespace

const std::vector<DataType>& all_data_types() {
  static const std::vector<DataType> types{
      DataType::kInt8,    DataType::kUInt8,    DataType::kInt32,      DataType::kUInt32,
      DataType::kInt64,   DataType::kUInt64,   DataType::kFloat16,    DataType::kFloat32,
      DataType::kFloat64, DataType::kBFloat16, DataType::kFloat8E4M3, DataType::kFloat8E5M2};
  return types;
}

const std::vector<ReduceOp>& all_reduce_ops() {
  static const std::vector<ReduceOp> ops{ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax,
                                         ReduceOp::kMin, ReduceOp::kAvg,  ReduceOp::kMulSum};
  return ops;
}

double premul_scalar(int rank) { return 1 + rank % 2; }

size_t element_size(DataType type) {
  switch (type) {
    case DataType::kFloat32:
    case DataType::kInt32:
    case DataType::kUInt32:
      return 4;
    case DataType::kFloat64:
    case DataType::kInt64:
    case DataType::kUInt64:
      return 8;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2:
      return 1;
  }
  return 1;
}

bool is_floating(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kFloat16 ||
         type == DataType::kBFloat16 || type == DataType::kFloat8E4M3 ||
         type == DataType::kFloat8E5M2;
}

bool is_signed_integer(DataType type) {
  return type == DataType::kInt8 || type == DataType::kInt32 || type == DataType::kInt64;
}

double largest_exact_integer(DataType type) {
  switch (type) {
    case DataType::kFloat8E5M2:
      return 8;  // 2 mantissa bits: 9 is not representable
    case DataType::kFloat8E4M3:
      return 16;
    case DataType::kBFloat16:
      return 256;
    case DataType::kFloat16:
      return 2048;
    case DataType::kFloat32:
      return 16777216.0;
    case DataType::kInt8:
      return 127;
    case DataType::kUInt8:
      return 255;
    case DataType::kInt32:
      return 2147483647.0;
    case DataType::kUInt32:
      return 4294967295.0;
    case DataType::kFloat64:
    case DataType::kInt64:
    case DataType::kUInt64:
      return 9007199254740992.0;
  }
  return 127;
}

std::string_view name(DataType type) {
  for (const auto& entry : kTypeNames)
    if (entry.type == type) return entry.name;
  return "unknown";
}

std::string_view name(ReduceOp op) {
  for (const auto& entry : kOpNames)
    if (entry.op == op) return entry.name;
  return "unknown";
}

std::optional<DataType> parse_data_type(std::string_view text) {
  for (const auto& entry : kTypeNames)
    if (entry.name == text) return entry.type;
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view text) {
  for (const auto& entry : kOpNames)
    if (entry.name == text) return entry.op;
  return std::nullopt;
}

std::string data_type_choices() {
  std::string out;
  for (const auto& entry : kTypeNames) {
    if (!out.empty()) out += ", ";
    out += entry.name;
  }
  return out;
}

std::string reduce_op_choices() {
  std::string out;
  for (const auto& entry : kOpNames) {
    if (!out.empty()) out += ", ";
    out += entry.name;
  }
  return out;
}

uint16_t float_to_half(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t exponent = (bits >> 23) & 0xffu;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  }
  const int unbiased = static_cast<int>(exponent) - 127;
  if (unbiased > 15) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (unbiased >= -14) {
    // Normal half: keep 10 mantissa bits, round to nearest even on the 13 dropped.
    uint32_t half = sign | (static_cast<uint32_t>(unbiased + 15) << 10) | (mantissa >> 13);
    const uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into inf
    return static_cast<uint16_t>(half);
  }
  if (unbiased < -25) return static_cast<uint16_t>(sign);  // underflow to zero
  // Subnormal half.
  mantissa |= 0x800000u;
  const int shift = -unbiased - 1;  // 14..24
  uint32_t half = sign | (mantissa >> shift);
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
  return static_cast<uint16_t>(half);
}

float half_to_float(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_bfloat16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float bfloat16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

uint8_t float_to_fp8_e4m3(float value) { return encode_minifloat(value, kE4M3); }
float fp8_e4m3_to_float(uint8_t bits) { return decode_minifloat(bits, kE4M3); }
uint8_t float_to_fp8_e5m2(float value) { return encode_minifloat(value, kE5M2); }
float fp8_e5m2_to_float(uint8_t bits) { return decode_minifloat(bits, kE5M2); }

double load_element(const void* data, DataType type, size_t index) {
  switch (type) {
    case DataType::kFloat32:
      return static_cast<const float*>(data)[index];
    case DataType::kFloat64:
      return static_cast<const double*>(data)[index];
    case DataType::kFloat16:
      return half_to_float(static_cast<const uint16_t*>(data)[index]);
    case DataType::kBFloat16:
      return bfloat16_to_float(static_cast<const uint16_t*>(data)[index]);
    case DataType::kInt32:
      return static_cast<const int32_t*>(data)[index];
    case DataType::kInt8:
      return static_cast<const int8_t*>(data)[index];
    case DataType::kUInt8:
      return static_cast<const uint8_t*>(data)[index];
    case DataType::kUInt32:
      return static_cast<const uint32_t*>(data)[index];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(data)[index]);
    case DataType::kUInt64:
      return static_cast<double>(static_cast<const uint64_t*>(data)[index]);
    case DataType::kFloat8E4M3:
      return fp8_e4m3_to_float(static_cast<const uint8_t*>(data)[index]);
    case DataType::kFloat8E5M2:
      return fp8_e5m2_to_float(static_cast<const uint8_t*>(data)[index]);
  }
  return 0;
}

namespace {
// An integer element from a double: truncated toward zero and wrapped modulo 2^bits, as the
// integer types' arithmetic wraps (converting an out-of-range double is undefined behaviour:
// a test's "element + 1" on 255 must store 0). NaN stores 0; beyond 64 bits saturates.
template <typename Integer>
Integer to_integer(double value) {
  constexpr double kTwo63 = 9223372036854775808.0;
  uint64_t bits = 0;
  if (std::isnan(value) || value < -kTwo63)
    bits = value < 0 ? uint64_t{1} << 63 : 0;
  else if (value >= 2 * kTwo63)
    bits = ~uint64_t{0};
  else if (value >= kTwo63)
    bits = static_cast<uint64_t>(value);
  else
    bits = static_cast<uint64_t>(static_cast<int64_t>(value));
  return static_cast<Integer>(bits);
}
}  // namespace

void store_element(void* data, DataType type, size_t index, double value) {
  switch (type) {
    case DataType::kFloat32:
      static_cast<float*>(data)[index] = static_cast<float>(value);
      return;
    case DataType::kFloat64:
      static_cast<double*>(data)[index] = value;
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(data)[index] = float_to_half(static_cast<float>(value));
      return;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(data)[index] = float_to_bfloat16(static_cast<float>(value));
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(data)[index] = to_integer<int32_t>(value);
      return;
    case DataType::kInt8:
      static_cast<int8_t*>(data)[index] = to_integer<int8_t>(value);
      return;
    case DataType::kUInt8:
      static_cast<uint8_t*>(data)[index] = to_integer<uint8_t>(value);
      return;
    case DataType::kUInt32:
      static_cast<uint32_t*>(data)[index] = to_integer<uint32_t>(value);
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(data)[index] = to_integer<int64_t>(value);
      return;
    case DataType::kUInt64:
      static_cast<uint64_t*>(data)[index] = to_integer<uint64_t>(value);
      return;
    case DataType::kFloat8E4M3:
      static_cast<uint8_t*>(data)[index] = float_to_fp8_e4m3(static_cast<float>(value));
      return;
    case DataType::kFloat8E5M2:
      static_cast<uint8_t*>(data)[index] = float_to_fp8_e5m2(static_cast<float>(value));
      return;
  }
}

}  // namespace ccscope
