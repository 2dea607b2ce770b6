#pragma once
// The one entry both fuzzers drive: the libFuzzer target (readers_fuzz.cpp)
// and the seeded CTest forms (reports/tests). parse_results must read the
// bytes or refuse them with one line of InputError naming the input; any
// other exception, or a read with impossible figures, is a finding.
#include <cmath>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ccscope/reports/loaded_results.h"

namespace ccscope::reports::fuzz {

inline constexpr std::string_view kInputName = "fuzz-input";

// "" when the input was read (`*read` set) or properly refused; else what went wrong.
inline std::string check_one_input(std::string_view bytes, bool* read = nullptr) {
  if (read) *read = false;
  LoadedRun run;
  try {
    run = parse_results(std::string(kInputName), std::string(bytes));
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (what.rfind(kInputName, 0) != 0)
      return "an InputError that does not name the input: " + what;
    if (what.find('\n') != std::string::npos) return "an InputError of several lines: " + what;
    return "";
  } catch (const std::exception& e) {
    return std::string("an exception that is not an InputError: ") + e.what();
  }
  if (run.records.empty()) return "read without records and without an InputError";
  if (read) *read = true;
  for (const auto& r : run.records) {
    if (r.collective.empty()) return r.source + ": a record without a collective";
    // Every time and bandwidth of every format: finite and never negative
    // (ccscope's schema refuses negative ones; the other readers too).
    const std::pair<const char*, const std::optional<double>&> figures[] = {
        {"time_s", r.time_s},
        {"cpu_time_s", r.cpu_time_s},
        {"time_min_s", r.time_min_s},
        {"time_max_s", r.time_max_s},
        {"time_avg_s", r.time_avg_s},
        {"iteration_time_p50_s", r.iteration_time_p50_s},
        {"iteration_time_p99_s", r.iteration_time_p99_s},
        {"algbw_GBps", r.algbw_GBps},
        {"busbw_GBps", r.busbw_GBps}};
    for (const auto& [name, v] : figures)
      if (v && (!std::isfinite(*v) || *v < 0))
        return r.source + ": a negative or non-finite " + name;
    if (r.wrong && *r.wrong < 0) return r.source + ": a negative count of wrong elements";
    if (r.ranks && *r.ranks < 1) return r.source + ": fewer than one rank";
  }
  return "";
}

}  // namespace ccscope::reports::fuzz
