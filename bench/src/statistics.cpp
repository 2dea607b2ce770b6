#include "statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace ccscope::bench {

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

double median(std::span<const double> values) { return percentile(values, 50); }

double algorithm_bandwidth_GBps(size_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

size_t iterations_per_sample(double iteration_seconds, size_t iterations,
                             double min_sample_seconds) {
  if (!(iteration_seconds > 0) || iteration_seconds >= min_sample_seconds) return 1;
  // (less a hair, so that 10 us / 0.5 us is 20, not 21 by rounding error)
  const double needed = std::ceil(min_sample_seconds / iteration_seconds - 1e-9);
  const size_t most = std::max<size_t>(iterations, 1);
  return needed >= static_cast<double>(most) ? most : static_cast<size_t>(needed);
}

}  // namespace ccscope::bench
