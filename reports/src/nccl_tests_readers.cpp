// nccl-tests' text output and -J JSON.
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

// ------------------------------------------------------------------ nccl-tests -J JSON

// One out_of_place / in_place group of a nccl-tests result; times in us.
void nccl_tests_group(LoadedRecord r, const json* g, bool in_place, const std::string& w,
                      std::vector<LoadedRecord>& out) {
  if (!g) return;
  if (!g->is_object()) fail(w, "expected an object");
  r.in_place = in_place;
  r.source = w;
  if (auto t = jnumber(*g, "time", w)) {
    if (*t < 0) fail(w + ".time", "negative");
    r.time_s = *t * 1e-6;
  }
  r.time_avg_s = r.time_s;  // nccl-tests' time: the average over ranks (its -a 1)
  r.time_statistic = "avg";
  r.algbw_GBps = jnumber(*g, "alg_bw", w);
  r.busbw_GBps = jnumber(*g, "bus_bw", w);
  if (auto wrong = jnumber(*g, "nwrong", w)) {
    if (*wrong < 0 || *wrong >= 9.2e18 || std::floor(*wrong) != *wrong)
      fail(w + ".nwrong", "not a count of elements; is the file unedited?");
    r.wrong = static_cast<int64_t>(*wrong);
  }
  out.push_back(std::move(r));
}

LoadedRun read_nccl_tests_json(const std::string& path, const json& doc) {
  LoadedRun run{path, "nccl-tests-json", {}, {}};
  RunMetadata& m = run.metadata;
  m.backend = "nccl";
  std::vector<std::string> args = jstrings(doc, "args", jwhere(path, ""));
  for (const auto& a : args) m.command_line += (m.command_line.empty() ? "" : " ") + a;
  std::string collective = args.empty() ? "" : collective_from_program(args[0]);
  if (collective.empty())
    fail(jwhere(path, "args"), "no program name (e.g. all_reduce_perf) to tell the collective");
  if (auto v = jinteger(doc, "nccl_version", jwhere(path, ""), 0, kLongMax))
    m.nccl_version = nccl_version_from_code(*v);
  m.start_time_utc =
      jstring(doc, "start_time", jwhere(path, ""));  // local time, as nccl-tests prints it
  m.end_time_utc = jstring(doc, "end_time", jwhere(path, ""));
  for (const auto& kv : jstrings(doc, "env", jwhere(path, ""))) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos && collected_variable(kv.substr(0, eq)))
      m.environment.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  std::sort(m.environment.begin(), m.environment.end());
  if (const json* config = member(doc, "config")) {
    if (const json* devices = member(*config, "devices"); devices && devices->is_array())
      for (size_t i = 0; i < devices->size(); ++i) {
        const std::string w = jwhere(path, "config.devices[" + std::to_string(i) + "]");
        m.hosts.push_back(jstring((*devices)[i], "hostname", w));
        m.gpu_names.push_back(jstring((*devices)[i], "device_info", w));
      }
  }
  derive_layout(m);
  // -m and -G, as nccl-tests' config block states them.
  std::optional<int> aggregate, graph;
  if (const json* config = member(doc, "config")) {
    const std::string cw = jwhere(path, "config");
    if (auto v = jinteger(*config, "aggregated_iterations", cw, 1)) aggregate = *v;
    if (auto v = jinteger(*config, "graph", cw, 0)) graph = *v;
  }
  const json* results = member(doc, "results");
  if (!results || !results->is_array()) fail(jwhere(path, "results"), "missing or not an array");
  for (size_t i = 0; i < results->size(); ++i) {
    const json& j = (*results)[i];
    const std::string w = jwhere(path, "results[" + std::to_string(i) + "]");
    if (!j.is_object()) fail(w, "expected an object");
    LoadedRecord r;
    r.collective = collective;
    r.backend = "nccl";
    r.dtype = jstring(j, "type", w);
    r.op = jstring(j, "redop", w);
    if (auto root = jinteger(j, "root", w, -1); root && *root >= 0)
      r.root = static_cast<int>(*root);
    auto size = jinteger(j, "size", w, 0, kLongMax);
    if (!size) fail(w + ".size", "missing");
    r.size_bytes = static_cast<size_t>(*size);
    if (auto v = jinteger(j, "count", w, 0, kLongMax)) r.count = static_cast<size_t>(*v);
    apply_layout(m, r);
    r.aggregate_iterations = aggregate;
    r.graph_launches = graph;
    nccl_tests_group(r, member(j, "out_of_place"), false, w + ".out_of_place", run.records);
    nccl_tests_group(r, member(j, "in_place"), true, w + ".in_place", run.records);
  }
  if (run.records.empty()) fail(jwhere(path, "results"), "empty: the run measured nothing");
  return run;
}

// ------------------------------------------------------------------ nccl-tests text

// nccl-tests prints no command line; the collective comes from
// "# Collective test starting: all_reduce_perf" (printed since nccl-tests 2.14).
LoadedRun read_nccl_tests_text(const std::string& path, const std::string& raw) {
  LoadedRun run{path, "nccl-tests-text", {}, {}};
  RunMetadata& m = run.metadata;
  m.backend = "nccl";
  std::string collective;
  std::optional<int> aggregate, graph;  // -m and -G from the "# nThread" line
  std::vector<std::pair<size_t, std::vector<std::string>>> rows;
  std::istringstream in(raw);
  size_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    std::string t = trim(line);
    if (t.empty()) continue;
    if (t[0] != '#') {
      rows.emplace_back(line_no, split_ws(t));
      continue;
    }
    auto words = split_ws(t.substr(1));
    if (starts_with(t, "# Collective test starting:") && words.size() >= 4)
      collective = collective_from_program(words[3]);
    if (starts_with(t, "# nccl-tests version"))
      for (const auto& w : words)
        if (starts_with(w, "nccl-library="))
          if (auto code = to_integer(w.substr(13))) m.nccl_version = nccl_version_from_code(*code);
    // "# nThread 1 nGpus 1 ... iters: 10 agg iters: 1 validation: 1 graph: 0 unalign: 0"
    if (starts_with(t, "# nThread"))
      for (size_t i = 0; i + 1 < words.size(); ++i) {
        auto value = to_integer(words[i + 1]);
        if (!value || *value < 0 || *value > kIntMax) continue;
        if (words[i] == "graph:") graph = static_cast<int>(*value);
        if (words[i] == "iters:" && i > 0 && words[i - 1] == "agg" && *value >= 1)
          aggregate = static_cast<int>(*value);
      }
    // "#  Rank  0 Group  0 Pid   1472 on         vm device  0 [0000:00:06] NVIDIA H200"
    if (words.size() >= 8 && words[0] == "Rank" && words[6] == "on") {
      m.hosts.push_back(words[7]);
      size_t bracket = t.find(']');
      m.gpu_names.push_back(bracket == std::string::npos ? "" : trim(t.substr(bracket + 1)));
    }
  }
  if (collective.empty())
    fail(at(path, 1),
         "no '# Collective test starting: <program>' line, so the collective is unknown; "
         "keep nccl-tests' whole output (including its header)");
  derive_layout(m);
  for (const auto& [n, f] : rows) {
    const std::string where = at(path, n);
    if (f.size() != 13)
      fail(where,
           "expected 13 fields (size count type redop root, then time algbw busbw #wrong "
           "out-of-place and in-place), found " +
               std::to_string(f.size()) + "; truncated or not nccl-tests output?");
    LoadedRecord base;
    base.source = where;
    base.collective = collective;
    base.backend = "nccl";
    base.size_bytes = static_cast<size_t>(need_integer(f[0], where, "size", 0, kLongMax));
    base.count = static_cast<size_t>(need_integer(f[1], where, "count", 0, kLongMax));
    base.dtype = f[2];
    base.op = f[3];
    if (long long root = need_integer(f[4], where, "root", -1); root >= 0)
      base.root = static_cast<int>(root);
    apply_layout(m, base);
    base.aggregate_iterations = aggregate;
    base.graph_launches = graph;
    for (int group = 0; group < 2; ++group) {
      LoadedRecord r = base;
      r.in_place = group == 1;
      auto figure = [&](size_t i, const char* what) -> std::optional<double> {
        if (f[i] == "N/A") return std::nullopt;
        return need_double(f[i], where, what);
      };
      if (auto t = figure(5 + 4 * group, "time")) {
        if (*t < 0) fail(where, "negative time");
        r.time_s = *t * 1e-6;
      }
      r.time_avg_s = r.time_s;  // nccl-tests' time: the average over ranks (its -a 1)
      r.time_statistic = "avg";
      r.algbw_GBps = figure(6 + 4 * group, "algbw");
      r.busbw_GBps = figure(7 + 4 * group, "busbw");
      if (f[8 + 4 * group] != "N/A")
        r.wrong = need_integer(f[8 + 4 * group], where, "#wrong", 0, kLongMax);
      run.records.push_back(std::move(r));
    }
  }
  if (run.records.empty())
    fail(at(path, line_no), "no result rows (the run measured nothing or was cut)");
  return run;
}

}  // namespace ccscope::reports::detail
