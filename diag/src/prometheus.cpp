#include "ccscope/diag/prometheus.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>

namespace ccscope::diag {
namespace {

std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string labels(const Check& c) {
  return fmt::format("stage=\"{}\",check=\"{}\",host=\"{}\",rank=\"{}\",peer=\"{}\"",
                     stage_name(c.stage), escape_label(c.name), escape_label(c.host),
                     c.rank >= 0 ? std::to_string(c.rank) : "", escape_label(c.peer));
}

// Prometheus' number text: NaN and infinities spelled its way.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void family(std::string& out, const char* name, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
}

}  // namespace

std::string prometheus_text(const std::vector<Check>& checks, const PrometheusRun& run) {
  // One series per label set: the worst status and the first figures.
  std::map<std::string, const Check*> series;
  std::map<std::string, int> worst;
  std::vector<std::string> order;
  for (const Check& c : checks) {
    const std::string key = labels(c);
    if (!series.count(key)) {
      series[key] = &c;
      worst[key] = status_value(c.status);
      order.push_back(key);
    } else if (status_value(c.status) > worst[key]) {
      worst[key] = status_value(c.status);
    }
  }
  std::string out;
  family(out, "ccscope_diag_check_status",
         "ccscope diag verdict per check: 0 PASS, 1 WARN, 2 FAIL, -1 SKIP.");
  for (const std::string& key : order)
    out += fmt::format("ccscope_diag_check_status{{{}}} {}\n", key, worst[key]);
  family(out, "ccscope_diag_check_measured", "The figure a check measured, in its unit label.");
  for (const std::string& key : order) {
    const Check& c = *series[key];
    if (!std::isnan(c.measured))
      out += fmt::format("ccscope_diag_check_measured{{{},unit=\"{}\"}} {}\n", key,
                         escape_label(c.unit), number(c.measured));
  }
  family(out, "ccscope_diag_check_expected", "The figure a check expected, in its unit label.");
  for (const std::string& key : order) {
    const Check& c = *series[key];
    if (!std::isnan(c.expected))
      out += fmt::format("ccscope_diag_check_expected{{{},unit=\"{}\"}} {}\n", key,
                         escape_label(c.unit), number(c.expected));
  }
  // A stage's worst verdict; -1 when all its checks were SKIPped.
  std::map<Stage, int> stages;
  for (const Check& c : checks) {
    const int v = status_value(c.status);
    auto [it, inserted] = stages.emplace(c.stage, v);
    if (!inserted) it->second = std::max(it->second, v);
  }
  family(out, "ccscope_diag_stage_status",
         "Worst verdict per checklist stage: 0 PASS, 1 WARN, 2 FAIL, -1 all SKIP.");
  for (const auto& [stage, v] : stages)
    out += fmt::format("ccscope_diag_stage_status{{stage=\"{}\"}} {}\n", stage_name(stage), v);
  family(out, "ccscope_diag_exit_code",
         "ccscope diag's exit code: 0 pass, 1 a FAIL; -1 while it runs (and when a hang or a death "
         "cut it short).");
  out += fmt::format("ccscope_diag_exit_code {}\n", run.exit_code);
  family(out, "ccscope_diag_duration_seconds", "Time from start to verdict.");
  out += fmt::format("ccscope_diag_duration_seconds {}\n", number(run.seconds));
  family(out, "ccscope_diag_last_run_timestamp_seconds", "When the run ended (Unix time).");
  out += fmt::format("ccscope_diag_last_run_timestamp_seconds {}\n", number(run.finished_unix_s));
  return out;
}

}  // namespace ccscope::diag
