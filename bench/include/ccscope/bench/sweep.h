#pragma once
// One sweep of a collective over any communicator and control plane: what
// `ccscope bench` runs over the world, and what `ccscope diag` runs over a
// node's ranks (a group's communicator and control plane) to check every
// collective and measure intra-node busbw. Records go to a Reporter as they
// are measured.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ccscope/bench/options.h"
#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/control_plane.h"
#include "ccscope/collectives/world.h"
#include "ccscope/job/watchdog.h"
#include "ccscope/records/reporter.h"

namespace ccscope::bench {

struct SweepOutcome {
  int64_t wrong_elements = 0;  // over all ranks and sizes
  // Over sizes, by the control plane's rank (its order of the sweep's ranks);
  // empty while no element was wrong.
  std::vector<int64_t> wrong_elements_per_rank;
  size_t records = 0;
  double busbw_sum_GBps = 0;  // over the records (NCCL_TESTS_MIN_BW's average)
  int stopped_by_signal = 0;  // the signal every rank stopped for, after the last record; 0 = none
  std::string refused;        // why nothing was measured (buffers do not fit); printed by rank 0
};

// Where the job runs, for the records.
struct JobShape {
  int nodes = 1;
  int ranks_per_node = 1;  // the largest number of ranks on one node
  std::string hostname;    // this rank's
};
JobShape job_shape(const World& world);

// What the sweep tells a hang watchdog (HangWatchdog's calls).
class SweepMonitor {
 public:
  virtual ~SweepMonitor() = default;
  virtual void begin_phase(const std::string& description) = 0;
  virtual void operation_started() = 0;
  virtual void end_phase() = 0;
};

// A SweepMonitor that tells a HangWatchdog.
class WatchdogMonitor : public SweepMonitor {
 public:
  explicit WatchdogMonitor(HangWatchdog& watchdog) : watchdog_(watchdog) {}
  void begin_phase(const std::string& description) override { watchdog_.begin_phase(description); }
  void operation_started() override { watchdog_.operation_started(); }
  void end_phase() override { watchdog_.end_phase(); }

 private:
  HangWatchdog& watchdog_;
};

// `reporter` may be null on ranks other than 0.
// `repeat` is the index of this sweep among --repeat K, stored in the records.
// `pending_signal` is asked after every record (each rank's answer, agreed
// over all ranks): non-zero stops the sweep there.
SweepOutcome run_sweep(const BenchOptions& options, const ControlPlane& control,
                       const JobShape& shape, Communicator& comm, SweepMonitor& monitor,
                       records::Reporter* reporter, int repeat,
                       const std::function<int()>& pending_signal);
// The same over MPI_COMM_WORLD, watched by `watchdog`.
SweepOutcome run_sweep(const BenchOptions& options, const World& world, Communicator& comm,
                       HangWatchdog& watchdog, records::Reporter* reporter, int repeat,
                       const std::function<int()>& pending_signal);

}  // namespace ccscope::bench
