#pragma once
// Where and with what a run happened: versions, hosts, devices, environment.
#include <string>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/world.h"
#include "ccscope/reports/record.h"

namespace ccscope::bench {

// Collective (gathers device names from every rank).
reports::RunMetadata collect_run_metadata(const World& world, const Communicator& comm,
                                          const std::vector<std::string>& command_line);

// Variables that change how collectives behave, from `environ`, sorted.
std::vector<std::pair<std::string, std::string>> relevant_environment(char** environment);
std::string utc_now_iso8601();
// Joins arguments, quoting those a shell would split.
std::string shell_join(const std::vector<std::string>& words);

}  // namespace ccscope::bench
