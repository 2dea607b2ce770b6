#pragma once
// Element types and reduction operations shared by every backend and algorithm.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccscope {

enum class DataType {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt8,
  kUInt8,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat8E4M3,  // OCP fp8: 4 exponent bits (bias 7), 3 mantissa bits, no infinity, max 448
  kFloat8E5M2,  // OCP fp8: 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like
};
// kMulSum is NCCL's pre-multiplied sum (ncclRedOpCreatePreMulSum): every rank's
// input is multiplied by that rank's scalar, premul_scalar(rank), then summed.
enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg, kMulSum };

// Every type and op, in nccl-tests' order (what -d all / -o all sweep).
const std::vector<DataType>& all_data_types();
const std::vector<ReduceOp>& all_reduce_ops();
// nccl-tests' scalar for -o mulsum: 1 + rank % 2 (so a check sees which rank
// contributed which value).
double premul_scalar(int rank);
bool is_signed_integer(DataType type);
// The largest integer N such that every integer 0..N is exactly representable
// in the type (capped at 2^53, what a double holds exactly).
double largest_exact_integer(DataType type);

size_t element_size(DataType type);
bool is_floating(DataType type);
// Names as nccl-tests prints them ("float", "half", "bfloat16", "int32", ...).
std::string_view name(DataType type);
std::string_view name(ReduceOp op);
// Accepts nccl-tests' names and common aliases (float32, fp16, bf16, ...).
std::optional<DataType> parse_data_type(std::string_view text);
std::optional<ReduceOp> parse_reduce_op(std::string_view text);
// Every accepted spelling, for error messages and --help.
std::string data_type_choices();
std::string reduce_op_choices();

// Host conversions for the 16-bit float formats (round to nearest even).
uint16_t float_to_half(float value);
float half_to_float(uint16_t bits);
uint16_t float_to_bfloat16(float value);
float bfloat16_to_float(uint16_t bits);
// OCP 8-bit floats (round to nearest even; e4m3 overflows to NaN, e5m2 to infinity).
uint8_t float_to_fp8_e4m3(float value);
float fp8_e4m3_to_float(uint8_t bits);
uint8_t float_to_fp8_e5m2(float value);
float fp8_e5m2_to_float(uint8_t bits);

// Reads/writes element `index` of a typed host array as a double; integer types
// convert exactly for the values ccscope's patterns use.
double load_element(const void* data, DataType type, size_t index);
void store_element(void* data, DataType type, size_t index, double value);

}  // namespace ccscope
