#include "sweep_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <thread>
#include <vector>

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

Placement place(Collective collective, bool in_place, const Layout& layout, Buffer& send,
                Buffer& recv) {
  if (!in_place) return {&send, 0, &recv, 0};
  switch (collective) {
    case Collective::kAllGather:
      return {&recv, layout.send_in_place_offset, &recv, 0};
    case Collective::kReduceScatter:
      return {&send, 0, &send, layout.recv_in_place_offset};
    default:
      return {&recv, 0, &recv, 0};
  }
}

void run_collective(Communicator& comm, const BenchOptions& options, const Layout& layout,
                    const void* send, void* recv) {
  switch (options.collective) {
    case Collective::kAllReduce:
      comm.all_reduce(send, recv, layout.param_count, options.type, options.op);
      break;
    case Collective::kAllGather:
      comm.all_gather(send, recv, layout.param_count, options.type);
      break;
    case Collective::kReduceScatter:
      comm.reduce_scatter(send, recv, layout.param_count, options.type, options.op);
      break;
    case Collective::kBroadcast:
      comm.broadcast(send, recv, layout.param_count, options.type, options.root);
      break;
    case Collective::kAllToAll:
      comm.all_to_all(send, recv, layout.param_count, options.type);
      break;
    case Collective::kSendRecv: {
      // Ask for rank and size only here: this runs once per timed iteration.
      const int rank = comm.rank();
      const int size = comm.size();
      comm.send_recv(send, (rank + 1) % size, recv, (rank + size - 1) % size, layout.param_count,
                     options.type);
      break;
    }
  }
}

std::string fmt_value(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// NCCL computes a floating-point average as a pre-multiplied sum (x * 1/n):
// exact only when n is a power of two. Elsewhere the check allows n ulps.
double check_tolerance(const BenchOptions& options, const Communicator& comm) {
  if (options.op != ReduceOp::kAvg || !is_floating(options.type) ||
      !has_reduction(options.collective))
    return 0;
  if (comm.backend_name() != "nccl" || is_power_of_two(comm.size())) return 0;
  const double epsilon = options.type == DataType::kFloat16    ? 1.0 / 1024
                         : options.type == DataType::kBFloat16 ? 1.0 / 128
                         : options.type == DataType::kFloat32  ? 1.0 / 8388608
                                                               : 1.0 / 4503599627370496.0;
  return epsilon * comm.size();
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

// The first rank's non-empty `problem` (every rank gets the same), or "".
std::string first_problem_over_ranks(const World& world, const std::string& problem) {
  for (const std::string& text : world.all_gather(problem))
    if (!text.empty()) return text;
  return "";
}

}  // namespace

std::string preflight(const BenchOptions& options, const World& world, const Communicator& comm) {
  std::string problem;
  const size_t element_bytes = element_size(options.type);
  const auto available =
      comm.memory_kind() == MemoryKind::kHost ? host_available_memory() : std::nullopt;
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
      problem = memory_shortfall(collective, sizes.back(), element_bytes, comm.size(),
                                 world.local_size(), *available, "host " + world.hostname());
  }
  return first_problem_over_ranks(world, problem);
}

SweepOutcome run_sweep(const BenchOptions& options, const World& world, Communicator& comm,
                       HangWatchdog& watchdog, reports::Reporter* reporter, int repeat,
                       const std::function<int()>& pending_signal) {
  const size_t element_bytes = element_size(options.type);
  const int ranks = comm.size();
  const int rank = comm.rank();
  const auto sizes =
      size_sequence(options.min_bytes, options.max_bytes, options.step_factor, options.step_bytes);
  const auto wait_bound =
      std::chrono::milliseconds(static_cast<long long>(options.timeout_seconds * 1000) + 5000);

  // Buffers for the largest size, reused by every size (as nccl-tests does).
  size_t send_bytes = 0, recv_bytes = 0;
  bool rounded = false;
  for (size_t size : sizes) {
    const Layout layout = layout_for(options.collective, size, element_bytes, ranks, rank);
    send_bytes = std::max(send_bytes, layout.send_count * element_bytes);
    recv_bytes = std::max(recv_bytes, layout.recv_count * element_bytes);
    rounded = rounded || layout.size_bytes != size;
  }
  if (rounded && rank == 0)
    std::fprintf(stderr, "ccscope: note: %s sizes were rounded down as nccl-tests does (%s)\n",
                 std::string(name(options.collective)).c_str(),
                 size_convention(options.collective).c_str());
  // preflight() checked the sizes; an allocation can still fail (device
  // memory, another process): every rank says whether it has its buffers.
  std::string problem;
  std::unique_ptr<Buffer> send, recv;
  try {
    send = comm.allocate(send_bytes);
    recv = comm.allocate(recv_bytes);
  } catch (const std::exception& error) {  // BackendError, std::bad_alloc
    problem = "cannot allocate the buffers of -e " + format_size(sizes.back()) + " (" +
              format_size(send_bytes) + " + " + format_size(recv_bytes) + ") on rank " +
              std::to_string(rank) + " (" + world.hostname() + "): " + error.what() +
              "; use a smaller -e";
  }
  SweepOutcome outcome;
  outcome.refused = first_problem_over_ranks(world, problem);
  if (!outcome.refused.empty()) {
    if (rank == 0) std::fprintf(stderr, "ccscope bench: error: %s\n", outcome.refused.c_str());
    return outcome;
  }
  RegionAccess access(comm, element_bytes);
  ProgressLine progress(options.progress && rank == 0);

  const size_t steps = sizes.size() * (supports_in_place(options.collective) ? 2 : 1);
  size_t step = 0;
  for (size_t size : sizes) {
    const Layout layout = layout_for(options.collective, size, element_bytes, ranks, rank);
    const DataPattern pattern(options.collective, options.type, options.op, ranks, options.root,
                              layout.param_count, check_tolerance(options, comm));
    for (bool in_place : {false, true}) {
      if (in_place && !supports_in_place(options.collective)) continue;
      ++step;
      const std::string what = std::string(name(options.collective)) + " " +
                               format_size(layout.size_bytes) +
                               (in_place ? " in-place" : " out-of-place");
      progress.show(what + " (" + std::to_string(step) + "/" + std::to_string(steps) + ")");
      const Placement at = place(options.collective, in_place, layout, *send, *recv);
      const void* send_ptr =
          static_cast<char*>(at.input_buffer->data()) + at.input_offset * element_bytes;
      void* recv_ptr =
          static_cast<char*>(at.output_buffer->data()) + at.output_offset * element_bytes;
      const auto prepare = [&] {
        if (!in_place) {  // stale results of earlier runs must not pass the check
          access.write(
              *at.output_buffer, at.output_offset, layout.recv_count,
              [&](size_t, size_t n, void* out) { std::memset(out, 0xff, n * element_bytes); });
        } else if (options.collective == Collective::kAllGather) {
          access.write(*recv, 0, layout.recv_count, [&](size_t, size_t n, void* out) {
            std::memset(out, 0xff, n * element_bytes);
          });
        }
        access.write(
            *at.input_buffer, at.input_offset, layout.send_count,
            [&](size_t first, size_t n, void* out) { pattern.fill_input(rank, first, n, out); });
      };
      const auto run_once = [&] {
        watchdog.operation_started();
        run_collective(comm, options, layout, send_ptr, recv_ptr);
      };

      // Runs `iterations` back to back with a stamp after every `group` of
      // them (the last group may be shorter), then waits for them; each
      // completed stamp counts as progress for the watchdog, so a long queue of
      // asynchronous (NCCL) operations is not taken for a hang. Stamps (CUDA
      // events) are taken in chunks of kStampsPerClock so that a huge -n does
      // not allocate them all up front. samples[j] = the mean seconds per
      // iteration of group j (samples has ceil(iterations / group) entries).
      const auto run_stamped = [&](size_t iterations, size_t group, std::vector<double>* samples) {
        const size_t chunk = kStampsPerClock * group;
        for (size_t begin = 0; begin < iterations; begin += chunk) {
          const size_t count = std::min(chunk, iterations - begin);
          const size_t stamps = (count + group - 1) / group;
          auto clock = comm.make_clock(stamps + 1);
          clock->stamp(0);
          for (size_t i = 0; i < count; ++i) {
            run_once();
            if ((i + 1) % group == 0 || i + 1 == count) clock->stamp((i + group) / group);
          }
          for (size_t done = 1; done <= stamps;) {
            if (clock->completed(done)) {
              ++done;
              watchdog.operation_started();
            } else {
              std::this_thread::sleep_for(std::chrono::microseconds(20));
            }
          }
          comm.wait(wait_bound);
          if (samples != nullptr)
            for (size_t j = 0; j < stamps; ++j) {
              const size_t in_group = std::min(group, count - j * group);
              (*samples)[begin / group + j] =
                  clock->seconds_between(j, j + 1) / static_cast<double>(in_group);
            }
        }
      };

      prepare();
      watchdog.begin_phase(what + ", warm-up");
      const size_t warmup = static_cast<size_t>(options.warmup_iterations);
      std::vector<double> warmup_seconds(warmup);
      run_stamped(warmup, 1, &warmup_seconds);
      // Every rank must use the same sample size (samples are reduced element by
      // element across ranks): the fastest rank's median warm-up iteration sets it.
      double typical = warmup_seconds.empty() ? 0.0 : median(warmup_seconds);
      world.all_reduce_min({&typical, 1});
      const size_t iterations = static_cast<size_t>(options.iterations);
      const size_t group = iterations_per_sample(typical, iterations, kMinSampleSeconds);
      world.barrier();

      watchdog.begin_phase(what + ", timed");
      std::vector<double> sample_seconds((iterations + group - 1) / group);
      run_stamped(iterations, group, &sample_seconds);
      // The samples tile each chunk's span: weighting each by its iteration
      // count gives the mean over all iterations.
      double total_seconds = 0;
      for (size_t j = 0; j < sample_seconds.size(); ++j)
        total_seconds +=
            sample_seconds[j] * static_cast<double>(std::min(group, iterations - j * group));
      const double rank_mean = total_seconds / static_cast<double>(iterations);

      CheckResult check;
      if (options.check_iterations > 0) {
        watchdog.begin_phase(what + ", check");
        prepare();
        run_once();
        watchdog.operation_started();
        comm.wait(wait_bound);
        if (rank == options.corrupt_rank && layout.recv_count > 0) {
          const size_t victim = layout.recv_count / 2;
          std::vector<unsigned char> element(element_bytes);
          access.read(*at.output_buffer, at.output_offset + victim, 1,
                      [&](size_t, size_t, const void* in) {
                        std::memcpy(element.data(), in, element_bytes);
                      });
          store_element(element.data(), options.type, 0,
                        load_element(element.data(), options.type, 0) + 1);
          access.write(
              *at.output_buffer, at.output_offset + victim, 1,
              [&](size_t, size_t, void* out) { std::memcpy(out, element.data(), element_bytes); });
        }
        access.read(*at.output_buffer, at.output_offset, layout.recv_count,
                    [&](size_t first, size_t n, const void* in) {
                      CheckResult part = pattern.check_output(rank, first, n, in);
                      if (part.has_first && !check.has_first) check = part, check.wrong = 0;
                      check.wrong += part.wrong;
                    });
      }
      watchdog.end_phase();

      // Across ranks: per-rank means and the slowest rank's time per iteration.
      double rank_min = rank_mean, rank_max = rank_mean, rank_sum = rank_mean;
      world.all_reduce_min({&rank_min, 1});
      world.all_reduce_max({&rank_max, 1});
      world.all_reduce_sum({&rank_sum, 1});
      world.all_reduce_max(sample_seconds);
      const int64_t wrong =
          options.check_iterations > 0 ? world.all_reduce_sum(static_cast<int64_t>(check.wrong)) : 0;
      if (wrong > 0) {
        // Every rank offers its first bad element; rank 0 names the lowest bad rank.
        const std::string first = check.has_first ? "rank " + std::to_string(rank) + " element " +
                                                        std::to_string(check.first_index) +
                                                        ": expected " + fmt_value(check.expected) +
                                                        ", received " + fmt_value(check.received)
                                                  : std::string();
        const auto firsts = world.all_gather(first);
        if (rank == 0) {
          for (const auto& line : firsts) {
            if (line.empty()) continue;
            std::fprintf(stderr,
                         "ccscope: WRONG RESULT in %s: %s (%lld wrong element(s) over all ranks)\n",
                         what.c_str(), line.c_str(), static_cast<long long>(wrong));
            break;
          }
        }
      }
      outcome.wrong_elements += wrong;
      ++outcome.records;

      if (reporter != nullptr) {
        reports::BenchRecord record;
        record.collective = std::string(name(options.collective));
        record.backend = comm.backend_name();
        record.dtype = std::string(name(options.type));
        record.op = has_reduction(options.collective) ? std::string(name(options.op)) : "none";
        record.root = has_root(options.collective) ? options.root : -1;
        record.in_place = in_place;
        record.size_bytes = layout.size_bytes;
        record.count = layout.param_count;
        record.ranks = ranks;
        record.nodes = world.node_count();
        record.ranks_per_node = world.max_ranks_per_node();
        record.iterations = options.iterations;
        record.warmup_iterations = options.warmup_iterations;
        record.iterations_per_sample = group;
        record.rank_time_min_s = rank_min;
        record.rank_time_avg_s = rank_sum / ranks;
        record.rank_time_max_s = rank_max;
        switch (options.time_across_ranks) {
          case TimeAcrossRanks::kRank0:
            record.time_s = rank_mean;
            break;
          case TimeAcrossRanks::kAverage:
            record.time_s = record.rank_time_avg_s;
            break;
          case TimeAcrossRanks::kMinimum:
            record.time_s = rank_min;
            break;
          case TimeAcrossRanks::kMaximum:
            record.time_s = rank_max;
            break;
        }
        record.time_statistic = time_statistic_description(options.time_across_ranks);
        record.algbw_GBps = algorithm_bandwidth_GBps(layout.size_bytes, record.time_s);
        record.busbw_GBps = record.algbw_GBps * bus_bandwidth_factor(options.collective, ranks);
        record.iteration_time_p50_s = median(sample_seconds);
        record.iteration_time_p99_s = percentile(sample_seconds, 99);
        record.checked = options.check_iterations > 0;
        record.wrong = wrong;
        record.record_time_utc = utc_now_iso8601();
        record.repeat = repeat;
        reporter->add(record);
      }
      // A signal may reach the ranks at different moments: they agree after
      // every record, so all stop after the same one.
      double signal = pending_signal();
      world.all_reduce_max({&signal, 1});
      if (signal != 0) {
        outcome.stopped_by_signal = static_cast<int>(signal);
        return outcome;
      }
    }
  }
  return outcome;
}

}  // namespace ccscope::bench
