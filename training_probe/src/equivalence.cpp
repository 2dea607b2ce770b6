#include "ccscope/training_probe/equivalence.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ccscope::training_probe {

// float32: 1e-4. A reduction of N partial gradients in another order moves
// each gradient by at most (N-1) u relative (u = 2^-24 = 6e-8), and 100 steps
// of training amplify that; measured over the probe's MLP at 1-4 ranks and
// every strategy: at most 1e-8 (training_probe_tests) and the figures
// `ccscope train --check-loss` prints. A semantic fault moves the loss by
// 1e-3 or more (an unreduced bucket 1.2e-3, per-shard clipping 6e-3, sum
// instead of average 3e-2, a sampler not reseeded 0.26), so 1e-4 separates
// rounding from faults by a factor of ten on either side.
// bfloat16 and float16: a few units of the format's rounding (u = 2^-8 =
// 3.9e-3 and 2^-11 = 4.9e-4): 1e-2 and 2e-3. Every activation and gradient is
// rounded, in places that depend on the rank count (a rank's partial
// gradient, then the reduction), and Adam's normalised update carries a
// rounding difference into every weight; measured at 2 ranks over 100 steps:
// bf16 9e-5 (SGD) and 2.7e-3 (Adam), fp16 1e-6 to 1e-5. With AdamW, clipping
// and micro-batches that drift outgrows 1e-2 within 30-60 steps, for two
// correct single-rank runs too: the comparison stops at rounding_horizon. An
// unreduced bucket and per-shard clipping still fail in bf16 within it (0.4
// and 5e-2 at 2 ranks, DDP and ZeRO-2), and the first step's gradients by 0.65
// and 0.31 against 4e-2.
double loss_tolerance(Precision precision) {
  switch (precision) {
    case Precision::kFloat32:
      return 1e-4;
    case Precision::kBFloat16:
      return 1e-2;
    case Precision::kFloat16:
      return 2e-3;
  }
  return 1e-4;
}

size_t rounding_horizon(std::span<const double> reference, std::span<const double> reordered,
                        double tolerance, double factor) {
  const size_t n = std::min(reference.size(), reordered.size());
  for (size_t i = 0; i < n; ++i) {
    const double scale = std::max(std::abs(reference[i]), 1e-30);
    double spread = std::abs(reordered[i] - reference[i]) / scale;
    if (std::isnan(spread)) spread = INFINITY;
    if (factor * spread > tolerance) return std::max<size_t>(i, 1);
  }
  return std::max<size_t>(n, 1);
}

std::optional<size_t> reordered_micro_batches(size_t global_batch, size_t micro_batches) {
  for (size_t times : {4, 2}) {
    const size_t m = micro_batches * times;
    if (m > 0 && global_batch % m == 0) return m;
  }
  return std::nullopt;
}

std::string EquivalenceResult::summary() const {
  return fmt::format(
      "loss vs {} over {} steps: max relative difference {:.3g} at step {}, tolerance {:.3g}: "
      "{}{}",
      reference, steps_compared, max_relative_difference, worst_step, tolerance,
      equivalent ? "equivalent" : "NOT equivalent", note.empty() ? "" : " (" + note + ")");
}

// Measured (training_probe_tests' GradientCheck tests and `train --check-loss`
// at 2-4 ranks, every data-parallel strategy, step 0): float32 at most 2e-6
// (the reduction's order), bf16 and fp16 at most a few units of their rounding
// (u = 3.9e-3 and 4.9e-4). The faults move a unit by 0.3 or more.
double gradient_tolerance(Precision precision) {
  switch (precision) {
    case Precision::kFloat32:
      return 1e-4;
    case Precision::kBFloat16:
      return 4e-2;
    case Precision::kFloat16:
      return 1e-2;
  }
  return 1e-4;
}

std::string GradientCheck::summary() const {
  return fmt::format(
      "gradients vs single at step {} ({} units): max relative difference {:.3g} in unit {}, "
      "tolerance {:.3g}: {}{}",
      step, units, max_relative_difference, worst_unit, tolerance,
      equivalent ? "equivalent" : "NOT equivalent", note.empty() ? "" : " (" + note + ")");
}

GradientCheck compare_gradients(std::span<const float> gradients, std::span<const float> reference,
                                std::span<const std::pair<size_t, size_t>> units,
                                double tolerance) {
  GradientCheck check;
  check.tolerance = tolerance;
  if (gradients.size() != reference.size() || gradients.empty()) {
    check.max_relative_difference = INFINITY;
    return check;
  }
  const std::pair<size_t, size_t> whole{0, gradients.size()};
  if (units.empty()) units = {&whole, 1};
  check.units = units.size();
  for (size_t u = 0; u < units.size(); ++u) {
    double diff = 0, norm = 0;
    for (size_t i = units[u].first; i < units[u].second && i < gradients.size(); ++i) {
      const double d = static_cast<double>(gradients[i]) - reference[i];
      diff += d * d;
      norm += static_cast<double>(reference[i]) * reference[i];
    }
    double relative = norm > 0 ? std::sqrt(diff / norm) : (diff > 0 ? INFINITY : 0.0);
    if (std::isnan(relative)) relative = INFINITY;
    if (u == 0 || relative > check.max_relative_difference) {
      check.max_relative_difference = relative;
      check.worst_unit = u;
    }
  }
  check.equivalent = check.max_relative_difference <= tolerance;
  return check;
}

EquivalenceResult compare_losses(std::span<const double> curve, std::span<const double> reference,
                                 double tolerance, size_t limit) {
  EquivalenceResult result;
  result.tolerance = tolerance;
  result.steps_compared = std::min({curve.size(), reference.size(), limit});
  for (size_t i = 0; i < result.steps_compared; ++i) {
    const double scale = std::max(std::abs(reference[i]), 1e-30);
    double diff = std::abs(curve[i] - reference[i]) / scale;
    if (std::isnan(diff)) diff = INFINITY;  // a NaN loss is never equivalent
    if (i == 0 || diff > result.max_relative_difference) {
      result.max_relative_difference = diff;
      result.worst_step = i;
    }
  }
  result.equivalent = result.steps_compared > 0 && result.max_relative_difference <= tolerance;
  return result;
}

}  // namespace ccscope::training_probe
