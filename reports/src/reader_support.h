#pragma once
// What every results reader shares: one-line errors naming file and line,
// number parsing that refuses partial or non-finite text, JSON member access,
// and the per-format entry points that read_results dispatches to.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/reports/loaded_results.h"

namespace ccscope::reports::detail {

using nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& what);
// "file:line" for messages, the path made printable.
std::string at(const std::string& path, size_t line);
std::string trim(std::string_view s);
std::vector<std::string> split_ws(const std::string& line);
bool starts_with(std::string_view s, std::string_view prefix);

// Numbers: the whole text must be a finite number ("1e+06" included).
std::optional<double> to_double(const std::string& text);
std::optional<long long> to_integer(const std::string& text);
double need_double(const std::string& text, const std::string& where, const std::string& what);

// The largest value of a field held as an int (ranks, nodes, root, repeat).
inline constexpr long long kIntMax = std::numeric_limits<int>::max();
inline constexpr long long kLongMax = std::numeric_limits<long long>::max();
std::string out_of_range(const std::string& what, const std::string& text, long long min_value,
                         long long max_value);
long long need_integer(const std::string& text, const std::string& where, const std::string& what,
                       long long min_value, long long max_value = kIntMax);

// Hosts of each rank -> nodes and the largest number of ranks on one node.
void derive_layout(RunMetadata& m);
void apply_layout(const RunMetadata& m, LoadedRecord& r);
// nccl-tests' program name -> ccscope's collective name.
std::string collective_from_program(std::string program);
// 22803 -> "2.28.3" (NCCL_VERSION_CODE = major*10000 + minor*100 + patch).
std::string nccl_version_from_code(long long code);
bool collected_variable(const std::string& name);
// ccscope.bench/1's sentence ("max over ranks of mean over iterations") or a
// token -> "max", "avg", "min", "rank0"; "" when it says none of them.
std::string time_statistic_token(std::string_view text);

// Where a JSON value lives, for messages: "run.json: records[3].time_s".
std::string jwhere(const std::string& path, const std::string& pointer);
const json* member(const json& obj, const char* key);
std::optional<double> jnumber(const json& obj, const char* key, const std::string& where);
std::optional<long long> jinteger(const json& obj, const char* key, const std::string& where,
                                  long long min_value, long long max_value = kIntMax);
std::string jstring(const json& obj, const char* key, const std::string& where);
std::vector<std::string> jstrings(const json& obj, const char* key, const std::string& where);
json parse_json(const std::string& path, const std::string& raw);

// One reader per format (read_results detects which).
LoadedRun read_ccscope_csv(const std::string& path, const std::string& raw);
LoadedRun read_ccscope_json(const std::string& path, const json& doc);
LoadedRun read_nccl_tests_json(const std::string& path, const json& doc);
LoadedRun read_nccl_tests_text(const std::string& path, const std::string& raw);
LoadedRun read_osu(const std::string& path, const std::string& raw);

}  // namespace ccscope::reports::detail
