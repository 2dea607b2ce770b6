#pragma once
// How a host backend's ranks wait for their peers: spinning in MPI's blocking
// calls (the lowest latency when every rank has a core) or testing the
// nonblocking call and yielding the core in between. Ranks that outnumber the
// CPUs they may run on spin against each other: a waiting rank burns the slice
// its peer needs. Open MPI yields when idle once a node is oversubscribed
// (mpi_yield_when_idle); MPICH never does, so ccscope decides itself.
#include <cstddef>
#include <optional>
#include <string>

#include "ccscope/collectives/world.h"

namespace ccscope::job {

struct WaitPolicy {
  bool yield = false;
  std::string why;  // for the run's header: "4 ranks share this host's 2 CPUs"
};

// The environment variable that decides instead of the rule: 1 yields, 0 spins.
inline constexpr const char* kYieldWhenIdleVariable = "CCSCOPE_YIELD_WHEN_IDLE";

// The rule (pure): `variable` (the environment's value, nullptr when unset) when set,
// else yield when `ranks_on_host` outnumber `usable_cpus`. Throws UsageError for a
// value other than 0 or 1.
WaitPolicy choose_wait_policy(size_t ranks_on_host, size_t usable_cpus, const char* variable);

// The CPUs this process may run on: its affinity mask, bounded by its cgroup's
// CPU quota (cgroup v2 cpu.max, as a container's CPU limit sets it); at least 1.
size_t usable_cpus();

// The policy of this rank: the ranks of its host (by hostname) against its CPUs.
WaitPolicy wait_policy(const World& world);

}  // namespace ccscope::job
