// compare_runs: match, judge each size, summarise; see compare.h.
//
// Every figure is computed from times (busbw ratio = baseline time / current
// time for the same size and ranks), so OSU files, which carry no busbw, are
// compared as well. Several samples of one size (several files per side, or
// the `repeat` column of `bench --repeat K`) are pooled.
#include "ccscope/reports/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ccscope/reports/comparison_stats.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports {
namespace {

std::string opt(const std::optional<int>& v) { return v ? std::to_string(*v) : "?"; }

// How a series was measured: the values its records state for each aspect
// (an aspect a source does not state, such as nccl-tests' rotation, is left
// out). Times measured differently are not like with like.
struct Method {
  std::set<std::string> rotation, aggregate, graph, time_method;
};

void note_method(const LoadedRecord& r, Method& m) {
  if (r.rotated) m.rotation.insert(*r.rotated ? "on" : "off");
  if (r.aggregate_iterations) m.aggregate.insert(std::to_string(*r.aggregate_iterations));
  if (r.graph_launches) m.graph.insert(std::to_string(*r.graph_launches));
  if (!r.time_method.empty()) m.time_method.insert(printable(r.time_method));
}

std::string joined(const std::set<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : " and ") + v;
  return out;
}

// "" when both sides were measured alike (as far as both state it), else
// what differs: "buffer rotation: baseline off, current on; ...".
std::string method_difference(const Method& base, const Method& cur) {
  std::string out;
  auto aspect = [&](const char* what, const std::set<std::string>& b,
                    const std::set<std::string>& c) {
    if (b.empty() || c.empty() || (b == c && b.size() == 1)) return;
    out += fmt::format("{}{}: baseline {}, current {}", out.empty() ? "" : "; ", what, joined(b),
                       joined(c));
  };
  aspect("buffer rotation", base.rotation, cur.rotation);
  aspect("operations per timed iteration (-m)", base.aggregate, cur.aggregate);
  aspect("CUDA graph launches (-G)", base.graph, cur.graph);
  aspect("time method", base.time_method, cur.time_method);
  return out;
}

// Records of one series (everything but the size equal): size -> times.
struct Series {
  std::string name;
  std::string shape;  // the key without ranks and nodes
  std::optional<int> ranks, nodes;
  std::map<size_t, std::vector<double>> times;
  Method method;
};

std::map<std::string, Series> group(const std::vector<LoadedRun>& runs) {
  std::map<std::string, Series> out;
  for (const auto& run : runs)
    for (const auto& r : run.records) {
      if (!r.time_s || *r.time_s <= 0) continue;  // N/A in nccl-tests output
      // Nothing moved: no bandwidth to compare, and nccl-tests' rounding makes
      // several requested sizes (8 B, 32 B reduce-scatter) into one 0 B row each.
      if (r.size_bytes == 0) continue;
      std::string place = !r.in_place ? "" : *r.in_place ? "in-place" : "out-of-place";
      std::string shape =
          fmt::format("{} {} {} {} {}", r.collective, r.backend, r.dtype.empty() ? "?" : r.dtype,
                      r.op.empty() ? "?" : r.op, place);
      std::string key = fmt::format("{}, {} ranks, {} nodes", shape, opt(r.ranks), opt(r.nodes));
      Series& s = out[key];
      s.name = key;
      s.shape = shape;
      s.ranks = r.ranks;
      s.nodes = r.nodes;
      s.times[r.size_bytes].push_back(*r.time_s);
      note_method(r, s.method);
    }
  return out;
}

std::string size_text(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4 && std::fmod(v, 1024) == 0) v /= 1024, ++u;
  return fmt::format("{}{}{}", v, u ? " " : " ", units[u]);
}

std::string size_list(const std::vector<size_t>& sizes) {
  std::string out;
  for (size_t s : sizes) out += (out.empty() ? "" : ", ") + size_text(s);
  return out;
}

std::map<size_t, double> medians(const Series& s) {
  std::map<size_t, double> m;
  for (const auto& [size, t] : s.times) m[size] = median(t);
  return m;
}

std::optional<AlphaBetaFit> fit(const std::map<size_t, double>& med) {
  std::vector<double> sizes, times;
  for (const auto& [size, t] : med) sizes.push_back(static_cast<double>(size)), times.push_back(t);
  return fit_alpha_beta(sizes, times);
}

// Which of latency and bandwidth changed between the fitted models.
std::string model_text(const std::map<size_t, double>& base, const std::map<size_t, double>& cur,
                       double threshold, std::string& attribution) {
  auto b = fit(base), c = fit(cur);
  if (!b || !c) return "model: too few sizes to fit time = alpha + size * beta";
  auto describe = [](const AlphaBetaFit& f) {
    return fmt::format("alpha {:.2f} us, beta {:.4g} ns/B ({:.3g} GB/s), max residual {:.0f}%",
                       f.alpha_s * 1e6, f.beta_s_per_B * 1e9,
                       f.beta_s_per_B > 0 ? 1e-9 / f.beta_s_per_B : 0, f.max_abs_residual * 100);
  };
  auto change = [](double now, double before) { return before > 0 ? now / before - 1 : 0; };
  const double da = change(c->alpha_s, b->alpha_s), db = change(c->beta_s_per_B, b->beta_s_per_B);
  std::vector<std::string> parts;
  if (da > threshold) parts.push_back(fmt::format("latency (alpha) {:+.0f}%", da * 100));
  if (db > threshold)
    parts.push_back(fmt::format("bandwidth (beta, time per byte) {:+.0f}%", db * 100));
  attribution = parts.empty()       ? "neither alpha nor beta changed beyond the threshold"
                : parts.size() == 2 ? parts[0] + " and " + parts[1]
                                    : parts[0];
  return fmt::format("model baseline: {}\nmodel current:  {}", describe(*b), describe(*c));
}

SeriesVerdict judge(const Series& base, const Series* cur,
                    const std::map<std::string, Series>& current, const CompareOptions& o) {
  SeriesVerdict v;
  v.name = base.name;
  if (!cur) {
    for (const auto& [key, other] : current)
      if (other.shape == base.shape) {
        v.cannot_judge =
            fmt::format("different rank counts: baseline {} ranks on {} nodes, current {} on {}",
                        opt(base.ranks), opt(base.nodes), opt(other.ranks), opt(other.nodes));
        return v;
      }
    v.cannot_judge = "the current results have no records of this series";
    return v;
  }
  if (std::string differs = method_difference(base.method, cur->method); !differs.empty()) {
    v.cannot_judge = "measured differently (" + differs +
                     "); compare runs made with the same options, e.g. rerun the baseline";
    return v;
  }
  const auto base_med = medians(base), cur_med = medians(*cur);
  double peak = 0;
  for (const auto& [size, t] : base_med) peak = std::max(peak, static_cast<double>(size) / t);
  std::vector<size_t> missing;
  for (const auto& [size, t] : base_med) {
    bool in_window = o.min_size || o.max_size
                         ? size >= o.min_size.value_or(0) && size <= o.max_size.value_or(SIZE_MAX)
                         : static_cast<double>(size) / t >= peak / 2;
    auto it = cur->times.find(size);
    if (it == cur->times.end()) {
      if (in_window) missing.push_back(size);
      continue;
    }
    const auto& b = base.times.at(size);
    const auto& c = it->second;
    SizeVerdict s;
    s.size_bytes = size;
    s.in_window = in_window;
    s.base_samples = b.size();
    s.current_samples = c.size();
    s.busbw_ratio = median(b) / median(c);
    s.ci_low = s.ci_high = s.busbw_ratio;
    if (b.size() >= 2 && c.size() >= 2) {
      RatioInterval ci = median_ratio_interval(b, c);
      s.ci_low = ci.low;
      s.ci_high = ci.high;
    }
    s.slower = s.busbw_ratio < 1 - o.threshold;
    if (b.size() >= 4 && c.size() >= 4) {
      s.p_value = mann_whitney_u(b, c).p_value;
      s.slower = s.slower && *s.p_value < 0.05;
    }
    v.sizes.push_back(s);
  }
  if (!missing.empty()) {
    v.cannot_judge = "the current results lack sizes " + size_list(missing);
    return v;
  }
  if (std::none_of(v.sizes.begin(), v.sizes.end(),
                   [](const SizeVerdict& s) { return s.in_window; })) {
    v.cannot_judge = "no size of the baseline lies in the chosen size window";
    return v;
  }
  for (const auto& s : v.sizes) v.regression |= s.in_window && s.slower;
  std::string attribution;
  v.model = model_text(base_med, cur_med, o.threshold, attribution);
  v.model += "\nchange: " + attribution;
  return v;
}

std::string describe_inputs(const std::vector<LoadedRun>& runs) {
  std::string out;
  size_t records = 0;
  for (const auto& r : runs)
    out += (out.empty() ? "" : ", ") + printable(r.path), records += r.records.size();
  return fmt::format("{} ({} records)", out, records);
}

}  // namespace

CompareResult compare_runs(const std::vector<LoadedRun>& baseline,
                           const std::vector<LoadedRun>& current, const CompareOptions& o) {
  CompareResult result;
  const auto base = group(baseline), cur = group(current);
  std::string& out = result.report;
  out +=
      "baseline: " + describe_inputs(baseline) + "\ncurrent:  " + describe_inputs(current) + "\n";
  out += fmt::format(
      "rule: a size is slower when busbw (baseline time / current time, medians) drops by more "
      "than {:g}%;"
      " with >= 4 samples per side it must also differ by Mann-Whitney U (two-sided p < 0.05)\n",
      o.threshold * 100);
  out += o.min_size || o.max_size
             ? fmt::format("window: sizes {} .. {}\n", size_text(o.min_size.value_or(0)),
                           o.max_size ? size_text(*o.max_size) : "max")
             : "window: sizes where the baseline's busbw is at least half its peak\n";
  bool any_regression = false, any_unjudged = base.empty();
  for (const auto& [key, series] : base) {
    auto it = cur.find(key);
    SeriesVerdict v = judge(series, it == cur.end() ? nullptr : &it->second, cur, o);
    out += "\n" + v.name + "\n";
    if (!v.sizes.empty())
      out += fmt::format("  {:>10}  {:>7}  {:>11}  {:>15}  {:>8}\n", "size", "samples",
                         "busbw ratio", "95% CI", "p");
    std::vector<size_t> slower, slower_outside;
    for (const auto& s : v.sizes) {
      std::string ci = s.base_samples >= 2 && s.current_samples >= 2
                           ? fmt::format("{:.3f}..{:.3f}", s.ci_low, s.ci_high)
                           : "-";
      out += fmt::format("{} {:>10}  {:>3}/{:<3}  {:>11.3f}  {:>15}  {:>8}{}{}\n",
                         s.in_window ? "*" : " ", size_text(s.size_bytes), s.base_samples,
                         s.current_samples, s.busbw_ratio, ci,
                         s.p_value ? fmt::format("{:.3g}", *s.p_value) : "-",
                         s.slower ? "  slower" : "", s.in_window ? "" : "  (outside window)");
      if (s.slower) (s.in_window ? slower : slower_outside).push_back(s.size_bytes);
    }
    if (!v.model.empty()) out += v.model + "\n";
    if (!v.cannot_judge.empty()) {
      out += "verdict: cannot judge: " + v.cannot_judge + "\n";
      any_unjudged = true;
    } else if (v.regression) {
      out += "verdict: REGRESSION at " + size_list(slower) + "\n";
      any_regression = true;
    } else {
      out += "verdict: no regression in the window (* sizes)\n";
    }
    if (!slower_outside.empty())
      out += "note: slower outside the window at " + size_list(slower_outside) + "\n";
    result.series.push_back(std::move(v));
  }
  for (const auto& [key, series] : cur)
    if (!base.count(key)) out += "\nnote: only in the current results: " + key + "\n";
  result.exit_code = any_regression ? kCompareRegression
                     : any_unjudged ? kCompareCannotJudge
                                    : kCompareOk;
  out += fmt::format(
      "\nsummary: {} (exit {})\n",
      any_regression ? "REGRESSION"
      : any_unjudged
          ? (base.empty() ? "cannot judge: no baseline records with a time" : "cannot judge")
          : "no regression",
      result.exit_code);
  return result;
}

}  // namespace ccscope::reports
