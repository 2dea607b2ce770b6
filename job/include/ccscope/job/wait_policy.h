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
#include <vector>

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

// The CPUs this process may run on (its affinity mask), by id.
std::vector<int> affinity_cpus();
// Its cgroup's CPU quota in whole CPUs (cgroup v2 cpu.max, as a container's CPU limit
// sets it), rounded up; 0 for no limit.
size_t cgroup_cpu_quota();
// The CPUs a host's ranks may run on together (pure): the union of their masks, bounded
// by `quota` (0: none); at least 1.
size_t host_cpus(const std::vector<std::vector<int>>& masks, size_t quota);

// The policy of this rank (collective: gathers every rank's mask): the ranks of its host
// (by hostname) against the CPUs they may run on together.
WaitPolicy wait_policy(const World& world);

}  // namespace ccscope::job
