#include "ccscope/training_probe/summary.h"

#include <array>

#include "ccscope/common/statistics.h"

namespace ccscope::training_probe {

namespace {

// `figures(step)`: its {step, compute, communication, exposed} times and bytes.
template <typename Step, typename Figures>
RunSummary summarize_by(std::span<const Step> steps, size_t warmup, size_t global_batch,
                        Figures figures) {
  RunSummary s;
  const size_t first = warmup < steps.size() ? warmup : 0;
  std::vector<double> step, compute, comm, exposed, bytes;
  for (size_t i = first; i < steps.size(); ++i) {
    const std::array<double, 5> f = figures(steps[i]);
    step.push_back(f[0]);
    compute.push_back(f[1]);
    comm.push_back(f[2]);
    exposed.push_back(f[3]);
    bytes.push_back(f[4]);
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

}  // namespace

RunSummary summarize(std::span<const StepFigures> steps, size_t warmup, size_t global_batch) {
  return summarize_by(steps, warmup, global_batch, [](const StepFigures& f) {
    return std::array{f.step_seconds, f.compute_seconds, f.comm_seconds, f.exposed_comm_seconds,
                      f.bytes_sent};
  });
}

RunSummary summarize(std::span<const records::TrainStepRecord> steps, size_t warmup,
                     size_t global_batch) {
  return summarize_by(steps, warmup, global_batch, [](const records::TrainStepRecord& r) {
    return std::array{r.step_s, r.compute_s, r.comm_s, r.exposed_comm_s, r.bytes_sent};
  });
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
