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
double median(std::span<const double> values);

}  // namespace ccscope
