#pragma once
// The TCP rendezvous of a launch without MPI (torchrun, Kubernetes, srun
// without an MPI plugin): world rank 0 listens at a port every rank knows from
// the launcher's environment; each rank connects, says who it is, and waits
// until all have arrived. The connection then carries the world's control
// collectives (barriers, gathers, the NCCL unique id) and World::abort. Every
// rendezvous step is bounded by `timeout`; a rank that did not arrive is named.
#include <chrono>
#include <memory>
#include <string>

#include "ccscope/collectives/world.h"

namespace ccscope {

struct RendezvousOptions {
  int rank = 0;
  int size = 1;
  std::string host;  // where rank 0 listens; the others connect there
  int port = 0;
  std::chrono::milliseconds timeout{60000};  // each rendezvous step
  // What set host, port and the rank numbers, for messages ("MASTER_ADDR:MASTER_PORT").
  std::string source;
  // Called before this process ends because another rank ended the job
  // (World::abort there): the job layer's watchdog goodbye. Async-signal-safe.
  void (*before_abort_exit)() = nullptr;
};

// Collective over the `size` processes: rank 0 serves, every rank connects and
// waits for all. Throws TimeoutError naming the ranks that did not arrive
// within the timeout (or "cannot reach ..." for a rank that never connected),
// UsageError for a port rank 0 cannot listen on, ranks disagreeing on the world
// size or two processes claiming one rank, BackendError for other socket failures.
// Rank 0's channel keeps serving until every other rank has closed its own
// (bounded: 10 s after rank 0's is released).
std::shared_ptr<const WorldChannel> join_rendezvous(const RendezvousOptions& options);

}  // namespace ccscope
