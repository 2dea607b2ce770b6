#pragma once
// Before a sweep allocates its buffers (sized for the largest message, as
// nccl-tests does), check that they fit: `-b 1T` on a machine that cannot hold
// it must say once what fits, not die in the allocator or the OOM killer.
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// glibc's largest dynamic mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit):
// a freed allocation above it does not raise the threshold, so the next one
// of that size is mapped afresh.
inline constexpr size_t kGlibcMmapThresholdMax = size_t{32} << 20;

// Pure: the console's note (one line, no '#') when rows of this sweep time
// more than the collective: MPICH allocates its reduction scratch
// (library_scratch_bytes) inside every call, and from `kGlibcMmapThresholdMax`
// up glibc maps it afresh each time, so those rows include the page faults
// that zero it (a 1 GiB all-reduce here: 637 ms, 440 ms with the threshold
// raised). "" for other backends or libraries, sweeps below the threshold,
// collectives without the scratch, and when MALLOC_MMAP_THRESHOLD_ is set
// (`environment`: the run's recorded variables).
std::string scratch_allocation_note(
    const std::string& backend, const std::string& mpi_library,
    const std::vector<Collective>& collectives, size_t max_size,
    const std::vector<std::pair<std::string, std::string>>& environment);

// Pure: "" when `ranks_here` ranks each needing buffer_bytes(max_size) plus
// the backend's library_scratch_bytes fit in `available` bytes; else one line
// saying what is needed, what is available and the largest power-of-two -e
// that fits (or that none does).
std::string memory_shortfall(const std::string& backend, Collective collective, size_t max_size,
                             size_t element_bytes, int ranks, int ranks_here, size_t available,
                             const std::string& where);


}  // namespace ccscope::bench
