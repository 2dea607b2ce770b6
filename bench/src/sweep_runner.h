#pragma once
// The timing loop: for every size (and in-place / out-of-place), warm up,
// time the iterations, run once more on fresh data and check every element,
// then hand one record per measurement to the reporter (rank 0 only).
#include <cstdint>
#include <functional>
#include <string>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/watchdog.h"
#include "ccscope/collectives/world.h"
#include "ccscope/reports/reporter.h"
#include "options.h"

namespace ccscope::bench {

struct SweepOutcome {
  int64_t wrong_elements = 0;  // over all ranks and sizes
  size_t records = 0;
  int stopped_by_signal = 0;  // the signal every rank stopped for, after the last record; 0 = none
  std::string refused;        // why nothing was measured (buffers do not fit); printed by rank 0
};

// Before any output is opened: whether the largest size of every collective
// fits (element count per call, host memory shared by a node's ranks). Every
// rank gets the same answer: "" or one line saying what fits.
std::string preflight(const BenchOptions& options, const World& world, const Communicator& comm);

// `reporter` may be null on ranks other than 0.
// `repeat` is the index of this sweep among --repeat K, stored in the records.
// `pending_signal` is asked after every record (each rank's answer, agreed
// over all ranks): non-zero stops the sweep there.
SweepOutcome run_sweep(const BenchOptions& options, const World& world, Communicator& comm,
                       HangWatchdog& watchdog, reports::Reporter* reporter, int repeat,
                       const std::function<int()>& pending_signal);

}  // namespace ccscope::bench
