#include "elements.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace ccscope::standin {
namespace {

TEST(StandinElements, SizesOfEveryType) {
  EXPECT_EQ(element_bytes(ncclInt8), 1u);
  EXPECT_EQ(element_bytes(ncclFloat16), 2u);
  EXPECT_EQ(element_bytes(ncclBfloat16), 2u);
  EXPECT_EQ(element_bytes(ncclFloat32), 4u);
  EXPECT_EQ(element_bytes(ncclUint64), 8u);
  EXPECT_EQ(element_bytes(ncclFloat8e4m3), 1u);
  EXPECT_EQ(element_bytes(static_cast<ncclDataType_t>(99)), 0u);
}

TEST(StandinElements, NarrowFloatsRoundToNearestEven) {
  // 1 + 2^-11 lies halfway between two halves: the even one (1.0) wins.
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_FLOAT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_FLOAT_EQ(bf16_to_float(0x4049), 3.140625f);
}

TEST(StandinElements, Fp8FormatsDecodeAndSaturate) {
  EXPECT_FLOAT_EQ(e4m3_to_float(0x38), 1.0f);   // exponent 7 = bias
  EXPECT_FLOAT_EQ(e4m3_to_float(0x7e), 448.0f); // largest finite
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_EQ(float_to_e4m3(1000.0f), 0x7e);      // saturates
  EXPECT_FLOAT_EQ(e5m2_to_float(0x3c), 1.0f);
  EXPECT_FLOAT_EQ(e5m2_to_float(0x7b), 57344.0f);
  EXPECT_EQ(float_to_e5m2(1e6f), 0x7b);
  for (int code = 0; code < 0x7f; ++code) {  // every finite code round-trips
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(code))), code) << code;
  }
}

TEST(StandinElements, HalfSumRoundsAfterEveryRankInRankOrder) {
  // 2048 + 1 + 1 in half: step by step 2048 + 1 rounds back to 2048 (ties to
  // even), twice; a sum rounded once would give 2050.
  const uint16_t a = float_to_half(2048.0f), b = float_to_half(1.0f);
  const std::vector<uint16_t> r0{a}, r1{b}, r2{b};
  const void* inputs[] = {r0.data(), r1.data(), r2.data()};
  uint16_t out = 0;
  reduce({Reduction::kSum, ncclFloat16, {}}, inputs, &out, 1);
  EXPECT_FLOAT_EQ(half_to_float(out), 2048.0f);
  // Rank order matters: 1 + 1 + 2048 = 2050.
  const void* reordered[] = {r1.data(), r2.data(), r0.data()};
  reduce({Reduction::kSum, ncclFloat16, {}}, reordered, &out, 1);
  EXPECT_FLOAT_EQ(half_to_float(out), 2050.0f);
}

TEST(StandinElements, AvgIsPremultipliedForFloatsAndDividedForIntegers) {
  const std::vector<float> f0{1.0f}, f1{2.0f}, f2{4.0f};
  const void* fin[] = {f0.data(), f1.data(), f2.data()};
  float fout = 0;
  reduce({Reduction::kAvg, ncclFloat32, {}}, fin, &fout, 1);
  const float third = 1.0f / 3.0f;
  EXPECT_EQ(fout, 1.0f * third + 2.0f * third + 4.0f * third);
  const std::vector<int32_t> i0{1}, i1{2}, i2{4};
  const void* iin[] = {i0.data(), i1.data(), i2.data()};
  int32_t iout = 0;
  reduce({Reduction::kAvg, ncclInt32, {}}, iin, &iout, 1);
  EXPECT_EQ(iout, 7 / 3);
}

TEST(StandinElements, PreMulSumScalesEachRank) {
  const std::vector<double> in0{3}, in1{5};
  const void* inputs[] = {in0.data(), in1.data()};
  const std::vector<double> scalars{2.0, 10.0};
  double out = 0;
  reduce({Reduction::kPreMulSum, ncclFloat64, scalars}, inputs, &out, 1);
  EXPECT_EQ(out, 56.0);
}

TEST(StandinElements, IntegersWrapAndCompareAsTheirType) {
  const std::vector<uint8_t> a{200}, b{100};
  const void* inputs[] = {a.data(), b.data()};
  uint8_t out = 0;
  reduce({Reduction::kSum, ncclUint8, {}}, inputs, &out, 1);
  EXPECT_EQ(out, 44);
  const std::vector<int8_t> c{-5}, d{3};
  const void* signed_inputs[] = {c.data(), d.data()};
  int8_t smallest = 0;
  reduce({Reduction::kMin, ncclInt8, {}}, signed_inputs, &smallest, 1);
  EXPECT_EQ(smallest, -5);
}

}  // namespace
}  // namespace ccscope::standin
