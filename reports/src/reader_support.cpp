// Shared parts of the results readers (see reader_support.h).
#include "reader_support.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

#include "ccscope/reports/user_files.h"

namespace ccscope::reports::detail {


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


std::string out_of_range(const std::string& what, const std::string& text, long long min_value,
                         long long max_value) {
  return what + " " + text + " is out of range (" + std::to_string(min_value) + " to " +
         std::to_string(max_value) + "); is the file complete and unedited?";
}

long long need_integer(const std::string& text, const std::string& where, const std::string& what,
                       long long min_value, long long max_value) {
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

// ------------------------------------------------------------------ JSON helpers

std::string time_statistic_token(std::string_view text) {
  for (const char* token : {"max", "avg", "min", "rank0"})
    if (text == token) return token;
  if (starts_with(text, "max over ranks")) return "max";
  if (starts_with(text, "average over ranks")) return "avg";
  if (starts_with(text, "min over ranks")) return "min";
  if (starts_with(text, "rank 0")) return "rank0";
  return "";
}

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
                                  long long min_value, long long max_value) {
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

}  // namespace ccscope::reports::detail
