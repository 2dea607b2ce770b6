#pragma once
// Loss equivalence: a strategy's loss curve against the single-rank
// reference. float32 sums in a different order on every rank count, so the
// curves are not bitwise equal; the tolerance says how far rounding alone can
// move them (see loss_tolerance).
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "ccscope/training_probe/model.h"

namespace ccscope::training_probe {

// Largest relative loss difference rounding alone explains, per precision
// (derivation beside the definition).
double loss_tolerance(Precision precision);

struct EquivalenceResult {
  size_t steps_compared = 0;
  double max_relative_difference = 0;
  size_t worst_step = 0;
  double tolerance = 0;
  bool equivalent = false;
  std::string reference = "single";  // what the curve was held against
  std::string note;                  // why fewer steps were compared, if so
  std::string summary() const;       // one line
};
// Compares the first min(len, limit) steps of both curves.
EquivalenceResult compare_losses(std::span<const double> curve, std::span<const double> reference,
                                 double tolerance, size_t limit = 100);

// The gradients the optimizer took at one step against the single-rank run's
// at the same step, unit by unit (a layer: its normwise relative difference).
// A 16-bit loss curve hides faults that move it by less than the format's
// rounding (an unreduced bucket, per-shard clipping); the gradients they
// change move by tens of percent, against a few units of the format's rounding.
struct GradientCheck {
  size_t step = 0;
  size_t units = 0;
  double max_relative_difference = 0;
  size_t worst_unit = 0;
  double tolerance = 0;
  bool equivalent = false;
  std::string note;
  std::string summary() const;  // one line
};
double gradient_tolerance(Precision precision);
// `units`: [begin, end) ranges of the flat vector (empty: the whole vector as one).
GradientCheck compare_gradients(std::span<const float> gradients, std::span<const float> reference,
                                std::span<const std::pair<size_t, size_t>> units, double tolerance);

}  // namespace ccscope::training_probe
