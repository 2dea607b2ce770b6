#pragma once
// Bounds every collective in time. Each rank runs a watchdog thread that also
// answers a small TCP side channel. When an operation makes no progress for the
// timeout, the rank asks every other rank over that channel where it is, and
// the lowest stalled rank prints which ranks did not finish (stopped, gone, or
// behind) before the job exits with kTimeoutExitCode. The side channel does not
// go through MPI or NCCL, so it still works when they are stuck.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ccscope/collectives/world.h"

namespace ccscope {

inline constexpr int kTimeoutExitCode = 3;

// What one rank says about itself when asked (also used for the report).
struct RankProgress {
  // kNoAnswer: connected, but the process did not reply (stopped, hung);
  // kGone: its host refused (nothing listens: the process died);
  // kUnreachable: no route or no reply from its host at all (link or node down).
  enum class Answer { kAnswered, kNoAnswer, kGone, kUnreachable };
  int rank = 0;
  Answer answer = Answer::kNoAnswer;
  bool busy = false;                 // inside a watched phase
  unsigned long long operation = 0;  // operations started so far
  double stalled_seconds = 0;        // time since the last operation started
  std::string phase;                 // what the rank is doing
  std::string detail;                // why there was no answer (errno text)
};

// Picks the ranks to blame and formats the report (pure, unit tested).
// `hosts` are the hostnames by rank; `reporter` is the rank writing the report
// (what it cannot reach may be its own fault).
std::string describe_stall(const std::vector<RankProgress>& ranks,
                           const std::vector<std::string>& hosts, double timeout_seconds,
                           int reporter);

class HangWatchdog {
 public:
  // Collective over the world: opens the side channel on every rank.
  HangWatchdog(const World& world, std::chrono::milliseconds timeout);
  ~HangWatchdog();
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  // A phase is a run of operations ("allreduce 1 MiB out-of-place, timed");
  // outside phases the rank is never considered stalled.
  void begin_phase(std::string description);
  void end_phase();
  // Called as each operation starts, from one thread only: a relaxed load and
  // store (no locked instruction), so it costs about a nanosecond per operation.
  void operation_started() {
    operation_.store(operation_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<unsigned long long> operation_{0};
};

}  // namespace ccscope
