// OSU Micro-Benchmarks' blocking collectives, 5.x to 7.x (osu_util*.c's
// print_preamble / print_only_header / print_stats*):
//
//   # OSU MPI Allreduce Latency Test v7.3          (MPI-CUDA, MPI-ROCM, NCCL, ...)
//   # Datatype: MPI_FLOAT.                         (7.x; one table per -T type)
//   # Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations  Validation
//   4                       1.62              1.50              1.80        1000        Pass
//   DATA VALIDATION ERROR: ./osu_allreduce exited with status 1 on message size 1024.
//
// -f adds Min/Max Latency and Iterations, -c the Validation column (Pass or
// Fail: no count), 7.x's tail-latency and "Transmit Size" columns are read past.
// OSU prints no rank count, op or bandwidth; its all-gather, all-to-all, gather
// and scatter sizes are one rank's block, converted to nccl-tests' size (x
// ranks) when a launcher line in the file gives the rank count.
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccscope/common/text.h"
#include "ccscope/records/collective.h"
#include "ccscope/reports/loaded_results.h"
#include "reader_support.h"

namespace ccscope::reports::detail {
namespace {

bool is_osu_program(std::string_view name) { return starts_with(name, "osu_"); }

struct Title {
  std::string collective;
  std::string program;  // "osu_bcast", for messages
  std::string backend;  // "mpi" or "nccl"
  // OSU prints one rank's block, nccl-tests the whole buffer (size x ranks).
  bool size_is_per_rank = false;
};

// OSU's titles of collectives ccscope does not benchmark, and its variants
// of those it does (their own titles: their descriptions' osu_titles),
// lowercased, " Personalized Exchange" and " Persistent" removed.
struct OtherTitle {
  std::string_view words;
  std::optional<Collective> described;  // a variant of a described one
  std::string_view collective, program;
  bool size_is_per_rank;
};
constexpr OtherTitle kOtherTitles[] = {
    {"reduce_scatter_block", Collective::kReduceScatter, "", "osu_reduce_scatter_block", false},
    {"allgatherv", {}, "allgatherv", "osu_allgatherv", false},
    {"all-to-allv", {}, "alltoallv", "osu_alltoallv", false},
    {"all-to-allw", {}, "alltoallw", "osu_alltoallw", false},
    {"gatherv", {}, "gatherv", "osu_gatherv", false},
    {"scatterv", {}, "scatterv", "osu_scatterv", false},
    {"barrier", {}, "barrier", "osu_barrier", false},
};

// "# OSU MPI-CUDA All-to-All Personalized Exchange Latency Test v7.3" -> alltoall.
Title parse_title(const std::string& t, const std::string& where) {
  auto words = split_ws(t.substr(1));  // "OSU", backend, name..., "Latency", "Test", version
  auto latency = std::find(words.begin(), words.end(), "Latency");
  // "Latency" must come after "OSU" and the backend word ("# OSU Latency Test"
  // names no backend and no collective).
  if (words.size() < 3 || latency == words.end() || latency - words.begin() < 2 ||
      latency + 1 == words.end() || *(latency + 1) != "Test")
    fail(where, "'" + trim(t.substr(1)) +
                    "' is not an OSU collective latency test; ccscope reads osu_allreduce, "
                    "osu_allgather, osu_alltoall, osu_bcast, ... output");
  Title out;
  out.backend = ascii_lower(words[1]).find("nccl") != std::string::npos ? "nccl" : "mpi";
  auto first = words.begin() + 2;
  if (first != latency && *first == "MANAGED") ++first;  // "MPI-CUDA MANAGED"
  std::string name;
  for (auto it = first; it != latency; ++it) name += (name.empty() ? "" : " ") + *it;
  name = ascii_lower(name);
  if (name.ends_with(" persistent")) name.resize(name.size() - 11);  // same table
  if (starts_with(name, "non-blocking") || name.find("neighborhood") != std::string::npos)
    fail(where,
         "OSU's non-blocking and neighborhood benchmarks (tables of Overall, Compute and "
         "Overlap) are not read; give the blocking benchmark's output (e.g. osu_allreduce)");
  auto described = [&out](const CollectiveDescription& d) {
    out.collective = d.name;
    out.program = d.osu_program;
    out.size_is_per_rank = d.osu_size_is_per_rank;
  };
  for (const auto& d : all_collectives())
    for (std::string_view title : d.osu_titles)
      if (ascii_lower(std::string(title)) == name) {
        described(d);
        return out;
      }
  if (name.ends_with(" personalized exchange")) name.resize(name.size() - 22);
  for (const auto& o : kOtherTitles)
    if (o.words == name) {
      if (o.described) described(describe(*o.described));
      if (!o.described) out.collective = o.collective, out.size_is_per_rank = o.size_is_per_rank;
      out.program = o.program;
      break;
    }
  if (out.collective.empty()) {  // a title not known here: its letters and digits
    for (char c : name)
      if (std::isalnum(static_cast<unsigned char>(c))) out.collective += c;
    out.program = "osu_" + out.collective;
  }
  if (out.collective.empty()) fail(where, "an OSU title without a benchmark name");
  if (out.collective == "barrier")
    fail(where, "OSU's barrier test has no message size; it is not read");
  return out;
}

// "# Size       Avg Latency(us)   Min Latency(us) ..." -> the column names; a
// name ends at "Size", "Iterations", "Validation" or "...)".
std::vector<std::string> parse_columns(const std::vector<std::string>& words) {
  std::vector<std::string> columns;
  std::string name;
  for (const auto& w : words) {
    name += (name.empty() ? "" : " ") + w;
    if (w == "Size" || w == "Iterations" || w == "Validation" || w.back() == ')')
      columns.push_back(std::move(name)), name.clear();
  }
  if (!name.empty()) columns.push_back(name);
  return columns;
}

struct Test {
  Title title;
  size_t line = 0;
  std::optional<int> ranks;
  size_t ranks_line = 0;
  std::string launcher;  // the command line that gave the ranks
  size_t first_record = 0;
};

}  // namespace

LoadedRun read_osu(const std::string& path, const std::string& raw) {
  LoadedRun run{path, "osu", {}, {}, {}};
  std::vector<Test> tests;
  std::string dtype;
  std::vector<std::string> columns;  // "Size", "Avg Latency(us)", ...
  std::optional<Launch> launch;      // the latest launcher line with a rank count
  size_t launch_line = 0;
  std::string launch_text;
  std::vector<std::string> other;
  size_t skipped = 0, prefixed = 0, failed = 0, line_no = 0;
  std::istringstream in(raw);
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    bool had_prefix = false;
    const std::string t = strip_log_prefixes(line, had_prefix);
    if (t.empty()) continue;
    const std::string where = at(path, line_no);
    if (t[0] == '#') {
      prefixed += had_prefix;
      auto words = split_ws(t.substr(1));
      if (starts_with(t, "# OSU ")) {
        tests.push_back({parse_title(t, where), line_no, {}, 0, "", run.records.size()});
        if (launch) {
          tests.back().ranks = launch->ranks;
          tests.back().ranks_line = launch_line;
          tests.back().launcher = launch_text;
        }
        dtype.clear();
        columns.clear();
      } else if (starts_with(t, "# Datatype:") && words.size() >= 2) {
        static const std::map<std::string, std::string, std::less<>> types = {
            {"MPI_CHAR", "int8"},  {"MPI_SIGNED_CHAR", "int8"}, {"MPI_UNSIGNED_CHAR", "uint8"},
            {"MPI_INT", "int32"},  {"MPI_FLOAT", "float"},      {"MPI_DOUBLE", "double"},
            {"MPI_LONG", "int64"}, {"MPI_SHORT", "int16"}};
        std::string type = words[1];
        if (!type.empty() && type.back() == '.') type.pop_back();
        auto it = types.find(type);
        dtype = it == types.end() ? type : it->second;
      } else if (!words.empty() && (words[0] == "Size" || words[0] == "Avg")) {
        columns = parse_columns(words);
      }
      continue;
    }
    const auto f = split_ws(t);
    if (!looks_like_row(f)) {
      // "DATA VALIDATION ERROR: ./osu_allgather exited with status 1 on message size 1024."
      if (const size_t at_size = t.find("on message size ");
          starts_with(t, "DATA VALIDATION ERROR") && at_size != std::string::npos) {
        std::string size = t.substr(at_size + 16);
        while (!size.empty() &&
               (size.back() == '.' || std::isspace(static_cast<unsigned char>(size.back()))))
          size.pop_back();
        auto bytes = to_integer(size);
        auto row =
            std::find_if(run.records.rbegin(), run.records.rend(), [&](const LoadedRecord& r) {
              return bytes && static_cast<long long>(r.size_bytes) == *bytes;
            });
        if (tests.empty() || row == run.records.rend() ||
            row.base() - run.records.begin() <=
                static_cast<std::ptrdiff_t>(tests.back().first_record))
          run.notes.push_back(where +
                              ": OSU reports a validation error at a size it printed no "
                              "row for: '" +
                              t + "'");
        else if (!row->wrong || *row->wrong == 0)
          row->wrong = 1, ++failed;
        other.push_back(t);
        continue;
      }
      ++skipped;
      if (other.size() < 20000) other.push_back(t);
      if (auto l = parse_launch(t, is_osu_program); l && l->ranks) {
        launch = std::move(l);
        launch_line = line_no;
        launch_text = t;
        if (run.metadata.command_line.empty()) run.metadata.command_line = t;
        // A launcher line after the title but before its rows still tells its ranks.
        if (!tests.empty() && !tests.back().ranks &&
            run.records.size() == tests.back().first_record) {
          tests.back().ranks = launch->ranks;
          tests.back().ranks_line = line_no;
          tests.back().launcher = t;
        }
      }
      continue;
    }
    prefixed += had_prefix;
    if (tests.empty())
      fail(
          where,
          "a data row before the '# OSU MPI <Collective> Latency Test' title; is this OSU output?");
    if (columns.empty()) fail(where, "a data row before the '# Size  Avg Latency(us)' header");
    if (f.size() != columns.size())
      fail(where, "expected " + std::to_string(columns.size()) +
                      " fields as in the '# Size' header, found " + std::to_string(f.size()) +
                      "; truncated?");
    const Test& test = tests.back();
    LoadedRecord r;
    r.source = where;
    r.collective = test.title.collective;
    r.backend = test.title.backend;
    r.dtype = dtype;
    bool has_time = false, has_size = false;
    for (size_t i = 0; i < f.size(); ++i) {
      if (columns[i] == "Size") {
        r.size_bytes = static_cast<size_t>(need_integer(f[i], where, "size", 0, kLongMax));
        has_size = true;
      }
      if (columns[i] == "Validation") {
        if (f[i] != "Pass" && f[i] != "Fail")
          fail(where, "Validation '" + f[i] + "' is neither Pass nor Fail; is the file unedited?");
        r.wrong = f[i] == "Fail" ? 1 : 0;  // OSU says Pass or Fail, not how many
        failed += f[i] == "Fail";
      }
      std::optional<double>* target = columns[i] == "Avg Latency(us)"   ? &r.time_s
                                      : columns[i] == "Min Latency(us)" ? &r.time_min_s
                                      : columns[i] == "Max Latency(us)" ? &r.time_max_s
                                                                        : nullptr;
      if (!target) continue;
      double us = need_double(f[i], where, columns[i]);
      if (us < 0) fail(where, columns[i] + " is negative");
      *target = us / 1e6;
      has_time |= target == &r.time_s;
    }
    if (!has_size) fail(where, "no 'Size' column in the header; rerun without hiding sizes");
    if (!has_time) fail(where, "no 'Avg Latency(us)' column in the header");
    r.time_avg_s = r.time_s;  // OSU's "Avg Latency": the average over ranks
    r.time_statistic = "avg";
    r.ranks = test.ranks;
    run.records.push_back(std::move(r));
  }
  if (run.records.empty())
    fail_no_results(at(path, line_no), tests.empty() ? "OSU" : tests.back().title.program, other);

  // OSU's per-rank sizes -> nccl-tests' (the whole buffer: size x ranks).
  for (size_t k = 0; k < tests.size(); ++k) {
    const Test& test = tests[k];
    const size_t end = k + 1 < tests.size() ? tests[k + 1].first_record : run.records.size();
    if (!test.title.size_is_per_rank || end == test.first_record) continue;
    const std::string where = at(path, test.line);
    if (!test.ranks) {
      run.notes.push_back(where + ": " + test.title.collective +
                          ": OSU prints one rank's size and the file gives no rank count (no "
                          "mpirun/mpiexec/srun -n line), so sizes stay OSU's, not nccl-tests' "
                          "(size x ranks)");
      continue;
    }
    for (size_t i = test.first_record; i < end; ++i) {
      LoadedRecord& r = run.records[i];
      if (r.size_bytes > static_cast<size_t>(kLongMax) / static_cast<size_t>(*test.ranks))
        fail(r.source, "size " + std::to_string(r.size_bytes) + " x " +
                           std::to_string(*test.ranks) + " ranks is out of range");
      r.size_bytes *= static_cast<size_t>(*test.ranks);
    }
    run.notes.push_back(where + ": " + test.title.collective + ": OSU's per-rank sizes x " +
                        std::to_string(*test.ranks) + " ranks (from line " +
                        std::to_string(test.ranks_line) + ") = nccl-tests' size convention");
  }
  run.metadata.backend = tests.empty() ? "mpi" : tests.front().title.backend;
  if (failed)
    run.notes.push_back(std::to_string(failed) +
                        " sizes failed OSU's validation (Fail or DATA VALIDATION ERROR): read as "
                        "wrong=1, as OSU prints no count");
  note_foreign_lines(run, skipped, "launcher and MPI messages, command lines", prefixed, "OSU");
  return run;
}

}  // namespace ccscope::reports::detail
