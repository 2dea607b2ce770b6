// OSU Micro-Benchmarks collective output.
#include "reader_support.h"

#include <libfccp/csv.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/reporter.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports::detail {

// ------------------------------------------------------------------ OSU

// "# OSU MPI Allreduce Latency Test v7.3", optional "# Datatype: MPI_FLOAT.",
// "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations".
// OSU's size is its message size (for all-gather: one rank's contribution, not
// nccl-tests' full output); it prints no rank count, op or bandwidth: absent.
LoadedRun read_osu(const std::string& path, const std::string& raw) {
  LoadedRun run{path, "osu", {}, {}};
  std::string collective, backend = "mpi", dtype;
  std::vector<std::string> columns;  // "Size", "Avg Latency(us)", ...
  std::istringstream in(raw);
  size_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    std::string t = trim(line);
    if (t.empty()) continue;
    const std::string where = at(path, line_no);
    if (t[0] == '#') {
      auto words = split_ws(t.substr(1));
      auto latency = std::find(words.begin(), words.end(), "Latency");
      if (starts_with(t, "# OSU") && latency != words.end() && latency != words.begin()) {
        if (t.find("NCCL") != std::string::npos) backend = "nccl";
        std::string name;
        for (char c : *(latency - 1))
          if (std::isalnum(static_cast<unsigned char>(c)))
            name += static_cast<char>(std::tolower(c));
        collective = name == "bcast" ? "broadcast" : name;
      } else if (starts_with(t, "# Datatype:") && words.size() >= 2) {
        static const std::map<std::string, std::string> types = {
            {"MPI_CHAR", "int8"}, {"MPI_SIGNED_CHAR", "int8"}, {"MPI_UNSIGNED_CHAR", "uint8"},
            {"MPI_INT", "int32"}, {"MPI_FLOAT", "float"},      {"MPI_DOUBLE", "double"}};
        std::string type = words[1];
        if (!type.empty() && type.back() == '.') type.pop_back();
        auto it = types.find(type);
        dtype = it == types.end() ? type : it->second;
      } else if (!words.empty() && words[0] == "Size") {
        columns.clear();
        std::string name;
        for (const auto& w : words) {  // a column name ends at "Size", "Iterations" or "...)"
          name += (name.empty() ? "" : " ") + w;
          if (w == "Size" || w == "Iterations" || w.back() == ')')
            columns.push_back(std::move(name)), name.clear();
        }
        if (!name.empty()) columns.push_back(name);
      }
      continue;
    }
    if (collective.empty())
      fail(
          where,
          "a data row before the '# OSU MPI <Collective> Latency Test' title; is this OSU output?");
    if (columns.empty()) fail(where, "a data row before the '# Size  Avg Latency(us)' header");
    auto f = split_ws(t);
    if (f.size() != columns.size())
      fail(where, "expected " + std::to_string(columns.size()) +
                      " fields as in the '# Size' header, found " + std::to_string(f.size()) +
                      "; truncated?");
    LoadedRecord r;
    r.source = where;
    r.collective = collective;
    r.backend = backend;
    r.dtype = dtype;
    bool has_time = false;
    for (size_t i = 0; i < f.size(); ++i) {
      if (columns[i] == "Size")
        r.size_bytes = static_cast<size_t>(need_integer(f[i], where, "size", 0, kLongMax));
      std::optional<double>* target = columns[i] == "Avg Latency(us)"   ? &r.time_s
                                      : columns[i] == "Min Latency(us)" ? &r.time_min_s
                                      : columns[i] == "Max Latency(us)" ? &r.time_max_s
                                                                        : nullptr;
      if (!target) continue;
      double us = need_double(f[i], where, columns[i]);
      if (us < 0) fail(where, columns[i] + " is negative");
      *target = us * 1e-6;
      has_time |= target == &r.time_s;
    }
    r.time_avg_s = r.time_s;  // OSU's "Avg Latency": the average over ranks
    r.time_statistic = "avg";
    if (!has_time) fail(where, "no 'Avg Latency(us)' column in the header");
    run.records.push_back(std::move(r));
  }
  if (run.records.empty())
    fail(at(path, line_no), "no result rows (the run measured nothing or was cut)");
  run.metadata.backend = backend;
  return run;
}

}  // namespace ccscope::reports::detail
