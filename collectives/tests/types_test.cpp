#include "ccscope/collectives/types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace ccscope {
namespace {

TEST(Types, ElementSizes) {
  EXPECT_EQ(element_size(DataType::kFloat32), 4u);
  EXPECT_EQ(element_size(DataType::kFloat64), 8u);
  EXPECT_EQ(element_size(DataType::kFloat16), 2u);
  EXPECT_EQ(element_size(DataType::kBFloat16), 2u);
  EXPECT_EQ(element_size(DataType::kInt32), 4u);
  EXPECT_EQ(element_size(DataType::kInt8), 1u);
  EXPECT_EQ(element_size(DataType::kUInt8), 1u);
}

TEST(Types, NamesRoundTripAndAliases) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                     DataType::kBFloat16, DataType::kInt32, DataType::kInt8, DataType::kUInt8})
    EXPECT_EQ(parse_data_type(name(t)), t);
  EXPECT_EQ(name(DataType::kFloat32), "float");  // as nccl-tests prints it
  EXPECT_EQ(name(DataType::kFloat16), "half");
  EXPECT_EQ(parse_data_type("bf16"), DataType::kBFloat16);
  EXPECT_EQ(parse_data_type("fp16"), DataType::kFloat16);
  EXPECT_FALSE(parse_data_type("float128"));
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg})
    EXPECT_EQ(parse_reduce_op(name(op)), op);
  EXPECT_FALSE(parse_reduce_op("xor"));
}

TEST(Types, HalfConversionsExactForIntegersAndRoundToNearestEven) {
  for (int v = -2048; v <= 2048; ++v)
    EXPECT_EQ(half_to_float(float_to_half(static_cast<float>(v))), v);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);  // overflow to infinity
  // 2049 is halfway between 2048 and 2050: ties to even (2048).
  EXPECT_EQ(half_to_float(float_to_half(2049.0f)), 2048.0f);
  EXPECT_EQ(half_to_float(float_to_half(2051.0f)), 2052.0f);
  // Subnormals survive the round trip.
  const float smallest = std::ldexp(1.0f, -24);
  EXPECT_EQ(half_to_float(float_to_half(smallest)), smallest);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
}

TEST(Types, BFloat16ConversionsExactForIntegersAndRound) {
  for (int v = -256; v <= 256; ++v)
    EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(static_cast<float>(v))), v);
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(257.0f)), 256.0f);  // tie to even
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(259.0f)), 260.0f);
}

TEST(Types, LoadStoreEveryType) {
  unsigned char storage[16] = {};
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                     DataType::kBFloat16, DataType::kInt32, DataType::kInt8, DataType::kUInt8}) {
    store_element(storage, t, 1, 100);
    EXPECT_EQ(load_element(storage, t, 1), 100) << name(t);
  }
  store_element(storage, DataType::kInt8, 0, -5);
  EXPECT_EQ(load_element(storage, DataType::kInt8, 0), -5);
}

}  // namespace
}  // namespace ccscope
