#include "memory_budget.h"

#include <algorithm>

#include "sizes.h"

namespace ccscope::bench {

std::optional<size_t> buffer_bytes(Collective collective, size_t size, size_t element_bytes,
                                   int ranks) {
  // nccl-tests allocates the send and the receive buffer at -e bytes each,
  // whatever the collective (rotation moves every size through that space).
  (void)collective, (void)element_bytes, (void)ranks;
  size_t total = 0;
  if (__builtin_mul_overflow(size, size_t{2}, &total)) return std::nullopt;
  return total;
}

size_t library_scratch_bytes(const std::string& backend, Collective collective, size_t size) {
  return backend == "mpi" && has_reduction(collective) ? size : 0;
}

std::string scratch_allocation_note(
    const std::string& backend, const std::string& mpi_library,
    const std::vector<Collective>& collectives, size_t max_size,
    const std::vector<std::pair<std::string, std::string>>& environment) {
  if (!mpi_library.starts_with("MPICH") || max_size < kGlibcMmapThresholdMax) return "";
  const bool scratch = std::any_of(collectives.begin(), collectives.end(), [&](Collective c) {
    return library_scratch_bytes(backend, c, max_size) > 0;
  });
  const bool threshold_set = std::any_of(environment.begin(), environment.end(), [](const auto& v) {
    return v.first == "MALLOC_MMAP_THRESHOLD_";
  });
  if (!scratch || threshold_set) return "";
  return "Note: MPICH allocates scratch the size of the message inside each reduction, and glibc "
         "maps allocations of 32 MiB and more afresh on every call: rows from 32 MiB include "
         "zeroing that memory. To time the collective alone, run with MALLOC_MMAP_THRESHOLD_="
         "4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 (mpiexec -genv); docs/bench.md.";
}

std::string memory_shortfall(const std::string& backend, Collective collective, size_t max_size,
                             size_t element_bytes, int ranks, int ranks_here, size_t available,
                             const std::string& where) {
  const size_t here = static_cast<size_t>(ranks_here < 1 ? 1 : ranks_here);
  const auto need_of = [&](size_t size) -> std::optional<size_t> {
    const auto buffers = buffer_bytes(collective, size, element_bytes, ranks);
    size_t total = 0;
    if (!buffers ||
        __builtin_add_overflow(*buffers, library_scratch_bytes(backend, collective, size), &total))
      return std::nullopt;
    return total;
  };
  const auto fits = [&](size_t size) {
    const auto need = need_of(size);
    return need && *need <= available / here;
  };
  // A size that rounds down to no elements moves nothing: not worth suggesting.
  const auto moves_data = [&](size_t size) {
    const auto need = need_of(size);
    return need && *need > 0;
  };
  if (fits(max_size)) return "";
  const auto need = need_of(max_size);
  const bool scratch = library_scratch_bytes(backend, collective, max_size) > 0;
  std::string line = "-e " + format_size(max_size) + " needs " +
                     (need ? format_size(*need) : std::string("more than 16 EiB")) +
                     " per rank (send + receive buffers" +
                     (scratch ? ", and " + backend + "'s reduction scratch of one message" : "") +
                     ") for " + std::string(name(collective)) + ", but " + where + " has " +
                     format_size(available) + " available for " + std::to_string(here) + " rank(s)";
  size_t largest = 0;
  for (size_t size = size_t{1} << 62; size >= 1; size >>= 1)
    if (size <= max_size && moves_data(size) && fits(size)) {
      largest = size;
      break;
    }
  if (largest == 0) return line + ": not even 1 B fits; free memory or use fewer ranks per node";
  return line + ": use -e " + format_size(largest) + " or less, or fewer ranks per node";
}

}  // namespace ccscope::bench
