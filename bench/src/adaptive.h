#pragma once
// Adaptive sampling (--target-ci): when to stop timing a size. Pure functions
// over the samples every rank already agrees on (each sample is the reported
// statistic over ranks, -a, of one timed batch; the row reports their median),
// so every rank reaches the same decision; the one per-rank input, whether this rank's time budget
// is spent, is reduced over ranks with the sample before the decision is taken.
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

// The median of the samples and its distribution-free confidence interval:
// the order statistics x(k) and x(n+1-k) with P(Binomial(n, 1/2) < k) <= 1.5%
// (exact to 1000 samples, the normal approximation beyond). It assumes nothing
// of the stream's shape, so it stays honest on the bimodal, heavy-tailed
// batches of a loaded host, where the mean's t-interval needs (1.96 x CV /
// target)^2 samples: CV 2 at +-2% is 38,000 batches. At a fixed count it is a
// 97% interval; the stopping rule looks at it after every batch, and the
// interval a row stops at then holds the true median 95% of the time
// (Adaptive.StoppedIntervalsHoldTheTrueMedianNineteenTimesInTwenty; a 95% one
// looked at so often held it 92% of the time).
struct MedianInterval {
  double median = 0;
  double lower = 0, upper = 0;     // the interval's ends (samples); 0 below 7 samples
  double half_width = 0;           // max(median - lower, upper - median); infinity below 7 samples
  double relative_half_width = 0;  // half_width / median; infinity below 7 samples or median <= 0
  size_t samples = 0;
};
MedianInterval median_interval(std::span<const double> samples);

// The 1-based rank k of the lower end of the median's interval over n
// samples (the upper end is n + 1 - k); 0 below 7 samples (no interval exists:
// even [min, max] holds the median with less than 97% certainty).
size_t median_interval_rank(size_t samples);

struct StoppingRule {
  double target_relative = 0.02;  // --target-ci / 100: half-width over the median
  size_t min_samples = 7;         // the fewest that hold an interval of the median
  size_t max_samples = 100000;    // a bound on memory whatever the budget
};

enum class StopReason { kContinue, kConverged, kBudgetSpent, kSampleLimit };

// Converged: at least min_samples, the median's interval within the target,
// and the medians of the first and second halves of the samples within twice
// the target of each other (a drifting stream, whose batches are not samples
// of one distribution, never converges: its interval would understate the
// spread). Otherwise kBudgetSpent when `budget_spent` (any rank's time budget
// for the size is used up) and min_samples are in (a row ends with an
// interval, however wide), kSampleLimit at max_samples, else kContinue. The
// interval is looked at after every sample up to 64, then every n/32 (fewer
// looks: a sequential rule that looks after every sample stops on a lucky
// run more often than 5%).
StopReason stopping_decision(std::span<const double> samples, bool budget_spent,
                             const StoppingRule& rule);

// Whether the halves' medians differ by more than `relative` of the median
// (false below 4 samples: nothing to compare).
bool drifts(std::span<const double> samples, double relative);

// nccl-tests' default -n 20 -w 5: the operations a fixed sweep spends on a row.
inline constexpr int kFixedSweepOperations = 25;

// A row's time budget: `budget` (--max-seconds-per-size), or what the fixed
// sweep would spend on the row, kFixedSweepOperations x `iteration_seconds`,
// when that is longer. So adaptive sampling never gives a row less time than
// nccl-tests' default would (a 1 GiB all-reduce of 0.4 s: 10 s, not 3), and a
// sweep's total stays bounded by the fixed sweep's plus the budget per row.
double row_budget_seconds(double budget, double iteration_seconds);

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
