// compare_runs: match, choose the statistic, judge each size; see compare.h.
// (The text is render_compare_text's, compare_text.cpp.)
//
// Every figure is computed from times (busbw ratio = baseline time / current
// time for the same size and ranks), so OSU files, which carry no busbw, are
// compared as well. Several samples of one size (several files per side, or
// the `repeat` column of `bench --repeat K`) are pooled.
#include "ccscope/reports/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "ccscope/common/sizes.h"
#include "ccscope/common/statistics.h"
#include "ccscope/reports/comparison_stats.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports {
namespace {

std::string opt(const std::optional<int>& v) { return v ? std::to_string(*v) : "?"; }

// The statistics over ranks a record can carry, in the order a choice prefers
// them when neither side's time_s decides.
constexpr std::array<const char*, 4> kStatistics = {"max", "avg", "min", "rank0"};

// How a series was measured: the values its records state for each aspect
// (an aspect a source does not state, such as nccl-tests' rotation, is left
// out). Times measured differently are not like with like.
struct Method {
  std::set<std::string> rotation, aggregate, graph, time_method;
};

// How a record's time was taken, as compare tells methods apart. nccl-tests'
// fixed -n and the first adaptive records (ccscope before the median: its
// batches' mean) are the same statistic, a mean per completed iteration of the
// host wall clock: one method, so that those runs are judged against each
// other. Adaptive records since report the median batch ("the median batch" in
// their time method): on a loaded host it sits below the mean, so a median is
// judged only against a median. -C 1's issue time and -G's graph launches are
// methods of their own.
std::string compared_time_method(const std::string& time_method) {
  static constexpr const char* kAdaptive = "host wall clock over timed batches + one sync each";
  static constexpr const char* kFixed =
      "host wall clock over -n iterations + one sync (nccl-tests)";
  const bool adaptive = time_method.rfind(kAdaptive, 0) == 0;
  if (adaptive && time_method.find("the median batch") != std::string::npos)
    return "the median of timed batches (adaptive sampling)";
  if (adaptive || time_method == kFixed)
    return "the mean per completed iteration (fixed -n, or adaptive sampling before ccscope "
           "reported the median)";
  return printable(time_method);
}

void note_method(const LoadedRecord& r, Method& m) {
  if (r.rotated) m.rotation.insert(*r.rotated ? "on" : "off");
  if (r.aggregate_iterations) m.aggregate.insert(std::to_string(*r.aggregate_iterations));
  if (r.graph_launches) m.graph.insert(std::to_string(*r.graph_launches));
  if (!r.time_method.empty()) m.time_method.insert(compared_time_method(r.time_method));
}

std::string joined(const std::set<std::string>& values, const char* separator = " and ") {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : separator) + v;
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

// One measurement's times: time_s (of the statistic it states) and the
// min/avg/max over ranks where the source has them.
struct Sample {
  double time_s = 0;
  std::string time_statistic;  // "" unstated
  std::optional<double> min_s, avg_s, max_s;
  std::optional<double> interval;  // time_s's 95% half-width, a fraction of it
};

std::optional<double> positive(const std::optional<double>& v) {
  return v && *v > 0 && std::isfinite(*v) ? v : std::nullopt;
}

// The sample's time by `statistic` ("" = time_s of an unstated statistic),
// and the field it came from; nullopt when the sample lacks it.
std::optional<double> time_by(const Sample& s, const std::string& statistic,
                              std::string* field = nullptr) {
  auto from = [&](const char* name, std::optional<double> v) {
    if (v && field) *field = name;
    return v;
  };
  if (s.time_statistic == statistic) return from("time_s", s.time_s);
  if (statistic == "min") return from("time_min_s", s.min_s);
  if (statistic == "avg") return from("time_avg_s", s.avg_s);
  if (statistic == "max") return from("time_max_s", s.max_s);
  return std::nullopt;
}

// Records of one series (everything but the size equal): size -> samples.
struct Series {
  std::string name;
  std::string shape;  // the key without ranks and nodes
  std::optional<int> ranks, nodes;
  std::map<size_t, std::vector<Sample>> samples;
  Method method;
  std::set<std::string> time_s_statistics;  // what time_s is in its records ("" unstated)
  std::set<std::string> tools;              // "ccscope", "nccl-tests", "OSU"
};

std::string tool_of(const std::string& format) {
  if (format.rfind("ccscope", 0) == 0) return "ccscope";
  if (format.rfind("nccl-tests", 0) == 0) return "nccl-tests";
  if (format == "osu") return "OSU";
  return format;
}

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
      const auto interval = positive(r.ci_half_width_percent);
      s.samples[r.size_bytes].push_back(
          Sample{*r.time_s, r.time_statistic, positive(r.time_min_s), positive(r.time_avg_s),
                 positive(r.time_max_s),
                 interval ? std::optional<double>(*interval / 100) : std::nullopt});
      s.time_s_statistics.insert(r.time_statistic);
      s.tools.insert(tool_of(run.format));
      note_method(r, s.method);
    }
  return out;
}

// Whether every sample of the series has `statistic`, and from which field
// (one name when all agree, else "time_s or time_avg_s").
bool has_statistic(const Series& s, const std::string& statistic, std::string* fields = nullptr) {
  std::set<std::string> used;
  for (const auto& [size, samples] : s.samples)
    for (const auto& sample : samples) {
      std::string field;
      if (!time_by(sample, statistic, &field)) return false;
      used.insert(field);
    }
  if (fields) *fields = joined(used, " or ");
  return true;
}

// The single statistic time_s is on this side, or "" (unstated or mixed).
std::string uniform_time_s(const Series& s) {
  return s.time_s_statistics.size() == 1 ? *s.time_s_statistics.begin() : "";
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + ("'" + items[i] + "'");
  return out;
}

// "has only 'avg' (nccl-tests)", "has 'max', 'avg' and 'min' (ccscope)",
// "states no statistic for its times (ccscope)".
std::string statistics_held(const Series& s) {
  std::vector<std::string> held;
  for (const char* statistic : kStatistics)
    if (has_statistic(s, statistic)) held.push_back(statistic);
  const std::string tools = " (" + joined(s.tools, ", ") + ")";
  if (held.empty()) return "states no statistic over ranks for its times" + tools;
  return (held.size() == 1 ? "has only " : "has ") + quoted_list(held) + tools;
}

// The statistic both sides have: time_s's when both sides' time_s is the same
// known statistic; else the baseline's time_s statistic, the current's, then
// max, avg, min, rank 0, the first both hold. Both sides unstated: time_s
// against time_s. Otherwise nullopt (and `why` says what each side has).
std::optional<StatisticChoice> choose_statistic(const Series& base, const Series& cur,
                                                std::string& why) {
  StatisticChoice c;
  c.base_time_s = joined(base.time_s_statistics);
  c.current_time_s = joined(cur.time_s_statistics);
  const std::string b = uniform_time_s(base), k = uniform_time_s(cur);
  std::vector<std::string> order;
  if (!b.empty()) order.push_back(b);
  if (!k.empty()) order.push_back(k);
  order.insert(order.end(), kStatistics.begin(), kStatistics.end());
  for (const auto& statistic : order)
    if (has_statistic(base, statistic, &c.base_field) &&
        has_statistic(cur, statistic, &c.current_field)) {
      c.statistic = statistic;
      return c;
    }
  const std::set<std::string> unstated{""};
  if (base.time_s_statistics == unstated && cur.time_s_statistics == unstated) {
    c.base_field = c.current_field = "time_s";
    return c;  // neither says: as alike as the files allow
  }
  why = "no common time statistic over ranks: baseline " + statistics_held(base) + ", current " +
        statistics_held(cur);
  return std::nullopt;
}

// Each size's times by the chosen statistic.
std::map<size_t, std::vector<double>> times_by(const Series& s, const std::string& statistic) {
  std::map<size_t, std::vector<double>> out;
  for (const auto& [size, samples] : s.samples)
    for (const auto& sample : samples) out[size].push_back(time_by(sample, statistic).value());
  return out;
}

std::map<size_t, double> medians(const std::map<size_t, std::vector<double>>& times) {
  std::map<size_t, double> m;
  for (const auto& [size, t] : times) m[size] = median(t);
  return m;
}

std::optional<AlphaBetaFit> fit(const std::map<size_t, double>& med) {
  std::vector<double> sizes, times;
  for (const auto& [size, t] : med) sizes.push_back(static_cast<double>(size)), times.push_back(t);
  return fit_alpha_beta(sizes, times);
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
  std::string why;
  const auto choice = choose_statistic(base, *cur, why);
  if (!choice) {
    v.cannot_judge = why;
    return v;
  }
  v.statistic = *choice;
  const auto base_times = times_by(base, choice->statistic);
  const auto cur_times = times_by(*cur, choice->statistic);
  const auto base_med = medians(base_times), cur_med = medians(cur_times);
  double peak = 0;
  for (const auto& [size, t] : base_med) peak = std::max(peak, static_cast<double>(size) / t);
  std::vector<size_t> missing;
  for (const auto& [size, t] : base_med) {
    bool in_window = o.min_size || o.max_size
                         ? size >= o.min_size.value_or(0) && size <= o.max_size.value_or(SIZE_MAX)
                         : static_cast<double>(size) / t >= peak / 2;
    auto it = cur_times.find(size);
    if (it == cur_times.end()) {
      if (in_window) missing.push_back(size);
      continue;
    }
    const auto& b = base_times.at(size);
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
    // One record a side, each with the interval of its time_s: a difference
    // inside both intervals is no change.
    const auto& base_samples = base.samples.at(size);
    const auto& cur_samples = cur->samples.at(size);
    // With one interval (an adaptive run against nccl-tests' output, which
    // states none) the threshold rule alone judges; the interval is shown.
    if (b.size() == 1 && c.size() == 1 && choice->base_field == "time_s" &&
        choice->current_field == "time_s") {
      s.base_interval = base_samples[0].interval;
      s.current_interval = cur_samples[0].interval;
      if (s.base_interval && s.current_interval) {
        const double difference = std::abs(c[0] - b[0]);
        s.within_intervals =
            difference <= *s.base_interval * b[0] && difference <= *s.current_interval * c[0];
        s.slower = s.slower && !s.within_intervals;
      }
    }
    if (b.size() >= 4 && c.size() >= 4) {
      s.p_value = mann_whitney_u(b, c).p_value;
      s.slower = s.slower && *s.p_value < 0.05;
    }
    v.sizes.push_back(s);
  }
  if (!missing.empty()) {
    v.cannot_judge = "the current results lack sizes " + format_exact_sizes(missing);
    return v;
  }
  if (std::none_of(v.sizes.begin(), v.sizes.end(),
                   [](const SizeVerdict& s) { return s.in_window; })) {
    v.cannot_judge = "no size of the baseline lies in the chosen size window";
    return v;
  }
  for (const auto& s : v.sizes) v.regression |= s.in_window && s.slower;
  v.base_model = fit(base_med);
  v.current_model = fit(cur_med);
  return v;
}

std::vector<CompareInput> inputs(const std::vector<LoadedRun>& runs) {
  std::vector<CompareInput> out;
  for (const auto& r : runs) out.push_back({r.path, r.format, r.records.size()});
  return out;
}

}  // namespace

std::string describe_statistic(const std::string& token) {
  if (token == "rank0") return "rank 0's";
  if (token.empty()) return "unstated";
  return token + " over ranks";
}

CompareResult compare_runs(const std::vector<LoadedRun>& baseline,
                           const std::vector<LoadedRun>& current, const CompareOptions& o) {
  CompareResult result;
  result.options = o;
  result.baseline = inputs(baseline);
  result.current = inputs(current);
  const auto base = group(baseline), cur = group(current);
  if (base.empty()) {
    result.cannot_judge = "no baseline records with a time";
    return result;
  }
  if (cur.empty()) {
    result.cannot_judge =
        "no current records with a time (an empty or interrupted run?); rerun the current side";
    return result;
  }
  for (const auto& [key, series] : base) {
    auto it = cur.find(key);
    result.series.push_back(judge(series, it == cur.end() ? nullptr : &it->second, cur, o));
  }
  for (const auto& [key, series] : cur)
    if (!base.count(key)) result.only_in_current.push_back(key);
  return result;
}

int compare_exit_code(const CompareResult& result) {
  bool any_unjudged = !result.cannot_judge.empty() || result.series.empty();
  for (const auto& v : result.series) {
    if (v.regression) return kCompareRegression;
    any_unjudged |= !v.cannot_judge.empty();
  }
  return any_unjudged ? kCompareCannotJudge : kCompareOk;
}

}  // namespace ccscope::reports
