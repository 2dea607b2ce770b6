#include "elements.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace ccscope::standin {
namespace {

// An 8-bit float format: its 128 non-negative codes decoded once, and
// encoding as "nearest finite value, ties to the even code, saturating".
struct Fp8Format {
  int exponent_bits;
  int mantissa_bits;
  bool ieee_specials;  // e5m2: infinities and NaNs as IEEE; e4m3: only 0x7f is NaN
  std::array<float, 128> values{};
  float largest = 0;

  Fp8Format(int e, int m, bool ieee) : exponent_bits(e), mantissa_bits(m), ieee_specials(ieee) {
    const int bias = (1 << (e - 1)) - 1;
    for (int code = 0; code < 128; ++code) {
      const int exponent = code >> m;
      const int mantissa = code & ((1 << m) - 1);
      float v;
      if (exponent == 0) {
        v = std::ldexp(static_cast<float>(mantissa), 1 - bias - m);
      } else {
        v = std::ldexp(1.0f + static_cast<float>(mantissa) / static_cast<float>(1 << m),
                       exponent - bias);
      }
      if (ieee && exponent == (1 << e) - 1) {
        v = mantissa == 0 ? std::numeric_limits<float>::infinity()
                          : std::numeric_limits<float>::quiet_NaN();
      }
      if (!ieee && code == 127) v = std::numeric_limits<float>::quiet_NaN();
      values[static_cast<size_t>(code)] = v;
      if (std::isfinite(v)) largest = std::max(largest, v);
    }
  }

  uint8_t encode(float x) const {
    if (std::isnan(x)) return 0x7f;
    const uint8_t sign = std::signbit(x) ? 0x80 : 0;
    const float a = std::fabs(x);
    if (a >= largest) {  // saturate (finite codes below the specials)
      for (int code = 127; code >= 0; --code)
        if (values[static_cast<size_t>(code)] == largest) return static_cast<uint8_t>(sign | code);
    }
    // Finite codes are increasing; find the neighbours of a.
    int hi = 0;
    while (hi < 127 && values[static_cast<size_t>(hi)] < a) ++hi;
    if (values[static_cast<size_t>(hi)] == a || hi == 0) return static_cast<uint8_t>(sign | hi);
    const int lo = hi - 1;
    const float below = a - values[static_cast<size_t>(lo)];
    const float above = values[static_cast<size_t>(hi)] - a;
    int code = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
    return static_cast<uint8_t>(sign | code);
  }

  float decode(uint8_t bits) const {
    const float v = values[bits & 0x7f];
    return (bits & 0x80) ? -v : v;
  }
};

const Fp8Format& e4m3() {
  static const Fp8Format format(4, 3, false);
  return format;
}
const Fp8Format& e5m2() {
  static const Fp8Format format(5, 2, true);
  return format;
}

// The element types as C++ types with their arithmetic: integers wrap as the
// device's do (unsigned arithmetic), narrow floats compute in float and round.
template <typename Storage>
struct Integer {
  using Compute = Storage;
  static Compute in(Storage s) { return s; }
  static Storage out(Compute c) { return c; }
  static Compute add(Compute a, Compute b) {
    using U = std::make_unsigned_t<Storage>;
    return static_cast<Storage>(static_cast<U>(a) + static_cast<U>(b));
  }
  static Compute mul(Compute a, Compute b) {
    using U = std::make_unsigned_t<Storage>;
    using Wide = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<Storage>(static_cast<U>(static_cast<Wide>(static_cast<U>(a)) *
                                               static_cast<Wide>(static_cast<U>(b))));
  }
  static Compute from_double(double v) { return static_cast<Storage>(v); }
  static constexpr bool kInteger = true;
};

template <typename Storage>
struct Native {
  using Compute = Storage;
  static Compute in(Storage s) { return s; }
  static Storage out(Compute c) { return c; }
  static Compute add(Compute a, Compute b) { return a + b; }
  static Compute mul(Compute a, Compute b) { return a * b; }
  static Compute from_double(double v) { return static_cast<Storage>(v); }
  static constexpr bool kInteger = false;
};

// A 16- or 8-bit float: computed in float, every step rounded to the type.
template <typename Bits, float (*Decode)(Bits), Bits (*Encode)(float)>
struct Narrow {
  using Compute = float;
  static Compute in(Bits s) { return Decode(s); }
  static Bits out(Compute c) { return Encode(c); }
  static Compute round(Compute c) { return Decode(Encode(c)); }
  static Compute add(Compute a, Compute b) { return round(a + b); }
  static Compute mul(Compute a, Compute b) { return round(a * b); }
  static Compute from_double(double v) { return round(static_cast<float>(v)); }
  static constexpr bool kInteger = false;
};

template <typename Storage, typename Traits>
void reduce_typed(const ReduceArgs& args, std::span<const void* const> inputs, void* out,
                  size_t count) {
  using Compute = typename Traits::Compute;
  const size_t n = inputs.size();
  std::vector<const Storage*> in(n);
  for (size_t r = 0; r < n; ++r) in[r] = static_cast<const Storage*>(inputs[r]);
  std::vector<Compute> factor(n, Compute{});
  const bool premultiplied =
      args.reduction == Reduction::kPreMulSum || (args.reduction == Reduction::kAvg && !Traits::kInteger);
  if (premultiplied) {
    for (size_t r = 0; r < n; ++r) {
      factor[r] = args.reduction == Reduction::kAvg
                      ? Traits::from_double(1.0 / static_cast<double>(n))
                      : Traits::from_double(args.scalars[r]);
    }
  }
  Storage* result = static_cast<Storage*>(out);
  for (size_t i = 0; i < count; ++i) {
    auto value_of = [&](size_t r) {
      Compute v = Traits::in(in[r][i]);
      return premultiplied ? Traits::mul(v, factor[r]) : v;
    };
    Compute acc = value_of(0);
    for (size_t r = 1; r < n; ++r) {
      const Compute v = value_of(r);
      switch (args.reduction) {
        case Reduction::kSum:
        case Reduction::kAvg:
        case Reduction::kPreMulSum:
          acc = Traits::add(acc, v);
          break;
        case Reduction::kProd:
          acc = Traits::mul(acc, v);
          break;
        case Reduction::kMax:
          acc = std::max(acc, v);
          break;
        case Reduction::kMin:
          acc = std::min(acc, v);
          break;
      }
    }
    if constexpr (Traits::kInteger) {
      if (args.reduction == Reduction::kAvg) acc = static_cast<Compute>(acc / static_cast<Compute>(n));
    }
    result[i] = Traits::out(acc);
  }
}

template <typename Fn>
void with_type(ncclDataType_t type, Fn&& fn) {
  switch (type) {
    case ncclInt8: return fn(int8_t{}, Integer<int8_t>{});
    case ncclUint8: return fn(uint8_t{}, Integer<uint8_t>{});
    case ncclInt32: return fn(int32_t{}, Integer<int32_t>{});
    case ncclUint32: return fn(uint32_t{}, Integer<uint32_t>{});
    case ncclInt64: return fn(int64_t{}, Integer<int64_t>{});
    case ncclUint64: return fn(uint64_t{}, Integer<uint64_t>{});
    case ncclFloat16: return fn(uint16_t{}, Narrow<uint16_t, half_to_float, float_to_half>{});
    case ncclFloat32: return fn(float{}, Native<float>{});
    case ncclFloat64: return fn(double{}, Native<double>{});
    case ncclBfloat16: return fn(uint16_t{}, Narrow<uint16_t, bf16_to_float, float_to_bf16>{});
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    case ncclFloat8e4m3: return fn(uint8_t{}, Narrow<uint8_t, e4m3_to_float, float_to_e4m3>{});
    case ncclFloat8e5m2: return fn(uint8_t{}, Narrow<uint8_t, e5m2_to_float, float_to_e5m2>{});
#endif
    default: return;
  }
}

}  // namespace

size_t element_bytes(ncclDataType_t type) {
  size_t bytes = 0;
  with_type(type, [&](auto storage, auto) { bytes = sizeof(storage); });
  return bytes;
}

const char* type_name(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return "ncclInt8";
    case ncclUint8: return "ncclUint8";
    case ncclInt32: return "ncclInt32";
    case ncclUint32: return "ncclUint32";
    case ncclInt64: return "ncclInt64";
    case ncclUint64: return "ncclUint64";
    case ncclFloat16: return "ncclFloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat64: return "ncclFloat64";
    case ncclBfloat16: return "ncclBfloat16";
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    case ncclFloat8e4m3: return "ncclFloat8e4m3";
    case ncclFloat8e5m2: return "ncclFloat8e5m2";
#endif
    default: return "an invalid ncclDataType_t";
  }
}

float half_to_float(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, sizeof(h));
  return static_cast<float>(h);
}

uint16_t float_to_half(float value) {
  const _Float16 h = static_cast<_Float16>(value);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float e4m3_to_float(uint8_t bits) { return e4m3().decode(bits); }
uint8_t float_to_e4m3(float value) { return e4m3().encode(value); }
float e5m2_to_float(uint8_t bits) { return e5m2().decode(bits); }
uint8_t float_to_e5m2(float value) { return e5m2().encode(value); }

double load(const void* data, ncclDataType_t type, size_t index) {
  double result = 0;
  with_type(type, [&](auto storage, auto traits) {
    using Storage = decltype(storage);
    Storage s;
    std::memcpy(&s, static_cast<const char*>(data) + index * sizeof(Storage), sizeof(Storage));
    result = static_cast<double>(decltype(traits)::in(s));
  });
  return result;
}

void store(void* data, ncclDataType_t type, size_t index, double value) {
  with_type(type, [&](auto storage, auto traits) {
    using Storage = decltype(storage);
    using Traits = decltype(traits);
    const Storage s = Traits::out(Traits::from_double(value));
    std::memcpy(static_cast<char*>(data) + index * sizeof(Storage), &s, sizeof(Storage));
  });
}

void reduce(const ReduceArgs& args, std::span<const void* const> inputs, void* out, size_t count) {
  if (inputs.empty()) return;
  with_type(args.type, [&](auto storage, auto traits) {
    reduce_typed<decltype(storage), decltype(traits)>(args, inputs, out, count);
  });
}

}  // namespace ccscope::standin
