#include "ccscope/common/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace ccscope {

double mean(std::span<const double> values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double percentile(std::span<const double> values, double p) {
  if (values.empty()) return 0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double position =
      std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

// The middle value, or the mean of the two middle values: equal to percentile(values, 50)
// but exact (no interpolation rounding), so a median of equal figures is that figure.
double median(std::span<const double> values) {
  if (values.empty()) return 0;
  std::vector<double> sorted(values.begin(), values.end());
  const size_t middle = sorted.size() / 2;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(middle), sorted.end());
  const double upper = sorted[middle];
  if (sorted.size() % 2) return upper;
  const double lower = *std::max_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(middle));
  return (lower + upper) / 2;
}

double median_absolute_deviation(std::span<const double> values) {
  if (values.empty()) return 0;
  const double center = median(values);
  std::vector<double> deviations;
  deviations.reserve(values.size());
  for (double value : values) deviations.push_back(std::abs(value - center));
  return median(deviations);
}

}  // namespace ccscope
