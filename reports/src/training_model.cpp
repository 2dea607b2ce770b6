// Training results as the reports show them (see training_model.h).
#include "training_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>

#include "ccscope/common/sizes.h"

namespace ccscope::reports::training_model {
namespace {

using records::TrainRankRecord;
using records::TrainRunRecord;

// The strategies' rank: the known ones first, in the order of their memory
// savings, then others as they first appear.
std::map<std::string, size_t> strategy_ranks(const TrainingResults& training) {
  std::map<std::string, size_t> rank;
  for (const char* known : {"single", "ddp", "zero1", "zero2", "zero3"})
    rank.emplace(known, rank.size());
  for (const TrainRunRecord& r : training.runs) rank.emplace(r.strategy, rank.size());
  return rank;
}

bool weak(const TrainRunRecord& r) { return r.scaling == "weak"; }

std::vector<Curve> curves(const TrainingResults& training,
                          std::optional<double> TrainRunRecord::*figure) {
  const std::map<std::string, size_t> rank = strategy_ranks(training);
  std::vector<Curve> out;
  std::vector<std::pair<size_t, bool>> keys;  // (strategy rank, weak) of each curve
  for (size_t i = 0; i < training.runs.size(); ++i) {
    const TrainRunRecord& r = training.runs[i];
    if (!(r.*figure)) continue;
    const std::pair<size_t, bool> key{rank.at(r.strategy), weak(r)};
    auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(key);
      out.push_back({r.strategy + (weak(r) ? " (weak)" : ""), {}});
      it = keys.end() - 1;
    }
    Curve& curve = out[static_cast<size_t>(it - keys.begin())];
    if (std::none_of(curve.points.begin(), curve.points.end(),
                     [&](const CurvePoint& p) { return p.ranks == r.ranks; }))
      curve.points.push_back({r.ranks, *(r.*figure), i});
  }
  for (Curve& c : out)
    std::stable_sort(c.points.begin(), c.points.end(),
                     [](const CurvePoint& a, const CurvePoint& b) { return a.ranks < b.ranks; });
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  std::vector<Curve> sorted;
  for (size_t i : order) sorted.push_back(std::move(out[i]));
  return sorted;
}

std::string size_text(double bytes) {
  return format_size(static_cast<size_t>(std::llround(std::max(bytes, 0.0))));
}

std::string ratio_text(double measured, double expected) {
  return expected > 0 ? fmt::format("{:.3f}", measured / expected) : std::string();
}

}  // namespace

std::vector<Curve> speedup_curves(const TrainingResults& training) {
  return curves(training, &TrainRunRecord::speedup);
}

std::vector<Curve> efficiency_curves(const TrainingResults& training) {
  return curves(training, &TrainRunRecord::efficiency);
}

std::vector<LossCurve> loss_curves(const TrainingResults& training) {
  std::vector<LossCurve> out;
  std::map<std::string, size_t> index;
  for (const records::TrainStepRecord& s : training.steps) {
    const auto [it, added] = index.emplace(s.run_id, out.size());
    if (added) out.push_back({s.run_id, {}});
    out[it->second].points.emplace_back(s.step, s.loss);
  }
  for (LossCurve& c : out)
    std::stable_sort(c.points.begin(), c.points.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

std::vector<size_t> run_order(const TrainingResults& training) {
  const std::map<std::string, size_t> rank = strategy_ranks(training);
  std::vector<size_t> order(training.runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const TrainRunRecord &x = training.runs[a], &y = training.runs[b];
    return std::tuple(rank.at(x.strategy), weak(x), x.ranks) <
           std::tuple(rank.at(y.strategy), weak(y), y.ranks);
  });
  return order;
}

RunText run_text(const TrainRunRecord& r) {
  RunText t;
  auto ms = [](double s) { return s > 0 ? fmt::format("{:.4g}", s * 1e3) : std::string(); };
  t.step_median_ms = ms(r.step_median_s);
  t.step_p90_ms = ms(r.step_p90_s);
  t.samples_per_s = r.samples_per_s > 0 ? fmt::format("{:.4g}", r.samples_per_s) : "";
  t.comm_share = fmt::format("{:.1f}%", r.comm_share * 100);
  t.exposed_share = fmt::format("{:.1f}%", r.exposed_comm_share * 100);
  t.bytes = size_text(r.bytes_per_step);
  t.bytes_expected = size_text(r.bytes_per_step_expected);
  t.bytes_ratio = ratio_text(r.bytes_per_step, r.bytes_per_step_expected);
  const double memory = r.memory_parameters_B + r.memory_gradients_B + r.memory_optimizer_B;
  const double expected = r.memory_parameters_expected_B + r.memory_gradients_expected_B +
                          r.memory_optimizer_expected_B;
  t.memory = size_text(memory);
  t.memory_expected = size_text(expected);
  t.memory_ratio = ratio_text(memory, expected);
  if (r.loss_max_rel_diff) t.loss_diff = fmt::format("{:.3g}", *r.loss_max_rel_diff);
  if (r.loss_tolerance) t.loss_tolerance = fmt::format("{:.3g}", *r.loss_tolerance);
  std::optional<bool> pass = r.loss_equivalent;
  if (!pass && r.loss_max_rel_diff && r.loss_tolerance)
    pass = *r.loss_max_rel_diff <= *r.loss_tolerance;
  if (pass) t.loss_check = *pass ? "pass" : "FAIL";
  if (r.speedup) t.speedup = fmt::format("{:.2f}", *r.speedup);
  if (r.efficiency) t.efficiency = fmt::format("{:.0f}%", *r.efficiency * 100);
  return t;
}

namespace {

// A column of the rank table: shown when `shown` holds for a row of the run.
struct RankColumnSpec {
  const char* name;
  bool numeric;
  std::function<bool(const TrainRankRecord&)> shown;
  std::function<std::string(const TrainRankRecord&)> text;
};

std::string ms_text(double s) { return fmt::format("{:.4g}", s * 1e3); }
std::string share_text(double share) { return fmt::format("{:.1f}%", share * 100); }

const std::vector<RankColumnSpec>& rank_columns() {
  using R = TrainRankRecord;
  auto always = [](const R&) { return true; };
  auto bytes = [](double R::*f) {
    return RankColumnSpec{nullptr, true, [f](const R& r) { return r.*f != 0; },
                          [f](const R& r) { return size_text(r.*f); }};
  };
  auto named = [](RankColumnSpec c, const char* name) {
    c.name = name;
    return c;
  };
  // The bubble, its textbook value and their difference show together.
  auto pipelined = [](const R& r) { return r.bubble != 0 || r.bubble_textbook != 0; };
  static const std::vector<RankColumnSpec> columns = {
      {"rank", true, always, [](const R& r) { return std::to_string(r.rank); }},
      {"host", false, [](const R& r) { return !r.host.empty(); },
       [](const R& r) { return r.host; }},
      {"stage", true, [](const R& r) { return r.stage != 0; },
       [](const R& r) { return std::to_string(r.stage); }},
      {"tp rank", true, [](const R& r) { return r.tp_rank != 0; },
       [](const R& r) { return std::to_string(r.tp_rank); }},
      {"dp rank", true, [](const R& r) { return r.dp_rank != 0; },
       [](const R& r) { return std::to_string(r.dp_rank); }},
      {"step median (ms)", true, [](const R& r) { return r.step_median_s != 0; },
       [](const R& r) { return ms_text(r.step_median_s); }},
      named(bytes(&R::tp_bytes), "tp bytes/step"),
      named(bytes(&R::pp_bytes), "pp bytes/step"),
      named(bytes(&R::dp_bytes), "dp bytes/step"),
      named(bytes(&R::ep_bytes), "ep bytes/step"),
      {"pipeline busy (ms)", true, [](const R& r) { return r.pipeline_busy_s != 0; },
       [](const R& r) { return ms_text(r.pipeline_busy_s); }},
      {"pipeline idle (ms)", true, [](const R& r) { return r.pipeline_idle_s != 0; },
       [](const R& r) { return ms_text(r.pipeline_idle_s); }},
      {"bubble", true, pipelined, [](const R& r) { return share_text(r.bubble); }},
      {"textbook bubble", true, pipelined,
       [](const R& r) { return share_text(r.bubble_textbook); }},
      {"difference", true, pipelined,
       [](const R& r) { return fmt::format("{:+.1f} pp", (r.bubble - r.bubble_textbook) * 100); }},
      {"peak in flight", true, [](const R& r) { return r.peak_in_flight != 0; },
       [](const R& r) { return std::to_string(r.peak_in_flight); }},
      {"activations (MB)", true, [](const R& r) { return r.peak_activation_B != 0; },
       [](const R& r) { return fmt::format("{:.3f}", r.peak_activation_B / 1e6); }},
      named(bytes(&R::memory_B), "memory"),
      {"all-to-all share", true, [](const R& r) { return r.all_to_all_share != 0; },
       [](const R& r) { return share_text(r.all_to_all_share); }},
      {"dropped", true, [](const R& r) { return r.dropped_share != 0; },
       [](const R& r) { return fmt::format("{:.3g}%", r.dropped_share * 100); }},
      {"load imbalance", true, [](const R& r) { return r.load_imbalance != 0; },
       [](const R& r) { return fmt::format("{:.2f}", r.load_imbalance); }},
  };
  return columns;
}

// The grid as the run's first record gives it; expert parallelism spans every
// rank of the run (`ranks`: its records).
std::string layout_text(const TrainRankRecord& r, size_t ranks) {
  std::string text = r.strategy == "ep" ? fmt::format("experts over {} ranks", ranks)
                                        : fmt::format("tp {} x pp {} x dp {}", r.tp, r.pp, r.dp);
  if (r.pp > 1) {
    if (!r.schedule.empty()) text += ", " + r.schedule;
    if (r.chunks > 1) text += fmt::format(", {} chunks per stage", r.chunks);
  }
  text += fmt::format(", {} micro-batch{}", r.micro_batches, r.micro_batches == 1 ? "" : "es");
  return text;
}

// The rank records of each run_id (indices, by rank), runs as they first appear.
std::vector<std::vector<size_t>> rank_groups(const TrainingResults& training) {
  std::vector<std::vector<size_t>> groups;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < training.ranks.size(); ++i) {
    const auto [it, added] = index.emplace(training.ranks[i].run_id, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  for (std::vector<size_t>& g : groups)
    std::stable_sort(g.begin(), g.end(), [&](size_t a, size_t b) {
      return training.ranks[a].rank < training.ranks[b].rank;
    });
  return groups;
}

}  // namespace

std::vector<RankTable> rank_tables(const TrainingResults& training) {
  std::vector<RankTable> out;
  for (const std::vector<size_t>& group : rank_groups(training)) {
    const TrainRankRecord& first = training.ranks[group.front()];
    RankTable table{first.run_id, first.strategy, layout_text(first, group.size()), {}, {}};
    std::vector<const RankColumnSpec*> shown;
    for (const RankColumnSpec& c : rank_columns())
      if (std::any_of(group.begin(), group.end(),
                      [&](size_t i) { return c.shown(training.ranks[i]); })) {
        shown.push_back(&c);
        table.columns.push_back({c.name, c.numeric});
      }
    for (size_t i : group) {
      std::vector<std::string> row;
      for (const RankColumnSpec* c : shown) row.push_back(c->text(training.ranks[i]));
      table.rows.push_back(std::move(row));
    }
    out.push_back(std::move(table));
  }
  return out;
}

std::vector<BubbleChart> bubble_charts(const TrainingResults& training) {
  std::vector<BubbleChart> out;
  for (const std::vector<size_t>& group : rank_groups(training)) {
    if (std::none_of(group.begin(), group.end(), [&](size_t i) {
          return training.ranks[i].pipeline_s > 0 || training.ranks[i].bubble_textbook > 0;
        }))
      continue;
    std::map<int64_t, StageBubble> stages;
    for (size_t i : group) {
      const TrainRankRecord& r = training.ranks[i];
      const auto [it, added] =
          stages.emplace(r.stage, StageBubble{r.stage, r.rank, r.bubble, r.bubble_textbook});
      if (!added && r.bubble > it->second.measured)
        it->second = {r.stage, r.rank, r.bubble, r.bubble_textbook};
    }
    BubbleChart chart{training.ranks[group.front()].run_id, {}};
    for (const auto& [stage, bubble] : stages) chart.stages.push_back(bubble);
    out.push_back(std::move(chart));
  }
  return out;
}

}  // namespace ccscope::reports::training_model
