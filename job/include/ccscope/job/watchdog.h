#pragma once
// Bounds every collective in time and names a rank that dies. Each rank runs a
// watchdog thread that also answers a small TCP side channel (not through MPI
// or NCCL, so it still works when they are stuck).
//
// Hangs: when an operation makes no progress for the timeout, the rank asks
// every other rank over that channel where it is, and the lowest stalled rank
// prints which ranks did not finish (stopped, gone, or behind) before the job
// exits with kTimeoutExitCode.
//
// Deaths: every rank also keeps a connection open to rank 0 and to a deputy
// (the first rank on another node than rank 0). The kernel closes a process's
// sockets the moment it dies (SIGKILL included), so the watchers learn of a
// death within a millisecond; a rank that leaves on purpose says goodbye on
// them first. One watcher (see death_reporter) prints one line naming the rank,
// its host and pid, and ends the job with kPeerDiedExitCode:
//   ccscope: rank 1 (node1, pid 4242) died during allreduce 1 MiB out-of-place,
//   timed (operation #35): its watchdog connection to rank 0 closed without a
//   goodbye (...); ending the job with exit code 1
// Launchers react to a death within milliseconds too (MPICH's Hydra SIGKILLs
// the job as soon as the dead rank's PMI socket or output pipes close), so each
// rank has a descriptor holder: a small child process (sh, then sleep) that
// shares its stdout, stderr and PMI socket and, when the rank dies without a
// goodbye, keeps them open 2 s more. The launcher then hears of the death from
// ccscope first: under MPICH the reporter writes the abort MPI_Abort would send
// ("cmd=abort exitcode=1") to its PMI socket itself, else it calls MPI_Abort.
// When the reporter's own MPI library aborts on the dead peer first (UCX's
// shared-memory copy does, on one node), a SIGABRT hook on rank 0 and the
// deputy still writes the line and ends the rank with exit code 1.
//
// Exit codes seen (killed_rank.sh, vcluster.faults): Hydra across nodes 1;
// Hydra on one node 1 or 9: its proxy reaps the dead rank, and kills the job,
// on the next thing it reads (the report), racing ccscope's abort, and mpiexec
// then returns the OR of the ranks' wait statuses (9 = SIGKILL; a survivor that
// UCX aborts adds 6: 15); Open MPI 4.1 137: it keeps the first non-zero
// status, the dead rank's 128 + 9, and ends the job itself in 2 s (SIGTERM
// after 1 s, SIGKILL after 2 s).
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ccscope/collectives/world.h"

namespace ccscope {

inline constexpr int kTimeoutExitCode = 3;
// A rank died while the others ran: a failure while measuring (the documented
// exit code 1). The launcher may report its own code instead (see above).
inline constexpr int kPeerDiedExitCode = 1;

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
  // Ranks it waits for by design (HangWatchdog::begin_wait: a stage's leaders
  // measure while the others wait); such a rank is never "behind".
  std::vector<int> waiting_for;
};

// The progress line a rank answers with ("RANK BUSY OPERATION STALLED WAITING
// PHASE\n", WAITING "-" or "2,5") and its reading (pure, unit tested); the
// parse gives kAnswered, or kNoAnswer for a line that does not parse.
std::string format_progress_line(const RankProgress& progress);
RankProgress parse_progress_line(const std::string& line);

// Picks the ranks to blame and formats the report (pure, unit tested).
// `hosts` are the hostnames by rank; `reporter` is the rank writing the report
// (what it cannot reach may be its own fault). Ranks waiting by design
// (waiting_for) are left out of the operation counts' comparison and named as
// waiting for their group; when the reporter itself is such a rank (its wait
// outlasted its limit, `timeout_seconds`), the ranks it waits for are named.
std::string describe_stall(const std::vector<RankProgress>& ranks,
                           const std::vector<std::string>& hosts, double timeout_seconds,
                           int reporter);

// The death watch (pure, unit tested). `hosts` are the hostnames by rank.
// The deputy: the first rank on another host than rank 0, else rank 1; -1 for
// a single rank.
int watch_deputy(const std::vector<std::string>& hosts);
// The ranks `rank` opens a watch connection to (each end watches the other):
// rank 0 and the deputy, the deputy only to rank 0, rank 0 to none.
std::vector<int> watch_connections(int rank, const std::vector<std::string>& hosts);
// Which watcher reports the death of `dead` (-1: none): rank 0, except for
// rank 0 itself and for a rank on rank 0's host while the deputy is on another
// one (a launcher kills the other ranks of a dead rank's node first): the deputy.
int death_reporter(int dead, const std::vector<std::string>& hosts);

// How a watch connection to a peer ended.
struct PeerLoss {
  int rank = 0;
  long pid = 0;               // the peer's process id (0: unknown)
  bool said_goodbye = false;  // it sent its goodbye first: it left on purpose
  int error = 0;              // 0: closed (EOF); else the errno (ECONNRESET, ETIMEDOUT...)
};
// What `self` makes of a peer loss, and the line it prints when it reports.
struct DeathVerdict {
  bool died = false;    // the peer process is gone without saying goodbye
  bool report = false;  // and `self` is the one to say so and end the job
  std::string line;     // one line, newline-terminated (when report)
};
// `activity`: what `self` was doing (the phase and its operation number).
DeathVerdict judge_peer_loss(const PeerLoss& loss, int self, const std::vector<std::string>& hosts,
                             const std::string& activity);

// Async-signal-safe: tells this process's watchers that its exit is on purpose
// (it ends the job itself or was asked to stop), so that they do not report it
// as a death. The watchdog says goodbye itself when destroyed and before its own
// MPI_Abort; call this before any other exit that skips the destructor
// (world.abort(...), _exit, a signal handler that ends the process).
void watchdog_say_goodbye() noexcept;
// Async-signal-safe: true once this rank's watchdog has printed a death or
// timeout report and is ending the job (a launcher's SIGTERM that follows is
// its consequence, not a user's request).
bool watchdog_is_ending_job() noexcept;

// Runs `evidence` (a query of another service, e.g. NCCL's RAS) for at most
// `limit`: its text, its exception's message, or a note that it gave no answer
// in time (it then runs on, detached; the process is ending). Each line of the
// result starts with "ccscope: ".
std::string stall_evidence_within(const std::function<std::string()>& evidence,
                                  std::chrono::milliseconds limit);

class HangWatchdog {
 public:
  // Collective over the world: opens the side channel on every rank. A timeout
  // of 0 disables the stall report (nccl-tests' -T 0); deaths are still named.
  HangWatchdog(const World& world, std::chrono::milliseconds timeout);
  ~HangWatchdog();
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  // A phase is a run of operations ("allreduce 1 MiB out-of-place, timed");
  // outside phases the rank is never considered stalled.
  void begin_phase(std::string description);
  void end_phase();
  // A wait for other ranks by design (a stage's node leaders measure while the
  // others wait): busy, but timed as a whole against `limit` (not the timeout
  // between operations), and told to the stall report as waiting for
  // `awaited`, so that a hang names those ranks, not the waiting ones. Ends
  // with the next begin_phase or end_phase.
  void begin_wait(std::string description, std::vector<int> awaited,
                  std::chrono::milliseconds limit);
  // Evidence from elsewhere for the stall report (NCCL's RAS view): called by
  // the reporting rank, bounded by `limit`, after the report and before it ends
  // the job; its text follows the report. Set before the phases it covers.
  void set_stall_evidence(std::function<std::string()> evidence, std::chrono::milliseconds limit);
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
