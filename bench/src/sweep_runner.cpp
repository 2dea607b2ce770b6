#include "sweep_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "adaptive.h"
#include "ccscope/collectives/error.h"
#include "ccscope/common/small_file.h"
#include "collective_calls.h"
#include "memory_budget.h"
#include "patterns.h"
#include "run_metadata.h"
#include "sizes.h"
#include "statistics.h"

namespace ccscope::bench {
namespace {

// Host staging for device buffers: bounded so the check never holds a second
// full-size copy of a message.
constexpr size_t kStagingBytes = size_t{16} << 20;
// Timing stamps per clock: the NCCL clock holds one CUDA event per stamp.
constexpr size_t kStampsPerClock = 4096;
// Reading a clock costs about 25 ns on a host (more for a CUDA event): an
// operation faster than this is timed in samples of several iterations, so
// that the stamps cost well under 1% of what they measure.
constexpr double kMinSampleSeconds = 10e-6;
// Adaptive sampling: a timed batch lasts at least this long, so that the
// clock and the reduction over ranks after every batch (tens of microseconds
// over MPI) cost a few percent of what a batch measures at most.
constexpr double kMinBatchSeconds = 1e-3;
// ... and the warm-up at most this share of the size's time budget (at least
// one operation, at most -w).
constexpr double kWarmupShareOfBudget = 0.1;

// Reads or writes a region of a communicator buffer through host memory, in
// chunks (direct for host buffers).
class RegionAccess {
 public:
  RegionAccess(Communicator& comm, size_t element_bytes)
      : comm_(comm), element_bytes_(element_bytes) {}

  // Calls produce(first_element, count, host_chunk) and stores the chunk.
  void write(Buffer& buffer, size_t element_offset, size_t count,
             const std::function<void(size_t, size_t, void*)>& produce) {
    if (comm_.memory_kind() == MemoryKind::kHost) {
      produce(0, count, static_cast<char*>(buffer.data()) + element_offset * element_bytes_);
      return;
    }
    for_chunks(count, [&](size_t first, size_t n) {
      produce(first, n, staging());
      comm_.copy_from_host(buffer, (element_offset + first) * element_bytes_, staging(),
                           n * element_bytes_);
    });
  }
  // Calls consume(first_element, count, host_chunk) on the region's contents.
  void read(Buffer& buffer, size_t element_offset, size_t count,
            const std::function<void(size_t, size_t, const void*)>& consume) {
    if (comm_.memory_kind() == MemoryKind::kHost) {
      consume(0, count, static_cast<const char*>(buffer.data()) + element_offset * element_bytes_);
      return;
    }
    for_chunks(count, [&](size_t first, size_t n) {
      comm_.copy_to_host(staging(), buffer, (element_offset + first) * element_bytes_,
                         n * element_bytes_);
      consume(first, n, staging());
    });
  }

 private:
  void* staging() {
    if (staging_.empty()) staging_.resize(kStagingBytes);
    return staging_.data();
  }
  void for_chunks(size_t count, const std::function<void(size_t, size_t)>& body) {
    const size_t per_chunk = std::max<size_t>(1, kStagingBytes / element_bytes_);
    for (size_t first = 0; first < count; first += per_chunk)
      body(first, std::min(per_chunk, count - first));
  }

  Communicator& comm_;
  size_t element_bytes_;
  std::vector<unsigned char> staging_;
};

// Where one measurement reads and writes, in elements of the two buffers.
struct Placement {
  Buffer* input_buffer;
  size_t input_offset;
  Buffer* output_buffer;
  size_t output_offset;
};

// In place, input and output both lie in the receive buffer, at the
// layout's offsets (nccl-tests' sendInplaceOffset / recvInplaceOffset).
Placement place(bool in_place, const Layout& layout, Buffer& send, Buffer& recv) {
  if (!in_place) return {&send, 0, &recv, 0};
  return {&recv, layout.send_in_place_offset, &recv, layout.recv_in_place_offset};
}

// The record's machine-readable statistic (nccl-tests' -a 0/1/2/3).
std::string time_statistic_token(TimeAcrossRanks mode) {
  switch (mode) {
    case TimeAcrossRanks::kRank0:
      return "rank0";
    case TimeAcrossRanks::kAverage:
      return "avg";
    case TimeAcrossRanks::kMinimum:
      return "min";
    case TimeAcrossRanks::kMaximum:
      return "max";
  }
  return "";
}

class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)) {}
  ~ProgressLine() {
    if (enabled_) std::fputs("\r\033[K", stderr);
  }
  void show(const std::string& text) {
    if (enabled_) std::fprintf(stderr, "\r\033[K[ccscope bench] %s", text.c_str());
  }

 private:
  bool enabled_;
};

std::string fmt_value(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// NCCL computes a floating-point average as a pre-multiplied sum (x * 1/n on
// every rank): exact only when n is a power of two. Elsewhere the check allows
// 2 ulps (nccl-tests' bound), which the two-contributor pattern keeps meaningful.
int check_ulps(const BenchOptions& options, const Communicator& comm) {
  if (options.op != ReduceOp::kAvg || !is_floating(options.type) ||
      !has_reduction(options.collective))
    return 0;
  if (comm.backend_name() != "nccl" || is_power_of_two(comm.size())) return 0;
  return 2;
}

// The first rank's non-empty `problem` (every rank gets the same), or "".
std::string first_problem_over_ranks(const ControlPlane& control, const std::string& problem) {
  for (const std::string& text : control.all_gather(problem))
    if (!text.empty()) return text;
  return "";
}

// How long a wait for issued operations may take: the watchdog's timeout plus
// a margin (it reports first); -T 0 (no timeout, as nccl-tests) waits for ever.
std::chrono::milliseconds wait_bound(double timeout_seconds) {
  // A century, not milliseconds::max(): backends add it to now().
  if (timeout_seconds <= 0) return std::chrono::hours(24 * 365 * 100);
  return std::chrono::milliseconds(static_cast<long long>(timeout_seconds * 1000) + 5000);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One rank's timing of one (size, placement).
struct Timing {
  double seconds = 0;           // per operation: host wall clock over the timed pass
  double issue_seconds = 0;     // per operation: host time to issue them (nccl-tests' -C)
  size_t group = 1;             // iterations per distribution sample
  std::vector<double> samples;  // per operation, one per sample of `group` iterations
  size_t iterations = 0;        // timed iterations
  size_t warmup = 0;            // untimed iterations before them
  // Adaptive sampling: samples are the timed batches' reported statistic over
  // ranks (the same on every rank), their median is the reported time.
  bool adaptive = false;
  bool converged = false;
};

// One rank's checks of one (size, placement).
struct Checks {
  CheckResult first;  // this rank's first wrong element, if any
  size_t wrong = 0;   // this rank's wrong elements in the failing check
  int ran = 0;        // checks run (stops at the first that fails, as nccl-tests)
};

// Across ranks.
struct Figures {
  double rank_min = 0, rank_avg = 0, rank_max = 0, reported = 0;
  int64_t wrong = 0;
  int failed_checks = 0;  // (rank, check) pairs with wrong elements, as nccl-tests counts them
  std::vector<double> samples;  // element-wise max over ranks
  int stop_signal = 0;          // the highest signal pending on any rank (0: none)
};

// Everything one sweep shares between its steps.
class Sweep {
 public:
  Sweep(const BenchOptions& options, const ControlPlane& control, const JobShape& shape,
        Communicator& comm, SweepMonitor& monitor, records::Reporter* reporter, int repeat)
      : options_(options),
        control_(control),
        shape_(shape),
        comm_(comm),
        monitor_(monitor),
        reporter_(reporter),
        repeat_(repeat),
        element_bytes_(element_size(options.type)),
        rank_(comm.rank()),
        ranks_(comm.size()),
        access_(comm, element_bytes_),
        wait_bound_(wait_bound(options.timeout_seconds)),
        call_(collective_call(options.collective)) {}

  // Buffers of -e bytes each, as nccl-tests: "" or why they could not be had
  // (the same on every rank).
  std::string allocate() {
    buffer_bytes_ = options_.max_bytes;
    std::string problem;
    try {
      send_ = comm_.allocate(buffer_bytes_);
      recv_ = comm_.allocate(buffer_bytes_);
      // Known contents everywhere (rotation reads all of it): no NaN or
      // denormal slows a host reduction down.
      for (Buffer* buffer : {send_.get(), recv_.get()})
        access_.write(*buffer, 0, buffer_bytes_ / element_bytes_, [&](size_t, size_t n, void* out) {
          std::memset(out, 0, n * element_bytes_);
        });
    } catch (const std::exception& error) {  // BackendError, std::bad_alloc
      problem = "cannot allocate the buffers of -e " + format_size(options_.max_bytes) + " (2 x " +
                format_size(buffer_bytes_) + ") on rank " + std::to_string(rank_) + " (" +
                shape_.hostname + "): " + error.what() + "; use a smaller -e";
    }
    return first_problem_over_ranks(control_, problem);
  }

  Timing measure(const Layout& layout, bool in_place, const std::string& what);
  Timing measure_adaptive(const Placement& at, const Layout& layout, const std::string& what);
  Checks check(const Layout& layout, bool in_place, const std::string& what);
  Figures reduce_across_ranks(const Timing& timing, const Checks& checks, int pending_signal) const;
  records::BenchRecord make_record(const Layout& layout, bool in_place, const Timing& timing,
                                   const Figures& figures) const;
  void report_wrong(const std::string& what, const Checks& checks, int64_t wrong) const;

 private:
  // Where iteration `iteration` reads and writes.
  struct Pointers {
    const void* send;
    void* recv;
  };
  Pointers pointers(const Placement& at, const Layout& layout, size_t iteration) const {
    const size_t shift =
        rotation_offset(layout.size_bytes, buffer_bytes_, iteration, options_.rotate_buffers);
    return {
        static_cast<char*>(at.input_buffer->data()) + shift + at.input_offset * element_bytes_,
        static_cast<char*>(at.output_buffer->data()) + shift + at.output_offset * element_bytes_};
  }
  Placement placement(const Layout& layout, bool in_place) {
    return place(in_place, layout, *send_, *recv_);
  }
  void run_collective(const Layout& layout, const Pointers& p) {
    call_(comm_, {p.send, p.recv, &layout, options_.type, options_.op, options_.root});
  }
  // One timed iteration: -m operations (nccl-tests' agg_iters) in one group.
  void issue_iteration(const Placement& at, const Layout& layout, size_t iteration) {
    const size_t per = static_cast<size_t>(options_.aggregate_iterations);
    if (per > 1) comm_.group_start();
    for (size_t k = 0; k < per; ++k) {
      const Pointers p = pointers(at, layout, iteration * per + k);
      monitor_.operation_started();
      run_collective(layout, p);
    }
    if (per > 1) comm_.group_end();
  }
  void run_stamped(const Placement& at, const Layout& layout, size_t iterations, size_t group,
                   std::vector<double>* samples);
  void prepare(const Placement& at, const Layout& layout, bool in_place, const DataPattern& pattern,
               bool clear_output);
  void inject_faults(const Placement& at, const Layout& layout);

  const BenchOptions& options_;
  const ControlPlane& control_;
  const JobShape& shape_;
  Communicator& comm_;
  SweepMonitor& monitor_;
  records::Reporter* reporter_;
  int repeat_;
  size_t element_bytes_;
  int rank_;
  int ranks_;
  RegionAccess access_;
  std::chrono::milliseconds wait_bound_;
  CollectiveCall call_;
  size_t buffer_bytes_ = 0;
  std::unique_ptr<Buffer> send_, recv_;
};

// Runs `iterations` back to back with a stamp after every `group` of them
// (the last group may be shorter), then waits for them; each completed stamp
// counts as progress for the watchdog, so a long queue of asynchronous (NCCL)
// operations is not taken for a hang. Stamps (CUDA events) are taken in chunks
// of kStampsPerClock so that a huge -n does not allocate them all up front.
// samples[j] = the mean seconds per operation of group j.
void Sweep::run_stamped(const Placement& at, const Layout& layout, size_t iterations, size_t group,
                        std::vector<double>* samples) {
  const size_t chunk = kStampsPerClock * group;
  const double per_iteration = static_cast<double>(options_.aggregate_iterations);
  for (size_t begin = 0; begin < iterations; begin += chunk) {
    const size_t count = std::min(chunk, iterations - begin);
    const size_t stamps = (count + group - 1) / group;
    auto clock = comm_.make_clock(stamps + 1);
    clock->stamp(0);
    for (size_t i = 0; i < count; ++i) {
      issue_iteration(at, layout, begin + i);
      if (options_.blocking) comm_.wait(wait_bound_);
      if ((i + 1) % group == 0 || i + 1 == count) clock->stamp((i + group) / group);
    }
    for (size_t done = 1; done <= stamps;) {
      if (clock->completed(done)) {
        ++done;
        monitor_.operation_started();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
    comm_.wait(wait_bound_);
    if (samples != nullptr)
      for (size_t j = 0; j < stamps; ++j) {
        const size_t in_group = std::min(group, count - j * group);
        (*samples)[begin / group + j] =
            clock->seconds_between(j, j + 1) / (static_cast<double>(in_group) * per_iteration);
      }
  }
}

Timing Sweep::measure(const Layout& layout, bool in_place, const std::string& what) {
  const Placement at = placement(layout, in_place);
  // Inputs of their own seed, which no check uses.
  const DataPattern inputs(options_.collective, options_.type, options_.op, ranks_, options_.root,
                           layout.param_count,
                           pattern_seed(options_.collective, options_.type, options_.op,
                                        layout.size_bytes, in_place, repeat_, -1),
                           0, in_place);
  prepare(at, layout, in_place, inputs, true);

  if (options_.target_ci_percent > 0) return measure_adaptive(at, layout, what);
  monitor_.begin_phase(what + ", warm-up");
  // At least one untimed operation, as nccl-tests (its -w 0 still issues one):
  // the first call of a size pays for connections and caches.
  const size_t warmup = std::max<size_t>(1, static_cast<size_t>(options_.warmup_iterations));
  std::vector<double> warmup_seconds(warmup);
  run_stamped(at, layout, warmup, 1, &warmup_seconds);
  // Every rank must use the same sample size (samples are reduced element by
  // element across ranks): the fastest rank's median warm-up iteration sets it.
  double typical = median(warmup_seconds);
  control_.all_reduce_min({&typical, 1});
  const size_t iterations = static_cast<size_t>(options_.iterations);
  Timing timing;
  timing.iterations = iterations;
  timing.warmup = warmup;
  timing.group =
      iterations_per_sample(typical * options_.aggregate_iterations, iterations, kMinSampleSeconds);

  // The headline figure, nccl-tests' way: the host clock around -n iterations
  // issued back to back and one wait at the end, no event between them.
  monitor_.begin_phase(what + ", timed");
  control_.barrier();
  const double operations = static_cast<double>(iterations) * options_.aggregate_iterations *
                            std::max(1, options_.graph_launches);
  if (options_.graph_launches > 0) {
    auto graph = comm_.capture([&] {
      for (size_t i = 0; i < iterations; ++i) issue_iteration(at, layout, i);
    });
    if (!graph)
      throw UsageError("-G " + std::to_string(options_.graph_launches) + ": the " +
                       comm_.backend_name() + " backend cannot capture a graph; use -G 0");
    control_.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int launch = 0; launch < options_.graph_launches; ++launch) {
      monitor_.operation_started();
      graph->launch();
    }
    // nccl-tests divides the issue time by -n x -m only, not by the launches.
    timing.issue_seconds = seconds_since(start) / (operations / options_.graph_launches);
    comm_.wait(wait_bound_);
    timing.seconds = seconds_since(start) / operations;
  } else {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < iterations; ++i) {
      issue_iteration(at, layout, i);
      if (options_.blocking) comm_.wait(wait_bound_);
    }
    timing.issue_seconds = seconds_since(start) / operations;
    comm_.wait(wait_bound_);
    timing.seconds = seconds_since(start) / operations;
  }

  // The distribution (p50/p99) from a second pass with a stamp per sample, so
  // that no stamp sits between the operations of the headline figure.
  monitor_.begin_phase(what + ", per-iteration distribution");
  timing.samples.assign((iterations + timing.group - 1) / timing.group, 0.0);
  run_stamped(at, layout, iterations, timing.group, &timing.samples);
  monitor_.end_phase();
  return timing;
}

// Adaptive sampling (--target-ci): a warm-up bounded by the time budget,
// then timed batches (host wall clock over a batch of iterations issued back
// to back plus one wait, as the fixed headline) until stopping_decision says
// so. After each batch one reduction over ranks gives every rank the batch's
// reported statistic (-a) and whether any rank's budget is spent, so every
// rank decides alike and they stop together. The row reports the batches'
// median: on a loaded host their stream is bimodal and heavy-tailed, and the
// median's interval narrows where the mean's would need tens of thousands.
Timing Sweep::measure_adaptive(const Placement& at, const Layout& layout, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  const double budget = options_.max_seconds_per_size;
  const double per_iteration = static_cast<double>(options_.aggregate_iterations);
  monitor_.begin_phase(what + ", warm-up");
  std::vector<double> first(1);
  run_stamped(at, layout, 1, 1, &first);
  // The warm-up count and batch length follow from agreed figures (every rank
  // must issue as many operations): the slowest first call, the smallest budget.
  double agreed_start[2] = {first[0], -budget};
  control_.all_reduce_max(agreed_start);
  const double one = agreed_start[0] * per_iteration;  // one iteration, slowest rank
  const double sizing_budget = -agreed_start[1];
  const double wanted = one > 0 ? std::floor(kWarmupShareOfBudget * sizing_budget / one) : 1e9;
  const size_t warmup = static_cast<size_t>(
      std::clamp(wanted, 1.0, static_cast<double>(std::max(1, options_.warmup_iterations))));
  std::vector<double> warmup_seconds(warmup - 1);
  run_stamped(at, layout, warmup - 1, 1, &warmup_seconds);
  double typical = warmup_seconds.empty() ? agreed_start[0] : median(warmup_seconds);
  control_.all_reduce_min({&typical, 1});
  // The stop vote's budget: never less than the fixed sweep's time for this row.
  const double row_budget = row_budget_seconds(budget, typical * per_iteration);

  Timing timing;
  timing.adaptive = true;
  timing.warmup = warmup;
  const StoppingRule rule{options_.target_ci_percent / 100};
  // At least twice the minimum of batches fit the budget.
  const double max_batch_seconds = sizing_budget / (2.0 * static_cast<double>(rule.min_samples));
  timing.group = batch_iterations(typical * per_iteration, kMinBatchSeconds, max_batch_seconds);
  monitor_.begin_phase(what + ", timed batches");
  control_.barrier();
  double own_seconds = 0;
  size_t issued = 0;  // timed iterations issued (buffer rotation's index)
  const TimeAcrossRanks mode = options_.time_across_ranks;
  const bool by_maximum = mode == TimeAcrossRanks::kMaximum || mode == TimeAcrossRanks::kMinimum;
  for (StopReason reason = StopReason::kContinue; reason == StopReason::kContinue;) {
    const auto batch_start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < timing.group; ++i) {
      issue_iteration(at, layout, issued + i);
      if (options_.blocking) comm_.wait(wait_bound_);
    }
    comm_.wait(wait_bound_);
    const double batch_seconds = seconds_since(batch_start);
    monitor_.operation_started();
    own_seconds += batch_seconds;
    timing.iterations += timing.group;
    issued += timing.group;
    const double mine = batch_seconds / (static_cast<double>(timing.group) * per_iteration);
    // The statistic in the form its reduction takes, and the budget vote.
    double agreed[2] = {mode == TimeAcrossRanks::kMinimum                         ? -mine
                        : mode == TimeAcrossRanks::kRank0 && control_.rank() != 0 ? 0.0
                                                                                  : mine,
                        seconds_since(start) >= row_budget ? 1.0 : 0.0};
    if (by_maximum)
      control_.all_reduce_max(agreed);
    else
      control_.all_reduce_sum(agreed);
    const double sample = mode == TimeAcrossRanks::kMinimum   ? -agreed[0]
                          : mode == TimeAcrossRanks::kAverage ? agreed[0] / control_.size()
                                                              : agreed[0];
    timing.samples.push_back(sample);
    // Batches far shorter than the clock span (the warm-up's few operations
    // were slowed) regrow the batch: by the samples' median (a stalled batch
    // among them does not hide the others), looked at after each of the first
    // batches and then at 8, 16, ... 1024 of them; agreed samples, so the same
    // on every rank; the shorter batches' samples are dropped.
    const size_t n = timing.samples.size();
    if ((n <= rule.min_samples || (n <= 1024 && (n & (n - 1)) == 0)) && !(agreed[1] > 0)) {
      const double median_batch_seconds =
          median(timing.samples) * static_cast<double>(timing.group) * per_iteration;
      const size_t regrown = regrown_batch_iterations(timing.group, median_batch_seconds,
                                                      kMinBatchSeconds, max_batch_seconds);
      if (regrown > timing.group) {
        // The dropped batches were warm-up after all: the record's
        // iterations are those behind its figure.
        timing.warmup += timing.iterations;
        timing.iterations = 0;
        own_seconds = 0;
        timing.group = regrown;
        timing.samples.clear();
        continue;
      }
    }
    reason = stopping_decision(timing.samples, agreed[1] > 0, rule);
    timing.converged = reason == StopReason::kConverged;
  }
  timing.seconds = own_seconds / (static_cast<double>(timing.iterations) * per_iteration);
  timing.issue_seconds = timing.seconds;  // (-C 1 is refused with --target-ci)
  monitor_.end_phase();
  return timing;
}

void Sweep::prepare(const Placement& at, const Layout& layout, bool in_place,
                    const DataPattern& pattern, bool clear_output) {
  // A stale output must not pass the check: the output is filled first, unless
  // (in place) the input about to be written covers all of it.
  const bool input_covers_output = in_place &&
                                   layout.send_in_place_offset <= layout.recv_in_place_offset &&
                                   layout.recv_in_place_offset + layout.recv_count <=
                                       layout.send_in_place_offset + layout.send_count;
  if (clear_output && !input_covers_output)
    access_.write(
        *at.output_buffer, at.output_offset, layout.recv_count,
        [&](size_t, size_t n, void* out) { std::memset(out, kOutputFill, n * element_bytes_); });
  access_.write(
      *at.input_buffer, at.input_offset, layout.send_count,
      [&](size_t first, size_t n, void* out) { pattern.fill_input(rank_, first, n, out); });
}

// Test-only faults (--test-corrupt-rank, --test-shift-block): the check must see them.
void Sweep::inject_faults(const Placement& at, const Layout& layout) {
  if (rank_ == options_.corrupt_rank && layout.recv_count > 0) {
    const size_t victim = layout.recv_count / 2;
    std::vector<unsigned char> element(element_bytes_);
    access_.read(
        *at.output_buffer, at.output_offset + victim, 1,
        [&](size_t, size_t, const void* in) { std::memcpy(element.data(), in, element_bytes_); });
    std::vector<unsigned char> before(element);
    store_element(element.data(), options_.type, 0,
                  load_element(element.data(), options_.type, 0) + 1);
    // x + 1 leaves a NaN (an output the collective must leave untouched holds
    // the all-ones fill) as it was: change a bit instead.
    if (element == before) element[0] ^= 1;
    access_.write(*at.output_buffer, at.output_offset + victim, 1, [&](size_t, size_t, void* out) {
      std::memcpy(out, element.data(), element_bytes_);
    });
  }
  if (rank_ == options_.shift_block_rank && layout.recv_count > 1) {
    // The first block moved by one element, as a backend with an off-by-one
    // offset would deliver it.
    // One rank's block where the output is made of blocks (param_count is then
    // smaller than the output), else the whole output.
    const size_t block = std::min({layout.param_count, layout.recv_count, size_t{1} << 20});
    if (block < 2) return;
    std::vector<unsigned char> data(block * element_bytes_);
    access_.read(*at.output_buffer, at.output_offset, block,
                 [&](size_t first, size_t n, const void* in) {
                   std::memcpy(data.data() + first * element_bytes_, in, n * element_bytes_);
                 });
    std::memmove(data.data(), data.data() + element_bytes_, (block - 1) * element_bytes_);
    access_.write(*at.output_buffer, at.output_offset, block,
                  [&](size_t first, size_t n, void* out) {
                    std::memcpy(out, data.data() + first * element_bytes_, n * element_bytes_);
                  });
  }
}

Checks Sweep::check(const Layout& layout, bool in_place, const std::string& what) {
  Checks checks;
  if (options_.check_iterations <= 0) return checks;
  const Placement at = placement(layout, in_place);
  const int ulps = check_ulps(options_, comm_);
  monitor_.begin_phase(what + ", check");
  for (int c = 0; c < options_.check_iterations; ++c) {
    const DataPattern pattern(options_.collective, options_.type, options_.op, ranks_,
                              options_.root, layout.param_count,
                              pattern_seed(options_.collective, options_.type, options_.op,
                                           layout.size_bytes, in_place, repeat_, c),
                              ulps, in_place);
    // --test-stale-output: the output is whatever the previous run left.
    prepare(at, layout, in_place, pattern, !options_.stale_output);
    if (!options_.stale_output) {
      const Pointers p = pointers(at, layout, 0);  // checks run at offset 0, as nccl-tests'
      if (options_.graph_launches > 0) {
        auto graph = comm_.capture([&] {
          monitor_.operation_started();
          run_collective(layout, p);
        });
        if (graph) graph->launch();
      } else {
        monitor_.operation_started();
        run_collective(layout, p);
      }
      comm_.wait(wait_bound_);
    }
    inject_faults(at, layout);
    CheckResult result;
    access_.read(*at.output_buffer, at.output_offset, layout.recv_count,
                 [&](size_t first, size_t n, const void* in) {
                   CheckResult part = pattern.check_output(rank_, first, n, in);
                   if (part.has_first && !result.has_first) result = part, result.wrong = 0;
                   result.wrong += part.wrong;
                 });
    ++checks.ran;
    checks.first = result;
    checks.wrong = result.wrong;
    // nccl-tests stops at the first check that fails on any rank (after the
    // last one there is nothing to decide: the figures sum the wrong elements).
    if (c + 1 < options_.check_iterations &&
        control_.all_reduce_sum(static_cast<int64_t>(result.wrong)) != 0)
      break;
  }
  monitor_.end_phase();
  return checks;
}

Figures Sweep::reduce_across_ranks(const Timing& timing, const Checks& checks,
                                   int pending_signal) const {
  // Two control collectives per record (each costs a scheduler slice when
  // ranks outnumber cores): one maximum, one sum, each over a small vector.
  Figures f;
  const double mine = options_.report_cputime ? timing.issue_seconds : timing.seconds;
  // max and -min, the pending signal, then the samples
  std::vector<double> maxima{mine, -mine, static_cast<double>(pending_signal)};
  maxima.insert(maxima.end(), timing.samples.begin(), timing.samples.end());
  control_.all_reduce_max(maxima);
  // Over the control plane's ranks: under NCCL_TESTS_SPLIT every group's (as
  // nccl-tests reduces its times over MPI_COMM_WORLD).
  double sums[4] = {mine, control_.rank() == 0 ? mine : 0.0, static_cast<double>(checks.wrong),
                    checks.wrong > 0 ? 1.0 : 0.0};
  control_.all_reduce_sum(sums);
  f.rank_max = maxima[0];
  f.rank_min = -maxima[1];
  f.stop_signal = static_cast<int>(maxima[2]);
  f.rank_avg = sums[0] / control_.size();
  f.samples.assign(maxima.begin() + 3, maxima.end());
  f.wrong = static_cast<int64_t>(sums[2]);  // exact: below 2^53 elements
  f.failed_checks = static_cast<int>(sums[3]);
  switch (options_.time_across_ranks) {
    case TimeAcrossRanks::kRank0:
      f.reported = sums[1];
      break;
    case TimeAcrossRanks::kAverage:
      f.reported = f.rank_avg;
      break;
    case TimeAcrossRanks::kMinimum:
      f.reported = f.rank_min;
      break;
    case TimeAcrossRanks::kMaximum:
      f.reported = f.rank_max;
      break;
  }
  return f;
}

void Sweep::report_wrong(const std::string& what, const Checks& checks, int64_t wrong) const {
  // Every rank offers its first bad element; rank 0 names the lowest bad rank.
  const CheckResult& c = checks.first;
  const std::string first = c.has_first
                                ? "rank " + std::to_string(rank_) + " element " +
                                      std::to_string(c.first_index) + ": expected " +
                                      fmt_value(c.expected) + ", received " + fmt_value(c.received)
                                : std::string();
  const auto firsts = control_.all_gather(first);
  if (rank_ != 0) return;
  const std::string hint = known_library_issue(comm_.backend_name(), options_.type, options_.op);
  if (!hint.empty()) std::fprintf(stderr, "ccscope: note: %s\n", hint.c_str());
  for (const auto& line : firsts) {
    if (line.empty()) continue;
    std::fprintf(
        stderr,
        "ccscope: WRONG RESULT in %s (check %d of %d): %s (%lld wrong element(s) over all ranks)\n",
        what.c_str(), checks.ran, options_.check_iterations, line.c_str(),
        static_cast<long long>(wrong));
    break;
  }
}

records::BenchRecord Sweep::make_record(const Layout& layout, bool in_place, const Timing& timing,
                                        const Figures& figures) const {
  records::BenchRecord record;
  record.collective = std::string(name(options_.collective));
  record.backend = comm_.backend_name();
  record.dtype = std::string(name(options_.type));
  record.op = has_reduction(options_.collective) ? std::string(name(options_.op)) : "none";
  record.root = has_root(options_.collective) ? options_.root : -1;
  record.in_place = in_place;
  record.size_bytes = layout.size_bytes;
  record.count = layout.param_count;
  record.ranks = ranks_;
  record.nodes = shape_.nodes;
  record.ranks_per_node = shape_.ranks_per_node;
  record.iterations =
      static_cast<int>(std::min<size_t>(timing.iterations, std::numeric_limits<int>::max()));
  record.warmup_iterations = static_cast<int>(timing.warmup);
  record.iterations_per_sample = timing.group;
  record.rank_time_min_s = figures.rank_min;
  record.rank_time_avg_s = figures.rank_avg;
  record.rank_time_max_s = figures.rank_max;
  // The interval: adaptive, of the median of the batches' statistic (the
  // reported time); fixed, of the mean of the stamped pass's samples, scaled
  // to the headline (nccl-tests' mean over -n).
  double relative_half_width = 0;
  if (timing.adaptive) {
    const MedianInterval interval = median_interval(figures.samples);
    record.time_s = interval.median;
    relative_half_width = interval.relative_half_width;
  } else {
    record.time_s = figures.reported;
    relative_half_width = mean_interval(figures.samples).relative_half_width;
  }
  record.timing_samples = figures.samples.size();
  record.ci_half_width_percent = std::isfinite(relative_half_width) ? 100 * relative_half_width : 0;
  record.target_ci_percent = timing.adaptive ? options_.target_ci_percent : 0;
  record.converged = timing.converged;
  record.time_statistic = time_statistic_token(options_.time_across_ranks);
  record.time_method = timing.adaptive
                           ? "host wall clock over timed batches + one sync each, the median "
                             "batch, until its 95% interval is within --target-ci (ccscope)"
                       : options_.report_cputime
                           ? "host time to issue -n iterations (-C 1)"
                           : (options_.graph_launches > 0
                                  ? "host wall clock over -G graph launches of -n iterations + one "
                                    "sync (nccl-tests)"
                                  : "host wall clock over -n iterations + one sync (nccl-tests)");
  record.rotated = options_.rotate_buffers;
  record.aggregate_iterations = options_.aggregate_iterations;
  record.graph_launches = options_.graph_launches;
  record.algbw_GBps = algorithm_bandwidth_GBps(layout.size_bytes, record.time_s);
  record.busbw_GBps = record.algbw_GBps * bus_bandwidth_factor(options_.collective, ranks_);
  record.iteration_time_p50_s = median(figures.samples);
  record.iteration_time_p99_s = percentile(figures.samples, 99);
  record.checked = options_.check_iterations > 0;
  record.check_iterations = options_.check_iterations;
  record.failed_checks = figures.failed_checks;
  record.wrong = figures.wrong;
  record.record_time_utc = utc_now_iso8601();
  record.repeat = repeat_;
  return record;
}

}  // namespace

std::string known_library_issue(const std::string& backend, DataType type, ReduceOp op) {
  const bool is_unsigned =
      type == DataType::kUInt8 || type == DataType::kUInt32 || type == DataType::kUInt64;
  if (backend == "mpi" && is_unsigned && (op == ReduceOp::kMin || op == ReduceOp::kMax))
    return "MPICH 4.0.x compares unsigned integers as signed in MPI_MIN/MPI_MAX "
           "(pmodels/mpich#6083, fixed in 4.1), and Open MPI 4.1.2-4.1.4 does for unsigned long "
           "(open-mpi/ompi#10525); values above the signed maximum then come out wrong. Upgrade "
           "MPI, or compare with --backend ring (ccscope's own reduction)";
  return "";
}

size_t rotation_offset(size_t size_bytes, size_t buffer_bytes, size_t iteration, bool rotate) {
  if (!rotate || size_bytes == 0) return 0;
  const size_t steps = std::max<size_t>(1, buffer_bytes / size_bytes);
  return size_bytes * (iteration % steps);
}

JobShape job_shape(const World& world) {
  return {world.node_count(), world.max_ranks_per_node(), world.hostname()};
}

std::string preflight(const BenchOptions& options, const World& world, const Communicator& comm) {
  std::string problem;
  const size_t element_bytes = element_size(options.type);
  const bool on_host = comm.memory_kind() == MemoryKind::kHost;
  const auto available = on_host ? host_available_memory() : comm.device_memory_available();
  // Device memory is already this rank's share of its GPU's free memory.
  const int sharing_ranks = on_host ? world.local_size() : 1;
  const std::string where =
      on_host ? "host " + world.hostname() : comm.device_name() + " on host " + world.hostname();
  const auto sizes =
      size_sequence(options.min_bytes, options.max_bytes, options.step_factor, options.step_bytes);
  for (Collective collective : options.collectives) {
    if (sizes.empty() || !problem.empty()) break;
    const Layout layout = layout_for(collective, sizes.back(), element_bytes, comm.size(), 0);
    if (layout.param_count > comm.max_count())
      problem = "-e " + format_size(sizes.back()) + " is " + std::to_string(layout.param_count) +
                " " + std::string(name(options.type)) + " elements per " +
                std::string(name(collective)) + " call, more than the " + comm.backend_name() +
                " backend takes (" + std::to_string(comm.max_count()) + "); use a smaller -e";
    else if (available)
      problem = memory_shortfall(comm.backend_name(), collective, sizes.back(), element_bytes,
                                 comm.size(), sharing_ranks, *available, where);
  }
  return first_problem_over_ranks(world, problem);
}

SweepOutcome run_sweep(const BenchOptions& options, const ControlPlane& control,
                       const JobShape& shape, Communicator& comm, SweepMonitor& monitor,
                       records::Reporter* reporter, int repeat,
                       const std::function<int()>& pending_signal) {
  const int ranks = comm.size();
  const int rank = comm.rank();
  const size_t element_bytes = element_size(options.type);
  const auto sizes =
      size_sequence(options.min_bytes, options.max_bytes, options.step_factor, options.step_bytes);
  bool rounded = false;
  for (size_t size : sizes)
    rounded = rounded ||
              layout_for(options.collective, size, element_bytes, ranks, rank).size_bytes != size;
  if (rounded && rank == 0)
    std::fprintf(stderr, "ccscope: note: %s sizes were rounded down as nccl-tests does (%s)\n",
                 std::string(name(options.collective)).c_str(),
                 size_convention(options.collective).c_str());

  Sweep sweep(options, control, shape, comm, monitor, reporter, repeat);
  SweepOutcome outcome;
  // preflight() checked the sizes; an allocation can still fail (device
  // memory, another process): every rank says whether it has its buffers.
  outcome.refused = sweep.allocate();
  if (!outcome.refused.empty()) {
    if (rank == 0) std::fprintf(stderr, "ccscope bench: error: %s\n", outcome.refused.c_str());
    return outcome;
  }
  ProgressLine progress(options.progress && rank == 0);
  const size_t steps = sizes.size() * (supports_in_place(options.collective) ? 2 : 1);
  size_t step = 0;
  for (size_t size : sizes) {
    const Layout layout = layout_for(options.collective, size, element_bytes, ranks, rank);
    for (bool in_place : {false, true}) {
      if (in_place && !supports_in_place(options.collective)) continue;
      ++step;
      const std::string what =
          std::string(name(options.collective)) + " " + std::string(name(options.type)) +
          (has_reduction(options.collective) ? " " + std::string(name(options.op))
                                             : std::string()) +
          " " + format_size(layout.size_bytes) + (in_place ? " in-place" : " out-of-place");
      progress.show(what + " (" + std::to_string(step) + "/" + std::to_string(steps) + ")");

      const Timing timing = sweep.measure(layout, in_place, what);
      const Checks checks = sweep.check(layout, in_place, what);
      // A signal may reach the ranks at different moments: they agree on it
      // with the figures, so all stop after the same record.
      const Figures figures = sweep.reduce_across_ranks(timing, checks, pending_signal());
      if (figures.wrong > 0) sweep.report_wrong(what, checks, figures.wrong);
      outcome.wrong_elements += figures.wrong;
      if (figures.wrong > 0) {  // which ranks: one gather more, in a failing sweep only
        const std::vector<std::string> counts = control.all_gather(std::to_string(checks.wrong));
        outcome.wrong_elements_per_rank.resize(counts.size());
        for (size_t r = 0; r < counts.size(); ++r)
          outcome.wrong_elements_per_rank[r] += std::stoll(counts[r]);
      }
      ++outcome.records;
      const records::BenchRecord record = sweep.make_record(layout, in_place, timing, figures);
      outcome.busbw_sum_GBps += record.busbw_GBps;
      if (reporter != nullptr) reporter->add(record);
      if (figures.stop_signal != 0) {
        outcome.stopped_by_signal = figures.stop_signal;
        return outcome;
      }
    }
  }
  return outcome;
}

SweepOutcome run_sweep(const BenchOptions& options, const World& world, Communicator& comm,
                       HangWatchdog& watchdog, records::Reporter* reporter, int repeat,
                       const std::function<int()>& pending_signal) {
  WatchdogMonitor monitor(watchdog);
  const JobShape shape = job_shape(world);
  return run_sweep(options, world, shape, comm, monitor, reporter, repeat, pending_signal);
}

}  // namespace ccscope::bench
