#pragma once
// Message sizes: parsing "64M"-style arguments and nccl-tests' size sequence.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccscope::bench {

// "8", "1K", "0.5M", "64M", "2G", "1T" (binary multiples; a fraction is
// truncated to whole bytes, as nccl-tests' parser does), optional "B" or "iB"
// suffix. nullopt for anything else (negative, empty, overflow).
std::optional<size_t> parse_size(std::string_view text);
// 1024 -> "1 KiB", 1536 -> "1.5 KiB", 8 -> "8 B".
std::string format_size(size_t bytes);

// nccl-tests: multiply by `factor` when it is > 1, else add `step_bytes`;
// always from min to max inclusive.
std::vector<size_t> size_sequence(size_t min_bytes, size_t max_bytes, size_t factor,
                                  size_t step_bytes);

}  // namespace ccscope::bench
