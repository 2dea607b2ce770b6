#pragma once
// The topology of every node of the job, gathered over MPI: the first rank of
// each node probes it (topo::probe_host) and every rank gets all nodes. What
// `ccscope topo` shows and what bench sets busbw against.
#include <string>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/world.h"
#include "ccscope/topo/nccl_env.h"
#include "ccscope/topo/paths.h"
#include "ccscope/topo/probe.h"
#include "ccscope/topo/topology.h"

namespace ccscope::bench {

struct ClusterTopology {
  std::vector<topo::HostTopology> nodes;  // by World::node_index()
  std::vector<size_t> rank_node;          // each rank's index into nodes
  std::vector<int> rank_gpu;              // each rank's GPU index on its node, -1 host memory
  double probe_seconds = 0;               // the slowest node's probe
};

// Collective over the world. `gpu_bus_id` is this rank's GPU ("" for host
// memory); NCCL_* variables of rank 0 are the ones paths are judged by.
ClusterTopology gather_cluster_topology(const World& world, const topo::ProbeOptions& options,
                                        const std::string& gpu_bus_id);

// The slowest path the job's ranks use, as bench records it (expected busbw,
// its description). `sockets_only` for the MPI backend.
topo::RankSetPath expected_path_of_run(const ClusterTopology& cluster,
                                       const topo::NcclEnvironment& env, bool sockets_only);

}  // namespace ccscope::bench
