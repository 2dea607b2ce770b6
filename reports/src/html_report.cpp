// The HTML report: one page, inline CSS and SVG only (no script, no fonts, no
// URL), well-formed enough to parse as XML. Every string that came from a
// results file is escaped by esc(): hostnames, environment values, command
// lines and paths are untrusted.
#include "ccscope/reports/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string_view>

#include "ccscope/reports/comparison_stats.h"
#include "diag_model.h"
#include "report_model.h"
#include "training_model.h"

namespace ccscope::reports {
namespace {

using namespace report_model;

// Valid UTF-8 with & < > " ' escaped; bytes that are not valid UTF-8 and
// control characters XML forbids become U+FFFD.
std::string esc(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  const auto* s = reinterpret_cast<const unsigned char*>(in.data());
  const size_t n = in.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
            out += "\xEF\xBF\xBD";
          else
            out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // Multi-byte sequence: lead byte, length, and the smallest code point it may encode.
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (c >= 0xC2 && c <= 0xDF)
      len = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
      len = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
      len = 4, cp = c & 0x07, min = 0x10000;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (s[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) && cp != 0xFFFE &&
         cp != 0xFFFF;
    if (ok && is_bidi_control(cp)) {  // would reorder the text around it: shown, not obeyed
      out += fmt::format("\\u{:04x}", cp);
      i += len;
    } else if (ok) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// An element id from untrusted text: a-z, 0-9 and '-' kept, every other byte
// written as _hh, so that ids are valid, carry no markup and stay distinct.
std::string element_id(std::string_view prefix, std::string_view name) {
  std::string id(prefix);
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || c == '-')
      id += c;
    else
      id += fmt::format("_{:02x}", u);
  }
  return id;
}

std::string or_absent(const std::string& s) { return s.empty() ? "\xE2\x80\x94" : esc(s); }
std::string or_absent(int v) { return v > 0 ? std::to_string(v) : "\xE2\x80\x94"; }

// Tableau 10: distinguishable, also in grey-scale print; repeats after 10 runs.
const char* color(size_t run) {
  static const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return kPalette[run % std::size(kPalette)];
}

// A round axis step (1, 2 or 5 x 10^k) giving about `ticks` ticks up to `max`.
double nice_step(double max, int ticks) {
  const double raw = max / ticks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

std::string tick_label(double value, double step) {
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  return fmt::format("{:.{}f}", value, decimals);
}

// An x-y chart in SVG; x is either log2 (sizes) or linear (rank counts, steps).
struct Frame {
  static constexpr double kWidth = 760, kLeft = 72, kRight = 24, kTop = 34, kPlotHeight = 260;
  double x0, x1, y_max;  // data range
  bool log2_x;
  double y_min = 0;  // the y axis starts there (a multiple of its tick step)
  double px(double x) const {
    const double v = log2_x ? std::log2(x) : x;
    return kLeft + (v - x0) / (x1 - x0) * (kWidth - kLeft - kRight);
  }
  double py(double y) const {
    return kTop + kPlotHeight - (y - y_min) / (y_max - y_min) * kPlotHeight;
  }
};

// Grid, axes, tick labels, axis titles.
// `y_label` names a y tick (default: its value at the step's decimals).
void draw_axes(std::string& o, const Frame& f,
               const std::vector<std::pair<double, std::string>>& x_ticks, double y_step,
               const std::string& x_title, const std::string& y_title,
               const std::function<std::string(double)>& y_label = {}) {
  const double bottom = Frame::kTop + Frame::kPlotHeight, right = Frame::kWidth - Frame::kRight;
  o += "<g class=\"grid\">\n";
  for (double y = f.y_min; y <= f.y_max * (1 + 1e-9); y += y_step)
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>\n",
                     Frame::kLeft, f.py(y), right, f.py(y));
  for (const auto& [x, label] : x_ticks)
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>\n", f.px(x),
                     Frame::kTop, f.px(x), bottom);
  o += "</g>\n<g class=\"axes\">\n";
  o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\"/>\n",
                   Frame::kLeft, bottom, right);
  o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>\n",
                   Frame::kLeft, Frame::kTop, bottom);
  for (double y = f.y_min; y <= f.y_max * (1 + 1e-9); y += y_step)
    o += fmt::format("<text class=\"y-tick\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                     Frame::kLeft - 6, f.py(y) + 4,
                     y_label ? esc(y_label(y)) : tick_label(y, y_step));
  for (const auto& [x, label] : x_ticks)
    o += fmt::format("<text class=\"x-tick\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", f.px(x),
                     bottom + 16, esc(label));
  o += fmt::format("<text class=\"x-title\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                   (Frame::kLeft + right) / 2, bottom + 36, esc(x_title));
  o += fmt::format(
      "<text class=\"y-title\" x=\"0\" y=\"0\" transform=\"translate(16 {:.1f}) "
      "rotate(-90)\">{}</text>\n",
      Frame::kTop + Frame::kPlotHeight / 2, esc(y_title));
  o += "</g>\n";
}

struct LegendEntry {
  std::string label;
  const char* color;
  bool dashed;
};

// A series of a chart (busbw or time): its legend entry (the run's colour,
// dashed in place) and the opening of its group, closed by the caller.
const LegendEntry& open_series(std::string& o, std::vector<LegendEntry>& legend,
                               const std::string& label, const Series& s) {
  legend.push_back({label, color(s.run), s.in_place.value_or(false)});
  o += fmt::format("<g class=\"series run-{} {}\">\n<title>{}</title>\n", s.run,
                   s.in_place ? in_place_name(s.in_place) : "variant-unknown", esc(label));
  return legend.back();
}

// The line through a series' points ("x,y x,y ...").
std::string series_line(const LegendEntry& series, const std::string& points) {
  return fmt::format(
      "<polyline class=\"series-line\" fill=\"none\" stroke=\"{}\"{} points=\"{}\"/>\n",
      series.color, series.dashed ? " stroke-dasharray=\"6 3\"" : "", points);
}

void draw_legend(std::string& o, const std::vector<LegendEntry>& entries) {
  const double top = Frame::kTop + Frame::kPlotHeight + 56;
  o += "<g class=\"legend\">\n";
  for (size_t i = 0; i < entries.size(); ++i) {
    const double y = top + 18.0 * i;
    o += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
        "stroke-width=\"2\"{}/>\n",
        Frame::kLeft, y, Frame::kLeft + 28, y, entries[i].color,
        entries[i].dashed ? " stroke-dasharray=\"6 3\"" : "");
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", Frame::kLeft + 36, y + 4,
                     esc(entries[i].label));
  }
  o += "</g>\n";
}

double chart_height(size_t legend_entries) {
  return Frame::kTop + Frame::kPlotHeight + 56 + 18.0 * legend_entries + 4;
}

std::string svg_open(const std::string& cls, double height, const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{}\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" role=\"img\">\n<title>{}</title>\n",
      cls, Frame::kWidth, height, Frame::kWidth, height, esc(title));
}

std::string series_label(const std::vector<LoadedRun>& runs, const std::vector<std::string>& names,
                         const Series& s) {
  const LoadedRun& run = runs[s.run];
  std::string label = names[s.run];
  const int ranks = run_ranks(run), nodes = run_nodes(run);
  std::string where;
  if (ranks > 0) where += fmt::format("{} rank{}", ranks, ranks == 1 ? "" : "s");
  if (nodes > 0)
    where += fmt::format("{}{} node{}", where.empty() ? "" : ", ", nodes, nodes == 1 ? "" : "s");
  const std::string hosts = host_set(run.metadata);
  if (!hosts.empty()) where += (where.empty() ? "" : ": ") + hosts;
  if (!where.empty()) label += " (" + where + ")";
  if (s.in_place) label += std::string(", ") + in_place_name(s.in_place);
  return label;
}

// The log2 size axis from `lo` to `hi` bytes: its exponents and labelled ticks.
std::vector<std::pair<double, std::string>> size_ticks(size_t lo, size_t hi, int& e0, int& e1) {
  e0 = static_cast<int>(std::floor(std::log2(static_cast<double>(lo))));
  e1 = static_cast<int>(std::ceil(std::log2(static_cast<double>(hi))));
  if (e1 == e0) ++e1;
  // Label every k-th power of two (k = 1, 2, 5 or 10: 1 KiB, 1 MiB, 1 GiB stay
  // labelled) so that at most ~10 labels show, and both ends unless crowded.
  int k = 1;
  while ((e1 - e0) / k > 10) k = k == 1 ? 2 : k == 2 ? 5 : 10;
  std::vector<std::pair<double, std::string>> ticks;
  for (int e = e0; e <= e1; ++e)
    if (e % k == 0 || (e == e0 && e % k <= k - 2) || (e == e1 && e % k >= 2))
      ticks.push_back({std::ldexp(1.0, e), e < 64 ? format_size(size_t{1} << e)  // size_t's range
                                                  : fmt::format("2^{} B", e)});
  return ticks;
}

// A vertical error bar from value x (1 - share) to value x (1 + share), clipped to the frame.
std::string error_bar(const Frame& f, double x, double low, double high, const char* c) {
  const double top = f.py(std::min(high, f.y_max)), bottom = f.py(std::max(low, f.y_min));
  return fmt::format(
      "<line class=\"error-bar\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
      "stroke=\"{3}\"/>\n",
      x, top, bottom, c);
}

// busbw vs message size: log2 x axis with binary size labels, one series per
// (run, variant): a polyline and one circle per size.
void busbw_chart(std::string& o, const std::vector<LoadedRun>& runs,
                 const std::vector<std::string>& names, const Panel& panel) {
  size_t lo = SIZE_MAX, hi = 0;
  double y_max = 0;
  for (const Series& s : panel.series)
    for (const Point& p : s.points) {
      lo = std::min(lo, std::max<size_t>(p.size_bytes, 1));
      hi = std::max(hi, p.size_bytes);
      y_max = std::max(y_max, p.busbw_GBps);
    }
  o += fmt::format("<figure class=\"chart-box\" id=\"{}\">\n",
                   element_id("busbw-", panel.collective));
  if (hi == 0) {
    o += fmt::format("<p>{}: no busbw figures in the results.</p>\n</figure>\n",
                     esc(panel.collective));
    return;
  }
  int e0 = 0, e1 = 0;
  const auto ticks = size_ticks(lo, hi, e0, e1);
  const double y_step = nice_step(y_max > 0 ? y_max * 1.05 : 1, 5);
  const Frame f{static_cast<double>(e0), static_cast<double>(e1),
                std::ceil((y_max > 0 ? y_max * 1.05 : 1) / y_step) * y_step, true};

  const std::string title = panel.collective + ": bus bandwidth vs message size";
  o += svg_open("chart busbw", chart_height(panel.series.size()), title);
  draw_axes(o, f, ticks, y_step, "message size (log2 scale)", "busbw (GB/s)");
  std::vector<LegendEntry> legend;
  for (const Series& s : panel.series) {
    const LegendEntry& series = open_series(o, legend, series_label(runs, names, s), s);
    const bool dashed = series.dashed;
    const char* c = series.color;
    std::string pts;
    for (const Point& p : s.points)
      pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ",
                         f.px(static_cast<double>(std::max<size_t>(p.size_bytes, 1))),
                         f.py(p.busbw_GBps));
    o += series_line(series, pts);
    // The 95% interval of each time (adaptive sampling's records): busbw's by the same share.
    for (const Point& p : s.points)
      if (p.ci_percent > 0)
        o += error_bar(f, f.px(static_cast<double>(std::max<size_t>(p.size_bytes, 1))),
                       p.busbw_GBps * (1 - p.ci_percent / 100),
                       p.busbw_GBps * (1 + p.ci_percent / 100), c);
    for (const Point& p : s.points)
      o += fmt::format(
          "<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" stroke=\"{}\" fill=\"{}\">"
          "<title>{}: {} GB/s{}</title></circle>\n",
          f.px(static_cast<double>(std::max<size_t>(p.size_bytes, 1))), f.py(p.busbw_GBps), c,
          dashed ? "#ffffff" : c, esc(format_size(p.size_bytes)), format_GBps(p.busbw_GBps),
          p.samples > 1 ? fmt::format(" (median of {})", p.samples) : "");
    o += "</g>\n";
  }
  draw_legend(o, legend);
  o += "</svg>\n";
  o += fmt::format(
      "<figcaption>{}: busbw (GB/s) per message size; solid = out-of-place, dashed with "
      "hollow points = in-place; bars = the 95% interval where the records carry one."
      "</figcaption>\n</figure>\n",
      esc(panel.collective));
}

// Time vs message size, both on log scales (small messages are read as latency),
// with the intervals as error bars.
void latency_chart(std::string& o, const std::vector<LoadedRun>& runs,
                   const std::vector<std::string>& names, const Panel& panel) {
  size_t lo = SIZE_MAX, hi = 0;
  double t_min = HUGE_VAL, t_max = 0;  // microseconds
  for (const Series& s : panel.series)
    for (const Point& p : s.points)
      if (p.time_s > 0) {
        lo = std::min(lo, std::max<size_t>(p.size_bytes, 1));
        hi = std::max(hi, p.size_bytes);
        t_min = std::min(t_min, p.time_s * 1e6 * (1 - p.ci_percent / 100));
        t_max = std::max(t_max, p.time_s * 1e6 * (1 + p.ci_percent / 100));
      }
  if (hi == 0) return;  // no times (a busbw-only source)
  o += fmt::format("<figure class=\"chart-box\" id=\"{}\">\n",
                   element_id("latency-", panel.collective));
  int e0 = 0, e1 = 0;
  const auto ticks = size_ticks(lo, hi, e0, e1);
  // y is log10(microseconds), a tick per decade.
  Frame f{static_cast<double>(e0), static_cast<double>(e1), std::ceil(std::log10(t_max)), true,
          std::floor(std::log10(std::max(t_min, 1e-3)))};
  if (f.y_max <= f.y_min) f.y_max = f.y_min + 1;
  const auto y = [&](double seconds) { return std::log10(std::max(seconds * 1e6, 1e-3)); };
  o += svg_open("chart latency", chart_height(panel.series.size()),
                panel.collective + ": time vs message size");
  draw_axes(o, f, ticks, 1, "message size (log2 scale)", "time (us, log scale)",
            [](double decade) { return fmt::format("{:g}", std::pow(10.0, decade)); });
  std::vector<LegendEntry> legend;
  for (const Series& s : panel.series) {
    const LegendEntry& series = open_series(o, legend, series_label(runs, names, s), s);
    const bool dashed = series.dashed;
    const char* c = series.color;
    std::string pts;
    for (const Point& p : s.points)
      if (p.time_s > 0)
        pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ",
                           f.px(static_cast<double>(std::max<size_t>(p.size_bytes, 1))),
                           f.py(y(p.time_s)));
    o += series_line(series, pts);
    for (const Point& p : s.points) {
      if (!(p.time_s > 0)) continue;
      const double x = f.px(static_cast<double>(std::max<size_t>(p.size_bytes, 1)));
      if (p.ci_percent > 0)
        o += error_bar(f, x, y(p.time_s * (1 - p.ci_percent / 100)),
                       y(p.time_s * (1 + p.ci_percent / 100)), c);
      o += fmt::format(
          "<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" stroke=\"{}\" fill=\"{}\">"
          "<title>{}: {:.4g} us{}</title></circle>\n",
          x, f.py(y(p.time_s)), c, dashed ? "#ffffff" : c, esc(format_size(p.size_bytes)),
          p.time_s * 1e6,
          p.ci_percent > 0 ? fmt::format(" \u00b1{:.1f}%", p.ci_percent) : std::string());
    }
    o += "</g>\n";
  }
  draw_legend(o, legend);
  o += "</svg>\n";
  o += fmt::format(
      "<figcaption>{}: time per operation (us) per message size, log-log; bars = the 95% "
      "interval where the records carry one.</figcaption>\n</figure>\n",
      esc(panel.collective));
}

// Speed-up vs rank count (measured and ideal), with the efficiency table.
void scaling_chart(std::string& o, const std::vector<std::string>& names, const Scaling& sc) {
  if (sc.rows.empty()) {
    o += fmt::format(
        "<p class=\"note\">{}: not computed, the runs at different rank counts have "
        "no message size in common.</p>\n",
        esc(sc.collective));
    return;
  }
  const double r0 = sc.rows.front().ranks, r1 = sc.rows.back().ranks;
  double y_max = r1 / r0;
  for (const ScalingRow& row : sc.rows) y_max = std::max(y_max, row.speedup);
  const double y_step = nice_step(y_max * 1.05, 5);
  const Frame f{r0, r1, std::ceil(y_max * 1.05 / y_step) * y_step, false};
  std::vector<std::pair<double, std::string>> ticks;
  for (const ScalingRow& row : sc.rows)
    ticks.push_back({double(row.ranks), std::to_string(row.ranks)});

  const std::string variant = sc.in_place ? ", " + in_place_name(sc.in_place) : "";
  o += fmt::format(
      "<figure class=\"chart-box\" id=\"{}\">\n",
      element_id(
          sc.in_place ? (*sc.in_place ? "scaling-in-place-" : "scaling-out-of-place-") : "scaling-",
          sc.collective));
  o += svg_open(
      "chart scaling", chart_height(2),
      sc.collective + variant + ": speed-up vs rank count at " + format_size(sc.size_bytes));
  draw_axes(o, f, ticks, y_step, "ranks", "speed-up");
  const char* measured = color(0);
  const char* ideal = "#555555";
  o += fmt::format(
      "<g class=\"ideal\"><polyline class=\"series-line\" fill=\"none\" stroke=\"{}\" "
      "stroke-dasharray=\"6 3\" points=\"{:.1f},{:.1f} {:.1f},{:.1f}\"/></g>\n",
      ideal, f.px(r0), f.py(1), f.px(r1), f.py(r1 / r0));
  std::string pts;
  for (const ScalingRow& row : sc.rows)
    pts +=
        fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", f.px(row.ranks), f.py(row.speedup));
  o += fmt::format(
      "<g class=\"series measured\">\n<polyline class=\"series-line\" fill=\"none\" "
      "stroke=\"{}\" points=\"{}\"/>\n",
      measured, pts);
  for (const ScalingRow& row : sc.rows)
    o += fmt::format(
        "<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" stroke=\"{}\" fill=\"{}\">"
        "<title>{} ranks: speed-up {:.2f}, efficiency {:.0f}%</title></circle>\n",
        f.px(row.ranks), f.py(row.speedup), measured, measured, row.ranks, row.speedup,
        row.efficiency * 100);
  o += "</g>\n";
  draw_legend(o,
              {{"measured speed-up", measured, false}, {"ideal (linear in ranks)", ideal, true}});
  o += "</svg>\n<table class=\"data\">\n<thead><tr><th>ranks</th><th>run</th><th>busbw (GB/s)</th>"
       "<th>speed-up</th><th>efficiency</th></tr></thead>\n<tbody>\n";
  for (const ScalingRow& row : sc.rows)
    o += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td><td>{:.0f}%</td></tr>\n",
                     row.ranks, esc(names[row.run]), format_GBps(row.busbw_GBps), row.speedup,
                     row.efficiency * 100);
  o += "</tbody>\n</table>\n";
  // At the sizes a training job sends: the probe's gradient buckets.
  for (const BucketScaling& at : sc.at_buckets) {
    o += fmt::format(
        "<table class=\"data bucket-scaling\">\n<caption>at {} (a gradient bucket of the "
        "training probe; busbw interpolated between the measured sizes around it)</caption>\n"
        "<thead><tr><th>ranks</th><th>run</th><th>busbw (GB/s)</th><th>speed-up</th>"
        "<th>efficiency</th></tr></thead>\n<tbody>\n",
        format_size(at.size_bytes));
    for (const ScalingRow& row : at.rows)
      o += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td><td>{:.0f}%</td></tr>\n", row.ranks,
          esc(names[row.run]), format_GBps(row.busbw_GBps), row.speedup, row.efficiency * 100);
    o += "</tbody>\n</table>\n";
  }
  o += "</figure>\n";
}

void summary_table(std::string& o, const std::vector<LoadedRun>& runs,
                   const std::vector<std::string>& names, const std::vector<Panel>& panels) {
  o += "<table class=\"data summary\">\n<thead><tr><th>run</th><th>format</th><th>backend</th>"
       "<th>ranks</th><th>nodes</th><th>hosts</th><th>collective</th><th>variant</th>"
       "<th>sizes</th><th>peak busbw (GB/s)</th><th>at</th><th>avg busbw (GB/s)</th>"
       "<th>#wrong</th></tr></thead>\n<tbody>\n";
  for (const Panel& panel : panels)
    for (const Series& s : panel.series) {
      const LoadedRun& run = runs[s.run];
      std::string sizes = "\xE2\x80\x94", peak = sizes, at = sizes, avg = sizes;
      if (!s.points.empty()) {
        sizes =
            fmt::format("{} ({} .. {})", s.points.size(), format_size(s.points.front().size_bytes),
                        format_size(s.points.back().size_bytes));
        const auto best = std::max_element(s.points.begin(), s.points.end(), [](auto& a, auto& b) {
          return a.busbw_GBps < b.busbw_GBps;
        });
        peak = format_GBps(best->busbw_GBps);
        at = format_size(best->size_bytes);
        double sum = 0;
        for (const Point& p : s.points) sum += p.busbw_GBps;
        avg = format_GBps(sum / s.points.size());
      }
      std::string backend = run.metadata.backend;
      if (backend.empty() && !run.records.empty()) backend = run.records.front().backend;
      o += fmt::format(
          "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td>"
          "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
          color(s.run), esc(names[s.run]), or_absent(run.format), or_absent(backend),
          or_absent(run_ranks(run)), or_absent(run_nodes(run)), or_absent(host_set(run.metadata)),
          esc(panel.collective), or_absent(in_place_name(s.in_place)), esc(sizes), peak, esc(at),
          avg, s.any_wrong_known ? std::to_string(s.wrong) : "\xE2\x80\x94");
    }
  o += "</tbody>\n</table>\n";
}

// time = alpha + size x beta per (run, collective, variant), fitted by
// comparison_stats' fit_alpha_beta on every record with a time (repeats included).
void fitted_model_table(std::string& o, const std::vector<LoadedRun>& runs,
                        const std::vector<std::string>& names, const std::vector<Panel>& panels) {
  std::string rows;
  for (const Panel& panel : panels)
    for (const Series& s : panel.series) {
      std::vector<double> sizes, times;
      for (const LoadedRecord& r : runs[s.run].records)
        if (r.collective == panel.collective && r.in_place == s.in_place && r.time_s &&
            r.size_bytes > 0) {
          sizes.push_back(static_cast<double>(r.size_bytes));
          times.push_back(*r.time_s);
        }
      const auto fit = fit_alpha_beta(sizes, times);
      if (!fit) continue;
      rows += fmt::format(
          "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td>"
          "<td>{}</td><td>{:.2f}</td><td>{}</td><td>{:.1f}</td></tr>\n",
          color(s.run), esc(names[s.run]), esc(panel.collective),
          or_absent(in_place_name(s.in_place)), fit->alpha_s * 1e6,
          fit->beta_s_per_B > 0 ? format_GBps(1e-9 / fit->beta_s_per_B) : "\xE2\x80\x94",
          fit->max_abs_residual * 100);
    }
  if (rows.empty()) return;
  o += "<h2>Fitted latency-bandwidth model</h2>\n<p class=\"note\">time = alpha + size x beta, "
       "fitted per run and collective: beta by least squares over the bandwidth-bound sizes "
       "(busbw at least half its peak), then alpha over the smaller sizes. 1/beta is the "
       "asymptotic algorithm bandwidth (size / time); the residual is the largest relative "
       "difference between a measured time and the model. <code>ccscope compare</code> uses the "
       "same fit to say whether a regression is in alpha (latency) or beta (bandwidth).</p>\n";
  o += "<table class=\"data fit\">\n<thead><tr><th>run</th><th>collective</th><th>variant</th>"
       "<th>alpha (us)</th><th>1/beta (GB/s)</th><th>max residual (%)</th></tr></thead>\n<tbody>\n";
  o += rows;
  o += "</tbody>\n</table>\n";
}

// Where each run ran and what its slowest path should give (the records'
// hosts, devices and expected busbw from the topology probe), beside the best
// busbw it reached as a share of that figure.
void topology_table(std::string& o, const std::vector<LoadedRun>& runs,
                    const std::vector<std::string>& names) {
  o += "<h2>Topology</h2>\n<p class=\"note\">The nodes and devices of each run and the slowest "
       "path its ranks use, with its nominal bandwidth (ccscope topo's table of rates); "
       "best busbw is the highest of the run's records.</p>\n";
  o += "<table "
       "class=\"topology\">\n<thead><tr><th>run</th><th>nodes</th><th>hosts</th><th>devices</th>"
       "<th>slowest path</th><th>expected busbw (GB/s)</th><th>best busbw (GB/s)</th>"
       "<th>% of expected</th></tr></thead>\n<tbody>\n";
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunMetadata& m = runs[r].metadata;
    std::set<std::string> devices(m.gpu_names.begin(), m.gpu_names.end());
    std::string device_text;
    for (const std::string& d : devices) device_text += (device_text.empty() ? "" : ", ") + d;
    double best = 0;
    for (const LoadedRecord& record : runs[r].records)
      if (record.busbw_GBps) best = std::max(best, *record.busbw_GBps);
    const bool expected = m.expected_busbw_GBps && *m.expected_busbw_GBps > 0;
    o += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td></tr>\n",
        esc(names[r]), or_absent(run_nodes(runs[r])), or_absent(host_set(m)),
        or_absent(device_text),
        expected ? esc(m.expected_path) : std::string("not rated (host memory or no link rate)"),
        expected ? fmt::format("{:.4g}", *m.expected_busbw_GBps) : std::string("\xE2\x80\x94"),
        best > 0 ? fmt::format("{:.4g}", best) : std::string("\xE2\x80\x94"),
        expected && best > 0 ? fmt::format("{:.1f}%", 100 * best / *m.expected_busbw_GBps)
                             : std::string("\xE2\x80\x94"));
  }
  o += "</tbody>\n</table>\n";
}

void metadata_details(std::string& o, const LoadedRun& run, const std::string& name) {
  const RunMetadata& m = run.metadata;
  o += fmt::format("<details class=\"metadata\">\n<summary>{} ({} records)</summary>\n", esc(name),
                   run.records.size());
  o += "<table class=\"kv\">\n<tbody>\n";
  auto row = [&](const char* key, const std::string& value) {
    o += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", key, value);
  };
  row("path", or_absent(run.path));
  row("format", or_absent(run.format));
  row("ccscope version", or_absent(m.ccscope_version));
  row("git commit", or_absent(m.git_commit));
  row("backend", or_absent(m.backend));
  row("MPI library", or_absent(m.mpi_library));
  row("NCCL version", or_absent(m.nccl_version));
  row("CUDA version", or_absent(m.cuda_version));
  row("GPU driver", or_absent(m.driver_version));
  row("expected busbw (slowest path)",
      m.expected_busbw_GBps
          ? fmt::format("{:.4g} GB/s: {}", *m.expected_busbw_GBps, esc(m.expected_path))
          : std::string("\xE2\x80\x94"));
  row("ranks / nodes / ranks per node",
      fmt::format("{} / {} / {}", or_absent(m.ranks), or_absent(m.nodes),
                  or_absent(m.ranks_per_node)));
  std::string hosts;
  for (size_t r = 0; r < m.hosts.size(); ++r)
    hosts += fmt::format("{}{}: {}{}", r ? "<br/>" : "", r, esc(m.hosts[r]),
                         r < m.gpu_names.size() ? " (" + esc(m.gpu_names[r]) + ")" : "");
  row("hosts (rank: host (device))", hosts.empty() ? "\xE2\x80\x94" : hosts);
  row("command line",
      m.command_line.empty() ? "\xE2\x80\x94" : "<code>" + esc(m.command_line) + "</code>");
  row("start / end (UTC)", or_absent(m.start_time_utc) + " / " + or_absent(m.end_time_utc));
  o += "</tbody>\n</table>\n";
  if (m.environment.empty()) {
    o += "<p>environment: none recorded</p>\n";
  } else {
    o += "<table class=\"kv "
         "env\">\n<thead><tr><th>variable</th><th>value</th></tr></thead>\n<tbody>\n";
    for (const auto& [key, value] : m.environment)
      o += fmt::format("<tr><td><code>{}</code></td><td><code>{}</code></td></tr>\n", esc(key),
                       esc(value));
    o += "</tbody>\n</table>\n";
  }
  o += "</details>\n";
}

// ------------------------------------------------------------------ training

// One series of an x-y chart on linear axes: a polyline, and a circle per
// point where it has tooltips; a reference line (ideal) has no points.
struct XySeries {
  std::string label;
  const char* color;
  bool reference = false;
  std::vector<std::pair<double, double>> points;
  std::vector<std::string> tips;  // one per point, or none
};

// The training section's charts, on the frame, axes and legend of the busbw
// and scaling charts. The y axis runs from y_lo (0, or below for negative
// data) to a round value above y_hi.
void xy_chart(std::string& o, const std::string& id, const std::string& cls,
              const std::string& title, const std::string& x_title, const std::string& y_title,
              const std::vector<std::pair<double, std::string>>& x_ticks, double y_lo, double y_hi,
              const std::vector<XySeries>& series, const std::string& caption) {
  double x0 = x_ticks.front().first, x1 = x_ticks.back().first;
  if (x1 <= x0) x0 -= 0.5, x1 += 0.5;
  if (!(y_hi > y_lo)) y_hi = y_lo + 1;
  const double y_step = nice_step((y_hi - y_lo) * 1.05, 5);
  Frame f{x0, x1, std::ceil((y_lo + (y_hi - y_lo) * 1.05) / y_step) * y_step, false};
  f.y_min = std::floor(y_lo / y_step) * y_step;
  o += fmt::format("<figure class=\"chart-box\" id=\"{}\">\n", id);
  o += svg_open("chart " + cls, chart_height(series.size()), title);
  draw_axes(o, f, x_ticks, y_step, x_title, y_title);
  std::vector<LegendEntry> legend;
  for (const XySeries& s : series) {
    legend.push_back({s.label, s.color, s.reference});
    std::string pts;
    for (const auto& [x, y] : s.points)
      pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", f.px(x), f.py(y));
    o += fmt::format("<g class=\"{}\">\n<title>{}</title>\n",
                     s.reference ? "ideal" : "series training-series", esc(s.label));
    o += fmt::format(
        "<polyline class=\"series-line\" fill=\"none\" stroke=\"{}\"{} points=\"{}\"/>\n", s.color,
        s.reference ? " stroke-dasharray=\"6 3\"" : "", pts);
    for (size_t i = 0; i < s.tips.size() && i < s.points.size(); ++i)
      o += fmt::format(
          "<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" stroke=\"{}\" fill=\"{}\">"
          "<title>{}</title></circle>\n",
          f.px(s.points[i].first), f.py(s.points[i].second), s.color, s.color, esc(s.tips[i]));
    o += "</g>\n";
  }
  draw_legend(o, legend);
  o += "</svg>\n";
  o += fmt::format("<figcaption>{}</figcaption>\n</figure>\n", esc(caption));
}

// Speed-up or efficiency vs rank count: one series per strategy and the ideal.
void training_curve_chart(std::string& o, const TrainingResults& training,
                          const std::vector<training_model::Curve>& curves, bool speedup) {
  std::set<int64_t> ranks;
  double y_hi = speedup ? 0 : 1;
  for (const auto& c : curves)
    for (const auto& p : c.points) {
      ranks.insert(p.ranks);
      y_hi = std::max(y_hi, p.value);
    }
  std::vector<std::pair<double, std::string>> ticks;
  for (int64_t r : ranks) ticks.push_back({double(r), std::to_string(r)});
  const double r0 = double(*ranks.begin()), r1 = double(*ranks.rbegin());
  if (speedup) y_hi = std::max(y_hi, r1);
  std::vector<XySeries> series;
  for (size_t i = 0; i < curves.size(); ++i) {
    XySeries s{curves[i].label, color(i), false, {}, {}};
    for (const auto& p : curves[i].points) {
      s.points.push_back({double(p.ranks), p.value});
      s.tips.push_back(fmt::format("{}, {} rank{} ({}): {}", curves[i].label, p.ranks,
                                   p.ranks == 1 ? "" : "s", training.runs[p.run].run_id,
                                   speedup ? fmt::format("speed-up {:.2f}", p.value)
                                           : fmt::format("efficiency {:.0f}%", p.value * 100)));
    }
    series.push_back(std::move(s));
  }
  series.push_back({speedup ? "ideal (speed-up = ranks)" : "ideal (efficiency 1)",
                    "#555555",
                    true,
                    {{r0, speedup ? r0 : 1}, {r1, speedup ? r1 : 1}},
                    {}});
  if (speedup)
    xy_chart(o, "training-speedup", "training-speedup", "training: speed-up vs rank count", "ranks",
             "speed-up", ticks, 0, y_hi, series,
             "Speed-up against one rank per strategy: T(1) / T(N) of the median step time "
             "(strong scaling), N T(1) / T(N) (weak); dashed: ideal, equal to the rank count.");
  else
    xy_chart(o, "training-efficiency", "training-efficiency", "training: efficiency vs rank count",
             "ranks", "efficiency", ticks, 0, y_hi, series,
             "Efficiency = speed-up / ranks per strategy; dashed: ideal (1).");
}

void training_loss_chart(std::string& o, const std::vector<training_model::LossCurve>& curves) {
  int64_t last = 1;
  double lo = 0, hi = 0;
  for (const auto& c : curves)
    for (const auto& [step, loss] : c.points) {
      last = std::max(last, step);
      lo = std::min(lo, loss);
      hi = std::max(hi, loss);
    }
  const double x_step = std::max(1.0, nice_step(double(last), 8));
  std::vector<std::pair<double, std::string>> ticks;
  for (double x = 0; x <= last * (1 + 1e-9); x += x_step)
    ticks.push_back({x, fmt::format("{:.0f}", x)});
  if (ticks.back().first < last) ticks.push_back({double(last), std::to_string(last)});
  std::vector<XySeries> series;
  for (size_t i = 0; i < curves.size(); ++i) {
    XySeries s{curves[i].run_id, color(i), false, {}, {}};
    for (const auto& [step, loss] : curves[i].points) s.points.push_back({double(step), loss});
    if (s.points.size() == 1)  // a polyline of one point does not show
      s.tips.push_back(fmt::format("{}: step {}, loss {:.6g}", curves[i].run_id,
                                   curves[i].points[0].first, curves[i].points[0].second));
    series.push_back(std::move(s));
  }
  xy_chart(o, "training-loss", "training-loss", "training: loss vs step", "step", "loss", ticks, lo,
           hi, series,
           "Loss of each step (mean over the global batch) per run; equivalent strategies "
           "overlap.");
}

// A pipelined run's bubble per stage: the measured bar (the stage's most idle
// rank) beside the textbook one, hollow and dashed as the ideal lines are.
void training_bubble_chart(std::string& o, const training_model::BubbleChart& chart) {
  const size_t n = chart.stages.size();
  std::vector<std::pair<double, std::string>> ticks;
  double y_hi = 0;
  for (size_t i = 0; i < n; ++i) {
    ticks.push_back({double(i), std::to_string(chart.stages[i].stage)});
    y_hi = std::max({y_hi, chart.stages[i].measured * 100, chart.stages[i].textbook * 100});
  }
  if (!(y_hi > 0)) y_hi = 1;
  const double y_step = nice_step(y_hi * 1.05, 5);
  const Frame f{-0.5, n - 0.5, std::ceil(y_hi * 1.05 / y_step) * y_step, false};
  const double slot = (Frame::kWidth - Frame::kLeft - Frame::kRight) / double(n);
  const double bar = std::min(slot * 0.3, 48.0);
  const char* measured = color(0);
  const char* textbook = "#555555";
  o += fmt::format("<figure class=\"chart-box\" id=\"{}\">\n",
                   element_id("training-bubble-", chart.run_id));
  o += svg_open("chart training-bubble", chart_height(2),
                chart.run_id + ": pipeline bubble per stage, measured and textbook");
  draw_axes(o, f, ticks, y_step, "pipeline stage", "bubble (% of the pipeline time)");
  auto bars = [&](const char* cls, bool is_measured) {
    o += fmt::format("<g class=\"bar {}\">\n", cls);
    for (size_t i = 0; i < n; ++i) {
      const training_model::StageBubble& b = chart.stages[i];
      const double v = (is_measured ? b.measured : b.textbook) * 100;
      const double x = f.px(double(i)) + (is_measured ? -bar - 1 : 1);
      const double top = f.py(std::max(v, 0.0)), height = f.py(0) - top;
      o += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" {}>"
          "<title>{}</title></rect>\n",
          x, top, bar, height,
          is_measured ? fmt::format("fill=\"{}\"", measured)
                      : fmt::format("fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
                                    "stroke-dasharray=\"6 3\"",
                                    textbook),
          esc(is_measured ? fmt::format("stage {} (rank {}): bubble {:.1f}%", b.stage, b.rank, v)
                          : fmt::format("stage {}: textbook bubble {:.1f}%", b.stage, v)));
    }
    o += "</g>\n";
  };
  bars("measured", true);
  bars("textbook", false);
  draw_legend(o, {{"measured (the stage's most idle rank)", measured, false},
                  {"textbook (N - 1) / (v M + N - 1)", textbook, true}});
  o += "</svg>\n";
  o += fmt::format(
      "<figcaption>{}: pipeline bubble per stage = 1 - busy / pipeline time (first pass to "
      "flush, medians after warm-up) of the stage's most idle rank; dashed: the textbook bubble "
      "for N "
      "stages, M micro-batches and v chunks per stage.</figcaption>\n</figure>\n",
      esc(chart.run_id));
}

// One table per model-parallel run (its ccscope.train_rank records), each
// followed by its bubble chart where it has a pipeline.
void training_ranks(std::string& o, const TrainingResults& training) {
  const std::vector<training_model::RankTable> tables = training_model::rank_tables(training);
  if (tables.empty()) return;
  const std::vector<training_model::BubbleChart> charts = training_model::bubble_charts(training);
  o += "<h3>Model-parallel ranks</h3>\n<p class=\"note\">One row per rank of each "
       "model-parallel run: its place in the grid, the bytes it sends per step in each group "
       "(tensor, pipeline, data and expert parallel), its own medians after warm-up. Bubble = "
       "1 - busy / pipeline time (first pass to flush: the pipeline's makespan) against the "
       "textbook (N - 1) / (v M + N - 1), their difference in percentage points; peak in flight = "
       "the most "
       "micro-batches whose activations the rank held at once; memory = parameters, gradients "
       "and optimizer state; the expert all-to-all's share of the step, the token assignments "
       "dropped for capacity and the load imbalance (max / mean tokens per expert). Columns "
       "that are zero for every rank of a run are left out.</p>\n";
  for (const training_model::RankTable& t : tables) {
    o += fmt::format("<h4>{} ({}): {}</h4>\n", esc(t.run_id), esc(t.strategy), esc(t.layout));
    o += fmt::format("<table class=\"data training-ranks\" id=\"{}\">\n<thead><tr>",
                     element_id("training-ranks-", t.run_id));
    for (const training_model::RankColumn& c : t.columns) o += "<th>" + esc(c.name) + "</th>";
    o += "</tr></thead>\n<tbody>\n";
    for (const std::vector<std::string>& row : t.rows) {
      o += "<tr>";
      for (const std::string& cell : row) o += "<td>" + or_absent(cell) + "</td>";
      o += "</tr>\n";
    }
    o += "</tbody>\n</table>\n";
    for (const training_model::BubbleChart& chart : charts)
      if (chart.run_id == t.run_id) training_bubble_chart(o, chart);
  }
}

void training_section(std::string& o, const TrainingResults& training) {
  using training_model::RunText;
  o += "<h2>Training</h2>\n<p class=\"note\">ccscope train: a model trained with each "
       "strategy and rank count. Per-step times are the slowest rank's; medians and p90 over "
       "the steps after warm-up. Communication share = communication time / step time; exposed "
       "= the part of the step the training thread waited for it. Bytes are per rank and step, "
       "memory per rank (parameters + gradients + optimizer state), each against its formula. "
       "The loss check compares every step's loss with single's.</p>\n";
  const std::vector<size_t> order = training_model::run_order(training);
  if (!order.empty()) {
    o += "<table class=\"data training-runs\">\n<thead><tr><th>run</th><th>strategy</th>"
         "<th>ranks</th><th>step median (ms)</th><th>step p90 (ms)</th><th>samples/s</th>"
         "<th>comm share</th><th>exposed share</th><th>bytes/step</th><th>expected</th>"
         "<th>ratio</th><th>memory/rank</th><th>expected</th><th>ratio</th>"
         "<th>loss max rel diff</th><th>tolerance</th><th>loss check</th><th>speed-up</th>"
         "<th>efficiency</th></tr></thead>\n<tbody>\n";
    for (size_t i : order) {
      const records::TrainRunRecord& r = training.runs[i];
      const RunText t = training_model::run_text(r);
      auto cell = [](const std::string& s) { return s.empty() ? "\xE2\x80\x94" : esc(s); };
      o += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td></tr>\n",
          cell(r.run_id), cell(r.strategy + (r.scaling == "weak" ? " (weak)" : "")), r.ranks,
          cell(t.step_median_ms), cell(t.step_p90_ms), cell(t.samples_per_s), cell(t.comm_share),
          cell(t.exposed_share), cell(t.bytes), cell(t.bytes_expected), cell(t.bytes_ratio),
          cell(t.memory), cell(t.memory_expected), cell(t.memory_ratio), cell(t.loss_diff),
          cell(t.loss_tolerance), t.loss_check == "FAIL" ? "fail" : "check", cell(t.loss_check),
          cell(t.speedup), cell(t.efficiency));
    }
    o += "</tbody>\n</table>\n";

    // Communication share per strategy (rows) and rank count (columns).
    std::vector<std::string> strategies;
    std::set<int64_t> ranks;
    std::map<std::pair<std::string, int64_t>, size_t> at;
    for (size_t i : order) {
      const records::TrainRunRecord& r = training.runs[i];
      const std::string label = r.strategy + (r.scaling == "weak" ? " (weak)" : "");
      if (std::find(strategies.begin(), strategies.end(), label) == strategies.end())
        strategies.push_back(label);
      ranks.insert(r.ranks);
      at.emplace(std::pair(label, r.ranks), i);
    }
    o += "<h3>Communication share</h3>\n<table class=\"data training-comm\">\n<thead><tr>"
         "<th>strategy</th>";
    for (int64_t n : ranks) o += fmt::format("<th>{} rank{}</th>", n, n == 1 ? "" : "s");
    o += "</tr></thead>\n<tbody>\n";
    for (const std::string& label : strategies) {
      o += fmt::format("<tr><td>{}</td>", esc(label));
      for (int64_t n : ranks) {
        const auto it = at.find({label, n});
        if (it == at.end()) {
          o += "<td>\xE2\x80\x94</td>";
          continue;
        }
        const RunText t = training_model::run_text(training.runs[it->second]);
        o += fmt::format("<td>{} (exposed {})</td>", t.comm_share, t.exposed_share);
      }
      o += "</tr>\n";
    }
    o += "</tbody>\n</table>\n";
  }

  const auto speedups = training_model::speedup_curves(training);
  const auto efficiencies = training_model::efficiency_curves(training);
  if (!speedups.empty() || !efficiencies.empty()) o += "<h3>Scaling</h3>\n";
  if (!speedups.empty()) training_curve_chart(o, training, speedups, true);
  if (!efficiencies.empty()) training_curve_chart(o, training, efficiencies, false);
  const auto losses = training_model::loss_curves(training);
  if (!losses.empty()) {
    o += "<h3>Loss</h3>\n";
    training_loss_chart(o, losses);
  }
  training_ranks(o, training);
}

// No CSS character that would need escaping in XML (no '<', no '&').
constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1160px; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table.data, table.kv { border-collapse: collapse; font-size: 0.85em; margin: 8px 0; }
table.data th, table.data td, table.kv th, table.kv td { border: 1px solid #ccc; padding: 2px 6px; }
table.data td { text-align: right; } table.kv th { text-align: left; background: #f4f4f4; }
table.data th { background: #f4f4f4; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
figure.chart-box { margin: 12px 0 24px 0; }
svg.chart { background: #fff; font-size: 12px; }
svg.chart .grid line { stroke: #e6e6e6; } svg.chart .axes line { stroke: #333; }
svg.chart .y-tick { text-anchor: end; } svg.chart .x-tick, svg.chart .x-title { text-anchor: middle; }
svg.chart .y-title { text-anchor: middle; }
svg.chart .series-line { stroke-width: 2; }
details.metadata { margin: 6px 0; } details.metadata summary { cursor: pointer; font-weight: bold; }
p.note { font-size: 0.9em; color: #444; }
)";

// Everything of the bench runs but their metadata.
void bench_sections(std::string& o, const std::vector<LoadedRun>& runs) {
  const std::vector<Panel> panels = build_panels(runs);
  const std::vector<Scaling> scaling = build_scaling(runs, panels);
  const std::vector<std::string> names = run_names(runs);
  o += fmt::format(
      "<p class=\"note\">{} run(s), {} collective(s). busbw = algbw x nccl-tests' bus factor, in "
      "GB/s (1e9 B/s); sizes follow nccl-tests' convention. Where a run holds repeated samples of "
      "a size, the charts and tables show their median.</p>\n",
      runs.size(), panels.size());

  o += "<h2>Summary</h2>\n";
  summary_table(o, runs, names, panels);

  o += "<h2>Bus bandwidth vs message size</h2>\n";
  for (const Panel& panel : panels) {
    busbw_chart(o, runs, names, panel);
    latency_chart(o, runs, names, panel);
  }

  if (!scaling.empty()) {
    o += "<h2>Speed-up and efficiency vs rank count</h2>\n<p class=\"note\">For each collective "
         "measured at several rank counts: at the largest message size every compared run "
         "measured, speed-up = (ranks x busbw) / (n0 x busbw at n0), the aggregate bus bandwidth "
         "relative to the smallest rank count n0 (ideal: ranks / n0); efficiency = speed-up / "
         "(ranks / n0) = busbw / busbw at n0 (ideal: 100%). Where several runs have the same "
         "rank count, the first one given is used.</p>\n";
    for (const Scaling& sc : scaling) scaling_chart(o, names, sc);
  }

  fitted_model_table(o, runs, names, panels);
  topology_table(o, runs, names);
  // Diag findings come from their own files (DiagResults), after these sections.
}

// ------------------------------------------------------------------ diag findings

// Only on pages with findings: other pages stay byte for byte as they were.
constexpr const char* kDiagStyle = R"(
.badge { display: inline-block; padding: 0 5px; border-radius: 3px; font-weight: bold; color: #fff; }
.badge-fail { background: #c62828; } .badge-warn { background: #f0a800; color: #222; }
.badge-pass { background: #2e7d32; } .badge-skip { background: #757575; }
table.diag-findings td { text-align: left; } table.diag-findings td.num { text-align: right; }
tr.diag-fail td { background: #fdecea; } tr.diag-warn td { background: #fff8e1; }
ul.diag-verdicts { font-size: 0.9em; }
details.diag-passed summary { cursor: pointer; }
)";

std::string diag_badge(const std::string& status) {
  return fmt::format("<span class=\"badge badge-{}\">{}</span>",
                     esc(diag_model::status_class(status)), esc(status));
}

void diag_findings_rows(std::string& o, const diag_model::DiagRun& run, size_t begin, size_t end) {
  o += "<table class=\"data diag-findings\">\n<thead><tr><th>stage</th><th>check</th>"
       "<th>status</th><th>host / rank / peer</th><th>measured</th><th>expected</th>"
       "<th>message</th><th>remedy</th></tr></thead>\n<tbody>\n";
  for (size_t i = begin; i < end; ++i) {
    const diag_model::Finding& f = run.findings[i];
    o += fmt::format(
        "<tr class=\"diag-{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}"
        "</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>\n",
        esc(diag_model::status_class(records::status_name(f.check->check.status))),
        or_absent(f.stage), or_absent(f.check->check.name),
        diag_badge(records::status_name(f.check->check.status)), or_absent(f.where),
        or_absent(f.measured), or_absent(f.expected), or_absent(f.check->check.message),
        or_absent(f.check->check.remedy));
  }
  o += "</tbody></table>\n";
}

void diag_findings_section(std::string& o, const DiagResults& diag) {
  o += "<h2 id=\"findings\">Findings</h2>\n<p class=\"note\">ccscope diag: the bring-up "
       "checklist, stage by stage (1 rank, 2 node, 3 cluster, 4 scaling). FAIL = broken, WARN = "
       "works but below what it should be, SKIP = cannot be judged here. Failures and warnings "
       "first; passed and skipped checks folded below them.</p>\n";
  for (const diag_model::DiagRun& run : diag_model::diag_runs(diag)) {
    o += fmt::format("<h3 id=\"{}\">{} {}</h3>\n", element_id("diag-run-", run.run_id),
                     or_absent(run.run_id), diag_badge(run.status));
    std::string when;
    if (!run.first_time.empty())
      when = run.first_time == run.last_time ? run.first_time
                                             : run.first_time + " to " + run.last_time;
    o += fmt::format("<p class=\"note\">{}{} check(s).{}</p>\n",
                     when.empty() ? "" : esc(when) + ", ", run.findings.size(),
                     run.complete ? ""
                                  : " <strong>Incomplete:</strong> the run stopped before its "
                                    "end (its JSON says complete: false).");
    o += "<ul class=\"diag-verdicts\">\n";
    for (const diag_model::StageVerdict& v : run.stages)
      o += fmt::format("<li>{} {}</li>\n", diag_badge(v.status), esc(v.line));
    o += "</ul>\n";
    if (run.attention > 0)
      diag_findings_rows(o, run, 0, run.attention);
    else
      o += "<p class=\"note\">No FAIL and no WARN.</p>\n";
    if (run.attention < run.findings.size()) {
      size_t pass = 0;
      for (size_t i = run.attention; i < run.findings.size(); ++i)
        pass += run.findings[i].check->check.status == records::DiagStatus::kPass;
      const size_t other = run.findings.size() - run.attention - pass;
      o += fmt::format("<details class=\"diag-passed\"><summary>{} PASS{}</summary>\n", pass,
                       other > 0 ? fmt::format(", {} SKIP", other) : "");
      diag_findings_rows(o, run, run.attention, run.findings.size());
      o += "</details>\n";
    }
  }
}

void metadata_section(std::string& o, const std::vector<LoadedRun>& runs) {
  const std::vector<std::string> names = run_names(runs);
  o += "<h2>Run metadata</h2>\n";
  for (size_t r = 0; r < runs.size(); ++r) metadata_details(o, runs[r], names[r]);
}

}  // namespace

std::string render_html_report(const std::vector<LoadedRun>& runs, const ReportOptions& options) {
  return render_html_report(runs, TrainingResults{}, DiagResults{}, options);
}

std::string render_html_report(const std::vector<LoadedRun>& runs, const TrainingResults& training,
                               const ReportOptions& options) {
  return render_html_report(runs, training, DiagResults{}, options);
}

std::string render_html_report(const std::vector<LoadedRun>& runs, const TrainingResults& training,
                               const DiagResults& diag, const ReportOptions& options) {
  // Training or diag files alone: no bench sections.
  const bool bench = !runs.empty() || (training.empty() && diag.empty());
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n";
  o += fmt::format("<title>{}</title>\n<style>{}{}</style>\n</head>\n<body>\n", esc(options.title),
                   kStyle, diag.empty() ? "" : kDiagStyle);
  o += fmt::format("<h1>{}</h1>\n", esc(options.title));
  if (bench) bench_sections(o, runs);
  if (!diag.empty()) diag_findings_section(o, diag);
  if (!training.empty()) training_section(o, training);
  if (bench) metadata_section(o, runs);
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace ccscope::reports
