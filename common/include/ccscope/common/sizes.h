#pragma once
// Message sizes as people write them and read them.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccscope {

// "8", "1K", "0.5M", "64M", "2G", "1T" (binary multiples; a fraction is
// truncated to whole bytes, as nccl-tests' parser does), optional "B" or "iB"
// suffix, either case. nullopt for anything else (negative, empty, past 2^64).
std::optional<size_t> parse_size(std::string_view text);
// 8 -> "8 B", 1024 -> "1 KiB", 1536 -> "1.5 KiB", 1234567 -> "1.18 MiB"
// (at most two decimals, trailing zeros dropped).
std::string format_size(size_t bytes);
// Exact: the largest unit that divides the size, 1536 -> "1536 B", 65536 ->
// "64 KiB" (for lists of sizes that must name each one exactly).
std::string format_exact_size(size_t bytes);
// "8 B, 1 KiB, 1536 B".
std::string format_exact_sizes(const std::vector<size_t>& sizes);

}  // namespace ccscope
