#pragma once
// Loss equivalence: a strategy's loss curve against the single-rank
// reference. float32 sums in a different order on every rank count, so the
// curves are not bitwise equal; the tolerance says how far rounding alone can
// move them (see loss_tolerance).
#include <cstddef>
#include <optional>
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

// A 16-bit run's loss can be held against another run's only while rounding
// alone cannot move it by the tolerance. Two correct single-rank runs that
// differ only in their summation order (`reordered`: the reference with more
// micro-batches, each gradient accumulated in the format) drift apart, as
// Adam's normalised steps carry every rounding into every weight (measured,
// bf16, AdamW lr 0.05, clipping 0.05: 1.3e-2 apart by step 5, 0.19 by step 99).
// The horizon is the count of leading steps over which `factor` times their
// spread (their relative difference) stays within `tolerance`, at least 1
// (the first step's forward). A parallel run's own
// drift from the reference measured at most 1.6 times that spread (3d tp 2 x
// dp 2, 2 micro-batches, 100 steps, against 4 micro-batches), hence 4.
size_t rounding_horizon(std::span<const double> reference, std::span<const double> reordered,
                        double tolerance, double factor = 4.0);
// The reordered reference's micro-batches from the reference's `micro_batches`:
// 4 m, else 2 m, where the global batch divides into them; none otherwise.
std::optional<size_t> reordered_micro_batches(size_t global_batch, size_t micro_batches);

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
