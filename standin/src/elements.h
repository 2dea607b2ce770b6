#pragma once
// Element types and reductions of the NCCL stand-in: NCCL's data types over
// host bytes, reduced in rank order as the real NCCL's results come out
// (sum/prod/min/max step by step, each step rounded to the element type; avg
// of floating types as a pre-multiplied sum, x * (1/n) on every rank, and of
// integer types as the sum divided by n; premulsum as x * scalar per rank).
// Pure functions, unit-tested (standin/tests/elements_test.cpp).
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace ccscope::standin {

// Bytes of one element, 0 for a value that is not an NCCL data type.
size_t element_bytes(ncclDataType_t type);
const char* type_name(ncclDataType_t type);

// Conversions of the narrow floating types (round to nearest even, the 8-bit
// ones saturating to their largest finite value as NCCL's fp8 reductions do).
float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float value);
float e4m3_to_float(uint8_t bits);
uint8_t float_to_e4m3(float value);
float e5m2_to_float(uint8_t bits);
uint8_t float_to_e5m2(float value);

// Element `index` of typed `data` as a double, and a double stored into it
// (rounded to the type); for tests and fault injection.
double load(const void* data, ncclDataType_t type, size_t index);
void store(void* data, ncclDataType_t type, size_t index, double value);

enum class Reduction { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };

struct ReduceArgs {
  Reduction reduction = Reduction::kSum;
  ncclDataType_t type = ncclFloat32;
  // premulsum: one scalar per input (rank), already a value of `type`.
  std::span<const double> scalars;
};

// out[i] = inputs[0][i] (op) inputs[1][i] (op) ... for i < count, in rank
// order. `out` may be one of the inputs.
void reduce(const ReduceArgs& args, std::span<const void* const> inputs, void* out, size_t count);

}  // namespace ccscope::standin
