// Grouping of loaded records into the panels and series both reports draw.
#include "report_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "ccscope/common/statistics.h"

namespace ccscope::reports::report_model {
namespace {

// Out-of-place first, then in-place, then unknown.
int variant_order(const std::optional<bool>& in_place) {
  return in_place ? (*in_place ? 1 : 0) : 2;
}

}  // namespace

std::vector<Panel> build_panels(const std::vector<LoadedRun>& runs) {
  std::vector<std::string> order;  // collectives by first appearance
  // (collective, run, variant) -> size -> busbw samples
  std::map<std::tuple<std::string, size_t, int>, std::map<size_t, std::vector<double>>> samples,
      times;
  std::map<std::tuple<std::string, size_t, int>, std::map<size_t, double>> intervals;
  std::map<std::tuple<std::string, size_t, int>, Series> series;
  for (size_t r = 0; r < runs.size(); ++r) {
    for (const LoadedRecord& rec : runs[r].records) {
      if (std::find(order.begin(), order.end(), rec.collective) == order.end())
        order.push_back(rec.collective);
      auto key = std::make_tuple(rec.collective, r, variant_order(rec.in_place));
      Series& s = series[key];
      s.run = r;
      s.in_place = rec.in_place;
      if (rec.wrong) {
        s.wrong += *rec.wrong;
        s.any_wrong_known = true;
      }
      if (rec.busbw_GBps && std::isfinite(*rec.busbw_GBps)) {
        samples[key][rec.size_bytes].push_back(*rec.busbw_GBps);
        if (rec.time_s && *rec.time_s > 0) times[key][rec.size_bytes].push_back(*rec.time_s);
        if (rec.ci_half_width_percent && std::isfinite(*rec.ci_half_width_percent)) {
          double& widest = intervals[key][rec.size_bytes];
          widest = std::max(widest, *rec.ci_half_width_percent);
        }
      }
    }
  }
  std::vector<Panel> panels;
  for (const std::string& collective : order) {
    Panel panel{collective, {}};
    for (auto& [key, s] : series) {
      if (std::get<0>(key) != collective) continue;
      for (auto& [size, values] : samples[key]) {
        const auto& t = times[key][size];
        s.points.push_back({size, median(values), static_cast<int>(values.size()),
                            t.empty() ? 0.0 : median(t), intervals[key][size]});
      }
      panel.series.push_back(s);
    }
    panels.push_back(std::move(panel));
  }
  return panels;
}

std::vector<Scaling> build_scaling(const std::vector<LoadedRun>& runs,
                                   const std::vector<Panel>& panels) {
  std::vector<Scaling> out;
  for (const Panel& panel : panels) {
    // One variant per collective: out-of-place when present (it comes first).
    if (panel.series.empty()) continue;
    const std::optional<bool> variant = panel.series.front().in_place;
    std::map<int, const Series*> by_ranks;  // first run of each rank count
    for (const Series& s : panel.series) {
      const int ranks = run_ranks(runs[s.run]);
      // busbw of one rank is 0 by nccl-tests' definition: no reference for a ratio.
      if (s.in_place == variant && ranks > 1 && !s.points.empty()) by_ranks.emplace(ranks, &s);
    }
    if (by_ranks.size() < 2) continue;
    std::set<size_t> common;
    for (const Point& p : by_ranks.begin()->second->points) common.insert(p.size_bytes);
    for (const auto& [ranks, s] : by_ranks) {
      std::set<size_t> here;
      for (const Point& p : s->points)
        if (common.count(p.size_bytes)) here.insert(p.size_bytes);
      common = std::move(here);
    }
    Scaling scaling{panel.collective, variant, common.empty() ? 0 : *common.rbegin(), {}};
    if (common.empty()) {  // reported as such, with no rows
      out.push_back(std::move(scaling));
      continue;
    }
    for (const auto& [ranks, s] : by_ranks) {
      const auto it = std::find_if(s->points.begin(), s->points.end(), [&](const Point& p) {
        return p.size_bytes == scaling.size_bytes;
      });
      scaling.rows.push_back({s->run, ranks, it->busbw_GBps, 0, 0});
    }
    const auto relate = [](std::vector<ScalingRow>& rows) {
      const ScalingRow ref = rows.front();
      for (ScalingRow& row : rows) {
        row.efficiency = ref.busbw_GBps > 0 ? row.busbw_GBps / ref.busbw_GBps : 0;
        row.speedup = row.efficiency * row.ranks / ref.ranks;
      }
    };
    relate(scaling.rows);
    for (size_t bucket : kTrainingBucketSizes) {
      BucketScaling at{bucket, {}};
      for (const auto& [ranks, s] : by_ranks)
        if (const auto busbw = interpolate_busbw(s->points, bucket))
          at.rows.push_back({s->run, ranks, *busbw, 0, 0});
      if (at.rows.size() < 2) continue;
      relate(at.rows);
      scaling.at_buckets.push_back(std::move(at));
    }
    out.push_back(std::move(scaling));
  }
  return out;
}

std::optional<double> interpolate_busbw(const std::vector<Point>& points, size_t size_bytes) {
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].size_bytes == size_bytes) return points[i].busbw_GBps;
    if (i + 1 < points.size() && points[i].size_bytes < size_bytes &&
        size_bytes < points[i + 1].size_bytes && points[i].size_bytes > 0) {
      const double x0 = std::log2(static_cast<double>(points[i].size_bytes));
      const double x1 = std::log2(static_cast<double>(points[i + 1].size_bytes));
      const double w = (std::log2(static_cast<double>(size_bytes)) - x0) / (x1 - x0);
      return points[i].busbw_GBps + w * (points[i + 1].busbw_GBps - points[i].busbw_GBps);
    }
  }
  return std::nullopt;
}

int run_ranks(const LoadedRun& run) {
  if (run.metadata.ranks > 0) return run.metadata.ranks;
  for (const LoadedRecord& rec : run.records)
    if (rec.ranks) return *rec.ranks;
  return 0;
}

int run_nodes(const LoadedRun& run) {
  if (run.metadata.nodes > 0) return run.metadata.nodes;
  for (const LoadedRecord& rec : run.records)
    if (rec.nodes) return *rec.nodes;
  return 0;
}

std::vector<std::string> run_names(const std::vector<LoadedRun>& runs) {
  std::vector<std::string> names;
  std::map<std::string, int> count;
  for (const LoadedRun& run : runs) {
    std::string name = std::filesystem::path(run.path).filename().string();
    names.push_back(name.empty() ? run.path : name);
    ++count[names.back()];
  }
  for (size_t i = 0; i < names.size(); ++i)
    if (count[names[i]] > 1) names[i] = fmt::format("#{} {}", i + 1, names[i]);
  return names;
}

std::string host_set(const RunMetadata& metadata) {
  constexpr size_t kShown = 3;
  std::vector<std::string> hosts;
  for (const std::string& h : metadata.hosts)
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  std::string out;
  for (size_t i = 0; i < hosts.size() && i < kShown; ++i) out += (i ? ", " : "") + hosts[i];
  if (hosts.size() > kShown) out += fmt::format(" and {} more", hosts.size() - kShown);
  return out;
}

std::string in_place_name(const std::optional<bool>& in_place) {
  return in_place ? (*in_place ? "in-place" : "out-of-place") : "";
}

bool is_bidi_control(uint32_t cp) {
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

std::string show_bidi_controls(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    // Every one of them is a 3-byte UTF-8 sequence (lead byte 0xD8 for U+061C, else 0xE2).
    const auto b = [&](size_t k) { return static_cast<unsigned char>(in[i + k]); };
    if (i + 1 < in.size() && b(0) == 0xD8 && b(1) == 0x9C) {
      out += "\\u061c";
      ++i;
      continue;
    }
    if (i + 2 < in.size() && b(0) == 0xE2 && (b(1) & 0xC0) == 0x80 && (b(2) & 0xC0) == 0x80) {
      const uint32_t cp = ((b(0) & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
      if (is_bidi_control(cp)) {
        out += fmt::format("\\u{:04x}", cp);
        i += 2;
        continue;
      }
    }
    out += in[i];
  }
  return out;
}

std::string format_GBps(double value) { return fmt::format("{:.2f}", value); }

}  // namespace ccscope::reports::report_model
