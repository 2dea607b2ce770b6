#include "patterns.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

namespace ccscope::bench {
namespace {

// splitmix64's finaliser: a cheap bijection whose outputs look independent.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t mix2(uint64_t a, uint64_t b) { return mix(a ^ mix(b)); }

// A double holds every integer up to 2^53; patterns stay below it.
constexpr double kLargestDoubleInteger = 9007199254740992.0;

// The largest e such that 2^(2e) is exact and in range for the type.
int largest_product_exponent(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUInt8:
      return 3;  // 2^6 = 64 (int8), 2^7 would be the largest for uint8
    case DataType::kFloat8E4M3:
      return 4;  // 2^8 = 256 <= 448
    case DataType::kFloat16:
    case DataType::kFloat8E5M2:
      return 7;  // 2^14 <= 65504 / 57344
    case DataType::kInt32:
    case DataType::kUInt32:
      return 15;  // 2^30
    case DataType::kInt64:
    case DataType::kUInt64:
      return 31;  // 2^62
    case DataType::kBFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      return 30;
  }
  return 3;
}

int mantissa_bits(DataType type) {
  switch (type) {
    case DataType::kFloat8E5M2:
      return 2;
    case DataType::kFloat8E4M3:
      return 3;
    case DataType::kBFloat16:
      return 7;
    case DataType::kFloat16:
      return 10;
    case DataType::kFloat32:
      return 23;
    case DataType::kFloat64:
      return 52;
    default:
      return 0;
  }
}

int min_normal_exponent(DataType type) {
  switch (type) {
    case DataType::kFloat8E5M2:
    case DataType::kFloat16:
      return -14;
    case DataType::kFloat8E4M3:
      return -6;
    case DataType::kBFloat16:
    case DataType::kFloat32:
      return -126;
    default:
      return -1022;
  }
}

// --- The random bits ---

// Elements are made in tiles of kTile, aligned on kTile; the rank that
// contributes second also moves once per tile.
constexpr size_t kTile = 256;

// 32 random bits for the low 32 bits `x` of a word index, under a 64-bit key
// that stands for (seed, stream, the index's high 32 bits): Chris Wellons'
// lowbias32 (hash-prospector; near-ideal avalanche) with the key's halves
// xored in before each multiply. Every step is a bijection of x, so no two of
// the 2^32 words that share a key are equal. Its 32-bit multiplies, unlike
// splitmix's 64-bit ones, vectorise: natively with SSE4.1 and AVX2 (pmulld),
// emulated with the baseline x86-64's SSE2.
inline uint32_t hash32(uint32_t x, uint64_t key) {
  x ^= static_cast<uint32_t>(key);
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= static_cast<uint32_t>(key >> 32);
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// The key of a stream's words whose index has the high 32 bits `high`.
uint64_t word_key(uint64_t stream, uint64_t high) { return mix2(stream, high); }

// Word `index` of a stream: the stream's random bits, 32 at a time.
uint32_t stream_word(uint64_t stream, uint64_t index) {
  return hash32(static_cast<uint32_t>(index), word_key(stream, index >> 32));
}

// Stream ids (each stream's key is mix2(seed, id)).
constexpr uint64_t kValueStream = 1;   // reductions: v1 and v2, the exponents, the extreme
constexpr uint64_t kSecondStream = 2;  // the distance from the first rank to the second
constexpr uint64_t kFirstStream = 3;   // the rotation of the first rank
constexpr uint64_t kOtherStream = uint64_t{1} << 32;     // + rank: min / max, the other values
constexpr uint64_t kMovementStream = uint64_t{2} << 32;  // + source: data movement

// A value in [0, range) from `x`, a number of `bits` random bits (Lemire's
// multiply-shift range reduction).
uint64_t below(uint64_t x, int bits, uint64_t range) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(x) * range) >> bits);
}
uint64_t low_bits(uint64_t x, int bits) { return bits >= 64 ? x : x & ((uint64_t{1} << bits) - 1); }

// --- Element types: how a value becomes the type's bits in the tiles ---
// `integer` takes an integer the type holds exactly (so that any rounding
// gives these bits, the ones store_element gives), `power_of_two` 2^k (k <=
// 62, exact too), `quotient` (types of 4 and 8 bytes; the narrower ones look
// averages up) a positive double, an average, rounded as store_element rounds
// it. `Int` is the width of the fields and integer values: 32 bits, 64 for
// 8-byte types. `Signed` holds every value and sum, for the conversions to
// and from floating point: the signed 32-bit ones vectorise (SSE2 has no
// unsigned conversion).

struct Float32Codec {
  using Bits = uint32_t;
  using Int = uint32_t;
  using Signed = int32_t;  // values up to 2^24
  static Bits integer(Int v) {
    return std::bit_cast<uint32_t>(static_cast<float>(static_cast<Signed>(v)));
  }
  static Bits power_of_two(Int k) { return (127 + k) << 23; }
  static Bits quotient(double q) { return std::bit_cast<uint32_t>(static_cast<float>(q)); }
};

struct Float64Codec {
  using Bits = uint64_t;
  using Int = uint64_t;
  using Signed = int64_t;  // values up to 2^53
  static Bits integer(Int v) {
    return std::bit_cast<uint64_t>(static_cast<double>(static_cast<Signed>(v)));
  }
  static Bits power_of_two(Int k) { return (1023 + k) << 52; }
  static Bits quotient(double q) { return std::bit_cast<uint64_t>(q); }
};

// bfloat16 is float's top half: exact integers (at most 256) have a zero
// lower half. `rounded` rounds a float to nearest even as float_to_bfloat16
// does (for an average, never NaN).
struct BFloat16Codec {
  using Bits = uint16_t;
  using Int = uint32_t;
  using Signed = int32_t;
  static Bits integer(Int v) { return static_cast<uint16_t>(Float32Codec::integer(v) >> 16); }
  static Bits power_of_two(Int k) { return static_cast<uint16_t>((127 + k) << 7); }
  static Bits rounded(float f) {
    uint32_t bits = std::bit_cast<uint32_t>(f);
    bits += 0x7fffU + ((bits >> 16) & 1U);
    return static_cast<uint16_t>(bits >> 16);
  }
};

// half: exact integers (at most 2048, or powers of two up to 2^14) are normal
// halves, whose bits are those of the float v * 2^-112 (the exponent rebiased
// from 127 to 15; exact, and 0 stays 0) without its 13 lowest mantissa bits.
// `rounded` rounds a float in the normal halves' range to nearest even as
// float_to_half does (the carry may reach the exponent, as there).
struct Float16Codec {
  using Bits = uint16_t;
  using Int = uint32_t;
  using Signed = int32_t;
  static Bits integer(Int v) {
    const float rebiased = static_cast<float>(static_cast<Signed>(v)) * 0x1p-112f;
    return static_cast<uint16_t>(std::bit_cast<uint32_t>(rebiased) >> 13);
  }
  static Bits power_of_two(Int k) { return static_cast<uint16_t>((15 + k) << 10); }
  static Bits rounded(float f) {
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    return static_cast<uint16_t>(((bits + 0xfffU + ((bits >> 13) & 1U)) >> 13) - (112U << 10));
  }
};

// fp8, exact integers (at most 16, or powers of two up to 2^8) are normal:
// e4m3's bits are the float v * 2^-120's (the exponent rebiased from 127 to 7)
// without its 20 lowest mantissa bits; e5m2 is half's top byte.
struct Float8E4M3Codec {
  using Bits = uint8_t;
  using Int = uint32_t;
  using Signed = int32_t;
  static Bits integer(Int v) {
    const float rebiased = static_cast<float>(static_cast<Signed>(v)) * 0x1p-120f;
    return static_cast<uint8_t>(std::bit_cast<uint32_t>(rebiased) >> 20);
  }
  static Bits power_of_two(Int k) { return static_cast<uint8_t>((7 + k) << 3); }
};

struct Float8E5M2Codec {
  using Bits = uint8_t;
  using Int = uint32_t;
  using Signed = int32_t;
  static Bits integer(Int v) { return static_cast<uint8_t>(Float16Codec::integer(v) >> 8); }
  static Bits power_of_two(Int k) { return static_cast<uint8_t>((15 + k) << 2); }
};

// Integers: the values are non-negative and in range, so the bits are the
// value's low bits; an average truncates toward zero, as store_element does.
template <class Unsigned, class SignedValue>
struct IntegerCodec {
  using Bits = Unsigned;
  using Int = std::conditional_t<sizeof(Bits) == 8, uint64_t, uint32_t>;
  using Signed = SignedValue;
  static Bits integer(Int v) { return static_cast<Bits>(v); }
  static Bits power_of_two(Int k) { return static_cast<Bits>(Int{1} << k); }
  static Bits quotient(double q) { return static_cast<Bits>(static_cast<Signed>(q)); }
};

template <class F>
void with_codec(DataType type, F&& f) {
  switch (type) {
    case DataType::kFloat32:
      return f(Float32Codec{});
    case DataType::kFloat64:
      return f(Float64Codec{});
    case DataType::kFloat16:
      return f(Float16Codec{});
    case DataType::kBFloat16:
      return f(BFloat16Codec{});
    case DataType::kFloat8E4M3:
      return f(Float8E4M3Codec{});
    case DataType::kFloat8E5M2:
      return f(Float8E5M2Codec{});
    // Signed and unsigned integers of a width share the bits (and the code);
    // int32's sums reach 2^30, uint32's 2^31.
    case DataType::kInt8:
    case DataType::kUInt8:
      return f(IntegerCodec<uint8_t, int32_t>{});
    case DataType::kInt32:
      return f(IntegerCodec<uint32_t, int32_t>{});
    case DataType::kUInt32:
      return f(IntegerCodec<uint32_t, int64_t>{});
    case DataType::kInt64:
    case DataType::kUInt64:
      return f(IntegerCodec<uint64_t, int64_t>{});
  }
}

// --- Where each output element's expected value comes from ---

// A stretch of output elements whose expected values are consecutive elements
// of one source: the reduced vector, a rank's input, or (kFill) the kOutputFill bytes.
struct Run {
  enum class Kind { kReduced, kInput, kFill };
  Kind kind = Kind::kFill;
  int rank = 0;        // kInput: whose input
  size_t element = 0;  // the source element of the run's first output element
  size_t length = 0;
};

// output_source's rules are piecewise: each source feeds one contiguous stretch
// of an output, element by element in order (a block of the reduced vector, a
// rank's block, the part left alone). The stretch that starts at `index` is
// found by galloping, O(log length) calls of output_source instead of one per
// element; it relies on that shape, which the tests check for every collective.
size_t stretch(Collective collective, const OutputQuery& query, size_t index, size_t end,
               const OutputSource& start) {
  const auto continues = [&](size_t at) {
    const OutputSource s = output_source(collective, query, at);
    if (s.kind != start.kind) return false;
    if (s.kind == OutputSource::Kind::kUnchanged) return true;
    return s.rank == start.rank && s.element == start.element + (at - index);
  };
  size_t good = 1, bad = end - index + 1;  // lengths: [index, index + good) continues
  for (size_t step = 1; good + 1 < bad; step *= 2) {
    const size_t probe = std::min(good + step, bad - 1);
    if (!continues(index + probe - 1)) {
      bad = probe;
      break;
    }
    good = probe;
  }
  while (good + 1 < bad) {
    const size_t probe = good + (bad - good) / 2;
    if (continues(index + probe - 1)) {
      good = probe;
    } else {
      bad = probe;
    }
  }
  return good;
}

// Calls visit(run) for the runs of output elements [first, first + count) of
// q.rank, in order. Left alone in place, an output element inside the input
// still holds it (the rank's own input), elsewhere the fill.
template <class Visit>
void for_each_run(Collective collective, const OutputQuery& q, bool in_place, size_t first,
                  size_t count, Visit&& visit) {
  const Layout& layout = q.layout;
  const size_t end = first + count;
  for (size_t index = first; index < end;) {
    const OutputSource source = output_source(collective, q, index);
    const size_t length = stretch(collective, q, index, end, source);
    switch (source.kind) {
      case OutputSource::Kind::kReduced:
        visit(Run{Run::Kind::kReduced, 0, source.element, length});
        index += length;
        continue;
      case OutputSource::Kind::kInput:
        visit(Run{Run::Kind::kInput, source.rank, source.element, length});
        index += length;
        continue;
      case OutputSource::Kind::kUnchanged:
        break;
    }
    // Split the part left alone where the input starts and ends.
    for (const size_t stop = index + length; index < stop;) {
      const size_t at = layout.recv_in_place_offset + index;
      const size_t input_begin = layout.send_in_place_offset;
      const size_t input_end = input_begin + layout.send_count;
      if (in_place && at >= input_begin && at < input_end) {
        const size_t n = std::min(stop - index, input_end - at);
        visit(Run{Run::Kind::kInput, q.rank, at - input_begin, n});
        index += n;
      } else {
        const size_t n =
            in_place && at < input_begin ? std::min(stop - index, input_begin - at) : stop - index;
        visit(Run{Run::Kind::kFill, 0, 0, n});
        index += n;
      }
    }
  }
}

}  // namespace

uint64_t pattern_seed(Collective collective, DataType type, ReduceOp op, size_t size_bytes,
                      bool in_place, int repeat, int check_iteration) {
  uint64_t seed = mix(static_cast<uint64_t>(collective) + 1);
  seed = mix2(seed, static_cast<uint64_t>(type));
  seed = mix2(seed, static_cast<uint64_t>(op));
  seed = mix2(seed, size_bytes);
  seed = mix2(seed, in_place ? 1 : 0);
  seed = mix2(seed, static_cast<uint64_t>(repeat));
  return mix2(seed, static_cast<uint64_t>(check_iteration) + 0x1000);
}

double unit_in_last_place(DataType type, double value) {
  if (!is_floating(type)) return 1;
  int exponent = 0;
  std::frexp(std::fabs(value), &exponent);  // |value| in [2^(e-1), 2^e)
  const int binade = std::max(exponent - 1, min_normal_exponent(type));
  return std::ldexp(1.0, binade - mantissa_bits(type));
}

DataPattern::DataPattern(Collective collective, DataType type, ReduceOp op, int ranks, int root,
                         size_t block, uint64_t seed, int ulps, bool in_place)
    : collective_(collective),
      type_(type),
      op_(op),
      ranks_(ranks),
      root_(root),
      block_(block),
      seed_(seed),
      ulps_(ulps),
      in_place_(in_place),
      element_bytes_(element_size(type)) {
  largest_ = static_cast<uint64_t>(std::min(largest_exact_integer(type), kLargestDoubleInteger));
  field_bits_ = static_cast<int>(8 * element_bytes_);
  // Two contributions v1 + v2 (mulsum: each times a scalar of at most 2) stay
  // exact: v1 <= 2^bits <= largest_ / parts (at least 2 for every type), v2
  // has the field's remaining bits, at most as many.
  const uint64_t parts = op == ReduceOp::kMulSum ? 4 : 2;
  contribution_bits_ = std::max(1, static_cast<int>(std::bit_width(largest_ / parts)) - 1);
  second_bits_ = std::min(contribution_bits_, field_bits_ - contribution_bits_);
  // Data movement: every value below the largest power of two <= largest_ + 1.
  movement_bits_ = static_cast<int>(std::bit_width(largest_ + 1)) - 1;
  max_exponent_ = static_cast<uint32_t>(largest_product_exponent(type));
  value_stream_ = mix2(seed_, kValueStream);
  second_stream_ = mix2(seed_, kSecondStream);
  first_offset_ = mix2(seed_, kFirstStream) % static_cast<uint64_t>(ranks_);
  if (op == ReduceOp::kAvg && element_bytes_ <= 2) {
    // The narrow types' averages by sum v1 + v2 (at most 1088 sums), rounded
    // as reduction_result rounds them, which the tiles look up.
    const uint64_t sums = (uint64_t{1} << contribution_bits_) + (uint64_t{1} << second_bits_);
    average_bits_.assign(sums + 1, 0);
    for (uint64_t sum = 0; sum <= sums; ++sum) {
      const auto s = static_cast<double>(sum);
      const double average = is_floating(type_) ? s / ranks_ : std::trunc(s / ranks_);
      if (element_bytes_ == 2) {
        store_element(&average_bits_[sum], type_, 0, average);
      } else {
        uint8_t bits = 0;
        store_element(&bits, type_, 0, average);
        average_bits_[sum] = bits;
      }
    }
    // bfloat16 and half: where multiplying each sum (at least 1) by the float
    // 1/ranks and rounding it gives those bits, checked here for every one,
    // the tiles do that instead, a vector multiply rather than a load per
    // element (it does at every rank count tried below 32767).
    with_codec(type_, [&](auto codec) {
      using Codec = decltype(codec);
      if constexpr (requires { Codec::rounded(0.0f); }) {
        const float scale = 1.0f / static_cast<float>(ranks_);
        for (uint64_t sum = 1; sum <= sums; ++sum)
          if (Codec::rounded(static_cast<float>(sum) * scale) != average_bits_[sum]) return;
        average_scale_ = scale;
      }
    });
  }
}

uint64_t DataPattern::other_stream(int rank) const {
  return mix2(seed_, kOtherStream + static_cast<uint64_t>(rank));
}

uint64_t DataPattern::movement_stream(size_t source) const {
  return mix2(seed_, kMovementStream + source);
}

double DataPattern::typed(double value) const {
  unsigned char bytes[8];
  store_element(bytes, type_, 0, value);
  return load_element(bytes, type_, 0);
}

// --- The definitions, one element at a time (the reference for the tiles) ---

uint64_t DataPattern::field(uint64_t stream, size_t element) const {
  // The stream's words laid out as the elements are, little-endian: a 2-byte
  // element is a half of a word, an 8-byte one two words.
  if (field_bits_ == 64)
    return stream_word(stream, 2 * element) | uint64_t{stream_word(stream, 2 * element + 1)} << 32;
  const size_t per_word = static_cast<size_t>(32 / field_bits_);
  const uint32_t word = stream_word(stream, element / per_word);
  return low_bits(word >> (field_bits_ * static_cast<int>(element % per_word)), field_bits_);
}

uint64_t DataPattern::second_distance(size_t element) const {
  // 1 .. n-1 ranks, the same for the kTile elements of a tile.
  return 1 + below(mix2(second_stream_, element / kTile), 64, static_cast<uint64_t>(ranks_ - 1));
}

DataPattern::Contributors DataPattern::contributors(size_t element) const {
  const auto n = static_cast<uint64_t>(ranks_);
  Contributors c;
  c.first = static_cast<int>((element % n + first_offset_) % n);
  if (n > 1)
    c.second = static_cast<int>((static_cast<uint64_t>(c.first) + second_distance(element)) % n);
  return c;
}

double DataPattern::reduction_input(int rank, size_t element) const {
  const Contributors c = contributors(element);
  const bool first = rank == c.first, second = rank == c.second;
  const uint64_t bits = field(value_stream_, element);
  const int half = field_bits_ / 2;
  switch (op_) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
    case ReduceOp::kMulSum:
      // v1 from the field's top bits, v2 from its low bits.
      if (first) return static_cast<double>(1 + (bits >> (field_bits_ - contribution_bits_)));
      if (second) return static_cast<double>(1 + low_bits(bits, second_bits_));
      return 0;
    case ReduceOp::kProd:
      // The exponents from the field's halves.
      if (first)
        return std::ldexp(1.0, 1 + static_cast<int>(below(bits >> half, half, max_exponent_)));
      if (second)
        return std::ldexp(1.0,
                          1 + static_cast<int>(below(low_bits(bits, half), half, max_exponent_)));
      return 1;
    case ReduceOp::kMax:
    case ReduceOp::kMin: {
      // The extreme sits on rank `first`; the others are strictly below (max)
      // or above (min) it. Values 0..largest_.
      const uint64_t extreme = op_ == ReduceOp::kMax ? 1 + below(bits, field_bits_, largest_)
                                                     : below(bits, field_bits_, largest_);
      if (first) return static_cast<double>(extreme);
      const uint64_t other = field(other_stream(rank), element);
      if (op_ == ReduceOp::kMax) return static_cast<double>(below(other, field_bits_, extreme));
      return static_cast<double>(extreme + 1 + below(other, field_bits_, largest_ - extreme));
    }
  }
  return 0;
}

double DataPattern::reduction_result(size_t element) const {
  const Contributors c = contributors(element);
  const double a = reduction_input(c.first, element);
  const double b = c.second >= 0 ? reduction_input(c.second, element) : 0;
  switch (op_) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kAvg:
      // Integers truncate (as NCCL and C); floats round the exact quotient once.
      return is_floating(type_) ? (a + b) / ranks_ : std::trunc((a + b) / ranks_);
    case ReduceOp::kMulSum:
      return premul_scalar(c.first) * a + (c.second >= 0 ? premul_scalar(c.second) * b : 0);
    case ReduceOp::kProd:
      return a * (c.second >= 0 ? b : 1);
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      return a;  // the extreme
  }
  return 0;
}

double DataPattern::movement_value(size_t source, size_t index) const {
  return static_cast<double>(field(movement_stream(source), index) >>
                             (field_bits_ - movement_bits_));
}

double DataPattern::input_unrounded(int rank, size_t index) const {
  if (has_reduction(collective_)) return reduction_input(rank, index);
  return movement_value(static_cast<size_t>(rank), index);
}

double DataPattern::input_value(int rank, size_t index) const {
  return typed(input_unrounded(rank, index));
}

Layout DataPattern::layout_of(int rank) const {
  return layout_of_param_count(collective_, block_, element_bytes_, ranks_, rank);
}

// The collective's rule (records/collective.h), in the pattern's values.
DataPattern::Expected DataPattern::expected_unrounded(const Layout& layout, int rank,
                                                      size_t index) const {
  const OutputSource source = output_source(collective_, {layout, ranks_, rank, root_}, index);
  switch (source.kind) {
    case OutputSource::Kind::kReduced:
      return {false, reduction_result(source.element)};
    case OutputSource::Kind::kInput:
      return {false, input_unrounded(source.rank, source.element)};
    case OutputSource::Kind::kUnchanged:
      break;
  }
  // Left alone: in place, an output element inside the input still holds it.
  const size_t at = layout.recv_in_place_offset + index;
  if (in_place_ && at >= layout.send_in_place_offset &&
      at < layout.send_in_place_offset + layout.send_count)
    return {false, input_unrounded(rank, at - layout.send_in_place_offset)};
  return {true, 0};
}

double DataPattern::expected_value(int rank, size_t index) const {
  const Expected e = expected_unrounded(layout_of(rank), rank, index);
  if (!e.fill) return typed(e.value);
  std::vector<unsigned char> fill(element_bytes_, kOutputFill);
  return load_element(fill.data(), type_, 0);
}

// --- The same definitions over tiles ---

// Whether the tile kernels may run their AVX2 build (x86-64 only): the
// baseline x86-64 (SSE2) has no 32-bit vector multiply, which the hash is
// made of: measured, AVX2 halves the hash's cost here.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CCSCOPE_PATTERNS_AVX2 1
namespace {
bool use_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}
}  // namespace
#else
#define CCSCOPE_PATTERNS_AVX2 0
#endif

template <class Codec>
struct DataPattern::Tiles {
  using Bits = typename Codec::Bits;
  using Int = typename Codec::Int;
  using Signed = typename Codec::Signed;
  static constexpr int kFieldBits = 8 * static_cast<int>(sizeof(Bits));
  static constexpr size_t kWords = kTile * sizeof(Bits) / 4;  // a tile's words of a stream
  static_assert(std::endian::native == std::endian::little,
                "a tile's fields are its words' bytes (DataPattern::field's layout)");

  // A value in [0, range) from x, a number of `bits` random bits (below()'s
  // arithmetic, widened only as far as needed, so that 32-bit lanes vectorise).
  static Int below(Int x, int bits, Int range) {
    if constexpr (sizeof(Int) == 4) {
      return static_cast<Int>((uint64_t{x} * range) >> bits);
    } else {
      return static_cast<Int>((static_cast<unsigned __int128>(x) * range) >> bits);
    }
  }

  // One stream's key, kept while the high 32 bits of the word index stay.
  struct Stream {
    uint64_t id;
    uint64_t high = ~uint64_t{0};
    uint64_t key = 0;
    explicit Stream(uint64_t stream) : id(stream) {}
  };
  // The fields of `stream` for elements [tile, tile + kTile) (tile aligned):
  // its words' bytes, a whole number of words per tile.
  static void fields(Stream& stream, size_t tile, Bits* out) {
    const uint64_t first_word = tile / kTile * kWords;
    if (first_word >> 32 != stream.high) {
      stream.high = first_word >> 32;
      stream.key = word_key(stream.id, stream.high);
    }
    const uint64_t key = stream.key;
    const auto x0 = static_cast<uint32_t>(first_word);
    auto* bytes = reinterpret_cast<unsigned char*>(out);
    for (uint32_t i = 0; i < kWords; ++i) {
      const uint32_t word = hash32(x0 + i, key);
      std::memcpy(bytes + 4 * i, &word, 4);
    }
  }

  // Where one rank contributes in a tile, as masks: element j is its first's
  // when window[first + j] is set, its second's when window[second + j] is.
  // The first rank of element e is (e + first_offset_) mod n, so the rank is
  // first at every n-th element: the window has every n-th entry set (with
  // more ranks than a tile, one), and a tile starts reading it where its
  // first such element falls.
  struct Roles {
    static constexpr size_t kNone = 2 * kTile;  // an all-zero stretch: no element
    uint64_t n;
    Int window[3 * kTile];
    size_t first = kNone, second = kNone;
    explicit Roles(uint64_t ranks) : n(ranks) {
      for (size_t k = 0, count = 0; k < kNone; ++k) {
        window[k] = (n <= kTile ? count == 0 : k == kTile) ? ~Int{0} : Int{0};
        if (++count == n) count = 0;
      }
      std::fill(window + kNone, window + 3 * kTile, Int{0});
    }
    // The start that selects the tile's elements j = position (mod n).
    size_t start(uint64_t position) const {
      if (n <= kTile) return static_cast<size_t>((n - position) % n);
      return position < kTile ? kTile - position : kNone;
    }
    void at(const DataPattern& p, int rank, size_t tile) {
      const uint64_t first0 = (tile % n + p.first_offset_) % n, r = static_cast<uint64_t>(rank);
      first = start((r + n - first0) % n);
      second = n > 1 ? start((r + 2 * n - first0 - p.second_distance(tile)) % n) : kNone;
    }
  };

  // Every element's first and second rank in a tile: element j's first is
  // (first0 + offsets[j]) mod n, its second `distance` ranks after it.
  struct Ranks {
    uint32_t n, wrap;  // wrap: n, or 2 with one rank (second stays 1: no rank)
    uint32_t first0 = 0, distance = 1;
    uint32_t offsets[kTile];  // j mod n
    explicit Ranks(uint32_t ranks) : n(ranks), wrap(n > 1 ? n : 2) {
      for (uint32_t j = 0, count = 0; j < kTile; ++j) {
        offsets[j] = count;
        if (++count == n) count = 0;
      }
    }
    void at(const DataPattern& p, size_t tile) {
      first0 = static_cast<uint32_t>((tile % n + p.first_offset_) % n);
      distance = static_cast<uint32_t>(p.second_distance(tile));
    }
  };

  // What a call makes its tiles from: `rank`'s streams, and where it contributes.
  struct Context {
    const DataPattern& p;
    int rank;
    Stream value, other, movement;
    std::unique_ptr<Roles> roles;  // made at the first tile that needs them
    std::unique_ptr<Ranks> ranks;
    Context(const DataPattern& pattern, int r)
        : p(pattern),
          rank(r),
          value(pattern.value_stream_),
          other(pattern.other_stream(r)),
          movement(pattern.movement_stream(static_cast<size_t>(r))) {}
    const Roles& roles_at(size_t tile) {
      if (!roles) roles = std::make_unique<Roles>(static_cast<uint64_t>(p.ranks_));
      roles->at(p, rank, tile);
      return *roles;
    }
    const Ranks& ranks_at(size_t tile) {
      if (!ranks) ranks = std::make_unique<Ranks>(static_cast<uint32_t>(p.ranks_));
      ranks->at(p, tile);
      return *ranks;
    }
  };

  // The kernels copy what they use into locals and select with masks, so
  // that their loops have a fixed trip count and no branch: compilers
  // vectorise them (GCC too at -O2, whose cost model then accepts only
  // loops that need no scalar remainder). `out` aliases nothing.

  // The input of c.rank, elements [tile, tile + kTile) of a reduction.
  static void reduction_input(Context& c, size_t tile, Bits* __restrict out) {
    const DataPattern& p = c.p;
    Bits field[kTile];
    fields(c.value, tile, field);
    const Roles& roles = c.roles_at(tile);
    const Int* is_first = roles.window + roles.first;
    const Int* is_second = roles.window + roles.second;
    switch (p.op_) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
      case ReduceOp::kMulSum: {
        const int top = kFieldBits - p.contribution_bits_;
        const auto low = static_cast<Int>(low_bits(~uint64_t{0}, p.second_bits_));
        for (uint32_t j = 0; j < kTile; ++j) {
          const Int v1 = 1 + (Int{field[j]} >> top), v2 = 1 + (Int{field[j]} & low);
          out[j] = Codec::integer((v1 & is_first[j]) | (v2 & is_second[j]));  // 0 elsewhere
        }
        return;
      }
      case ReduceOp::kProd: {
        const int half = kFieldBits / 2;
        const auto low = static_cast<Int>(low_bits(~uint64_t{0}, half));
        const auto exponents = static_cast<Int>(p.max_exponent_);
        for (uint32_t j = 0; j < kTile; ++j) {
          const Int e1 = 1 + below(Int{field[j]} >> half, half, exponents);
          const Int e2 = 1 + below(Int{field[j]} & low, half, exponents);
          out[j] = Codec::power_of_two((e1 & is_first[j]) | (e2 & is_second[j]));  // 2^0 elsewhere
        }
        return;
      }
      case ReduceOp::kMax:
      case ReduceOp::kMin: {
        Bits other[kTile];
        fields(c.other, tile, other);
        const auto largest = static_cast<Int>(p.largest_);
        const bool max = p.op_ == ReduceOp::kMax;
        for (uint32_t j = 0; j < kTile; ++j) {
          const Int extreme = below(field[j], kFieldBits, largest) + (max ? 1 : 0);
          const Int rest = max ? below(other[j], kFieldBits, extreme)
                               : extreme + 1 + below(other[j], kFieldBits, largest - extreme);
          out[j] = Codec::integer((extreme & is_first[j]) | (rest & ~is_first[j]));
        }
        return;
      }
    }
  }

  // The reduced vector, elements [tile, tile + kTile).
  static void reduction_result(Context& c, size_t tile, Bits* __restrict out) {
    const DataPattern& p = c.p;
    Bits field[kTile];
    fields(c.value, tile, field);
    const int top = kFieldBits - p.contribution_bits_;
    const auto low = static_cast<Int>(low_bits(~uint64_t{0}, p.second_bits_));
    // With one rank, no second contribution: v2 (e2) masked to 0.
    const Int second = p.ranks_ > 1 ? ~Int{0} : Int{0};
    switch (p.op_) {
      case ReduceOp::kSum:
        for (uint32_t j = 0; j < kTile; ++j) {
          const Int v1 = 1 + (Int{field[j]} >> top), v2 = (1 + (Int{field[j]} & low)) & second;
          out[j] = Codec::integer(v1 + v2);
        }
        return;
      case ReduceOp::kAvg:
        if constexpr (sizeof(Bits) <= 2) {
          if constexpr (requires { Codec::rounded(0.0f); }) {
            if (p.average_scale_ != 0) {  // the constructor checked every sum
              const float scale = p.average_scale_;
              for (uint32_t j = 0; j < kTile; ++j) {
                const Int sum = 1 + (Int{field[j]} >> top) + ((1 + (Int{field[j]} & low)) & second);
                out[j] = Codec::rounded(static_cast<float>(static_cast<Signed>(sum)) * scale);
              }
              return;
            }
          }
          // At most 1088 sums: their averages' bits are looked up (made in
          // the constructor, as reduction_result rounds them).
          Int sums[kTile];
          for (uint32_t j = 0; j < kTile; ++j)
            sums[j] = 1 + (Int{field[j]} >> top) + ((1 + (Int{field[j]} & low)) & second);
          const uint16_t* average = p.average_bits_.data();
          for (uint32_t j = 0; j < kTile; ++j) out[j] = static_cast<Bits>(average[sums[j]]);
        } else {
          // reduction_result divides the sum by n in double, which float32
          // rounds to float. With sum and n exact in float (sum < 2^24, n <=
          // 2^24) that is the correctly rounded float quotient (Figueroa,
          // "When is double rounding innocuous?", 1995: 53 >= 2 x 24 + 2),
          // which float division gives, 8 lanes wide instead of 4.
          const auto average = [&](auto divide) {
            for (uint32_t j = 0; j < kTile; ++j) {
              const Int v1 = 1 + (Int{field[j]} >> top), v2 = (1 + (Int{field[j]} & low)) & second;
              out[j] = divide(static_cast<Signed>(v1 + v2));
            }
          };
          if constexpr (std::is_same_v<Codec, Float32Codec>) {
            if (p.ranks_ <= 1 << 24) {
              const auto n = static_cast<float>(p.ranks_);
              average([n](Signed sum) { return std::bit_cast<Bits>(static_cast<float>(sum) / n); });
              return;
            }
          }
          const double n = p.ranks_;
          average([n](Signed sum) { return Codec::quotient(static_cast<double>(sum) / n); });
        }
        return;
      case ReduceOp::kMulSum: {
        const Ranks& ranks = c.ranks_at(tile);
        const uint32_t n = ranks.n, wrap = ranks.wrap, first0 = ranks.first0,
                       distance = ranks.distance;
        const uint32_t* offsets = ranks.offsets;
        for (uint32_t j = 0; j < kTile; ++j) {
          uint32_t first = first0 + offsets[j];
          first -= first >= n ? n : 0;
          uint32_t after = first + distance;
          after -= after >= wrap ? n : 0;
          const Int v1 = 1 + (Int{field[j]} >> top), v2 = (1 + (Int{field[j]} & low)) & second;
          // premul_scalar(rank) = 1 + rank % 2.
          out[j] = Codec::integer((1 + first % 2) * v1 + (1 + after % 2) * v2);
        }
        return;
      }
      case ReduceOp::kProd: {
        const int half = kFieldBits / 2;
        const auto half_low = static_cast<Int>(low_bits(~uint64_t{0}, half));
        const auto exponents = static_cast<Int>(p.max_exponent_);
        for (uint32_t j = 0; j < kTile; ++j) {
          const Int e1 = 1 + below(Int{field[j]} >> half, half, exponents);
          const Int e2 = (1 + below(Int{field[j]} & half_low, half, exponents)) & second;
          out[j] = Codec::power_of_two(e1 + e2);
        }
        return;
      }
      case ReduceOp::kMax:
      case ReduceOp::kMin: {
        const Int plus = p.op_ == ReduceOp::kMax ? 1 : 0;
        const auto largest = static_cast<Int>(p.largest_);
        for (uint32_t j = 0; j < kTile; ++j)
          out[j] = Codec::integer(plus + below(field[j], kFieldBits, largest));
        return;
      }
    }
  }

  // Data movement: c.rank's input, elements [tile, tile + kTile).
  static void movement(Context& c, size_t tile, Bits* __restrict out) {
    Bits field[kTile];
    fields(c.movement, tile, field);
    const int top = kFieldBits - c.p.movement_bits_;
    for (uint32_t j = 0; j < kTile; ++j) out[j] = Codec::integer(Int{field[j]} >> top);
  }

  // Each kernel is built twice: for the build's target and (x86-64) for
  // AVX2, picked at run time. Functions of their own (a call per tile costs
  // nothing), with everything inlined into them: inside the large callers
  // GCC stops inlining the hash into the loops, which then do not vectorise.
  using Kernel = void (*)(Context&, size_t, Bits*);
  template <Kernel kMake>
  [[gnu::noinline, gnu::flatten]] static void baseline(Context& c, size_t tile, Bits* out) {
    kMake(c, tile, out);
  }
#if CCSCOPE_PATTERNS_AVX2
  template <Kernel kMake>
  [[gnu::noinline, gnu::flatten, gnu::target("avx2")]] static void avx2(Context& c, size_t tile,
                                                                        Bits* out) {
    kMake(c, tile, out);
  }
#endif
  template <Kernel kMake>
  static Kernel kernel() {
#if CCSCOPE_PATTERNS_AVX2
    if (use_avx2()) return avx2<kMake>;
#endif
    return baseline<kMake>;
  }

  // Calls visit(done, values, n) for elements [element, element + count) of
  // what `make` makes tile by tile: `values` holds elements element + done ..
  // + n - 1.
  template <class Visit>
  static void for_each_piece(const DataPattern& p, int rank, size_t element, size_t count,
                             Kernel make, Visit&& visit) {
    Context context(p, rank);
    Bits values[kTile];
    for (size_t done = 0; done < count;) {
      const size_t at = element + done;
      const size_t tile = at & ~(kTile - 1);
      const size_t n = std::min(kTile - (at - tile), count - done);
      make(context, tile, values);
      visit(done, values + (at - tile), n);
      done += n;
    }
  }

  // Calls visit(done, values, n) for `rank`'s input elements [element, element + count).
  template <class Visit>
  static void for_each_input_piece(const DataPattern& p, int rank, size_t element, size_t count,
                                   Visit&& visit) {
    const Kernel make =
        has_reduction(p.collective_) ? kernel<reduction_input>() : kernel<movement>();
    for_each_piece(p, rank, element, count, make, visit);
  }

  // Calls visit(done, values, n) for `rank`'s expected output elements
  // [first, first + count); `values` is null where the output holds the fill.
  template <class Visit>
  static void for_each_expected_piece(const DataPattern& p, int rank, size_t first, size_t count,
                                      Visit&& visit) {
    const Layout layout = p.layout_of(rank);
    size_t done = 0;
    for_each_run(p.collective_, {layout, p.ranks_, rank, p.root_}, p.in_place_, first, count,
                 [&](const Run& run) {
                   const auto at = [&](size_t offset, const Bits* values, size_t n) {
                     visit(done + offset, values, n);
                   };
                   switch (run.kind) {
                     case Run::Kind::kReduced:
                       for_each_piece(p, rank, run.element, run.length, kernel<reduction_result>(),
                                      at);
                       break;
                     case Run::Kind::kInput:
                       for_each_input_piece(p, run.rank, run.element, run.length, at);
                       break;
                     case Run::Kind::kFill:
                       for (size_t offset = 0; offset < run.length; offset += kTile)
                         at(offset, nullptr, std::min(kTile, run.length - offset));
                       break;
                   }
                   done += run.length;
                 });
  }

  static void fill_input(const DataPattern& p, int rank, size_t first, size_t count, void* out) {
    auto* bytes = static_cast<unsigned char*>(out);
    for_each_input_piece(p, rank, first, count, [&](size_t done, const Bits* values, size_t n) {
      std::memcpy(bytes + done * sizeof(Bits), values, n * sizeof(Bits));
    });
  }

  static void expected_output(const DataPattern& p, int rank, size_t first, size_t count,
                              void* out) {
    auto* bytes = static_cast<unsigned char*>(out);
    for_each_expected_piece(p, rank, first, count, [&](size_t done, const Bits* values, size_t n) {
      if (values == nullptr) {
        std::memset(bytes + done * sizeof(Bits), kOutputFill, n * sizeof(Bits));
      } else {
        std::memcpy(bytes + done * sizeof(Bits), values, n * sizeof(Bits));
      }
    });
  }

  static CheckResult check_output(const DataPattern& p, int rank, size_t first, size_t count,
                                  const void* received) {
    CheckResult result;
    const auto* bytes = static_cast<const unsigned char*>(received);
    Bits fill[kTile];
    std::memset(fill, kOutputFill, sizeof(fill));
    for_each_expected_piece(p, rank, first, count, [&](size_t done, const Bits* values, size_t n) {
      const Bits* expected = values == nullptr ? fill : values;
      const unsigned char* got = bytes + done * sizeof(Bits);
      // The common case: the whole piece is right.
      if (std::memcmp(got, expected, n * sizeof(Bits)) == 0) return;
      for (size_t i = 0; i < n; ++i) {
        if (std::memcmp(got + i * sizeof(Bits), expected + i, sizeof(Bits)) == 0) continue;
        // Read back only for a mismatch.
        const double want = load_element(expected, p.type_, i);
        const double have = load_element(got, p.type_, i);
        if (p.ulps_ > 0 && values != nullptr &&
            std::fabs(have - want) <= p.ulps_ * unit_in_last_place(p.type_, want))
          continue;
        if (!result.has_first) {
          result.has_first = true;
          result.first_index = first + done + i;
          result.expected = want;
          result.received = have;
        }
        ++result.wrong;
      }
    });
    return result;
  }
};

void DataPattern::fill_input(int rank, size_t first, size_t count, void* out) const {
  with_codec(type_, [&](auto codec) {
    Tiles<decltype(codec)>::fill_input(*this, rank, first, count, out);
  });
}

void DataPattern::expected_output(int rank, size_t first, size_t count, void* out) const {
  with_codec(type_, [&](auto codec) {
    Tiles<decltype(codec)>::expected_output(*this, rank, first, count, out);
  });
}

CheckResult DataPattern::check_output(int rank, size_t first, size_t count,
                                      const void* received) const {
  CheckResult result;
  with_codec(type_, [&](auto codec) {
    result = Tiles<decltype(codec)>::check_output(*this, rank, first, count, received);
  });
  return result;
}

}  // namespace ccscope::bench
