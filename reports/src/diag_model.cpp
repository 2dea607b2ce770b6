#include "diag_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>

namespace ccscope::reports::diag_model {

// Named, not anonymous: reports is a unity build.
namespace diag_text {

// Index in records::kDiagStatuses (FAIL 0 .. SKIP 3); the reader refuses others.
size_t status_index(const std::string& status) {
  const auto it =
      std::find(std::begin(records::kDiagStatuses), std::end(records::kDiagStatuses), status);
  return static_cast<size_t>(std::distance(std::begin(records::kDiagStatuses), it));
}

// Four significant digits, whole numbers from 10^4 up (no exponent for a
// GFLOP/s figure), with the unit.
std::string figure(double v, const std::string& unit) {
  if (std::isnan(v)) return "";
  std::string text = std::fabs(v) >= 1e4 ? fmt::format("{:.0f}", v) : fmt::format("{:.4g}", v);
  return unit.empty() ? text : text + " " + unit;
}

std::string where(const records::DiagCheck& c) {
  std::string text = c.host;
  if (c.rank >= 0) text += (text.empty() ? "" : " ") + fmt::format("rank {}", c.rank);
  if (!c.peer.empty()) text += (text.empty() ? "" : " ") + std::string("\xE2\x86\x92 ") + c.peer;
  return text.empty() ? "cluster" : text;
}

// The worst of the counts (FAIL, WARN, PASS, SKIP); SKIP only when every check is.
std::string worst(const std::array<size_t, 4>& counts) {
  for (size_t i = 0; i < 2; ++i)
    if (counts[i] > 0) return std::string(records::kDiagStatuses[i]);
  return counts[2] == 0 && counts[3] > 0 ? "SKIP" : "PASS";
}

}  // namespace diag_text

std::string status_class(const std::string& status) {
  std::string out = status;
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::vector<DiagRun> diag_runs(const DiagResults& diag) {
  using namespace diag_text;
  std::vector<DiagRun> runs;
  std::vector<std::vector<const records::DiagCheckRecord*>> members;
  for (const records::DiagCheckRecord& c : diag.checks) {
    auto it = std::find_if(runs.begin(), runs.end(),
                           [&](const DiagRun& r) { return r.run_id == c.run_id; });
    if (it == runs.end()) {
      runs.push_back(DiagRun{});
      runs.back().run_id = c.run_id;
      members.emplace_back();
      it = runs.end() - 1;
    }
    members[static_cast<size_t>(it - runs.begin())].push_back(&c);
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    DiagRun& run = runs[r];
    std::vector<const records::DiagCheckRecord*>& checks = members[r];
    run.complete = std::find(diag.incomplete_runs.begin(), diag.incomplete_runs.end(),
                             run.run_id) == diag.incomplete_runs.end();
    std::array<size_t, 4> total{};
    std::map<int64_t, std::pair<std::string, std::array<size_t, 4>>> stages;  // name, counts
    for (const records::DiagCheckRecord* c : checks) {
      // ISO 8601 in UTC sorts as text.
      if (!c->time_utc.empty() && (run.first_time.empty() || c->time_utc < run.first_time))
        run.first_time = c->time_utc;
      run.last_time = std::max(run.last_time, c->time_utc);
      auto& [name, counts] = stages[static_cast<int64_t>(c->check.stage)];
      if (name.empty()) name = records::stage_name(c->check.stage);
      const size_t s = status_index(records::status_name(c->check.status));
      if (s < 4) ++counts[s], ++total[s];
    }
    run.status = worst(total);
    for (const auto& [stage, entry] : stages) {
      const auto& [name, counts] = entry;
      std::string line = fmt::format("stage {}{}:", stage, name.empty() ? "" : " " + name);
      const char* separator = " ";
      for (size_t i = 0; i < 4; ++i)
        if (counts[i] > 0) {
          line += fmt::format("{}{} {}", separator, counts[i], records::kDiagStatuses[i]);
          separator = ", ";
        }
      run.stages.push_back(StageVerdict{stage, worst(counts), line});
    }
    std::stable_sort(checks.begin(), checks.end(), [](const auto* a, const auto* b) {
      const size_t sa = status_index(records::status_name(a->check.status)),
                   sb = status_index(records::status_name(b->check.status));
      return sa != sb ? sa < sb : a->check.stage < b->check.stage;
    });
    for (const records::DiagCheckRecord* c : checks) {
      Finding f;
      f.check = c;
      f.stage = fmt::format("{} {}", static_cast<int>(c->check.stage),
                            records::stage_name(c->check.stage));
      f.where = where(c->check);
      f.measured = figure(c->check.measured, c->check.unit);
      f.expected = figure(c->check.expected, c->check.unit);
      if (status_index(records::status_name(c->check.status)) < 2) ++run.attention;
      run.findings.push_back(std::move(f));
    }
  }
  return runs;
}

}  // namespace ccscope::reports::diag_model
