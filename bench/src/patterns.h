#pragma once
// Data patterns whose results are known exactly, element by element, in closed
// form (no table that grows with ranks or sizes). Every value depends on a
// seed, so each check (nccl-tests' -c N) uses inputs no earlier run produced: a
// backend that returns a previous output, or a block shifted by any amount,
// fails. The values are integers the element type holds exactly:
//  - sum / avg / mulsum: two ranks (chosen per element) contribute v1, v2 >= 1,
//    every other rank 0, so that even NCCL's average (a pre-multiplied sum,
//    x * (1/n) on every rank) is within 2 ulps of (v1 + v2) / n at any rank count;
//  - prod: two ranks contribute powers of two, the others 1;
//  - min / max: one rank (chosen per element) holds the extreme, the others
//    values strictly on the other side of it;
//  - data movement: each (source rank, element) has its own value.
// The check compares the bits with the expected value (or, where the backend
// rounds, allows `ulps` units in the last place).
//
// How the values are drawn (patterns.cpp): each element takes a field of
// random bits as wide as itself from a stream of 32-bit words (a 2-byte
// element is half a word), lowbias32 hashes of the word's index under a key
// made from (seed, stream, the index's high half). The hash is a bijection of
// the index, so a stream repeats no word within 2^32 (no period), and streams
// of other seeds, ranks or purposes are unrelated. A sum's v1 is the field's
// top bits (as many as the type's exact range allows), v2 its low bits; the
// rank contributing first rotates (element e: (e + a) mod ranks, a from the
// seed) and the second is 1..ranks-1 ranks after it, drawn per 256 elements.
// Fill and check make 256 elements at a time in loops that compilers vectorise
// (on x86-64 also built for AVX2, picked at run time); input_value and
// expected_value follow the same definitions one element at a time, the
// reference the tests compare the tiles with.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ccscope/collectives/types.h"
#include "collective_spec.h"

namespace ccscope::bench {

// What the sweep fills an output with before a collective writes it; an
// output the collective must leave alone is expected to hold it still.
inline constexpr unsigned char kOutputFill = 0xff;

struct CheckResult {
  size_t wrong = 0;
  bool has_first = false;
  size_t first_index = 0;  // element index in the output buffer
  double expected = 0;
  double received = 0;
};

// The seed of one check: the same on every rank (computed from what every rank
// knows), different for every size, placement, check iteration, type and op.
uint64_t pattern_seed(Collective collective, DataType type, ReduceOp op, size_t size_bytes,
                      bool in_place, int repeat, int check_iteration);

// The distance between `value` and the next representable number of a
// floating-point type (1 for integer types).
double unit_in_last_place(DataType type, double value);

class DataPattern {
 public:
  // `block` is the layout's param_count (the count passed to the collective).
  // `ulps` > 0 accepts an output within that many units in the last place of
  // the expected value instead of the exact bits. `in_place`: where an output
  // the collective leaves alone lies in the input, it still holds the input
  // (elsewhere the kOutputFill bytes).
  DataPattern(Collective collective, DataType type, ReduceOp op, int ranks, int root, size_t block,
              uint64_t seed, int ulps = 0, bool in_place = false);

  // Writes `count` typed input elements of `rank`, starting at send-buffer
  // element `first`, into `out`.
  void fill_input(int rank, size_t first, size_t count, void* out) const;
  // Compares `count` received elements of `rank`'s output, starting at output
  // element `first`, with the expected values.
  CheckResult check_output(int rank, size_t first, size_t count, const void* received) const;

  // Writes the bytes a correct collective leaves in `count` elements of `rank`'s
  // output, starting at output element `first` (what check_output compares
  // with; for tests and benchmarks).
  void expected_output(int rank, size_t first, size_t count, void* out) const;

  // As doubles, already rounded to the element type, one element at a time.
  double input_value(int rank, size_t index) const;
  double expected_value(int rank, size_t index) const;

 private:
  // The tiled fast path (patterns.cpp), one instantiation per element type.
  template <class Codec>
  struct Tiles;

  // Reductions: the ranks that contribute to one element of the reduced vector.
  struct Contributors {
    int first = 0, second = -1;  // second = -1 with a single rank
  };
  Contributors contributors(size_t element) const;
  // How many ranks after the first the second is (1 .. ranks-1).
  uint64_t second_distance(size_t element) const;
  // The element's field of random bits in `stream` (as wide as the element).
  uint64_t field(uint64_t stream, size_t element) const;
  double reduction_input(int rank, size_t element) const;
  double reduction_result(size_t element) const;
  // The expected value before rounding to the element type, or (fill) the
  // kOutputFill bytes.
  struct Expected {
    bool fill = false;
    double value = 0;
  };
  Expected expected_unrounded(const Layout& layout, int rank, size_t index) const;
  Layout layout_of(int rank) const;
  double input_unrounded(int rank, size_t index) const;
  // Data movement: the value `source` holds at its send-buffer element `index`.
  double movement_value(size_t source, size_t index) const;
  double typed(double value) const;               // rounded to the element type
  uint64_t other_stream(int rank) const;          // min / max: a rank's non-extreme values
  uint64_t movement_stream(size_t source) const;  // data movement: source's values

  Collective collective_;
  DataType type_;
  ReduceOp op_;
  int ranks_;
  int root_;
  size_t block_;
  uint64_t seed_;
  int ulps_;
  bool in_place_;
  size_t element_bytes_;
  uint64_t largest_ = 1;       // every integer 0..largest_ is exact in the type (<= 2^53)
  int field_bits_ = 32;        // random bits per element: the element's width
  int contribution_bits_ = 1;  // sum / mulsum / avg: v1 in [1, 2^contribution_bits_]
  int second_bits_ = 1;        // and v2 in [1, 2^second_bits_]
  int movement_bits_ = 1;      // data movement: values in [0, 2^movement_bits_)
  uint32_t max_exponent_ = 1;  // prod: each factor 2^e with e in [1, max_exponent_]
  uint64_t value_stream_ = 0, second_stream_ = 0;  // stream keys
  uint64_t first_offset_ = 0;  // the first contributor of element e is (e + this) mod ranks
  // avg in the 1- and 2-byte types: the expected bits for each sum v1 + v2,
  // and (bfloat16, half) the float 1/ranks if multiplying by it gives them all.
  std::vector<uint16_t> average_bits_;
  float average_scale_ = 0;
};

}  // namespace ccscope::bench
