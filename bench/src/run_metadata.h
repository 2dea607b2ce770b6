#pragma once
// Where and with what a run happened: versions, hosts, devices, environment.
#include <string>
#include <vector>

#include "ccscope/common/utc_time.h"
#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/world.h"
#include "ccscope/records/bench_record.h"

namespace ccscope::bench {

// Collective (gathers device names from every rank).
records::RunMetadata collect_run_metadata(const World& world, const Communicator& comm,
                                          const std::vector<std::string>& command_line);

// Collective: the nominal figure of the slowest path the ranks use and what it
// is (topo), into expected_busbw_GBps/expected_path; left unset when unknown.
void set_expected_path(records::RunMetadata& metadata, const World& world,
                       const Communicator& comm);

// Joins arguments, quoting those a shell would split.
std::string shell_join(const std::vector<std::string>& words);

}  // namespace ccscope::bench
