// Training results as the reports show them (see training_model.h).
#include "training_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "ccscope/common/sizes.h"

namespace ccscope::reports::training_model {
namespace {

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

}  // namespace ccscope::reports::training_model
