// The markdown report: a table of runs, then per collective and in-place
// variant a table of busbw per size with ratios to the first run. Strings from
// the results are escaped so that they render as text (GitHub renders HTML in
// markdown: a hostname "<script>" must not become a tag).
#include "ccscope/reports/markdown_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "diag_model.h"
#include "report_model.h"
#include "training_model.h"

namespace ccscope::reports {
namespace {

using namespace report_model;

// CommonMark allows a backslash before any ASCII punctuation: escaped are the
// characters that could open HTML, a link or code, or split a table cell
// (emphasis characters stay, so file names read well in a terminal); line
// breaks would end a table row, so they become spaces.
std::string md(std::string_view raw) {
  const std::string in = show_bidi_controls(raw);
  std::string out;
  for (char c : in) {
    if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
    } else if (std::string_view("\\`[]<>|&").find(c) != std::string_view::npos) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out.empty() ? "-" : out;
}

std::string or_dash(int v) { return v > 0 ? std::to_string(v) : "-"; }

void bench_tables(std::string& o, const std::vector<LoadedRun>& runs) {
  const std::vector<Panel> panels = build_panels(runs);
  const std::vector<std::string> names = run_names(runs);
  o += "| # | run | format | backend | ranks | nodes | hosts | ccscope | NCCL | CUDA |\n";
  o += "|---|---|---|---|---:|---:|---|---|---|---|\n";
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunMetadata& m = runs[r].metadata;
    std::string backend = m.backend;
    if (backend.empty() && !runs[r].records.empty()) backend = runs[r].records.front().backend;
    o += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r + 1, md(names[r]),
                     md(runs[r].format), md(backend), or_dash(run_ranks(runs[r])),
                     or_dash(run_nodes(runs[r])), md(host_set(m)), md(m.ccscope_version),
                     md(m.nccl_version), md(m.cuda_version));
  }
  o += "\nbusbw in GB/s (median of repeated samples); ratio = busbw of run #k / busbw of run #1 at "
       "the same size; - = not measured.\n";

  for (const Panel& panel : panels) {
    // One table per variant (out-of-place, in-place, unknown), in that order.
    std::vector<std::optional<bool>> variants;
    for (const Series& s : panel.series)
      if (std::find(variants.begin(), variants.end(), s.in_place) == variants.end())
        variants.push_back(s.in_place);
    std::sort(variants.begin(), variants.end(),
              [](auto& a, auto& b) { return (a ? int(*a) : 2) < (b ? int(*b) : 2); });
    for (const auto& variant : variants) {
      // run -> size -> busbw
      std::map<size_t, std::map<size_t, double>> busbw;
      std::set<size_t> sizes;
      for (const Series& s : panel.series)
        if (s.in_place == variant)
          for (const Point& p : s.points) {
            busbw[s.run][p.size_bytes] = p.busbw_GBps;
            sizes.insert(p.size_bytes);
          }
      const std::string title =
          variant ? panel.collective + ", " + in_place_name(variant) : panel.collective;
      o += fmt::format("\n## {}\n\n| size |", md(title));
      std::string rule = "|---:|";
      for (size_t r = 0; r < runs.size(); ++r, rule += "---:|")
        o += fmt::format(" #{} busbw |", r + 1);
      for (size_t r = 1; r < runs.size(); ++r, rule += "---:|")
        o += fmt::format(" #{} / #1 |", r + 1);
      o += "\n" + rule + "\n";
      for (size_t size : sizes) {
        o += fmt::format("| {} |", format_size(size));
        auto value = [&](size_t r) -> std::optional<double> {
          auto run = busbw.find(r);
          if (run == busbw.end()) return std::nullopt;
          auto it = run->second.find(size);
          if (it == run->second.end()) return std::nullopt;
          return it->second;
        };
        for (size_t r = 0; r < runs.size(); ++r) {
          auto v = value(r);
          o += v ? fmt::format(" {} |", format_GBps(*v)) : std::string(" - |");
        }
        const auto first = value(0);
        for (size_t r = 1; r < runs.size(); ++r) {
          auto v = value(r);
          o += v && first && *first > 0 ? fmt::format(" {:.3f} |", *v / *first)
                                        : std::string(" - |");
        }
        o += "\n";
      }
    }
  }
}

// The training runs, one row each; then the loss of each run of the step
// records (first and last step); then a table per model-parallel run, one row
// per rank.
void training_tables(std::string& o, const TrainingResults& training, bool after_bench) {
  o += after_bench ? "\n## Training\n\n" : "## Training\n\n";
  auto cell = [](const std::string& s) { return s.empty() ? std::string("-") : md(s); };
  if (!training.runs.empty()) {
    o += "| run | strategy | ranks | step median (ms) | step p90 (ms) | samples/s | comm share | "
         "exposed share | bytes/step | expected | memory/rank | expected | loss max rel diff | "
         "tolerance | loss check | speed-up | efficiency |\n";
    o += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n";
    for (size_t i : training_model::run_order(training)) {
      const records::TrainRunRecord& r = training.runs[i];
      const training_model::RunText t = training_model::run_text(r);
      o += fmt::format(
          "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} "
          "|\n",
          cell(r.run_id), cell(r.strategy + (r.scaling == "weak" ? " (weak)" : "")), r.ranks,
          cell(t.step_median_ms), cell(t.step_p90_ms), cell(t.samples_per_s), cell(t.comm_share),
          cell(t.exposed_share), cell(t.bytes), cell(t.bytes_expected), cell(t.memory),
          cell(t.memory_expected), cell(t.loss_diff), cell(t.loss_tolerance), cell(t.loss_check),
          cell(t.speedup), cell(t.efficiency));
    }
    o += "\nTimes: the slowest rank's, median and p90 over the steps after warm-up; shares of the "
         "median step time; bytes per rank and step, memory per rank (parameters + gradients + "
         "optimizer state), each beside its formula; loss check against single; - = not "
         "recorded.\n";
  }
  const auto losses = training_model::loss_curves(training);
  if (!losses.empty()) {
    o += training.runs.empty() ? "" : "\n";
    o += "| run | steps | first loss | last loss |\n|---|---:|---:|---:|\n";
    for (const auto& c : losses)
      o += fmt::format("| {} | {} | {:.6g} | {:.6g} |\n", md(c.run_id), c.points.size(),
                       c.points.front().second, c.points.back().second);
  }
  const auto tables = training_model::rank_tables(training);
  if (!tables.empty()) {
    o += training.runs.empty() && losses.empty() ? "" : "\n";
    o += "### Model-parallel ranks\n";
    for (const training_model::RankTable& t : tables) {
      o += fmt::format("\n{} ({}): {}\n\n|", md(t.run_id), md(t.strategy), md(t.layout));
      for (const training_model::RankColumn& c : t.columns) o += " " + md(c.name) + " |";
      o += "\n|";
      for (const training_model::RankColumn& c : t.columns) o += c.numeric ? "---:|" : "---|";
      o += "\n";
      for (const std::vector<std::string>& row : t.rows) {
        o += "|";
        for (const std::string& cell : row) o += " " + md(cell) + " |";
        o += "\n";
      }
    }
    o +=
        "\nOne row per rank, its medians after warm-up; bytes per step in each group; bubble = 1 - "
        "busy / pipeline time against the textbook (N - 1) / (v M + N - 1), difference in "
        "percentage points; columns zero for every rank of a run left out.\n";
  }
}

// Per diag run: its verdict per stage, then one table of its checks, FAIL and
// WARN first (in bold), then PASS and SKIP.
void diag_findings_tables(std::string& o, const DiagResults& diag, bool after_other) {
  o += after_other ? "\n## Findings\n" : "## Findings\n";
  auto cell = [](const std::string& s) { return s.empty() ? std::string("-") : md(s); };
  for (const diag_model::DiagRun& run : diag_model::diag_runs(diag)) {
    o += fmt::format("\n### {}: {}\n\n", md(run.run_id), run.status);
    if (!run.first_time.empty())
      o += fmt::format(
          "{}, ", md(run.first_time == run.last_time ? run.first_time
                                                     : run.first_time + " to " + run.last_time));
    o += fmt::format("{} check(s).{}\n\n", run.findings.size(),
                     run.complete ? ""
                                  : " **Incomplete:** the run stopped before its end (its JSON "
                                    "says complete: false).");
    for (const diag_model::StageVerdict& v : run.stages) o += "- " + md(v.line) + "\n";
    o += "\n| stage | check | status | host / rank / peer | measured | expected | message | "
         "remedy |\n|---|---|---|---|---:|---:|---|---|\n";
    for (size_t i = 0; i < run.findings.size(); ++i) {
      const diag_model::Finding& f = run.findings[i];
      const records::DiagCheck& check = f.check->check;
      const std::string name = records::status_name(check.status);
      const std::string status = i < run.attention ? "**" + name + "**" : name;
      o += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", cell(f.stage),
                       cell(check.name), md(status), cell(f.where), cell(f.measured),
                       cell(f.expected), cell(check.message), cell(check.remedy));
    }
  }
  o += "\nFAIL = broken, WARN = works but below what it should be, SKIP = cannot be judged here; "
       "- = not recorded.\n";
}

}  // namespace

std::string render_markdown_report(const std::vector<LoadedRun>& runs,
                                   const ReportOptions& options) {
  return render_markdown_report(runs, TrainingResults{}, DiagResults{}, options);
}

std::string render_markdown_report(const std::vector<LoadedRun>& runs,
                                   const TrainingResults& training, const ReportOptions& options) {
  return render_markdown_report(runs, training, DiagResults{}, options);
}

std::string render_markdown_report(const std::vector<LoadedRun>& runs,
                                   const TrainingResults& training, const DiagResults& diag,
                                   const ReportOptions& options) {
  std::string o = fmt::format("# {}\n\n", md(options.title));
  // Training or diag files alone: no bench tables.
  const bool bench = !runs.empty() || (training.empty() && diag.empty());
  if (bench) bench_tables(o, runs);
  if (!diag.empty()) diag_findings_tables(o, diag, bench);
  if (!training.empty()) training_tables(o, training, bench || !diag.empty());
  return o;
}

}  // namespace ccscope::reports
