#pragma once
// Small named statistics over samples, each a pure function (unit tested in
// bench's statistics tests): bench's timing figures and the training probe's
// step medians use the same ones.
#include <span>

namespace ccscope {

double mean(std::span<const double> values);
// Percentile p in [0, 100] with linear interpolation between the closest
// ranks (numpy's default); 0 for no values.
double percentile(std::span<const double> values, double p);
// 0 for no values (callers that must not see that check for it).
double median(std::span<const double> values);
// Median of |x - median|: the spread that a minority of outliers does not
// move (unlike the standard deviation); 0 for no values. Scale by 1.4826 for
// an estimate of the standard deviation of normal samples.
double median_absolute_deviation(std::span<const double> values);
// Iglewicz-Hoaglin's modified z-score is kModifiedZScale (x - median) / MAD:
// 0.6745 MAD estimates one standard deviation's quantile of normal samples, so
// modified z and z agree on normal data.
inline constexpr double kModifiedZScale = 0.6745;

}  // namespace ccscope
