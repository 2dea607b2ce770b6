#include "ccscope/job/wait_policy.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ccscope/collectives/error.h"
#include "ccscope/common/small_file.h"

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

size_t usable_cpus() {
  size_t cpus = 0;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) cpus = static_cast<size_t>(CPU_COUNT(&mask));
  // This process's cgroup (v2: "0::/PATH" in /proc/self/cgroup), whose cpu.max is "max PERIOD"
  // (no limit) or "QUOTA PERIOD" in microseconds.
  std::string group = trim_blanks(read_small_file("/proc/self/cgroup", 4096));
  group =
      group.rfind("0::", 0) == 0 && group.find('\n') == std::string::npos ? group.substr(3) : "";
  const std::string quota = trim_blanks(
      read_small_file("/sys/fs/cgroup" + (group == "/" ? "" : group) + "/cpu.max", 256));
  long long limit = 0, period = 0;
  if (std::sscanf(quota.c_str(), "%lld %lld", &limit, &period) == 2 && limit > 0 && period > 0) {
    const auto allowed = static_cast<size_t>(std::ceil(static_cast<double>(limit) / period));
    cpus = cpus == 0 ? allowed : std::min(cpus, allowed);
  }
  return std::max<size_t>(cpus, 1);
}

WaitPolicy wait_policy(const World& world) {
  const std::vector<std::string>& hosts = world.hostnames();
  const auto ranks_on_host =
      static_cast<size_t>(std::count(hosts.begin(), hosts.end(), world.hostname()));
  return choose_wait_policy(ranks_on_host, usable_cpus(), std::getenv(kYieldWhenIdleVariable));
}

}  // namespace ccscope::job
