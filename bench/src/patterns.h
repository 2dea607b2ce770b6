#pragma once
// Data patterns whose results are exact: every input element is a small
// integer (or 1 or 2 for products) chosen from rank and element index so that
// any reduction order gives the same bits in the element type. Sums stay
// within the type's exactly representable integers, products are powers of two
// within range, min/max/data movement use values below 101/113. The check is
// then a bitwise comparison with the expected value (see patterns.cpp).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ccscope/collectives/types.h"
#include "collective_spec.h"

namespace ccscope::bench {

struct CheckResult {
  size_t wrong = 0;
  bool has_first = false;
  size_t first_index = 0;  // element index in the output buffer
  double expected = 0;
  double received = 0;
};

class DataPattern {
 public:
  // `block` is the layout's param_count (per-rank block of all-gather,
  // reduce-scatter and all-to-all). `relative_tolerance` > 0 replaces the
  // bitwise check (only for reductions that are not exact by construction).
  DataPattern(Collective collective, DataType type, ReduceOp op, int ranks, int root, size_t block,
              double relative_tolerance = 0);

  // Writes `count` typed input elements of `rank`, starting at send-buffer
  // element `first`, into `out`.
  void fill_input(int rank, size_t first, size_t count, void* out) const;
  // Compares `count` received elements of `rank`'s output, starting at output
  // element `first`, with the expected values.
  CheckResult check_output(int rank, size_t first, size_t count, const void* received) const;

  double input_value(int rank, size_t index) const;
  double expected_value(int rank, size_t index) const;

 private:
  // Index into the typed value tables for an input / expected element.
  size_t input_slot(int rank, size_t index) const;
  size_t expected_slot(int rank, size_t index) const;
  double reduce_pattern(int rank, size_t index) const;

  Collective collective_;
  DataType type_;
  ReduceOp op_;
  int ranks_;
  int root_;
  size_t block_;
  double relative_tolerance_;
  size_t element_bytes_;
  // Reductions: inputs are periodic in the element index.
  size_t period_ = 1;
  int modulus_ = 1;
  bool one_hot_ = false;
  // values_[slot] as doubles and as typed bytes (slot layout documented in .cpp)
  std::vector<double> values_;
  std::vector<unsigned char> typed_;
};

}  // namespace ccscope::bench
