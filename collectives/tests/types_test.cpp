#include "ccscope/collectives/types.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

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
  EXPECT_EQ(element_size(DataType::kUInt32), 4u);
  EXPECT_EQ(element_size(DataType::kInt64), 8u);
  EXPECT_EQ(element_size(DataType::kUInt64), 8u);
  EXPECT_EQ(element_size(DataType::kFloat8E4M3), 1u);
  EXPECT_EQ(element_size(DataType::kFloat8E5M2), 1u);
}

TEST(Types, EveryTypeAndOpListedOnceWithARoundTrippingName) {
  const auto& types = all_data_types();
  EXPECT_EQ(types.size(), 12u);
  EXPECT_EQ(std::set<DataType>(types.begin(), types.end()).size(), types.size());
  for (DataType t : types) EXPECT_EQ(parse_data_type(name(t)), t) << name(t);
  const auto& ops = all_reduce_ops();
  EXPECT_EQ(ops.size(), 6u);
  EXPECT_EQ(std::set<ReduceOp>(ops.begin(), ops.end()).size(), ops.size());
  for (ReduceOp op : ops) EXPECT_EQ(parse_reduce_op(name(op)), op) << name(op);
  EXPECT_EQ(parse_reduce_op("mulsum"), ReduceOp::kMulSum);
  EXPECT_EQ(parse_data_type("e4m3"), DataType::kFloat8E4M3);
  EXPECT_EQ(parse_data_type("fp8_e5m2"), DataType::kFloat8E5M2);
}

TEST(Types, PremulScalarIsOnePlusRankParity) {
  for (int rank = 0; rank < 64; ++rank) EXPECT_EQ(premul_scalar(rank), 1 + rank % 2);
}

TEST(Types, SignednessAndLargestExactInteger) {
  for (DataType t : all_data_types()) {
    const bool is_signed_int =
        t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64;
    EXPECT_EQ(is_signed_integer(t), is_signed_int) << name(t);
    const double largest = largest_exact_integer(t);
    if (largest >= 9007199254740992.0) continue;  // a double cannot hold largest + 1
    unsigned char storage[8] = {};
    // Every integer up to `largest` (sampled near the top) survives, largest + 1
    // does not: either rounded (floats) or out of range (integers).
    for (double v = std::max(0.0, largest - 300); v <= largest; ++v) {
      store_element(storage, t, 0, v);
      ASSERT_EQ(load_element(storage, t, 0), v) << name(t);
    }
    if (!is_floating(t)) continue;  // storing an out-of-range integer is not defined
    store_element(storage, t, 0, largest + 1);
    EXPECT_NE(load_element(storage, t, 0), largest + 1) << name(t);
  }
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
  for (DataType t : all_data_types()) {
    store_element(storage, t, 1, 12);
    EXPECT_EQ(load_element(storage, t, 1), 12) << name(t);
  }
  store_element(storage, DataType::kInt8, 0, -5);
  EXPECT_EQ(load_element(storage, DataType::kInt8, 0), -5);
}

TEST(Types, IntegersStoreOutOfRangeValuesWrappedAsTheirArithmeticDoes) {
  unsigned char storage[16] = {};
  auto stored = [&](DataType t, double v) {
    store_element(storage, t, 0, v);
    return load_element(storage, t, 0);
  };
  EXPECT_EQ(stored(DataType::kUInt8, 256), 0);  // 255 + 1, a corrupted element in the tests
  EXPECT_EQ(stored(DataType::kUInt8, -1), 255);
  EXPECT_EQ(stored(DataType::kInt8, 128), -128);
  EXPECT_EQ(stored(DataType::kUInt32, 4294967296.0 + 7), 7);
  EXPECT_EQ(stored(DataType::kInt32, 2.9), 2);  // toward zero, as a conversion truncates
  EXPECT_EQ(stored(DataType::kUInt64, 18446744073709549568.0), 18446744073709549568.0);
  EXPECT_EQ(stored(DataType::kInt64, std::nan("")), 0);
}

// --- OCP fp8 (e4m3 "fn": no infinity, one NaN per sign; e5m2: IEEE-like) ---

struct Fp8Format {
  const char* name;
  int exponent_bits;
  int mantissa_bits;
  bool ieee;  // e5m2: all-ones exponent is inf/NaN; e4m3: only S.1111.111 is NaN
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
};
const Fp8Format kE4M3{"e4m3", 4, 3, false, float_to_fp8_e4m3, fp8_e4m3_to_float};
const Fp8Format kE5M2{"e5m2", 5, 2, true, float_to_fp8_e5m2, fp8_e5m2_to_float};

// The value of a code from the format's definition, written independently of
// types.cpp: NaN for the NaN codes.
double reference_value(const Fp8Format& f, uint8_t code) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const int exponent = (code >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int mantissa = code & ((1 << f.mantissa_bits) - 1);
  const int top = (1 << f.exponent_bits) - 1;
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  if (f.ieee && exponent == top) return mantissa == 0 ? sign * INFINITY : NAN;
  if (!f.ieee && exponent == top && mantissa == (1 << f.mantissa_bits) - 1) return NAN;
  const double fraction = mantissa / static_cast<double>(1 << f.mantissa_bits);
  if (exponent == 0) return sign * std::ldexp(fraction, 1 - bias);
  return sign * std::ldexp(1.0 + fraction, exponent - bias);
}

class Fp8Test : public ::testing::TestWithParam<Fp8Format> {};

TEST_P(Fp8Test, AllCodesDecodeToTheirDefinitionAndEncodeBack) {
  const Fp8Format& f = GetParam();
  int nans = 0;
  for (int code = 0; code < 256; ++code) {
    const uint8_t bits = static_cast<uint8_t>(code);
    const double expected = reference_value(f, bits);
    const float decoded = f.decode(bits);
    if (std::isnan(expected)) {
      ++nans;
      EXPECT_TRUE(std::isnan(decoded)) << f.name << " code " << code;
      EXPECT_TRUE(std::isnan(f.decode(f.encode(decoded)))) << f.name << " code " << code;
      continue;
    }
    EXPECT_EQ(decoded, expected) << f.name << " code " << code;
    EXPECT_EQ(std::signbit(decoded), (code & 0x80) != 0) << f.name << " code " << code;
    EXPECT_EQ(f.encode(decoded), bits) << f.name << " code " << code << " value " << decoded;
  }
  EXPECT_EQ(nans, f.ieee ? 6 : 2) << f.name;
  EXPECT_TRUE(std::isnan(f.decode(f.encode(NAN))));
  EXPECT_TRUE(std::isnan(f.decode(f.encode(-NAN))));
}

// Every value halfway between two neighbouring finite codes rounds to the one
// with the even mantissa; a hair either side rounds to the nearer one.
TEST_P(Fp8Test, RoundsToNearestEvenBetweenEveryPairOfNeighbours) {
  const Fp8Format& f = GetParam();
  for (uint8_t sign : {uint8_t{0}, uint8_t{0x80}}) {
    for (int code = 0; code < 0x7f; ++code) {
      const uint8_t low = static_cast<uint8_t>(sign | code);
      const uint8_t high = static_cast<uint8_t>(sign | (code + 1));
      const double a = reference_value(f, low), b = reference_value(f, high);
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      const float mid = static_cast<float>((a + b) / 2);  // exact in float
      ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
      const uint8_t even = (code & 1) == 0 ? low : high;
      EXPECT_EQ(f.encode(mid), even)
          << f.name << " between codes " << int{low} << " and " << int{high};
      const float toward_a = std::nextafter(mid, static_cast<float>(a));
      const float toward_b = std::nextafter(mid, static_cast<float>(b));
      EXPECT_EQ(f.encode(toward_a), low) << f.name << " just past " << a;
      EXPECT_EQ(f.encode(toward_b), high) << f.name << " just before " << b;
    }
  }
}

TEST(Fp8, RoundToNearestEvenAtATie) {
  // e4m3 around 1: 1, 1.125, 1.25 (codes 0x38, 0x39, 0x3a).
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);  // tie: to the even 1.0
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3a);  // tie: to the even 1.25
  EXPECT_EQ(float_to_fp8_e4m3(1.07f), 0x39);
  // e5m2 around 1: 1, 1.25, 1.5.
  EXPECT_EQ(float_to_fp8_e5m2(1.125f), 0x3c);
  EXPECT_EQ(float_to_fp8_e5m2(1.375f), 0x3e);
  EXPECT_EQ(fp8_e5m2_to_float(float_to_fp8_e5m2(9.0f)), 8.0f);
  EXPECT_EQ(fp8_e5m2_to_float(float_to_fp8_e5m2(11.0f)), 12.0f);
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(17.0f)), 16.0f);
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(19.0f)), 20.0f);
}

TEST(Fp8, MaxFiniteAndOverflow) {
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0xfe), -448.0f);
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7e);  // the tie above 448 goes to the even 448
  EXPECT_EQ(fp8_e5m2_to_float(0x7b), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0xfb), -57344.0f);
  EXPECT_EQ(float_to_fp8_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(float_to_fp8_e5m2(61439.0f), 0x7b);
  // Overflow: e4m3 has no infinity and goes to NaN; e5m2 goes to infinity.
  for (float big : {465.0f, 480.0f, 1e6f, 3.4e38f, INFINITY}) {
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(float_to_fp8_e4m3(big)))) << big;
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(float_to_fp8_e4m3(-big)))) << -big;
  }
  for (float big : {61440.0f, 65536.0f, 1e6f, 3.4e38f, INFINITY}) {
    EXPECT_EQ(float_to_fp8_e5m2(big), 0x7c) << big;  // +inf
    EXPECT_EQ(float_to_fp8_e5m2(-big), 0xfc) << -big;
  }
  EXPECT_EQ(fp8_e5m2_to_float(0x7c), INFINITY);
  EXPECT_EQ(fp8_e5m2_to_float(0xfc), -INFINITY);
}

TEST(Fp8, Subnormals) {
  // e4m3: subnormals m * 2^-9 (codes 1..7), smallest normal 2^-6 (code 8).
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_float(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_float(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(float_to_fp8_e4m3(-3 * std::ldexp(1.0f, -9)), 0x83);
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);        // half the smallest: tie to 0
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.5f, -10)), 0x01);        // above half: smallest
  EXPECT_EQ(float_to_fp8_e4m3(-std::ldexp(1.0f, -12)), 0x80);       // underflow keeps the sign
  EXPECT_EQ(float_to_fp8_e4m3(7.5f * std::ldexp(1.0f, -9)), 0x08);  // tie into the normals
  // e5m2: subnormals m * 2^-16 (codes 1..3), smallest normal 2^-14 (code 4).
  EXPECT_EQ(fp8_e5m2_to_float(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_e5m2_to_float(0x03), 3 * std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_e5m2_to_float(0x04), std::ldexp(1.0f, -14));
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(1.0f, -17)), 0x00);
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(3.0f, -17)), 0x02);         // tie 1.5 -> even 2
  EXPECT_EQ(float_to_fp8_e5m2(3.5f * std::ldexp(1.0f, -16)), 0x04);  // tie into the normals
  EXPECT_EQ(float_to_fp8_e5m2(1e-30f), 0x00);
  EXPECT_EQ(float_to_fp8_e5m2(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3(0.0f), 0x00);
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Test, ::testing::Values(kE4M3, kE5M2),
                         [](const ::testing::TestParamInfo<Fp8Format>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace ccscope
