#pragma once
// PointToPoint over MPI (host memory, MPI_BYTE). Does not expose mpi.h.
#include <cstddef>
#include <memory>

#include "ccscope/collectives/point_to_point.h"

namespace ccscope {

// Collective over MPI_COMM_WORLD (every rank must call it): the endpoint talks on
// a duplicate of MPI_COMM_WORLD, so its messages never match anyone else's.
// Destroy it before MPI is finalised. MPI must already be initialised
// (MpiSession), else UsageError. Messages larger than `max_chunk_bytes` (0: the
// largest an MPI int count allows) travel as several MPI messages; tests pass a
// small value to exercise that path. MPI failures become BackendError carrying
// MPI_Error_string's text.
// `yielding_waits`: each call waits by testing its nonblocking form with the
// core yielded in between (for ranks that outnumber their host's CPUs), not
// in MPI's blocking call.
std::unique_ptr<PointToPoint> make_mpi_point_to_point(size_t max_chunk_bytes = 0,
                                                      bool yielding_waits = false);

}  // namespace ccscope
