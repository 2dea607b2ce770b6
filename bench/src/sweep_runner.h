#pragma once
// The sweep: for every size (and in-place / out-of-place) measure the time as
// nccl-tests does, check every element of -c fresh results, reduce the figures
// across ranks, and hand one record per measurement to the reporter (rank 0).
// It runs over the small interfaces below, so a unit test drives a whole sweep
// over the in-process transport; run_sweep(World...) is the MPI entry.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/control_plane.h"
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

// nccl-tests' buffer rotation: iteration `iteration` of a size of
// `size_bytes` starts at this byte offset of buffers of `buffer_bytes`:
// size x (iteration mod (buffer / size)); 0 when rotation is off or the size is 0.
size_t rotation_offset(size_t size_bytes, size_t buffer_bytes, size_t iteration, bool rotate);

// Pure: a known defect of the backend's library that produces wrong results
// for this type and op (said beside a WRONG RESULT line), or "".
std::string known_library_issue(const std::string& backend, DataType type, ReduceOp op);

// Before any output is opened: whether the largest size of every collective
// fits (element count per call, host memory shared by a node's ranks). Every
// rank gets the same answer: "" or one line saying what fits.
std::string preflight(const BenchOptions& options, const World& world, const Communicator& comm);

// `reporter` may be null on ranks other than 0.
// `repeat` is the index of this sweep among --repeat K, stored in the records.
// `pending_signal` is asked after every record (each rank's answer, agreed
// over all ranks): non-zero stops the sweep there.
SweepOutcome run_sweep(const BenchOptions& options, const ControlPlane& control,
                       const JobShape& shape, Communicator& comm, SweepMonitor& monitor,
                       reports::Reporter* reporter, int repeat,
                       const std::function<int()>& pending_signal);
// The same over MPI_COMM_WORLD, watched by `watchdog`.
SweepOutcome run_sweep(const BenchOptions& options, const World& world, Communicator& comm,
                       HangWatchdog& watchdog, reports::Reporter* reporter, int repeat,
                       const std::function<int()>& pending_signal);

}  // namespace ccscope::bench
