#include "run_metadata.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <set>
#include <string>

#include "ccscope/bench/cluster_topology.h"
#include "ccscope/collectives/backends.h"
#include "ccscope/common/environment.h"
#include "ccscope/topo/paths.h"
#include "ccscope/version.h"

extern char** environ;

namespace ccscope::bench {

void set_expected_path(records::RunMetadata& metadata, const World& world,
                       const Communicator& comm) {
  // NVML and sysfs place GPUs and rate NICs; hwloc's full I/O scan would add
  // up to a second per node to every bench run for the PCI tree alone.
  topo::ProbeOptions probe;
  probe.use_hwloc = false;
  const bool nccl = comm.backend_name() == "nccl";
  ClusterTopology cluster;
  try {
    cluster = gather_cluster_topology(
        world, probe, nccl ? gpu_identity_for_local_rank(world.local_rank()) : std::string());
  } catch (const topo::TopologyError&) {
    return;  // every rank read the same texts: all leave the figure unknown alike
  }
  // The MPI backends speak TCP between nodes whatever the NICs (MPICH's and
  // Open MPI's default transports here); NCCL picks as topo says it would.
  const topo::RankSetPath path =
      expected_path_of_run(cluster, topo::nccl_environment_from_process(), !nccl);
  if (path.expected_GBps > 0) {
    metadata.expected_busbw_GBps = path.expected_GBps;
    metadata.expected_path = path.description;
  }
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) {
    if (!out.empty()) out += ' ';
    const bool plain =
        !word.empty() &&
        word.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+%@") ==
            std::string::npos;
    if (plain) {
      out += word;
      continue;
    }
    out += '\'';
    for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

records::RunMetadata collect_run_metadata(const World& world, const Communicator& comm,
                                          const std::vector<std::string>& command_line) {
  records::RunMetadata metadata;
  metadata.ccscope_version = kVersion;
  metadata.git_commit = kGitCommit;
  metadata.backend = comm.backend_name();
  metadata.backend_resources = comm.resources();
  metadata.mpi_library = MpiSession::library_version();
  if (comm.backend_name() == "nccl") {
    metadata.nccl_version = nccl_version_string();
    metadata.cuda_version = cuda_runtime_version_string();
  }
  // Every rank asks its own node's driver: a node with a different driver is a
  // classic bring-up mistake, so all distinct versions are kept (sorted, so the
  // fingerprint does not depend on rank placement).
  const std::string driver =
      comm.backend_name() == "nccl" ? gpu_driver_version_string() : std::string();
  std::set<std::string> drivers;
  for (const std::string& version : world.all_gather(driver))
    if (!version.empty()) drivers.insert(version);
  for (const std::string& version : drivers)
    metadata.driver_version += (metadata.driver_version.empty() ? "" : ";") + version;
  metadata.hosts = world.hostnames();
  metadata.gpu_names = world.all_gather(comm.device_name());
  const std::string bus_id = comm.backend_name() == "nccl"
                                 ? gpu_identity_for_local_rank(world.local_rank())
                                 : std::string("-");
  const int gpus = comm.backend_name() == "nccl" ? visible_gpu_count() : 0;
  metadata.rank_devices = world.all_gather(fmt::format(
      "Pid {:6} on {:>10} device {:>2} [{}] {}", static_cast<long>(::getpid()), world.hostname(),
      gpus > 0 ? std::to_string(world.local_rank() % gpus) : std::string("-"), bus_id,
      comm.device_name()));
  metadata.ranks = world.size();
  metadata.nodes = world.node_count();
  metadata.ranks_per_node = world.max_ranks_per_node();
  metadata.environment = recorded_environment(environ);
  metadata.command_line = shell_join(command_line);
  set_expected_path(metadata, world, comm);
  metadata.start_time_utc = utc_now_iso8601();
  return metadata;
}

}  // namespace ccscope::bench
