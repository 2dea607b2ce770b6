// nccl-tests' text output and -J JSON, as every version since 2.0 prints them.
//
// Text, by version (src/common.cu, from 2.17.3 also src/util.cu):
//   2.0-2.11   each test prints its own table header: size count type, then
//              redop and/or root only where the collective has them, then
//              time algbw busbw error twice; "error" is the largest deviation
//              (%5.0le), not a count. Until 2.9 the time is rank 0's.
//   2.13-      one header for all: size count type redop root time algbw busbw
//              #wrong (a count, %g: "1.04858e+06") x2; all-gather, all-to-all,
//              broadcast, ... print an empty redop until 2.13.3, "none" after.
//   2.13.4-    -C: the time columns are "cputime" (host time to issue).
//   2.16.7-    "# Collective test starting: all_reduce_perf" (none before).
//   2.17.4-    "# nccl-tests version 2.17.4 nccl-headers=... nccl-library=...".
//   2.17.6-    -S: "timestamp" column (2 words) after the in-place figures.
//   2.19.2-    -I: i_min i_max i_p99 i_cv% after each group's figures.
// -J JSON: 2.17.3 (version 1) to 2.19.6 (version 3): results[] with size,
// count, type, redop, root (a string), out_of_place/in_place {time or, with -C,
// cpu_time, alg_bw, bus_bw, nwrong}, from version 2 *_per_iter {p50_us, ...}.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccscope/common/environment.h"
#include "ccscope/common/nccl_version.h"
#include "ccscope/records/collective.h"
#include "ccscope/records/schema.h"
#include "ccscope/reports/loaded_results.h"
#include "reader_support.h"

namespace ccscope::reports::detail {
namespace {

// The collectives of nccl-tests' programs as their tables show them: what
// the redop column holds, a root column, whether size is n x count x element
// (n ranks) rather than count x element, busbw's factor over algbw, and the
// columns of a 2.0-2.11 header between type and time. ccscope's benchmarks
// come from their descriptions (records/collective.h).
struct Signature {
  std::string_view collective, program;
  NcclTestsOp op;
  bool root;
  bool size_per_count_n;
  std::optional<Collective> described;  // busbw factor: bus_bandwidth_factor
  double (*other_factor)(int n);        // else this
  std::string_view old_columns;
  double factor(int n) const {
    return described ? bus_bandwidth_factor(*described, n) : other_factor(n);
  }
};
double one_factor(int) { return 1; }

// nccl-tests' programs of collectives ccscope does not benchmark.
constexpr Signature kOtherSignatures[] = {
    {"hypercube", "hypercube_perf", NcclTestsOp::kNone, false, true, {}, one_factor, ""},
};

const std::vector<Signature>& signatures() {
  static const std::vector<Signature> all = [] {
    std::vector<Signature> out;
    for (const auto& d : all_collectives()) {
      // Elements of the "count" column vs bytes of "size" (8 ranks, 4-byte elements).
      const auto l = layout_for(d.id, size_t{1} << 20, 4, 8, 0);
      const bool per_count_n = l.size_bytes == l.param_count * 4 * 8;
      // Read by name only where size is neither (alltoallv: its per-peer sizes vary).
      if (!per_count_n && l.size_bytes != l.param_count * 4) continue;
      out.push_back({d.name, d.nccl_tests_program, d.nccl_tests_op, d.has_root, per_count_n, d.id,
                     nullptr, d.nccl_tests_old_columns});
    }
    out.insert(out.end(), std::begin(kOtherSignatures), std::end(kOtherSignatures));
    return out;
  }();
  return all;
}

// "all_reduce_perf" (no directory; the MPI build's "_mpi" removed).
std::string_view plain_program(std::string_view program) {
  program = program.substr(program.find_last_of('/') + 1);  // npos + 1 == 0
  if (program.ends_with("_perf_mpi")) program.remove_suffix(4);
  return program;
}

bool is_nccl_tests_program(std::string_view name) {
  name = plain_program(name);
  if (!name.ends_with("_perf")) return false;
  for (const auto& s : signatures())
    if (s.program == name) return true;
  for (const auto& d : all_collectives())
    if (d.nccl_tests_program == name) return true;
  return false;
}

// nccl-tests' program name (or its collective's, "all_reduce") -> ccscope's
// collective name; a program not known here keeps its name without "_perf"
// and underscores (alltoallv_perf -> alltoallv).
std::string collective_of_program(std::string_view program) {
  program = plain_program(program);
  if (auto c = parse_collective(program)) return std::string(name(*c));
  if (program.size() > 5 && program.ends_with("_perf")) program.remove_suffix(5);
  std::string out;
  for (char c : program)
    if (c != '_') out += c;
  return out;
}

// ccscope's collective name -> the nccl-tests program, for messages.
std::string program_of(const std::string& collective) {
  for (const auto& s : signatures())
    if (s.collective == collective) return std::string(s.program);
  for (const auto& d : all_collectives())
    if (d.name == collective) return std::string(d.nccl_tests_program);
  return collective;
}

// Bytes per element of nccl-tests' type names; 0 when unknown.
size_t element_bytes(const std::string& type) {
  static const std::map<std::string, size_t, std::less<>> sizes = {
      {"int8", 1},  {"uint8", 1},    {"char", 1},   {"f8e4m3", 1}, {"f8e5m2", 1},
      {"half", 2},  {"bfloat16", 2}, {"int32", 4},  {"uint32", 4}, {"int", 4},
      {"float", 4}, {"int64", 8},    {"uint64", 8}, {"double", 8}};
  auto it = sizes.find(type);
  return it == sizes.end() ? 0 : it->second;
}

// The -a of a command line: which statistic over ranks the time is.
std::string statistic_of_average(const std::vector<std::string>& args) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "-a" || args[i] == "--average") {
      auto v = to_integer(args[i + 1]);
      if (!v) return "";
      return *v == 0 ? "rank0" : *v == 1 ? "avg" : *v == 2 ? "min" : *v == 3 ? "max" : "";
    }
  return "";
}

std::optional<long long> option_value(const std::vector<std::string>& args, const char* shrt,
                                      const char* lng) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == shrt || args[i] == lng) return to_integer(args[i + 1]);
  return std::nullopt;
}

// time_s is `statistic` over ranks: fill the matching per-rank figure too.
void set_statistic(LoadedRecord& r, const std::string& statistic) {
  r.time_statistic = r.time_s ? statistic : "";
  if (statistic == "avg") r.time_avg_s = r.time_s;
  if (statistic == "min") r.time_min_s = r.time_s;
  if (statistic == "max") r.time_max_s = r.time_s;
}

// ------------------------------------------------------------------ -J JSON

// A figure of nccl-tests' JSON: a number, or absent (null, "nan", "N/A").
std::optional<double> jfigure(const json& obj, const char* key, const std::string& where) {
  const json* v = member(obj, key);
  if (v && v->is_string() && (v->get<std::string>() == "nan" || v->get<std::string>() == "-nan"))
    return std::nullopt;
  return jnumber(obj, key, where);
}

// One out_of_place / in_place group of a nccl-tests result; times in us.
void nccl_tests_group(LoadedRecord r, const json& j, bool in_place, const std::string& statistic,
                      const std::string& w, std::vector<LoadedRecord>& out) {
  const char* key = in_place ? "in_place" : "out_of_place";
  const json* g = member(j, key);
  if (!g) return;  // null: not measured (trace replay)
  const std::string gw = w + "." + key;
  if (!g->is_object()) fail(gw, "expected an object");
  r.in_place = in_place;
  r.source = gw;
  if (auto t = jfigure(*g, "time", gw)) {
    if (*t < 0) fail(gw + ".time", "negative");
    r.time_s = *t / 1e6;
  }
  if (auto t = jfigure(*g, "cpu_time", gw)) {  // -C: host time to issue, never time_s
    if (*t < 0) fail(gw + ".cpu_time", "negative");
    r.cpu_time_s = *t / 1e6;
  }
  set_statistic(r, statistic);
  r.algbw_GBps = jfigure(*g, "alg_bw", gw);
  r.busbw_GBps = jfigure(*g, "bus_bw", gw);
  if (auto wrong = jfigure(*g, "nwrong", gw)) {
    if (*wrong < 0 || *wrong >= 9.2e18 || std::floor(*wrong) != *wrong)
      fail(gw + ".nwrong", "not a count of elements; is the file unedited?");
    r.wrong = static_cast<int64_t>(*wrong);
  }
  // -I: per-iteration times, each the slowest process's.
  const std::string pkey = std::string(key) + "_per_iter";
  if (const json* p = member(j, pkey.c_str()); p && p->is_object()) {
    const std::string pw = w + "." + pkey;
    if (auto v = jfigure(*p, "p50_us", pw); v && *v >= 0) r.iteration_time_p50_s = *v / 1e6;
    if (auto v = jfigure(*p, "p99_us", pw); v && *v >= 0) r.iteration_time_p99_s = *v / 1e6;
  }
  out.push_back(std::move(r));
}

}  // namespace

LoadedRun read_nccl_tests_json(const std::string& path, const json& doc) {
  LoadedRun run{path, "nccl-tests-json", {}, {}, {}};
  RunMetadata& m = run.metadata;
  m.backend = "nccl";
  std::vector<std::string> args = jstrings(doc, "args", jwhere(path, ""));
  for (const auto& a : args) m.command_line += (m.command_line.empty() ? "" : " ") + a;
  std::string program = args.empty() ? "" : args[0].substr(args[0].find_last_of('/') + 1);
  std::string collective = collective_of_program(program);
  if (collective.empty())
    fail(jwhere(path, "args"), "no program name (e.g. all_reduce_perf) to tell the collective");
  const std::vector<std::string> options(args.begin() + (args.empty() ? 0 : 1), args.end());
  std::string statistic = statistic_of_average(options);
  if (statistic.empty()) statistic = "avg";  // -a 1, nccl-tests' default
  if (auto v = jinteger(doc, "nccl_version", jwhere(path, ""), 0, kLongMax))
    m.nccl_version = nccl_version_text(*v);
  m.start_time_utc =
      jstring(doc, "start_time", jwhere(path, ""));  // local time, as nccl-tests prints it
  m.end_time_utc = jstring(doc, "end_time", jwhere(path, ""));
  for (const auto& kv : jstrings(doc, "env", jwhere(path, ""))) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos && is_recorded_variable(std::string_view(kv).substr(0, eq)))
      m.environment.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  std::sort(m.environment.begin(), m.environment.end());
  std::optional<int> aggregate, graph;
  if (const json* config = member(doc, "config")) {
    const std::string cw = jwhere(path, "config");
    // devices[] holds one entry per process (its first GPU's line); each process
    // runs nthreads x ngpus ranks, all on its host.
    long long per_process = 1;
    if (auto v = jinteger(*config, "nthreads", cw, 1, 1 << 16)) per_process *= *v;
    if (auto v = jinteger(*config, "ngpus", cw, 1, 1 << 16)) per_process *= *v;
    if (const json* devices = member(*config, "devices"); devices && devices->is_array()) {
      if (static_cast<long long>(devices->size()) * per_process > kIntMax)
        fail(cw + ".devices", "more ranks than a rank count can hold; is the file unedited?");
      for (size_t i = 0; i < devices->size(); ++i) {
        const std::string w = cw + ".devices[" + std::to_string(i) + "]";
        const std::string host = jstring((*devices)[i], "hostname", w);
        const std::string gpu = jstring((*devices)[i], "device_info", w);
        for (long long k = 0; k < per_process; ++k) {
          m.hosts.push_back(host);
          m.gpu_names.push_back(gpu);
        }
      }
    }
    // -m and -G, as nccl-tests' config block states them.
    if (auto v = jinteger(*config, "aggregated_iterations", cw, 1)) aggregate = *v;
    if (auto v = jinteger(*config, "graph", cw, 0)) graph = *v;
  }
  derive_layout(m);
  const json* results = member(doc, "results");
  std::vector<std::string> errors;
  if (const json* e = member(doc, "errors"); e && e->is_array())
    for (const auto& x : *e)
      if (x.is_string() && !trim(x.get<std::string>()).empty())
        errors.push_back(x.get<std::string>());
  // What nccl-tests wrote to "errors" (ncclGetLastError) is why it measured nothing.
  auto fail_errors = [&] {
    fail(jwhere(path, "errors"), program + " measured nothing; its errors say: '" +
                                     one_line(errors.front()) + "'; fix that and rerun");
  };
  if (!results && !errors.empty()) fail_errors();
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
    nccl_tests_group(r, j, false, statistic, w, run.records);
    nccl_tests_group(r, j, true, statistic, w, run.records);
  }
  if (run.records.empty()) {
    if (!errors.empty()) fail_errors();
    fail(jwhere(path, "results"), "empty: the run measured nothing");
  }
  if (std::any_of(run.records.begin(), run.records.end(),
                  [](const LoadedRecord& r) { return r.cpu_time_s && !r.time_s; }))
    run.notes.push_back(
        "-C: nccl-tests gave host CPU time (cpu_time), read as cpu_time_s; "
        "time_s is absent");
  return run;
}

// ------------------------------------------------------------------ nccl-tests text

namespace {

// The table's columns as its header line names them.
struct Layout {
  bool known = false;  // from a header line; else guessed per row from its fields
  bool redop = true;   // the leading columns after size, count, type
  bool root = true;
  bool per_iter = false;    // -I: i_min i_max i_p99 i_cv% after each group
  bool timestamp = false;   // -S
  bool cpu_time = false;    // -C: "cputime"
  bool deviation = false;   // 2.0-2.11 "error": the largest deviation, not a count
  bool rank0_time = false;  // 2.0-2.9 (type column 6 wide): rank 0's time
};

// "size count type [redop] [root] (time|cputime algbw busbw (#wrong|error)
// [i_min i_max i_p99 i_cv%]) x2 [timestamp]" after the '#'; `text` is the
// whole line, for the type column's width.
std::optional<Layout> parse_columns(const std::vector<std::string>& w, const std::string& text) {
  Layout l;
  l.known = true;
  size_t i = 3;
  if (w.size() < 3 || w[0] != "size" || w[1] != "count" || w[2] != "type") return std::nullopt;
  l.redop = i < w.size() && w[i] == "redop";
  if (l.redop) ++i;
  l.root = i < w.size() && w[i] == "root";
  if (l.root) ++i;
  for (int group = 0; group < 2; ++group) {
    if (i + 4 > w.size() || (w[i] != "time" && w[i] != "cputime") || w[i + 1] != "algbw" ||
        w[i + 2] != "busbw" || (w[i + 3] != "#wrong" && w[i + 3] != "error"))
      return std::nullopt;
    l.cpu_time = w[i] == "cputime";
    l.deviation = w[i + 3] == "error";
    i += 4;
    const bool iter = i + 4 <= w.size() && w[i] == "i_min" && w[i + 1] == "i_max" &&
                      w[i + 2] == "i_p99" && w[i + 3] == "i_cv%";
    if (group == 1 && iter != l.per_iter) return std::nullopt;
    l.per_iter = iter;
    if (iter) i += 4;
  }
  l.timestamp = i < w.size() && w[i] == "timestamp";
  if (l.timestamp) ++i;
  if (i != w.size()) return std::nullopt;
  // "# %10s  %12s  %6s" until 2.9, "%8s" from 2.10: from "size" to "type" is 22 or 24.
  const size_t size_end = text.find("size") + 4, type_end = text.find("type") + 4;
  l.rank0_time = l.deviation && type_end - size_end == 22;
  return l;
}

bool is_date(const std::string& s) {
  return s.size() == 10 && s[4] == '-' && s[7] == '-' && to_integer(s.substr(0, 4)) &&
         to_integer(s.substr(5, 2)) && to_integer(s.substr(8, 2));
}
bool is_clock(const std::string& s) {
  return s.size() == 8 && s[2] == ':' && s[5] == ':' && to_integer(s.substr(0, 2)) &&
         to_integer(s.substr(3, 2)) && to_integer(s.substr(6, 2));
}

// One test's output: from its first header line to the next test's.
struct Block {
  size_t first_line = 0;
  std::string collective;  // from its header line or a command line
  std::string collective_from;
  std::optional<Launch> launch;
  size_t launch_line = 0;
  std::vector<std::string> hosts, gpus;
  std::optional<int> aggregate, graph;
  Layout layout;
  bool saw_version = false, saw_start = false, saw_nthread = false;
  // ccscope's console log says which statistic its times are ("# time: max over ranks of
  // mean over iterations"; ccscope's default is the slowest rank, not nccl-tests' average).
  std::string time_statistic;
  std::vector<LoadedRecord> records;
};

struct Counts {
  size_t approximate_wrong = 0;  // "#wrong" in %g exponent form
  size_t deviation_rows = 0;     // 2.0-2.11 nonzero "error"
};

// A row of `b`'s table -> its out-of-place and in-place records.
void read_row(Block& b, std::vector<std::string> f, const std::string& where, Counts& counts) {
  const Layout& l = b.layout;
  if (f.size() >= 2 && is_date(f[f.size() - 2]) && is_clock(f.back()))
    f.resize(f.size() - 2);  // -S: when it was measured
  const size_t group = l.known ? (l.per_iter ? 8 : 4) : (f.size() >= 19 ? 8 : 4);
  const size_t lead_max = l.known ? 3 + l.redop + l.root : 5;
  const size_t lead_min = l.known ? lead_max - (l.redop ? 1 : 0) : 3;
  const size_t lead = f.size() >= 2 * group ? f.size() - 2 * group : 0;
  if (lead < lead_min || lead > lead_max) {
    std::string names = "size count type";
    if (!l.known || l.redop) names += " redop";
    if (!l.known || l.root) names += " root";
    names += std::string(", then ") + (l.cpu_time ? "cputime" : "time") + " algbw busbw " +
             (l.deviation ? "error" : "#wrong") + (group == 8 ? " i_min i_max i_p99 i_cv%" : "") +
             " out-of-place and in-place" + (l.timestamp ? ", timestamp" : "");
    fail(where, "expected " + std::to_string(lead_max + 2 * group + (l.timestamp ? 2 : 0)) +
                    " fields (" + names + "), found " + std::to_string(f.size()) +
                    "; truncated or not nccl-tests output?");
  }
  LoadedRecord base;
  base.source = where;
  base.backend = "nccl";
  base.size_bytes = static_cast<size_t>(need_integer(f[0], where, "size", 0, kLongMax));
  base.count = static_cast<size_t>(need_integer(f[1], where, "count", 0, kLongMax));
  base.dtype = f[2];
  // An empty redop (all-gather, all-to-all, ... until 2.13.3) prints nothing.
  std::string op, root;
  if (lead == 5) op = f[3], root = f[4];
  if (lead == 4) {
    const bool root_field = l.known ? l.root : to_integer(f[3]).has_value();
    (root_field ? root : op) = f[3];
  }
  base.op = op;
  if (!root.empty())
    if (long long v = need_integer(root, where, "root", -1); v >= 0)
      base.root = static_cast<int>(v);
  base.aggregate_iterations = b.aggregate;
  base.graph_launches = b.graph;
  const bool cpu_time =
      l.known ? l.cpu_time
              : b.launch && option_value(b.launch->program_args, "-C", "--report_cputime") > 0;
  for (int g = 0; g < 2; ++g) {
    LoadedRecord r = base;
    r.in_place = g == 1;
    const size_t at = lead + static_cast<size_t>(g) * group;
    auto figure = [&](size_t i, const char* what) -> std::optional<double> {
      if (f[i] == "N/A") return std::nullopt;
      double v = need_double(f[i], where, what);
      if (v < 0) fail(where, std::string(what) + " " + f[i] + " is negative");
      return v;
    };
    if (auto t = figure(at, cpu_time ? "cputime" : "time"))
      (cpu_time ? r.cpu_time_s : r.time_s) = *t / 1e6;
    r.algbw_GBps = figure(at + 1, "algbw");
    r.busbw_GBps = figure(at + 2, "busbw");
    if (auto wrong = figure(at + 3, l.deviation ? "error" : "#wrong")) {
      if (l.deviation) {
        if (*wrong == 0)
          r.wrong = 0;  // no element deviated
        else
          ++counts.deviation_rows;
      } else {
        if (*wrong >= 9.2e18) fail(where, "#wrong " + f[at + 3] + " is out of range");
        r.wrong = std::llround(*wrong);
        if (f[at + 3].find_first_of("eE") != std::string::npos) ++counts.approximate_wrong;
      }
    }
    if (group == 8)
      if (auto p99 = figure(at + 6, "i_p99")) r.iteration_time_p99_s = *p99 / 1e6;
    b.records.push_back(std::move(r));
  }
}

// Without a "# Collective test starting" line (before 2.16.7) or a command
// line: the collectives whose tables look like `b`'s.
std::vector<std::string> collectives_fitting(const Block& b, std::optional<int> ranks) {
  bool reduction = false, rooted = false;
  std::optional<bool> per_count_n;  // size / (count x element) is n, not 1
  double n = ranks.value_or(0);
  for (const auto& r : b.records) {
    reduction |= !r.op.empty() && r.op != "none";
    rooted |= r.root.has_value();
    const size_t element = element_bytes(r.dtype);
    if (!r.count || *r.count == 0 || element == 0 || r.size_bytes % (*r.count * element)) continue;
    const size_t ratio = r.size_bytes / (*r.count * element);
    if (ratio > 1) {
      per_count_n = true;
      if (n == 0) n = static_cast<double>(ratio);
    } else if (ranks && *ranks > 1 && !per_count_n) {
      per_count_n = false;
    }
  }
  std::string old_columns;
  if (b.layout.known && b.layout.deviation)
    old_columns = b.layout.redop && b.layout.root ? "redop root"
                  : b.layout.redop                ? "redop"
                  : b.layout.root                 ? "root"
                                                  : "";
  // busbw / algbw for n ranks (a ratio past the largest rank count: the same factor).
  const int ranks_n =
      n > static_cast<double>(kIntMax) ? static_cast<int>(kIntMax) : static_cast<int>(n);
  std::vector<std::string> out;
  for (const auto& s : signatures()) {
    if (s.op != NcclTestsOp::kAny && (s.op == NcclTestsOp::kReduction) != reduction) continue;
    if (s.root != rooted) continue;
    if (per_count_n && *per_count_n != s.size_per_count_n) continue;
    if (b.layout.known && b.layout.deviation && old_columns != s.old_columns) continue;
    bool fits = true;
    if (ranks_n >= 2)
      for (const auto& r : b.records) {
        if (!r.algbw_GBps || !r.busbw_GBps || *r.algbw_GBps < 0.5) continue;
        const double f = s.factor(ranks_n), a = *r.algbw_GBps;  // printed to 2 decimals
        if (std::fabs(*r.busbw_GBps - f * a) > 0.006 * (1 + f) + 1e-3 * f * a) fits = false;
      }
    if (fits) out.push_back(std::string(s.collective));
  }
  return out;
}

std::string join_programs(const std::vector<std::string>& collectives) {
  std::string out;
  for (size_t i = 0; i < collectives.size(); ++i)
    out += (i == 0 ? "" : i + 1 == collectives.size() ? " or " : ", ") + program_of(collectives[i]);
  return out;
}

}  // namespace

LoadedRun read_nccl_tests_text(const std::string& path, const std::string& raw) {
  LoadedRun run{path, "nccl-tests-text", {}, {}, {}};
  RunMetadata& m = run.metadata;
  m.backend = "nccl";
  std::vector<Block> blocks;
  std::optional<Launch> pending;  // a command line not yet followed by its output
  size_t pending_line = 0;
  std::vector<std::string> other;  // other programs' lines, for a failed run's message
  size_t skipped = 0, prefixed = 0, line_no = 0;
  Counts counts;
  // A test's header lines, in order: version (2.17.4-), start (2.16.7-), nThread.
  auto open_block = [&](bool fresh) -> Block& {
    if (fresh || blocks.empty()) {
      blocks.emplace_back();
      blocks.back().first_line = line_no;
      if (pending) {
        blocks.back().launch = std::move(pending);
        blocks.back().launch_line = pending_line;
        pending.reset();
      }
    }
    return blocks.back();
  };
  std::istringstream in(raw);
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    bool had_prefix = false;
    const std::string t = strip_log_prefixes(line, had_prefix);
    if (t.empty()) continue;
    const auto words = split_ws(t[0] == '#' ? t.substr(1) : t);
    if (t[0] != '#' && !looks_like_row(words)) {
      ++skipped;
      if (other.size() < 20000) other.push_back(t);
      if (auto launch = parse_launch(t, is_nccl_tests_program)) {
        if (!launch->program.empty() && m.command_line.empty()) m.command_line = t;
        pending = std::move(launch);
        pending_line = line_no;
      }
      continue;
    }
    prefixed += had_prefix;
    if (t[0] != '#') {
      Block& b = open_block(false);
      read_row(b, words, at(path, line_no), counts);
      continue;
    }
    const Block* cur = blocks.empty() ? nullptr : &blocks.back();
    const bool has_rows = cur && !cur->records.empty();
    if (starts_with(t, "# nccl-tests version")) {
      Block& b =
          open_block(!cur || has_rows || cur->saw_version || cur->saw_start || cur->saw_nthread);
      b.saw_version = true;
      for (const auto& w : words)
        if (starts_with(w, "nccl-library=") && m.nccl_version.empty())
          if (auto code = to_integer(w.substr(13)); code && *code >= 0)
            m.nccl_version = nccl_version_text(*code);
    } else if (starts_with(t, "# Collective test starting:")) {
      Block& b = open_block(!cur || has_rows || cur->saw_start || cur->saw_nthread);
      b.saw_start = true;
      if (words.size() >= 4 && !collective_of_program(words[3]).empty()) {
        b.collective = collective_of_program(words[3]);
        b.collective_from = "header";
      }
    } else if (starts_with(t, "# nThread")) {
      // "# nThread 1 nGpus 1 ... iters: 10 agg iters: 1 validation: 1 graph: 0 unalign: 0"
      Block& b = open_block(!cur || has_rows || cur->saw_nthread);
      b.saw_nthread = true;
      for (size_t i = 0; i + 1 < words.size(); ++i) {
        auto value = to_integer(words[i + 1]);
        if (!value || *value < 0 || *value > kIntMax) continue;
        if (words[i] == "graph:") b.graph = static_cast<int>(*value);
        if (words[i] == "iters:" && i > 0 && words[i - 1] == "agg" && *value >= 1)
          b.aggregate = static_cast<int>(*value);
      }
    } else if (!words.empty() && words[0] == "Rank") {
      // "#  Rank  0 Group  0 Pid 1472 on vm device  0 [0000:00:06] NVIDIA H200"
      // ("Group" from 2.13.4; before: "#   Rank  0 Pid 1472 on vm device 0 [0x06] ...")
      auto on = std::find(words.begin(), words.end(), "on");
      if (on != words.end() && on + 1 != words.end()) {
        Block& b = open_block(false);
        b.hosts.push_back(*(on + 1));
        size_t bracket = t.find(']');
        b.gpus.push_back(bracket == std::string::npos ? "" : trim(t.substr(bracket + 1)));
      }
    } else if (!words.empty() && words[0] == "size") {
      Block& b = open_block(false);
      if (auto layout = parse_columns(words, t)) {
        b.layout = *layout;
      } else {
        b.layout = Layout{};
        run.notes.push_back(at(path, line_no) +
                            ": a column line nccl-tests does not print; fields read by position");
      }
    } else if (starts_with(t, "# time: ")) {
      open_block(false).time_statistic = records::time_statistic_name(trim(t.substr(8)));
    } else if (starts_with(t, "# error:")) {
      other.push_back(t);  // 2.17.3-: ncclGetLastError() at the end
    } else if (auto launch = parse_launch(t.substr(1), is_nccl_tests_program);
               launch && !launch->program.empty()) {
      // "# mpirun -np 8 ./all_reduce_perf ..." as a script or log records it.
      if (m.command_line.empty()) m.command_line = trim(t.substr(1));
      pending = std::move(launch);
      pending_line = line_no;
    }
  }
  if (blocks.empty() ||
      std::all_of(blocks.begin(), blocks.end(), [](const Block& b) { return b.records.empty(); })) {
    std::string program = "nccl-tests";
    for (const auto& b : blocks)
      if (!b.collective.empty()) program = program_of(b.collective);
    fail_no_results(at(path, line_no), program, other);
  }

  for (auto& b : blocks) {
    if (b.records.empty()) {  // one test of several failed or was cut
      run.notes.push_back(at(path, b.first_line) + ": a test (" +
                          (b.collective.empty() ? "nccl-tests" : program_of(b.collective)) +
                          ") with no result rows");
      continue;
    }
    RunMetadata placement;  // this test's ranks, nodes and ranks per node
    placement.hosts = b.hosts;
    derive_layout(placement);
    std::optional<int> ranks;
    if (placement.ranks > 0) ranks = placement.ranks;
    if (!ranks && b.launch && b.launch->ranks) {
      // -np processes, each with -t threads of -g GPUs.
      long long n = *b.launch->ranks;
      auto g = option_value(b.launch->program_args, "-g", "--ngpus");
      auto th = option_value(b.launch->program_args, "-t", "--nthreads");
      if (g && *g > 0) n *= *g;
      if (th && *th > 0) n *= *th;
      if (n <= kIntMax) ranks = static_cast<int>(n);
    }
    if (b.collective.empty() && b.launch && !b.launch->program.empty()) {
      b.collective = collective_of_program(b.launch->program);
      b.collective_from = "the command line at line " + std::to_string(b.launch_line);
    }
    const std::string where = at(path, b.first_line);
    if (b.collective.empty()) {
      auto fitting = collectives_fitting(b, ranks);
      if (fitting.size() != 1)
        fail(where,
             "the collective is unknown: no '# Collective test starting' line (nccl-tests "
             "before 2.16.7 prints none) and no command line naming the program, and the "
             "table fits " +
                 (fitting.empty() ? std::string("no nccl-tests program") : join_programs(fitting)) +
                 "; put the command line (e.g. 'mpirun -np 8 ./all_reduce_perf ...') above "
                 "the output");
      b.collective = fitting[0];
      b.collective_from = "its table's columns and figures";
    }
    if (b.collective_from != "header")
      run.notes.push_back(where + ": collective " + b.collective + " (" + program_of(b.collective) +
                          ") read from " + b.collective_from);
    std::string statistic = b.time_statistic;
    if (statistic.empty() && b.launch) statistic = statistic_of_average(b.launch->program_args);
    if (statistic.empty()) statistic = b.layout.rank0_time ? "rank0" : "avg";
    // -N: the sweep again; each pass gets its index.
    std::map<std::tuple<std::string, std::string, int, size_t, bool>, int> seen;
    std::vector<int> pass;
    for (const auto& r : b.records)
      pass.push_back(seen[{r.dtype, r.op, r.root.value_or(-1), r.size_bytes, *r.in_place}]++);
    const bool repeated = std::any_of(pass.begin(), pass.end(), [](int p) { return p > 0; });
    for (size_t i = 0; i < b.records.size(); ++i) {
      LoadedRecord& r = b.records[i];
      r.collective = b.collective;
      apply_layout(placement, r);
      if (!r.ranks && ranks) r.ranks = ranks;
      set_statistic(r, statistic);
      if (repeated) r.repeat = pass[i];
      run.records.push_back(std::move(r));
    }
    if (m.hosts.empty()) {
      m.hosts = b.hosts;
      m.gpu_names = b.gpus;
    }
  }
  derive_layout(m);
  size_t tests = std::count_if(blocks.begin(), blocks.end(),
                               [](const Block& b) { return !b.records.empty(); });
  if (tests > 1)
    run.notes.push_back(std::to_string(tests) +
                        " tests in one file; each row keeps its own test's collective and ranks");
  note_foreign_lines(run, skipped, "NCCL INFO/WARN, launcher and MPI messages, command lines",
                     prefixed, "nccl-tests");
  if (std::any_of(run.records.begin(), run.records.end(),
                  [](const LoadedRecord& r) { return r.cpu_time_s.has_value(); }))
    run.notes.push_back(
        "-C: the time columns are host CPU time (cputime), read as cpu_time_s; "
        "time_s is absent");
  if (counts.approximate_wrong)
    run.notes.push_back(std::to_string(counts.approximate_wrong) +
                        " #wrong figures printed with 6 significant digits (%g, e.g. "
                        "1.04858e+06): those counts are rounded");
  if (counts.deviation_rows)
    run.notes.push_back(std::to_string(counts.deviation_rows) +
                        " 'error' figures of nccl-tests before 2.13 are a nonzero largest "
                        "deviation, not a count of wrong elements: wrong is absent there");
  return run;
}

}  // namespace ccscope::reports::detail
