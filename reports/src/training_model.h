#pragma once
// What the HTML and markdown reports show of training results, computed once:
// speed-up and efficiency curves per strategy, loss curves per run, the runs'
// figures as table text, and the model-parallel runs' rank tables and bubbles
// per stage. Private to reports/src.
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

// One model-parallel run's ccscope.train_rank records as a table: a row per
// record by rank (records of the same rank in the order given), and only the
// columns in which some row of the run is not zero (or empty).
struct RankColumn {
  std::string name;     // "pp bytes/step"
  bool numeric = true;  // right-aligned
};
struct RankTable {
  std::string run_id, strategy;
  // From the lowest rank's record: "tp 1 x pp 2 x dp 1, 1f1b, 4 micro-batches"
  // (ep: "experts over 2 ranks, 1 micro-batch").
  std::string layout;
  std::vector<RankColumn> columns;
  std::vector<std::vector<std::string>> rows;  // one cell per column
};
// One per run_id of the rank records, as they first appear.
std::vector<RankTable> rank_tables(const TrainingResults& training);

// A pipelined run's bubble per stage: the recorded bubble of the stage's most
// idle rank (1 - pipeline_busy_s / pipeline_s) beside that rank's textbook
// (N - 1) / (v M + N - 1).
struct StageBubble {
  int64_t stage = 0;
  int64_t rank = 0;  // the stage's rank with the largest bubble
  double measured = 0, textbook = 0;
};
struct BubbleChart {
  std::string run_id;
  std::vector<StageBubble> stages;  // by stage
};
// One per run_id whose records have a pipeline (pipeline_s or bubble_textbook
// above 0 in a row), as they first appear.
std::vector<BubbleChart> bubble_charts(const TrainingResults& training);

}  // namespace ccscope::reports::training_model
