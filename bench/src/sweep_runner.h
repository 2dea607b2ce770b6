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
#include "ccscope/job/watchdog.h"
#include "ccscope/collectives/world.h"
#include "ccscope/records/reporter.h"
#include "ccscope/bench/sweep.h"
#include "options.h"

namespace ccscope::bench {

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

}  // namespace ccscope::bench
