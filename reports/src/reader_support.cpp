// Shared parts of the results readers (see reader_support.h).
#include "reader_support.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

#include "ccscope/common/json_text.h"
#include "ccscope/common/text.h"
#include "ccscope/records/schema.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports::detail {

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw InputError(where + ": " + what);
}

std::string at(const std::string& path, size_t line) {
  return printable(path) + ":" + std::to_string(line);
}

std::string trim(std::string_view s) { return std::string(trimmed(s)); }

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
    return parse_json_text(raw);
  } catch (const JsonLimitError& e) {
    fail(printable(path), std::string(e.what()) + "; is this the file you meant?");
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

// ------------------------------------------------------------------ text outputs

namespace ccscope::reports::detail {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_blank(char c) { return c == ' ' || c == '\t'; }

bool digits_at(std::string_view s, size_t at, size_t n) {
  if (at > s.size() || s.size() - at < n) return false;
  for (size_t i = at; i < at + n; ++i)
    if (!is_digit(s[i])) return false;
  return true;
}

size_t skip_blanks(std::string_view s, size_t i) {
  while (i < s.size() && is_blank(s[i])) ++i;
  return i;
}

// "2024-05-01T12:34:56.123456789Z " (kubectl logs --timestamps), "2024-05-01
// 12:34:56,123 ", "[2024-05-01T12:34:56+02:00] ": the length with the blanks
// after it, or 0.
size_t iso_time_prefix(std::string_view s) {
  size_t i = 0;
  const bool bracket = !s.empty() && s[0] == '[';
  if (bracket) i = 1;
  if (!(digits_at(s, i, 4) && s.size() >= i + 19 && s[i + 4] == '-' && digits_at(s, i + 5, 2) &&
        s[i + 7] == '-' && digits_at(s, i + 8, 2) && (s[i + 10] == 'T' || s[i + 10] == ' ') &&
        digits_at(s, i + 11, 2) && s[i + 13] == ':' && digits_at(s, i + 14, 2) &&
        s[i + 16] == ':' && digits_at(s, i + 17, 2)))
    return 0;
  i += 19;
  if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i < s.size() && s[i] == 'Z') {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-') && digits_at(s, i + 1, 2)) {
    i += 3;
    if (i < s.size() && s[i] == ':') ++i;
    if (digits_at(s, i, 2)) i += 2;
  }
  if (bracket) {
    if (i >= s.size() || s[i] != ']') return 0;
    ++i;
  }
  if (i < s.size() && !is_blank(s[i])) return 0;
  return skip_blanks(s, i);
}

// journalctl / syslog: "May 01 12:34:56 node1 nccl[123]: ".
size_t journal_prefix(std::string_view s) {
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (s.size() < 16 || s[3] != ' ' ||
      std::find(std::begin(kMonths), std::end(kMonths), s.substr(0, 3)) == std::end(kMonths))
    return 0;
  size_t i = skip_blanks(s, 4);
  const size_t day = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == day || i - day > 2 || i >= s.size() || s[i] != ' ') return 0;
  ++i;
  if (!(digits_at(s, i, 2) && s.size() >= i + 8 && s[i + 2] == ':' && digits_at(s, i + 3, 2) &&
        s[i + 5] == ':' && digits_at(s, i + 6, 2)))
    return 0;
  i += 8;
  if (i >= s.size() || s[i] != ' ') return 0;
  const size_t host_end = s.find(' ', i + 1);  // the host, then "tag[pid]:"
  if (host_end == std::string_view::npos) return 0;
  const size_t tag_end = s.find(' ', host_end + 1);
  const size_t colon = (tag_end == std::string_view::npos ? s.size() : tag_end) - 1;
  if (colon <= host_end || s[colon] != ':') return 0;
  return skip_blanks(s, colon + 1);
}

// "[1,0]<stdout>:" (mpirun --tag-output), "[0] " (MPICH -prepend-rank),
// "[pod/name/container] " (kubectl logs --prefix).
size_t bracket_prefix(std::string_view s) {
  if (s.empty() || s[0] != '[') return 0;
  const size_t close = s.find(']');
  if (close == std::string_view::npos) return 0;
  const std::string_view inside = s.substr(1, close - 1);
  size_t i = close + 1;
  const size_t comma = inside.find(',');
  if (comma != std::string_view::npos && comma > 0 && digits_at(inside, 0, comma) &&
      comma + 1 < inside.size() && digits_at(inside, comma + 1, inside.size() - comma - 1) &&
      i < s.size() && s[i] == '<') {
    const size_t gt = s.find(">:", i);
    if (gt == std::string_view::npos || gt - i > 8) return 0;
    return skip_blanks(s, gt + 2);
  }
  const bool rank = !inside.empty() && digits_at(inside, 0, inside.size());
  const bool pod = starts_with(inside, "pod/");
  if ((rank || pod) && i < s.size() && is_blank(s[i])) return skip_blanks(s, i);
  return 0;
}

// "0: " and " 12: " (srun --label).
size_t rank_label_prefix(std::string_view s) {
  size_t i = skip_blanks(s, 0);
  const size_t start = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == start || i >= s.size() || s[i] != ':') return 0;
  ++i;
  if (i < s.size() && !is_blank(s[i])) return 0;
  return skip_blanks(s, i);
}

// "node01: " (pdsh, clush): any one word ending in ':'.
size_t host_prefix(std::string_view s) {
  const size_t space = s.find_first_of(" \t");
  if (space == std::string_view::npos || space < 2 || space > 128 || s[space - 1] != ':') return 0;
  return skip_blanks(s, space);
}

bool table_text(std::string_view s) {
  return !s.empty() && (s[0] == '#' || looks_like_row(split_ws(std::string(s))));
}

}  // namespace

bool looks_like_row(const std::vector<std::string>& words) {
  if (words.empty() || !is_digit(words[0][0]) || !to_integer(words[0])) return false;
  return words.size() == 1 || to_double(words[1]) || words[1] == "N/A";
}

std::string strip_log_prefixes(std::string_view line, bool& stripped) {
  stripped = false;
  std::string_view s = line;
  while (!s.empty() && (is_blank(s.back()) || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  for (int round = 0; round < 8; ++round) {
    const std::string_view rest = s.substr(skip_blanks(s, 0));
    if (table_text(rest)) break;  // the program's own line: no prefix to remove
    size_t n = iso_time_prefix(rest);
    if (!n) n = journal_prefix(rest);
    if (!n) n = bracket_prefix(rest);
    if (!n) n = rank_label_prefix(rest);
    if (!n) {
      n = host_prefix(rest);
      if (n && !table_text(rest.substr(n))) n = 0;
    }
    if (!n) {
      s = rest;
      break;
    }
    s = rest.substr(n);
    stripped = true;
  }
  return trim(s);
}

namespace {

std::string base_name(std::string_view word) {
  const size_t slash = word.find_last_of('/');
  return std::string(slash == std::string_view::npos ? word : word.substr(slash + 1));
}

bool is_launcher(const std::string& name) {
  for (const char* l : {"mpirun", "mpiexec", "mpiexec.hydra", "mpiexec.slurm", "orterun", "prterun",
                        "srun", "aprun", "jsrun"})
    if (name == l) return true;
  return false;
}

std::optional<int> rank_count(const std::string& text) {
  auto v = to_integer(text);
  if (!v || *v < 1 || *v > kIntMax) return std::nullopt;
  return static_cast<int>(*v);
}

}  // namespace

std::optional<Launch> parse_launch(const std::string& line,
                                   bool (*is_program)(std::string_view name)) {
  const auto words = split_ws(line);
  Launch launch;
  bool launcher = false;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string name = base_name(words[i]);
    if (is_program(name)) {
      launch.program = name;
      launch.program_args.assign(words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
      break;
    }
    if (is_launcher(name)) {
      launcher = true;
      continue;
    }
    if (!launcher) continue;
    const std::string& w = words[i];
    const bool takes_value =
        w == "-n" || w == "-np" || w == "--np" || w == "--n" || w == "-c" || w == "--ntasks";
    if (takes_value && i + 1 < words.size()) {
      if (auto n = rank_count(words[i + 1])) launch.ranks = n;
      ++i;
    } else if (starts_with(w, "--ntasks=") || starts_with(w, "-np=") || starts_with(w, "--np=")) {
      if (auto n = rank_count(w.substr(w.find('=') + 1))) launch.ranks = n;
    } else if (w.size() > 2 && starts_with(w, "-n") && digits_at(w, 2, w.size() - 2)) {
      if (auto n = rank_count(w.substr(2))) launch.ranks = n;  // srun -n8
    }
  }
  if (launch.program.empty() && !launch.ranks) return std::nullopt;
  return launch;
}

std::string one_line(std::string_view text) {
  std::string out;
  for (char c : trim(text)) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  if (out.size() > 200) out = out.substr(0, 197) + "...";
  return out;
}

std::string reported_failure(const std::vector<std::string>& lines) {
  // Most telling first: the benchmark's own words, then NCCL's, then the launcher's.
  static constexpr std::string_view kSigns[][10] = {
      {"Invalid number of GPUs", "Test NCCL failure", "Test CUDA failure", "Test failure",
       "requires at least", "Could Not Allocate Memory", "Error initializing device",
       "DATA VALIDATION ERROR", "# error: "},
      {"] Error: ", "NCCL WARN", "Fatal error", "MPI_ABORT", "out of memory"},
      {"mpirun noticed", "srun: error", "error:", "Error", "ERROR", "failure", "failed", "Aborted",
       "Segmentation fault", "error"},
  };
  for (const auto& signs : kSigns)
    for (const auto& sign : signs) {
      if (sign.empty()) continue;  // the shorter rows' padding
      for (const auto& line : lines) {
        if (line.find(sign) != std::string::npos) return one_line(line);
      }
    }
  return "";
}

void fail_no_results(const std::string& where, const std::string& program,
                     const std::vector<std::string>& other_lines) {
  const std::string what = reported_failure(other_lines);
  if (!what.empty())
    fail(where,
         program + " printed no results; the file reports: '" + what + "'; fix that and rerun");
  fail(where, "no result rows (the run measured nothing or was cut); rerun and keep " + program +
                  "'s whole output");
}

void note_foreign_lines(LoadedRun& run, size_t skipped, std::string_view kinds, size_t prefixed,
                        std::string_view tool) {
  if (skipped)
    run.notes.push_back(std::to_string(skipped) + " lines of other programs skipped (" +
                        std::string(kinds) + ")");
  if (prefixed)
    run.notes.push_back(std::to_string(prefixed) + " " + std::string(tool) +
                        " lines read without their log prefix (mpirun --tag-output, srun "
                        "--label, time stamps)");
}

std::optional<CsvKindHead> csv_kind_head(std::string_view text) {
  auto next_line = [&](size_t& pos) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };
  size_t pos = 0;
  std::string_view header;
  while (pos < text.size() && (header = next_line(pos)).empty()) {
  }
  if (!(header.starts_with("schema,") || header.starts_with("\"schema\","))) return std::nullopt;
  std::string_view row;
  while (pos < text.size() && (row = next_line(pos)).empty()) {
  }
  CsvKindHead head;
  if (row.empty()) {
    try {
      const std::vector<records::CsvRecordLine> lines = records::parse_csv(header);
      if (lines.empty()) return std::nullopt;
      head.header_columns = lines.front().fields;
    } catch (const records::CsvError&) {
      return std::nullopt;
    }
    return head;
  }
  std::string_view cell = row.substr(0, row.find(','));
  if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"')
    cell = cell.substr(1, cell.size() - 2);
  head.first_schema = std::string(cell);
  return head;
}

}  // namespace ccscope::reports::detail
