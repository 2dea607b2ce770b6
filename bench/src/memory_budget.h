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

// Pure: "" when `ranks_here` ranks each needing buffer_bytes(max_size) fit in
// `available` bytes; else one line saying what is needed, what is available
// and the largest power-of-two -e that fits (or that none does).
std::string memory_shortfall(Collective collective, size_t max_size, size_t element_bytes,
                             int ranks, int ranks_here, size_t available, const std::string& where);

// MemAvailable from /proc/meminfo (bytes), or nullopt when it cannot be read.
std::optional<size_t> host_available_memory();

}  // namespace ccscope::bench
