// ccscope's own CSV and JSON records.
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
      r.time_avg_s = number("rank_time_avg_s");
      r.time_statistic = time_statistic_token(text("time_statistic"));
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
    r.time_avg_s = jnumber(j, "rank_time_avg_s", w);
    r.time_statistic = time_statistic_token(jstring(j, "time_statistic", w));
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

}  // namespace ccscope::reports::detail
