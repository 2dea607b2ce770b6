#pragma once
// Loss equivalence: a strategy's loss curve against the single-rank
// reference. float32 sums in a different order on every rank count, so the
// curves are not bitwise equal; the tolerance says how far rounding alone can
// move them (see loss_tolerance).
#include <cstddef>
#include <span>
#include <string>

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
  std::string summary() const;  // one line
};
// Compares the first min(len, limit) steps of both curves.
EquivalenceResult compare_losses(std::span<const double> curve, std::span<const double> reference,
                                 double tolerance, size_t limit = 100);

}  // namespace ccscope::training_probe
