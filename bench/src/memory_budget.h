#pragma once
// Before a sweep allocates its buffers (sized for the largest message, as
// nccl-tests does), check that they fit: `-b 1T` on a machine that cannot hold
// it must say once what fits, not die in the allocator or the OOM killer.
#include <cstddef>
#include <optional>
#include <string>

#include "collective_spec.h"

namespace ccscope::bench {

// Send plus receive bytes one rank needs for a sweep up to -e `size`: two
// buffers of `size` bytes, as nccl-tests allocates them; nullopt when that
// overflows size_t.
std::optional<size_t> buffer_bytes(Collective collective, size_t size, size_t element_bytes,
                                   int ranks);

// Bytes a backend's library holds per rank beside the two buffers while it
// runs one operation of `size` bytes: MPICH's reductions keep a temporary copy
// of the message (MPIR_Allreduce's tmp_buf of count x extent, as Open MPI's
// recursive doubling), so an MPI all-reduce of 4 GiB needs 12 GiB per rank,
// not 8. 0 elsewhere (NCCL's and gloo's staging is bounded; ring reduces into
// the output), and 0 for collectives that do not reduce.
size_t library_scratch_bytes(const std::string& backend, Collective collective, size_t size);

// Pure: "" when `ranks_here` ranks each needing buffer_bytes(max_size) plus
// the backend's library_scratch_bytes fit in `available` bytes; else one line
// saying what is needed, what is available and the largest power-of-two -e
// that fits (or that none does).
std::string memory_shortfall(const std::string& backend, Collective collective, size_t max_size,
                             size_t element_bytes, int ranks, int ranks_here, size_t available,
                             const std::string& where);

// MemAvailable from /proc/meminfo (bytes), or nullopt when it cannot be read.
std::optional<size_t> host_available_memory();

}  // namespace ccscope::bench
