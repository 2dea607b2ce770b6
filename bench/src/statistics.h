#pragma once
// Small named statistics, each a pure function (unit tested).
#include <cstddef>
#include <span>

#include "ccscope/common/statistics.h"

namespace ccscope::bench {

// mean, percentile and median live in common (one copy for every component).
using ccscope::mean;
using ccscope::median;
using ccscope::percentile;

// Iterations per timing sample: 1 when one iteration lasts at least
// `min_sample_seconds` or its time is unknown (<= 0), else enough consecutive
// iterations that a sample lasts that long; never more than `iterations`.
size_t iterations_per_sample(double iteration_seconds, size_t iterations,
                             double min_sample_seconds);

// algbw in GB/s (1e9 B/s); 0 when the time is not positive.
double algorithm_bandwidth_GBps(size_t bytes, double seconds);

}  // namespace ccscope::bench
