#include "ccscope/collectives/types.h"

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
    TypeName{DataType::kFloat32, "float"},     TypeName{DataType::kFloat32, "float32"},
    TypeName{DataType::kFloat32, "fp32"},      TypeName{DataType::kFloat32, "f32"},
    TypeName{DataType::kFloat64, "double"},    TypeName{DataType::kFloat64, "float64"},
    TypeName{DataType::kFloat64, "fp64"},      TypeName{DataType::kFloat16, "half"},
    TypeName{DataType::kFloat16, "float16"},   TypeName{DataType::kFloat16, "fp16"},
    TypeName{DataType::kBFloat16, "bfloat16"}, TypeName{DataType::kBFloat16, "bf16"},
    TypeName{DataType::kInt32, "int32"},       TypeName{DataType::kInt32, "int"},
    TypeName{DataType::kInt8, "int8"},         TypeName{DataType::kInt8, "char"},
    TypeName{DataType::kUInt8, "uint8"},
};

struct OpName {
  ReduceOp op;
  std::string_view name;
};
constexpr std::array kOpNames{OpName{ReduceOp::kSum, "sum"}, OpName{ReduceOp::kProd, "prod"},
                              OpName{ReduceOp::kMin, "min"}, OpName{ReduceOp::kMax, "max"},
                              OpName{ReduceOp::kAvg, "avg"}};

}  // namespace

size_t element_size(DataType type) {
  switch (type) {
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt8:
    case DataType::kUInt8:
      return 1;
  }
  return 1;
}

bool is_floating(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kFloat16 ||
         type == DataType::kBFloat16;
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
  }
  return 0;
}

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
      static_cast<int32_t*>(data)[index] = static_cast<int32_t>(value);
      return;
    case DataType::kInt8:
      static_cast<int8_t*>(data)[index] = static_cast<int8_t>(value);
      return;
    case DataType::kUInt8:
      static_cast<uint8_t*>(data)[index] = static_cast<uint8_t>(value);
      return;
  }
}

}  // namespace ccscope
