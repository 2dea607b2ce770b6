#include "sizes.h"

namespace ccscope::bench {

std::vector<size_t> size_sequence(size_t min_bytes, size_t max_bytes, size_t factor,
                                  size_t step_bytes) {
  std::vector<size_t> sizes;
  if (min_bytes == 0 || min_bytes > max_bytes) return sizes;
  for (size_t size = min_bytes; size <= max_bytes;) {
    sizes.push_back(size);
    size_t next = 0;
    const bool overflow = factor > 1 ? __builtin_mul_overflow(size, factor, &next)
                                     : __builtin_add_overflow(size, step_bytes, &next);
    if (overflow || next <= size) break;  // past size_t, or a zero step
    size = next;
  }
  return sizes;
}

}  // namespace ccscope::bench
