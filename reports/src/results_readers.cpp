// read_results: one entry point, five formats, all becoming LoadedRun.
//
//   ccscope CSV      header "schema,collective,...": fields parsed by fast-cpp-csv-parser
//   ccscope JSON     {"schema": "ccscope.bench/1", "metadata", "records"}
//   nccl-tests text  "# nccl-tests version ..." and the size/count/type/redop/root table
//   nccl-tests JSON  -J output: {"args", "config", "results"}
//   OSU              "# OSU MPI Allreduce Latency Test", "# Size  Avg Latency(us) ..."
//
// A figure the source does not hold stays std::nullopt. Anything malformed
// throws InputError("file:line: what is wrong; what to do").
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

namespace ccscope::reports {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw InputError(where + ": " + what);
}

std::string at(const std::string& path, size_t line) {
  return printable(path) + ":" + std::to_string(line);
}

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> split_ws(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Numbers: the whole text must be a finite number ("1e+06" included).
std::optional<double> to_double(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<long long> to_integer(const std::string& text) {
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end) return std::nullopt;
  return v;
}

double need_double(const std::string& text, const std::string& where, const std::string& what) {
  auto v = to_double(text);
  if (!v) fail(where, what + " '" + text + "' is not a number; is the file complete and unedited?");
  return *v;
}

// The largest value of a field held as an int (ranks, nodes, root, repeat).
constexpr long long kIntMax = std::numeric_limits<int>::max();
constexpr long long kLongMax = std::numeric_limits<long long>::max();

std::string out_of_range(const std::string& what, const std::string& text, long long min_value,
                         long long max_value) {
  return what + " " + text + " is out of range (" + std::to_string(min_value) + " to " +
         std::to_string(max_value) + "); is the file complete and unedited?";
}

long long need_integer(const std::string& text, const std::string& where, const std::string& what,
                       long long min_value, long long max_value = kIntMax) {
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range && p == end)
    fail(where, out_of_range(what, text, min_value, max_value));
  if (ec != std::errc() || p != end)
    fail(where, what + " '" + text + "' is not an integer; is the file complete and unedited?");
  if (v < min_value || v > max_value) fail(where, out_of_range(what, text, min_value, max_value));
  return v;
}

// Hosts of each rank -> nodes and the largest number of ranks on one node.
void derive_layout(RunMetadata& m) {
  std::map<std::string, int> per_host;
  for (const auto& h : m.hosts) ++per_host[h];
  m.ranks = static_cast<int>(m.hosts.size());
  m.nodes = static_cast<int>(per_host.size());
  m.ranks_per_node = 0;
  for (const auto& [h, n] : per_host) m.ranks_per_node = std::max(m.ranks_per_node, n);
}

void apply_layout(const RunMetadata& m, LoadedRecord& r) {
  if (m.ranks > 0) r.ranks = m.ranks;
  if (m.nodes > 0) r.nodes = m.nodes;
  if (m.ranks_per_node > 0) r.ranks_per_node = m.ranks_per_node;
}

// nccl-tests' program name -> ccscope's collective name.
std::string collective_from_program(std::string program) {
  program = program.substr(program.find_last_of('/') + 1);  // npos + 1 == 0
  if (program.size() > 5 && program.ends_with("_perf")) program.resize(program.size() - 5);
  if (program == "mpi") program = "";  // mpi variants are named *_perf_mpi; rare
  std::string out;
  for (char c : program)
    if (c != '_') out += c;
  return out;  // all_reduce -> allreduce, reduce_scatter -> reducescatter, ...
}

// 22803 -> "2.28.3" (NCCL_VERSION_CODE = major*10000 + minor*100 + patch).
std::string nccl_version_from_code(long long code) {
  if (code < 10000) return std::to_string(code);
  return std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) + "." +
         std::to_string(code % 100);
}

bool collected_variable(const std::string& name) {
  for (const char* p : {"NCCL_", "UCX_", "MPIR_", "OMPI_", "CCSCOPE_"})
    if (starts_with(name, p)) return true;
  return false;
}

// ------------------------------------------------------------------ ccscope CSV

// fast-cpp-csv-parser splits lines at every '\n' before it looks at quotes, but
// ccscope's writer (RFC 4180) keeps a CR or LF inside a quoted field (an
// environment value, a command line). So a first pass folds each quoted line
// break into an escape sequence ("\x1e" 'n' / 'r'; "\x1e\x1e" for the byte
// 0x1E itself), fccp parses the folded text, and unfold() restores each field.
// physical_line[i] is the file line on which logical line i + 1 starts.
struct FoldedCsv {
  std::string text;
  std::vector<size_t> physical_line;
};

constexpr char kEscape = '\x1e';

FoldedCsv fold_quoted_line_breaks(const std::string& raw, const std::string& path) {
  FoldedCsv out;
  out.text.reserve(raw.size());
  out.physical_line.push_back(1);
  size_t line = 1;
  size_t quote_line = 0;
  bool quoted = false;
  for (char c : raw) {
    if (c == '"') {
      quoted = !quoted;  // a doubled quote toggles twice
      if (quoted) quote_line = line;
    }
    if (c == kEscape) {
      out.text += kEscape;
      out.text += kEscape;
      continue;
    }
    if (c == '\n') ++line;
    if (quoted && (c == '\n' || c == '\r')) {
      out.text += kEscape;
      out.text += c == '\n' ? 'n' : 'r';
      continue;
    }
    out.text += c;
    if (c == '\n') out.physical_line.push_back(line);
  }
  if (quoted)
    fail(at(path, quote_line),
         "a quoted field is not closed before the end of the file (truncated?); "
         "rerun the benchmark or remove the incomplete row");
  return out;
}

std::string unfold(const std::string& field) {
  if (field.find(kEscape) == std::string::npos) return field;
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != kEscape || i + 1 == field.size()) {
      out += field[i];
      continue;
    }
    char next = field[++i];
    out += next == 'n' ? '\n' : next == 'r' ? '\r' : next;
  }
  return out;
}

constexpr unsigned kCsvColumns = 46;
using CsvReader = io::CSVReader<kCsvColumns, io::trim_chars<>, io::double_quote_escape<',', '"'>>;

template <size_t... I>
void read_csv_header(CsvReader& in, const std::vector<std::string>& names,
                     std::index_sequence<I...>) {
  in.read_header(io::ignore_missing_column | io::ignore_extra_column, names[I]...);
}

template <size_t... I>
bool read_csv_row(CsvReader& in, std::array<std::string, kCsvColumns>& f,
                  std::index_sequence<I...>) {
  return in.read_row(f[I]...);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  if (s.empty()) return parts;
  size_t start = 0;
  for (size_t p; (p = s.find(sep, start)) != std::string::npos; start = p + 1)
    parts.push_back(s.substr(start, p - start));
  parts.push_back(s.substr(start));
  return parts;
}

LoadedRun read_ccscope_csv(const std::string& path, const std::string& raw) {
  const auto& names = csv_columns();
  if (names.size() != kCsvColumns)
    throw std::logic_error("csv_columns() changed: update kCsvColumns");
  FoldedCsv folded = fold_quoted_line_breaks(raw, path);
  LoadedRun run{path, "ccscope-csv", {}, {}};
  auto physical = [&](unsigned logical) {
    return logical >= 1 && logical <= folded.physical_line.size()
               ? folded.physical_line[logical - 1]
               : logical;
  };
  CsvReader in(path, folded.text.data(), folded.text.data() + folded.text.size());
  try {
    read_csv_header(in, names, std::make_index_sequence<kCsvColumns>{});
    for (const char* required : {"schema", "collective", "size_bytes", "time_s"})
      if (!in.has_column(required))
        fail(at(path, 1), std::string("the header has no '") + required +
                              "' column; is this a ccscope CSV file?");
    std::array<std::string, kCsvColumns> f;
    std::array<bool, kCsvColumns> present{};
    for (size_t i = 0; i < kCsvColumns; ++i) present[i] = in.has_column(names[i]);
    auto column = [&](const char* name) {
      return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
    };
    for (;;) {
      for (auto& s : f) s.clear();
      if (!read_csv_row(in, f, std::make_index_sequence<kCsvColumns>{})) break;
      const std::string where = at(path, physical(in.get_file_line()));
      auto text = [&](const char* name) { return unfold(f[column(name)]); };
      auto has = [&](const char* name) {
        return present[column(name)] && !f[column(name)].empty();
      };
      auto number = [&](const char* name) -> std::optional<double> {
        if (!has(name)) return std::nullopt;
        return need_double(f[column(name)], where, name);
      };
      auto integer = [&](const char* name, long long min_value,
                         long long max_value = kIntMax) -> std::optional<long long> {
        if (!has(name)) return std::nullopt;
        return need_integer(f[column(name)], where, name, min_value, max_value);
      };
      if (!starts_with(text("schema"), "ccscope.bench/"))
        fail(where,
             "schema '" + text("schema") + "' is not ccscope.bench/N; is this a ccscope CSV?");
      LoadedRecord r;
      r.source = where;
      r.collective = text("collective");
      if (r.collective.empty()) fail(where, "empty collective; is the file complete and unedited?");
      r.backend = text("backend");
      r.dtype = text("dtype");
      r.op = text("op");
      if (auto root = integer("root", -1); root && *root >= 0) r.root = static_cast<int>(*root);
      if (auto v = integer("in_place", 0)) r.in_place = *v != 0;
      auto size = integer("size_bytes", 0, kLongMax);
      if (!size) fail(where, "empty size_bytes; is the file complete and unedited?");
      r.size_bytes = static_cast<size_t>(*size);
      if (auto v = integer("count", 0, kLongMax)) r.count = static_cast<size_t>(*v);
      if (auto v = integer("ranks", 1)) r.ranks = static_cast<int>(*v);
      if (auto v = integer("nodes", 1)) r.nodes = static_cast<int>(*v);
      if (auto v = integer("ranks_per_node", 1)) r.ranks_per_node = static_cast<int>(*v);
      r.time_s = number("time_s");
      r.algbw_GBps = number("algbw_GBps");
      r.busbw_GBps = number("busbw_GBps");
      r.time_min_s = number("rank_time_min_s");
      r.time_max_s = number("rank_time_max_s");
      r.iteration_time_p50_s = number("iteration_time_p50_s");
      r.iteration_time_p99_s = number("iteration_time_p99_s");
      r.wrong = integer("wrong", 0, kLongMax);
      if (auto v = integer("repeat", 0)) r.repeat = static_cast<int>(*v);
      // Absent (files from before these columns): BenchRecord's defaults.
      r.rotated = integer("rotated", 0, 1).value_or(0) != 0;
      r.aggregate_iterations = static_cast<int>(integer("aggregate_iterations", 1).value_or(1));
      r.graph_launches = static_cast<int>(integer("graph_launches", 0).value_or(0));
      r.time_method = text("time_method");
      r.check_iterations = static_cast<int>(integer("check_iterations", 0).value_or(0));
      r.failed_checks = static_cast<int>(integer("failed_checks", 0).value_or(0));
      if (r.time_s && *r.time_s < 0) fail(where, "negative time_s; is the file unedited?");
      if (run.records.empty()) {  // every row repeats the run metadata: take the first
        RunMetadata& m = run.metadata;
        m.ccscope_version = text("ccscope_version");
        m.git_commit = text("git_commit");
        m.backend = r.backend;
        m.mpi_library = text("mpi_library");
        m.nccl_version = text("nccl_version");
        m.cuda_version = text("cuda_version");
        m.driver_version = text("driver_version");
        m.hosts = split(text("hosts"), ';');
        m.gpu_names = split(text("gpu_names"), ';');
        m.ranks = r.ranks.value_or(0);
        m.nodes = r.nodes.value_or(0);
        m.ranks_per_node = r.ranks_per_node.value_or(0);
        for (const auto& kv : split(text("environment"), ';')) {
          size_t eq = kv.find('=');
          m.environment.emplace_back(kv.substr(0, eq),
                                     eq == std::string::npos ? "" : kv.substr(eq + 1));
        }
        m.command_line = text("command_line");
        m.start_time_utc = text("run_start_utc");
        m.backend_resources = text("backend_resources");
      }
      run.records.push_back(std::move(r));
    }
  } catch (const io::error::too_few_columns&) {
    fail(at(path, physical(in.get_file_line())),
         "fewer fields than the header has (truncated row?); remove the incomplete row");
  } catch (const io::error::too_many_columns&) {
    fail(at(path, physical(in.get_file_line())),
         "more fields than the header has; is the file unedited?");
  } catch (const io::error::escaped_string_not_closed&) {
    fail(at(path, physical(in.get_file_line())),
         "a quoted field is not closed; is the file unedited?");
  } catch (const io::error::base& e) {  // header errors, line too long
    fail(at(path, physical(in.get_file_line())), std::string("CSV: ") + e.what());
  }
  if (run.records.empty())
    fail(at(path, 1), "a ccscope CSV header but no records; the run measured nothing");
  return run;
}

// ------------------------------------------------------------------ JSON helpers

// Where a JSON value lives, for messages: "run.json: records[3].time_s".
std::string jwhere(const std::string& path, const std::string& pointer) {
  return printable(path) + ": " + pointer;
}

const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> jnumber(const json& obj, const char* key, const std::string& where) {
  const json* v = member(obj, key);
  if (!v) return std::nullopt;
  if (v->is_string() && trim(v->get<std::string>()) == "N/A") return std::nullopt;
  if (!v->is_number())
    fail(where + "." + key, "expected a number, found " + std::string(v->type_name()));
  double d = v->get<double>();
  if (!std::isfinite(d)) fail(where + "." + key, "not a finite number");
  return d;
}

std::optional<long long> jinteger(const json& obj, const char* key, const std::string& where,
                                  long long min_value, long long max_value = kIntMax) {
  const json* v = member(obj, key);
  if (!v) return std::nullopt;
  std::optional<long long> out;
  if (v->is_number_unsigned() && v->get<unsigned long long>() > 9223372036854775807ULL)
    fail(where + "." + key, out_of_range(key, v->dump(), min_value, max_value));
  if (v->is_number_integer()) out = v->get<long long>();
  if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
      std::fabs(v->get<double>()) < 9e18)
    out = static_cast<long long>(v->get<double>());
  if (v->is_string()) out = to_integer(trim(v->get<std::string>()));  // nccl-tests: "    -1"
  if (!out) fail(where + "." + key, "expected an integer, found " + v->dump());
  if (*out < min_value || *out > max_value)
    fail(where + "." + key, out_of_range(key, v->dump(), min_value, max_value));
  return out;
}

std::string jstring(const json& obj, const char* key, const std::string& where) {
  const json* v = member(obj, key);
  if (!v) return "";
  if (!v->is_string())
    fail(where + "." + key, "expected a string, found " + std::string(v->type_name()));
  return v->get<std::string>();
}

std::vector<std::string> jstrings(const json& obj, const char* key, const std::string& where) {
  std::vector<std::string> out;
  const json* v = member(obj, key);
  if (!v) return out;
  if (!v->is_array()) fail(where + "." + key, "expected an array");
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string())
      fail(where + "." + key + "[" + std::to_string(i) + "]", "expected a string");
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

json parse_json(const std::string& path, const std::string& raw) {
  try {
    return json::parse(raw);
  } catch (const json::parse_error& e) {
    size_t line = 1 + std::count(raw.begin(), raw.begin() + std::min(e.byte, raw.size()), '\n');
    std::string what = e.what();
    fail(at(path, line), "invalid JSON (" + what.substr(what.find(':') + 2) +
                             "); truncated or edited? rerun or restore the file");
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    fail(printable(path),
         std::string("invalid JSON (") + e.what() + "); edited? rerun or restore the file");
  }
}

// ------------------------------------------------------------------ ccscope JSON

LoadedRun read_ccscope_json(const std::string& path, const json& doc) {
  LoadedRun run{path, "ccscope-json", {}, {}};
  const json* meta = member(doc, "metadata");
  if (!meta || !meta->is_object())
    fail(jwhere(path, "metadata"), "missing; is this a ccscope JSON file?");
  const std::string mw = jwhere(path, "metadata");
  RunMetadata& m = run.metadata;
  m.ccscope_version = jstring(*meta, "ccscope_version", mw);
  m.git_commit = jstring(*meta, "git_commit", mw);
  m.backend = jstring(*meta, "backend", mw);
  m.mpi_library = jstring(*meta, "mpi_library", mw);
  m.nccl_version = jstring(*meta, "nccl_version", mw);
  m.cuda_version = jstring(*meta, "cuda_version", mw);
  m.driver_version = jstring(*meta, "driver_version", mw);
  m.hosts = jstrings(*meta, "hosts", mw);
  m.gpu_names = jstrings(*meta, "gpu_names", mw);
  m.ranks = static_cast<int>(jinteger(*meta, "ranks", mw, 0).value_or(0));
  m.nodes = static_cast<int>(jinteger(*meta, "nodes", mw, 0).value_or(0));
  m.ranks_per_node = static_cast<int>(jinteger(*meta, "ranks_per_node", mw, 0).value_or(0));
  if (const json* env = member(*meta, "environment"); env && env->is_object())
    for (const auto& [k, v] : env->items())
      m.environment.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  m.command_line = jstring(*meta, "command_line", mw);
  m.start_time_utc = jstring(*meta, "start_time_utc", mw);
  m.end_time_utc = jstring(*meta, "end_time_utc", mw);
  m.backend_resources = jstring(*meta, "backend_resources", mw);

  const json* records = member(doc, "records");
  if (!records || !records->is_array()) fail(jwhere(path, "records"), "missing or not an array");
  for (size_t i = 0; i < records->size(); ++i) {
    const json& j = (*records)[i];
    const std::string w = jwhere(path, "records[" + std::to_string(i) + "]");
    if (!j.is_object()) fail(w, "expected an object");
    LoadedRecord r;
    r.source = w;
    r.collective = jstring(j, "collective", w);
    if (r.collective.empty()) fail(w + ".collective", "missing or empty");
    r.backend = jstring(j, "backend", w);
    r.dtype = jstring(j, "dtype", w);
    r.op = jstring(j, "op", w);
    if (auto root = jinteger(j, "root", w, -1); root && *root >= 0)
      r.root = static_cast<int>(*root);
    if (const json* ip = member(j, "in_place")) {
      if (!ip->is_boolean()) fail(w + ".in_place", "expected true or false");
      r.in_place = ip->get<bool>();
    }
    auto size = jinteger(j, "size_bytes", w, 0, kLongMax);
    if (!size) fail(w + ".size_bytes", "missing");
    r.size_bytes = static_cast<size_t>(*size);
    if (auto v = jinteger(j, "count", w, 0, kLongMax)) r.count = static_cast<size_t>(*v);
    if (auto v = jinteger(j, "ranks", w, 1)) r.ranks = static_cast<int>(*v);
    if (auto v = jinteger(j, "nodes", w, 1)) r.nodes = static_cast<int>(*v);
    if (auto v = jinteger(j, "ranks_per_node", w, 1)) r.ranks_per_node = static_cast<int>(*v);
    r.time_s = jnumber(j, "time_s", w);
    if (!r.time_s || *r.time_s < 0) fail(w + ".time_s", "missing or negative");
    r.algbw_GBps = jnumber(j, "algbw_GBps", w);
    r.busbw_GBps = jnumber(j, "busbw_GBps", w);
    r.time_min_s = jnumber(j, "rank_time_min_s", w);
    r.time_max_s = jnumber(j, "rank_time_max_s", w);
    r.iteration_time_p50_s = jnumber(j, "iteration_time_p50_s", w);
    r.iteration_time_p99_s = jnumber(j, "iteration_time_p99_s", w);
    r.wrong = jinteger(j, "wrong", w, 0, kLongMax);
    if (auto v = jinteger(j, "repeat", w, 0)) r.repeat = static_cast<int>(*v);
    // Absent (files from before these keys): BenchRecord's defaults.
    r.rotated = false;
    if (const json* rot = member(j, "rotated")) {
      if (!rot->is_boolean()) fail(w + ".rotated", "expected true or false");
      r.rotated = rot->get<bool>();
    }
    r.aggregate_iterations =
        static_cast<int>(jinteger(j, "aggregate_iterations", w, 1).value_or(1));
    r.graph_launches = static_cast<int>(jinteger(j, "graph_launches", w, 0).value_or(0));
    r.time_method = jstring(j, "time_method", w);
    r.check_iterations = static_cast<int>(jinteger(j, "check_iterations", w, 0).value_or(0));
    r.failed_checks = static_cast<int>(jinteger(j, "failed_checks", w, 0).value_or(0));
    run.records.push_back(std::move(r));
  }
  if (run.records.empty()) fail(jwhere(path, "records"), "empty: the run measured nothing");
  return run;
}

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
    if (!has_time) fail(where, "no 'Avg Latency(us)' column in the header");
    run.records.push_back(std::move(r));
  }
  if (run.records.empty())
    fail(at(path, line_no), "no result rows (the run measured nothing or was cut)");
  run.metadata.backend = backend;
  return run;
}

}  // namespace

LoadedRun read_results(const std::string& path) {
  return parse_results(path, read_input_file(path));
}

LoadedRun parse_results(const std::string& path, const std::string& raw) {
  const std::string head = trim(raw.substr(0, 4096));
  if (head.empty()) fail(at(path, 1), "empty file; rerun the benchmark");
  if (head[0] == '{') {
    json doc = parse_json(path, raw);
    if (!doc.is_object()) fail(at(path, 1), "a JSON document that is not an object");
    if (const json* schema = member(doc, "schema");
        schema && schema->is_string() && starts_with(schema->get<std::string>(), "ccscope.bench/"))
      return read_ccscope_json(path, doc);
    if (member(doc, "results") && (member(doc, "args") || member(doc, "config")))
      return read_nccl_tests_json(path, doc);
    fail(at(path, 1),
         "JSON that is neither ccscope's (schema ccscope.bench/N) nor nccl-tests' -J output");
  }
  if (starts_with(head, "schema,") || starts_with(head, "\"schema\","))
    return read_ccscope_csv(path, raw);
  if (head.find("# nccl-tests version") != std::string::npos ||
      head.find("# Collective test starting:") != std::string::npos ||
      head.find("out-of-place") != std::string::npos)
    return read_nccl_tests_text(path, raw);
  if (head.find("# OSU ") != std::string::npos) return read_osu(path, raw);
  fail(at(path, 1),
       "unknown format: expected ccscope CSV/JSON, nccl-tests text or -J JSON, or OSU output");
}

}  // namespace ccscope::reports
