#pragma once
// nccl-tests' size sequence (sizes as text: ccscope/common/sizes.h).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/common/sizes.h"

namespace ccscope::bench {

using ccscope::format_size;
using ccscope::parse_size;

// nccl-tests: multiply by `factor` when it is > 1, else add `step_bytes`;
// always from min to max inclusive.
std::vector<size_t> size_sequence(size_t min_bytes, size_t max_bytes, size_t factor,
                                  size_t step_bytes);

}  // namespace ccscope::bench
