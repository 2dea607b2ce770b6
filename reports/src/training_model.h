#pragma once
// What the HTML and markdown reports show of training results, computed once:
// speed-up and efficiency curves per strategy, loss curves per run, and the
// runs' figures as table text. Private to reports/src.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/reports/training_results.h"

namespace ccscope::reports::training_model {

struct CurvePoint {
  int64_t ranks = 0;
  double value = 0;
  size_t run = 0;  // index into TrainingResults::runs
};
// One strategy (strong and weak scaling apart): its runs that carry the figure,
// by increasing rank count; of runs with the same rank count the first given.
struct Curve {
  std::string label;  // "ddp", "ddp (weak)"
  std::vector<CurvePoint> points;
};
// Strategies in the order single, ddp, zero1, zero2, zero3, then others as
// they first appear.
std::vector<Curve> speedup_curves(const TrainingResults& training);
std::vector<Curve> efficiency_curves(const TrainingResults& training);

struct LossCurve {
  std::string run_id;
  std::vector<std::pair<int64_t, double>> points;  // (step, loss) by step
};
// One per run_id of the step records, as they first appear.
std::vector<LossCurve> loss_curves(const TrainingResults& training);

// The runs in table order: by strategy (as the curves), scaling, rank count.
std::vector<size_t> run_order(const TrainingResults& training);

// Table text of one run's figures; "" where the record holds none.
struct RunText {
  std::string step_median_ms, step_p90_ms, samples_per_s;
  std::string comm_share, exposed_share;  // "50.4%"
  std::string bytes, bytes_expected, bytes_ratio;
  std::string memory, memory_expected, memory_ratio;  // parameters + gradients + optimizer
  std::string loss_diff, loss_tolerance, loss_check;  // check: "pass", "FAIL", ""
  std::string speedup, efficiency;
};
RunText run_text(const records::TrainRunRecord& run);

}  // namespace ccscope::reports::training_model
