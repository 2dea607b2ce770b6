// render_compare_text: the text `ccscope compare` prints for a CompareResult.
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "ccscope/common/sizes.h"
#include "ccscope/reports/compare.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports {
namespace {

std::string describe_inputs(const std::vector<CompareInput>& inputs) {
  std::string out;
  size_t records = 0;
  for (const auto& in : inputs)
    out += (out.empty() ? "" : ", ") + printable(in.path), records += in.records;
  return fmt::format("{} ({} records)", out, records);
}

// "statistic: avg over ranks (baseline: time_avg_s, its time_s being max;
// current: time_s)".
std::string statistic_line(const StatisticChoice& c) {
  if (c.statistic.empty())
    return "statistic: time_s against time_s; neither side states which statistic over ranks "
           "it is";
  auto side = [](const std::string& field, const std::string& time_s) {
    if (field == "time_s") return field;
    return field + ", its time_s being " + (time_s.empty() ? "unstated" : time_s);
  };
  return fmt::format("statistic: {} (baseline: {}; current: {})", describe_statistic(c.statistic),
                     side(c.base_field, c.base_time_s), side(c.current_field, c.current_time_s));
}

// Which of latency and bandwidth changed between the fitted models.
std::string model_text(const SeriesVerdict& v, double threshold) {
  if (!v.base_model || !v.current_model)
    return "model: too few sizes to fit time = alpha + size * beta";
  const AlphaBetaFit &b = *v.base_model, &c = *v.current_model;
  auto describe = [](const AlphaBetaFit& f) {
    return fmt::format("alpha {:.2f} us, beta {:.4g} ns/B ({:.3g} GB/s), max residual {:.0f}%",
                       f.alpha_s * 1e6, f.beta_s_per_B * 1e9,
                       f.beta_s_per_B > 0 ? 1e-9 / f.beta_s_per_B : 0, f.max_abs_residual * 100);
  };
  auto change = [](double now, double before) { return before > 0 ? now / before - 1 : 0; };
  const double da = change(c.alpha_s, b.alpha_s), db = change(c.beta_s_per_B, b.beta_s_per_B);
  std::vector<std::string> parts;
  if (da > threshold) parts.push_back(fmt::format("latency (alpha) {:+.0f}%", da * 100));
  if (db > threshold)
    parts.push_back(fmt::format("bandwidth (beta, time per byte) {:+.0f}%", db * 100));
  const std::string attribution = parts.empty()
                                      ? "neither alpha nor beta changed beyond the threshold"
                                  : parts.size() == 2 ? parts[0] + " and " + parts[1]
                                                      : parts[0];
  return fmt::format("model baseline: {}\nmodel current:  {}\nchange: {}", describe(b), describe(c),
                     attribution);
}

}  // namespace

std::string render_compare_text(const CompareResult& result) {
  const CompareOptions& o = result.options;
  std::string out = "baseline: " + describe_inputs(result.baseline) +
                    "\ncurrent:  " + describe_inputs(result.current) + "\n";
  out += fmt::format(
      "rule: a size is slower when busbw (baseline time / current time, medians) drops by more "
      "than {:g}%;"
      " with >= 4 samples per side it must also differ by Mann-Whitney U (two-sided p < 0.05);"
      " with one record per side that states its 95% interval, lie outside both intervals\n",
      o.threshold * 100);
  out += o.min_size || o.max_size
             ? fmt::format("window: sizes {} .. {}\n", format_exact_size(o.min_size.value_or(0)),
                           o.max_size ? format_exact_size(*o.max_size) : "max")
             : "window: sizes where the baseline's busbw is at least half its peak\n";
  bool any_regression = false;
  for (const SeriesVerdict& v : result.series) {
    out += "\n" + v.name + "\n";
    if (!v.sizes.empty()) {
      out += statistic_line(v.statistic) + "\n";
      out += fmt::format("  {:>10}  {:>7}  {:>11}  {:>15}  {:>8}\n", "size", "samples",
                         "busbw ratio", "95% CI", "p");
    }
    std::vector<size_t> slower, slower_outside;
    for (const auto& s : v.sizes) {
      std::string ci = s.base_samples >= 2 && s.current_samples >= 2
                           ? fmt::format("{:.3f}..{:.3f}", s.ci_low, s.ci_high)
                           : "-";
      // A single record a side: its own interval in place of the bootstrap's.
      const auto half_width = [](const std::optional<double>& interval) {
        return interval ? fmt::format("+-{:.1f}%", *interval * 100) : std::string("-");
      };
      if (s.base_interval || s.current_interval)
        ci = half_width(s.base_interval) + "/" + half_width(s.current_interval);
      out += fmt::format(
          "{} {:>10}  {:>3}/{:<3}  {:>11.3f}  {:>15}  {:>8}{}{}{}\n", s.in_window ? "*" : " ",
          format_exact_size(s.size_bytes), s.base_samples, s.current_samples, s.busbw_ratio, ci,
          s.p_value ? fmt::format("{:.3g}", *s.p_value) : "-", s.slower ? "  slower" : "",
          s.within_intervals ? "  no change (inside both intervals)" : "",
          s.in_window ? "" : "  (outside window)");
      if (s.slower) (s.in_window ? slower : slower_outside).push_back(s.size_bytes);
    }
    if (v.cannot_judge.empty()) out += model_text(v, o.threshold) + "\n";
    if (!v.cannot_judge.empty()) {
      out += "verdict: cannot judge: " + v.cannot_judge + "\n";
    } else if (v.regression) {
      out += "verdict: REGRESSION at " + format_exact_sizes(slower) + "\n";
      any_regression = true;
    } else {
      out += "verdict: no regression in the window (* sizes)\n";
    }
    if (!slower_outside.empty())
      out += "note: slower outside the window at " + format_exact_sizes(slower_outside) + "\n";
  }
  for (const auto& name : result.only_in_current)
    out += "\nnote: only in the current results: " + name + "\n";
  const int code = compare_exit_code(result);
  out += fmt::format("\nsummary: {} (exit {})\n",
                     any_regression                 ? std::string("REGRESSION")
                     : !result.cannot_judge.empty() ? "cannot judge: " + result.cannot_judge
                     : code == kCompareCannotJudge  ? std::string("cannot judge")
                                                    : std::string("no regression"),
                     code);
  return out;
}

}  // namespace ccscope::reports
