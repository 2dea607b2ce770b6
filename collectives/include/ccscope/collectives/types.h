#pragma once
// Element types and reduction operations shared by every backend and algorithm.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ccscope {

enum class DataType { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt8, kUInt8 };
enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg };

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

// Reads/writes element `index` of a typed host array as a double; integer types
// convert exactly for the values ccscope's patterns use.
double load_element(const void* data, DataType type, size_t index);
void store_element(void* data, DataType type, size_t index, double value);

}  // namespace ccscope
