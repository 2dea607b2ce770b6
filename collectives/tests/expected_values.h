#pragma once
// Test inputs and their serial reductions, shared by the reference-algorithm tests
// (in-process transport) and the MPI backend tests (real MPI). Every value is a
// small integer, chosen so that every partial result of any combination order is
// exact in the type: the expected output is then the same bits whatever order an
// algorithm combines in. The expected values are computed here in int64_t, one
// rank after the other, without the reduction code under test (only the element
// conversions of types.h are used, to write a value as the type).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ccscope/collectives/types.h"

namespace ccscope::test {

inline bool is_unsigned_type(DataType type) {
  return type == DataType::kUInt8 || type == DataType::kUInt32 || type == DataType::kUInt64;
}
inline bool is_fp8_type(DataType type) {
  return type == DataType::kFloat8E4M3 || type == DataType::kFloat8E5M2;
}
// nccl-tests' -o mulsum scalar, written out (not premul_scalar) so that a wrong
// scalar in the library shows up.
inline int64_t mulsum_scalar(int rank) { return 1 + rank % 2; }

// Writes an integer value (small enough to be exact in every type) as `type`.
inline void put(std::vector<unsigned char>& buffer, DataType type, size_t index, int64_t value) {
  unsigned char* p = buffer.data() + index * element_size(type);
  auto write = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
  switch (type) {
    case DataType::kFloat32:
      return write(static_cast<float>(value));
    case DataType::kFloat64:
      return write(static_cast<double>(value));
    case DataType::kFloat16:
      return write(float_to_half(static_cast<float>(value)));
    case DataType::kBFloat16:
      return write(float_to_bfloat16(static_cast<float>(value)));
    case DataType::kInt32:
      return write(static_cast<int32_t>(value));
    case DataType::kInt8:
      return write(static_cast<int8_t>(value));
    case DataType::kUInt8:
      return write(static_cast<uint8_t>(value));
    case DataType::kUInt32:
      return write(static_cast<uint32_t>(value));
    case DataType::kInt64:
      return write(static_cast<int64_t>(value));
    case DataType::kUInt64:
      return write(static_cast<uint64_t>(value));
    case DataType::kFloat8E4M3:
      return write(float_to_fp8_e4m3(static_cast<float>(value)));
    case DataType::kFloat8E5M2:
      return write(float_to_fp8_e5m2(static_cast<float>(value)));
  }
}

// The average as the algorithms compute it: the exact sum divided in the type's
// arithmetic (float for the 16- and 8-bit formats, truncation for integers).
inline void put_average(std::vector<unsigned char>& buffer, DataType type, size_t index,
                        int64_t sum, int n) {
  unsigned char* p = buffer.data() + index * element_size(type);
  auto write = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
  float f = static_cast<float>(sum) / static_cast<float>(n);
  switch (type) {
    case DataType::kFloat32:
      return write(f);
    case DataType::kFloat64:
      return write(static_cast<double>(sum) / n);
    case DataType::kFloat16:
      return write(float_to_half(f));
    case DataType::kBFloat16:
      return write(float_to_bfloat16(f));
    case DataType::kFloat8E4M3:
      return write(float_to_fp8_e4m3(f));
    case DataType::kFloat8E5M2:
      return write(float_to_fp8_e5m2(f));
    default:
      return put(buffer, type, index, sum / n);  // C++ truncates toward zero
  }
}

inline double get(const unsigned char* p, DataType type) {
  auto read = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (type) {
    case DataType::kFloat32:
      return read(float{});
    case DataType::kFloat64:
      return read(double{});
    case DataType::kFloat16:
      return half_to_float(read(uint16_t{}));
    case DataType::kBFloat16:
      return bfloat16_to_float(read(uint16_t{}));
    case DataType::kInt32:
      return read(int32_t{});
    case DataType::kInt8:
      return read(int8_t{});
    case DataType::kUInt8:
      return read(uint8_t{});
    case DataType::kUInt32:
      return read(uint32_t{});
    case DataType::kInt64:
      return static_cast<double>(read(int64_t{}));
    case DataType::kUInt64:
      return static_cast<double>(read(uint64_t{}));
    case DataType::kFloat8E4M3:
      return fp8_e4m3_to_float(read(uint8_t{}));
    case DataType::kFloat8E5M2:
      return fp8_e5m2_to_float(read(uint8_t{}));
  }
  return 0;
}

// For min/max of unsigned types half the values have the top bit set (some MPI
// libraries compare unsigned types as signed: pmodels/mpich#6083): the lowest
// value with it, as int64_t (uint64: INT64_MIN, which put() stores as 2^63).
inline int64_t top_half(DataType type) {
  switch (type) {
    case DataType::kUInt8:
      return 128;
    case DataType::kUInt32:
      return int64_t{1} << 31;
    default:
      return INT64_MIN;
  }
}

// Input element `index` of `rank` (up to 8 ranks): every partial result is exact
// in every type. Sums: |sum| <= 24 (fp8: <= 8, e5m2's largest exact integer);
// mulsum: sum of |value|*scalar <= 36 (fp8: <= 8, only ranks of one parity
// contribute to an element, all with one sign); products: |product| <= 4;
// min/max within [-50, 50] (fp8: [-8, 8]; unsigned: [0, 100], half of them
// plus top_half). Unsigned types get no negatives.
inline int64_t input_value(DataType type, ReduceOp op, int rank, size_t index) {
  const bool is_unsigned = is_unsigned_type(type);
  const bool fp8 = is_fp8_type(type);
  const int64_t i = static_cast<int64_t>(index % 1000003);
  switch (op) {
    case ReduceOp::kMulSum:
      if (fp8) return (rank + i) % 2 != 0 ? 0 : (i / 2) % 2 == 0 ? 1 : -1;
      [[fallthrough]];
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      if (fp8) return (rank * 7 + i * 5) % 3 - 1;
      return is_unsigned ? (rank * 7 + i * 3) % 4 : (rank * 7 + i * 3) % 7 - 3;
    case ReduceOp::kProd:
      if (rank < 6 && (rank + i) % 3 == 0) return 2;
      return !is_unsigned && (rank + i) % 2 == 1 ? -1 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      if (fp8) return (rank * 37 + i * 11) % 17 - 8;
      if (is_unsigned)
        return (rank * 37 + i * 11) % 101 + ((rank + i) % 2 == 1 ? top_half(type) : 0);
      return (rank * 37 + i * 11) % 101 - 50;
  }
  return 0;
}

inline bool less(DataType type, int64_t a, int64_t b) {
  if (is_unsigned_type(type)) return static_cast<uint64_t>(a) < static_cast<uint64_t>(b);
  return a < b;
}

// Element `index` of the reduction over ranks 0..n-1, written into `out`.
inline void put_expected(std::vector<unsigned char>& out, size_t out_index, DataType type,
                         ReduceOp op, int n, size_t index) {
  int64_t acc = 0;
  for (int rank = 0; rank < n; ++rank) {
    const int64_t v = input_value(type, op, rank, index);
    if (rank == 0) {
      acc = op == ReduceOp::kMulSum ? v * mulsum_scalar(0) : v;
      continue;
    }
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kMulSum:
        acc += v * mulsum_scalar(rank);
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:  // unsigned: compared as the type stores them (uint64 above 2^63)
        acc = less(type, v, acc) ? v : acc;
        break;
      case ReduceOp::kMax:
        acc = less(type, acc, v) ? v : acc;
        break;
    }
  }
  if (op == ReduceOp::kAvg) {
    put_average(out, type, out_index, acc, n);
  } else {
    put(out, type, out_index, acc);
  }
}

}  // namespace ccscope::test
