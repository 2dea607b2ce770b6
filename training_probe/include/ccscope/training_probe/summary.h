#pragma once
// A run's figures from its steps (medians and p90 after warm-up, shares of the
// step), and scaling against one rank: pure functions of the step figures.
#include <cstddef>
#include <span>
#include <vector>

#include "ccscope/records/training_record.h"
#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {

struct RunSummary {
  size_t measured_steps = 0;  // steps after warm-up (all steps when there are no more)
  double step_median_s = 0;
  double step_p90_s = 0;
  double compute_median_s = 0;
  double comm_median_s = 0;
  double exposed_comm_median_s = 0;
  double comm_share = 0;          // comm median / step median
  double exposed_comm_share = 0;  // exposed median / step median
  double samples_per_s = 0;       // global batch / step median
  double bytes_per_step = 0;      // median
};
// `steps` hold the slowest rank's figures per step.
RunSummary summarize(std::span<const StepFigures> steps, size_t warmup, size_t global_batch);
// The same over step records (their times and bytes the slowest rank's).
RunSummary summarize(std::span<const records::TrainStepRecord> steps, size_t warmup,
                     size_t global_batch);

// Strong scaling (the same global batch at every rank count): speed-up
// T(1)/T(N), efficiency T(1)/(N T(N)). Weak scaling (the same per-rank
// batch): speed-up in samples/s N T(1)/T(N), efficiency T(1)/T(N).
struct Scaling {
  double speedup = 0;
  double efficiency = 0;
};
Scaling scaling(double one_rank_step_s, double step_s, size_t ranks, bool weak);

}  // namespace ccscope::training_probe
