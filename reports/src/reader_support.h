#pragma once
// What every results reader shares: one-line errors naming file and line,
// number parsing that refuses partial or non-finite text, JSON member access,
// and the per-format entry points that read_results dispatches to.
#include <cstddef>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/reports/loaded_results.h"

namespace ccscope::reports::detail {

using nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& what);
// "file:line" for messages, the path made printable.
// How a ccscope CSV of a record kind says which kind it is (training and
// diag files beside bench ones): nullopt when the first non-empty line is not
// a header starting with the schema column; else the first record's schema
// cell (unquoted; schema ids hold no character CSV quotes), or, when the header
// is followed by no record, "" and the header's columns.
struct CsvKindHead {
  std::string first_schema;
  std::vector<std::string> header_columns;  // only when there is no record
};
std::optional<CsvKindHead> csv_kind_head(std::string_view text);

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

// Where a JSON value lives, for messages: "run.json: records[3].time_s".
std::string jwhere(const std::string& path, const std::string& pointer);
const json* member(const json& obj, const char* key);
std::optional<double> jnumber(const json& obj, const char* key, const std::string& where);
std::optional<long long> jinteger(const json& obj, const char* key, const std::string& where,
                                  long long min_value, long long max_value = kIntMax);
std::string jstring(const json& obj, const char* key, const std::string& where);
std::vector<std::string> jstrings(const json& obj, const char* key, const std::string& where);
json parse_json(const std::string& path, const std::string& raw);

// ------------------------------------------------------------------ text outputs
// What nccl-tests and OSU files hold besides the programs' own lines: log
// prefixes (mpirun --tag-output "[1,0]<stdout>:", srun -l "0: ", MPICH "[0] ",
// kubectl/journal time stamps, pdsh "host: "), launcher command lines and the
// messages of other programs (NCCL INFO/WARN, MPI, Slurm).

// The line without the prefixes launchers and log collectors put before a
// program's output; `stripped` says whether there were any. A "word: " prefix
// is removed only when what follows looks like a table line ('#' or a number).
std::string strip_log_prefixes(std::string_view line, bool& stripped);
// A table row: the first word is an integer (a size) and the second, if any, too.
bool looks_like_row(const std::vector<std::string>& words);

// A command line that started a benchmark ("mpirun -np 8 ./all_reduce_perf -g 1",
// "srun -n 4 osu_allgather"): the launcher's rank count and the program.
struct Launch {
  std::optional<int> ranks;  // -n/-np/--np/--ntasks of mpirun, mpiexec, srun, ...
  std::string program;       // the benchmark's file name without its directory
  std::vector<std::string> program_args;
};
// `is_program` says which file names are benchmarks; nullopt when the line
// names none and no launcher with a rank count either.
std::optional<Launch> parse_launch(const std::string& line,
                                   bool (*is_program)(std::string_view name));

// `text` for a one-line message: control characters as '?', at most 200 characters.
std::string one_line(std::string_view text);
// The most telling line of a failed run among other programs' lines ("Invalid
// number of GPUs: 8 requested but only 1 were found.", "This test requires at
// least two processes"), shortened to one line; "" when none says anything.
std::string reported_failure(const std::vector<std::string>& lines);
// "file:N: ... the file reports: '<what>'" for a run that printed no results.
[[noreturn]] void fail_no_results(const std::string& where, const std::string& program,
                                  const std::vector<std::string>& other_lines);

// The notes of a text reader that skipped other programs' lines (`skipped`,
// of the kinds named in `kinds`) and read `prefixed` lines of `tool` without
// their log prefix; nothing for counts of 0.
void note_foreign_lines(LoadedRun& run, size_t skipped, std::string_view kinds, size_t prefixed,
                        std::string_view tool);

// One reader per format (read_results detects which).
LoadedRun read_ccscope_csv(const std::string& path, const std::string& raw);
LoadedRun read_ccscope_json(const std::string& path, const json& doc);
LoadedRun read_nccl_tests_json(const std::string& path, const json& doc);
LoadedRun read_nccl_tests_text(const std::string& path, const std::string& raw);
LoadedRun read_osu(const std::string& path, const std::string& raw);

}  // namespace ccscope::reports::detail
