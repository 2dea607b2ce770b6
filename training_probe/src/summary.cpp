#include "ccscope/training_probe/summary.h"

#include "ccscope/common/statistics.h"

namespace ccscope::training_probe {

RunSummary summarize(std::span<const StepFigures> steps, size_t warmup, size_t global_batch) {
  RunSummary s;
  const size_t first = warmup < steps.size() ? warmup : 0;
  std::vector<double> step, compute, comm, exposed, bytes;
  for (size_t i = first; i < steps.size(); ++i) {
    step.push_back(steps[i].step_seconds);
    compute.push_back(steps[i].compute_seconds);
    comm.push_back(steps[i].comm_seconds);
    exposed.push_back(steps[i].exposed_comm_seconds);
    bytes.push_back(steps[i].bytes_sent);
  }
  s.measured_steps = step.size();
  s.step_median_s = median(step);
  s.step_p90_s = percentile(step, 90);
  s.compute_median_s = median(compute);
  s.comm_median_s = median(comm);
  s.exposed_comm_median_s = median(exposed);
  s.bytes_per_step = median(bytes);
  if (s.step_median_s > 0) {
    s.comm_share = s.comm_median_s / s.step_median_s;
    s.exposed_comm_share = s.exposed_comm_median_s / s.step_median_s;
    s.samples_per_s = static_cast<double>(global_batch) / s.step_median_s;
  }
  return s;
}

Scaling scaling(double one_rank_step_s, double step_s, size_t ranks, bool weak) {
  Scaling out;
  if (!(step_s > 0) || ranks == 0) return out;
  const double n = static_cast<double>(ranks);
  if (weak) {
    out.efficiency = one_rank_step_s / step_s;
    out.speedup = n * out.efficiency;
  } else {
    out.speedup = one_rank_step_s / step_s;
    out.efficiency = out.speedup / n;
  }
  return out;
}

}  // namespace ccscope::training_probe
