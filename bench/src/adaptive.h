#pragma once
// Adaptive sampling (--target-ci): when to stop timing a size. Pure functions
// over the samples every rank already agrees on (each sample is the reported
// statistic over ranks, -a, of one timed batch), so every rank reaches the same
// decision; the one per-rank input, whether this rank's time budget is spent,
// is reduced over ranks with the sample before the decision is taken.
#include <cstddef>
#include <span>

namespace ccscope::bench {

// 97.5% quantile of Student's t with `degrees` degrees of freedom (the factor of
// a two-sided 95% interval); infinity for 0.
double student_t_975(size_t degrees);

// The mean of the samples and the half-width of its 95% confidence interval
// (t x standard error), also as a fraction of the mean.
struct MeanInterval {
  double mean = 0;
  double half_width = 0;           // same unit as the samples; infinity below 2 samples
  double relative_half_width = 0;  // half_width / mean; infinity below 2 samples or mean <= 0
  size_t samples = 0;
};
MeanInterval mean_interval(std::span<const double> samples);

struct StoppingRule {
  double target_relative = 0.02;  // --target-ci / 100: half-width over mean
  size_t min_samples = 5;         // below this the standard deviation is a guess
  size_t max_samples = 100000;    // a bound on memory whatever the budget
};

enum class StopReason { kContinue, kConverged, kBudgetSpent, kSampleLimit };

// Converged: at least min_samples, the interval within the target, and the
// means of the first and second halves of the samples within twice the target
// of each other (a drifting stream, whose batches are not samples of one
// distribution, never converges: its interval would understate the spread).
// Otherwise kBudgetSpent when `budget_spent` (any rank's time budget for the
// size is used up), kSampleLimit at max_samples, else kContinue.
StopReason stopping_decision(std::span<const double> samples, bool budget_spent,
                             const StoppingRule& rule);

// Whether the halves of the samples differ by more than `relative` of the mean
// (false below 4 samples: nothing to compare).
bool drifts(std::span<const double> samples, double relative);

// Iterations per timed batch: enough that a batch lasts `min_batch_seconds`
// (as Google Benchmark grows its iteration count until the clock is read over
// a long enough span), at least 1, and no more than fit `max_batch_seconds`
// (so that the budget holds min_samples batches). `iteration_seconds` <= 0
// (unknown) gives 1.
size_t batch_iterations(double iteration_seconds, double min_batch_seconds,
                        double max_batch_seconds);

// The batch length corrected by a measured batch (as Google Benchmark regrows
// its iteration count from the last run): a batch of `iterations` that took
// under half of `min_batch_seconds` says the warm-up's sizing was too short (a
// few warm-up operations caught by the scheduler: an 8 B row timed in batches
// of one 1 us operation); the next gets min(10, 1.4 x min / measured) times as
// many, no more than fit `max_batch_seconds`. Otherwise, and never fewer:
// `iterations`.
size_t regrown_batch_iterations(size_t iterations, double batch_seconds, double min_batch_seconds,
                                double max_batch_seconds);

}  // namespace ccscope::bench
