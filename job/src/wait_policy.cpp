#include "ccscope/job/wait_policy.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string_view>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/common/small_file.h"
#include "ccscope/common/text.h"

namespace ccscope::job {

WaitPolicy choose_wait_policy(size_t ranks_on_host, size_t usable_cpus, const char* variable) {
  if (variable) {
    const std::string_view value = variable;
    if (value == "1") return {true, fmt::format("{}=1", kYieldWhenIdleVariable)};
    if (value == "0") return {false, fmt::format("{}=0", kYieldWhenIdleVariable)};
    throw UsageError(fmt::format("{}='{}': give 1 (waits yield the core) or 0 (they spin)",
                                 kYieldWhenIdleVariable, value));
  }
  if (ranks_on_host > usable_cpus)
    return {true, fmt::format("{} ranks share this host's {} CPU{}", ranks_on_host, usable_cpus,
                              usable_cpus == 1 ? "" : "s")};
  return {false, ""};
}

std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  return cpus;
}

size_t cgroup_cpu_quota() {
  // This process's cgroup (v2: "0::/PATH" in /proc/self/cgroup), whose cpu.max is "max PERIOD"
  // (no limit) or "QUOTA PERIOD" in microseconds.
  std::string group = trim_blanks(read_small_file("/proc/self/cgroup", 4096));
  group =
      group.rfind("0::", 0) == 0 && group.find('\n') == std::string::npos ? group.substr(3) : "";
  const std::string quota = trim_blanks(
      read_small_file("/sys/fs/cgroup" + (group == "/" ? "" : group) + "/cpu.max", 256));
  long long limit = 0, period = 0;
  if (std::sscanf(quota.c_str(), "%lld %lld", &limit, &period) != 2 || limit <= 0 || period <= 0)
    return 0;
  return static_cast<size_t>(std::ceil(static_cast<double>(limit) / static_cast<double>(period)));
}

size_t host_cpus(const std::vector<std::vector<int>>& masks, size_t quota) {
  std::set<int> cpus;
  for (const std::vector<int>& mask : masks) cpus.insert(mask.begin(), mask.end());
  size_t count = cpus.size();
  if (quota > 0) count = count == 0 ? quota : std::min(count, quota);
  return std::max<size_t>(count, 1);
}

WaitPolicy wait_policy(const World& world) {
  // Every rank's mask (collective): ranks bound to a core each (Open MPI's default at 2
  // ranks) have a mask of one CPU but do not share it.
  std::string own;
  for (int cpu : affinity_cpus()) own += (own.empty() ? "" : ",") + std::to_string(cpu);
  const std::vector<std::string> texts = world.all_gather(own);
  std::vector<std::vector<int>> host_masks;
  for (size_t r = 0; r < texts.size(); ++r) {
    if (world.hostnames()[r] != world.hostname()) continue;
    std::vector<int>& mask = host_masks.emplace_back();
    for (const std::string& cpu : split(texts[r], ','))
      if (!cpu.empty()) mask.push_back(std::atoi(cpu.c_str()));
  }
  return choose_wait_policy(host_masks.size(), host_cpus(host_masks, cgroup_cpu_quota()),
                            std::getenv(kYieldWhenIdleVariable));
}

}  // namespace ccscope::job
