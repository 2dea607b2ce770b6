#include "ccscope/bench/cluster_topology.h"

#include <chrono>
#include <stdexcept>

#include "ccscope/collectives/backends.h"
#include "ccscope/topo/paths.h"
#include "ccscope/topo/report.h"

namespace ccscope::bench {

ClusterTopology gather_cluster_topology(const World& world, const topo::ProbeOptions& options,
                                        const std::string& gpu_bus_id) {
  ClusterTopology cluster;
  // One probe per node: its first rank's. The topology travels as its JSON.
  std::string mine;
  double seconds = 0;
  if (world.local_rank() == 0) {
    const auto start = std::chrono::steady_clock::now();
    topo::TopologyReport one;
    one.nodes.push_back(topo::probe_host(options));
    // The node's name as MPI knows it, so that ranks and nodes match up; the
    // NCCL this ccscope runs (no source on the node says which one a job loads).
    one.nodes.back().hostname = world.hostname();
    one.nodes.back().nccl_version = nccl_version_string();
    mine = topo::topology_json(one);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::vector<double> slowest{seconds};
  world.all_reduce_max(slowest);
  cluster.probe_seconds = slowest[0];
  const std::vector<std::string> texts = world.all_gather(mine);
  const std::vector<std::string> buses = world.all_gather(gpu_bus_id);
  for (size_t rank = 0; rank < texts.size(); ++rank) {
    if (texts[rank].empty()) continue;
    std::vector<topo::HostTopology> nodes = topo::read_topology_json(texts[rank]);
    for (topo::HostTopology& node : nodes) cluster.nodes.push_back(std::move(node));
  }
  const std::vector<std::string>& hosts = world.hostnames();
  for (size_t rank = 0; rank < hosts.size(); ++rank) {
    size_t node = 0;
    while (node < cluster.nodes.size() && cluster.nodes[node].hostname != hosts[rank]) ++node;
    cluster.rank_node.push_back(node);
    int gpu = -1;
    if (node < cluster.nodes.size() && rank < buses.size() && !buses[rank].empty())
      if (const topo::Gpu* found = cluster.nodes[node].find_gpu_by_bus_id(buses[rank]))
        gpu = found->index;
    cluster.rank_gpu.push_back(gpu);
  }
  return cluster;
}

topo::RankSetPath expected_path_of_run(const ClusterTopology& cluster,
                                       const topo::NcclEnvironment& env, bool sockets_only) {
  return topo::slowest_rank_path(cluster.nodes, cluster.rank_node, cluster.rank_gpu, env,
                                 sockets_only);
}

}  // namespace ccscope::bench
