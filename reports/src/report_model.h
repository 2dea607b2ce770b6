#pragma once
// What the HTML and markdown reports show, computed once from the loaded runs:
// one panel per collective, one series per (run, in-place variant), one point
// per message size. Private to reports/src.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/common/sizes.h"
#include "ccscope/reports/loaded_results.h"

namespace ccscope::reports::report_model {

struct Point {
  size_t size_bytes = 0;
  double busbw_GBps = 0;  // median over the samples (repeats) of this size
  int samples = 0;
  double time_s = 0;  // median over the samples with a time; 0 when none has one
  // The widest 95% interval of those samples' times, % (ccscope.bench/5's
  // ci_half_width_percent; busbw's is the same share); 0 when none says.
  double ci_percent = 0;
};

struct Series {
  size_t run = 0;                // index into the runs
  std::optional<bool> in_place;  // absent when the source did not say
  std::vector<Point> points;     // by increasing size; only sizes with a busbw
  int64_t wrong = 0;             // summed over the records
  bool any_wrong_known = false;
};

struct Panel {
  std::string collective;
  std::vector<Series> series;  // by run, then out-of-place before in-place
};

// Speed-up of one collective across rank counts, at the largest size that every
// compared run measured.
struct ScalingRow {
  size_t run = 0;
  int ranks = 0;
  double busbw_GBps = 0;
  double speedup = 0;     // (ranks x busbw) / (ranks0 x busbw0)
  double efficiency = 0;  // speedup / (ranks / ranks0) = busbw / busbw0
};
// The same at a size a training job sends (the probe's gradient buckets), its
// busbw interpolated between the measured sizes around it (log2 of size).
struct BucketScaling {
  size_t size_bytes = 0;
  std::vector<ScalingRow> rows;  // rank counts whose sweep covers the size
};
struct Scaling {
  std::string collective;
  std::optional<bool> in_place;
  size_t size_bytes = 0;
  // By increasing rank count; rows[0] is the reference. Empty when the runs
  // share no message size (size_bytes is then 0).
  std::vector<ScalingRow> rows;
  std::vector<BucketScaling> at_buckets;  // at kTrainingBucketSizes, where >= 2 rows
};

// The gradient bucket sizes of the training probe (and PyTorch DDP): the first
// bucket's 1 MiB and bucket_cap_mb's 25 MiB (TrainOptions' first_bucket_bytes
// and bucket_bytes, training_probe/trainer.h).
inline constexpr size_t kTrainingBucketSizes[] = {size_t{1} << 20, size_t{25} << 20};

// busbw at `size_bytes`, linear in log2(size) between the two measured points
// around it (exact at a measured size); nullopt outside the measured range.
std::optional<double> interpolate_busbw(const std::vector<Point>& points, size_t size_bytes);

std::vector<Panel> build_panels(const std::vector<LoadedRun>& runs);
// Collectives whose runs cover at least two rank counts above 1 (the first run
// of each rank count is used).
std::vector<Scaling> build_scaling(const std::vector<LoadedRun>& runs,
                                   const std::vector<Panel>& panels);

// Rank count of a run: its metadata, else its first record that says; 0 unknown.
int run_ranks(const LoadedRun& run);
int run_nodes(const LoadedRun& run);
// "run.csv" (the file name; "#2 run.csv" style when names repeat).
std::vector<std::string> run_names(const std::vector<LoadedRun>& runs);
// "node1, node2, node3 and 5 more": distinct hosts in rank order.
std::string host_set(const RunMetadata& metadata);
std::string in_place_name(const std::optional<bool>& in_place);

using ccscope::format_size;  // 8 B, 1 KiB, 1.5 MiB, 1 GiB

// Unicode bidirectional controls (U+061C, U+200E-F, U+202A-E, U+2066-9): in a
// hostname or file name they reorder the text around them ("gnp.exe" shown as
// "exe.png"), so reports show them as \u202e instead of obeying them.
bool is_bidi_control(uint32_t code_point);
std::string show_bidi_controls(std::string_view utf8);
// busbw as nccl-tests prints it: two decimals.
std::string format_GBps(double value);

}  // namespace ccscope::reports::report_model
