#pragma once
// One ccscope job (bench, topo, diag, train): the MPI session and its bounded
// finalize, the world, the hang watchdog, SIGINT/SIGTERM, agreement across
// ranks on refusals and outputs, and the exit-code policy (exit_codes.h). A verb
// keeps its flags and printing and runs as the body of run_job:
//
//   return job::run_job({"topo"}, [&](job::JobContext& job) {
//     if (std::string e = job.open_outputs([&] { csv = open(...); }); !e.empty())
//       return job.refuse(e);
//     HangWatchdog& watchdog = job.start_watchdog(timeout);
//     ...measure, rank 0 prints...
//     return job.leave_together(job::kExitOk);
//   });
//
// A body's exception ends the job: TimeoutError with kExitHang, UsageError with
// kExitUsage, anything else with kExitCheckFailed, on every rank, the rank that
// threw naming itself and its host.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ccscope/collectives/world.h"
#include "ccscope/job/exit_codes.h"
#include "ccscope/job/launch.h"
#include "ccscope/job/watchdog.h"

namespace ccscope::job {

// What SIGINT and SIGTERM do during the body.
enum class OnSignal {
  // The job ends at once: the signalled rank says "stopped by SIGTERM" and the
  // job exits 128 + signal on every rank.
  kEndJob,
  // The body installs InterruptHandlers itself and stops at a clean point
  // (bench: after the current row); before that the default action.
  kBodyStops,
};

struct JobSpec {
  std::string verb;  // "bench": every line the job prints starts "ccscope bench: "
  OnSignal on_signal = OnSignal::kEndJob;
  // kBodyStops: a body that has not stopped this long after the signal (diag
  // inside a long stage) is ended as kEndJob ends it, so that a batch system's
  // grace before SIGKILL (Slurm's KillWait, 30 s) still sees 128 + signal.
  // 0: the body alone decides.
  std::chrono::milliseconds stop_grace{0};
};

class JobContext {
 public:
  JobContext(const JobSpec& spec, World world, Launch launch = {});
  ~JobContext();
  JobContext(const JobContext&) = delete;
  JobContext& operator=(const JobContext&) = delete;

  const World& world() const { return world_; }
  bool leader() const { return world_.rank() == 0; }
  const std::string& verb() const { return spec_.verb; }
  // How this job was launched (MPI, Slurm's or torchrun's environment, one process).
  const Launch& launch() const { return launch_; }

  // A problem every rank has found alike (the same flags, the same world):
  // rank 0 prints "ccscope VERB: error: WHAT", every rank returns kExitUsage.
  int refuse(const std::string& what) const;
  // Rank 0 runs `open` (output files are opened before anything is measured,
  // so a bad path fails at once); returns, on every rank, the message of what
  // it threw ("" when nothing did). A non-empty answer is every rank's refusal.
  std::string open_outputs(const std::function<void()>& open) const;
  // Any rank's problem, on every rank: the lowest rank's non-empty `problem`,
  // "" when no rank has one (a rank leaving alone would leave the others
  // waiting in the next collective).
  std::string first_problem(const std::string& problem) const;

  // Starts the hang watchdog (collective); a rank that cannot start it says so
  // and ends the job with kExitCheckFailed. It lives until the body returns.
  HangWatchdog& start_watchdog(std::chrono::milliseconds timeout);
  // The watchdog once started, else nullptr.
  HangWatchdog* watchdog() const { return watchdog_.get(); }

  // This rank prints "ccscope VERB: rank R (HOST): WHAT" and ends the job with
  // `exit_code` (on purpose: no watchdog reports it as a death).
  [[noreturn]] void end_job(int exit_code, const std::string& what) const;
  // Every rank has agreed to end with `exit_code`: all say goodbye before any
  // of them closes its watch connections (no watchdog takes an early leaver
  // for a dead rank). Returns `exit_code`.
  int leave_together(int exit_code) const;
  // The same exit code on every rank: the largest of the ranks' codes.
  int agree_on_exit_code(int exit_code) const;

  // Collective, once per job (run_job does it before the body): how this
  // rank waits for its peers (job::wait_policy: yielding when the host's
  // ranks outnumber its CPUs), set on the world's control collectives and the
  // default of the host backends made from it. Throws UsageError for a bad
  // CCSCOPE_YIELD_WHEN_IDLE.
  void choose_waits();

 private:
  class SignalEnder;
  JobSpec spec_;
  World world_;
  Launch launch_;
  std::unique_ptr<HangWatchdog> watchdog_;
  std::unique_ptr<SignalEnder> signal_ender_;
};

// Runs `body` as one job of the ranks the launcher started (decide_launch: under
// an MPI launcher or alone, MPI_Init and MPI_COMM_WORLD; from Slurm's or
// torchrun's environment, the TCP rendezvous (rendezvous.h) without MPI), with the
// world and the signal policy, then finalizes MPI within MpiSession's bound.
// Returns the process's exit code.
int run_job(const JobSpec& spec, const std::function<int(JobContext&)>& body);

// True when the launcher's rank variable (Open MPI, PMI: MPICH and Intel MPI,
// Slurm) names this process rank 0, or none is set, so that an error found
// before MPI starts is printed once rather than once per rank.
bool launcher_says_rank_zero();

}  // namespace ccscope::job
