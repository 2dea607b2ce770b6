#include "statistics.h"

#include <algorithm>
#include <cmath>

namespace ccscope::bench {

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
