#pragma once
// What `ccscope topo` shows: the nodes, the paths between them, measured pairs
// and findings; rendered as text (nvidia-smi's matrix, a node table) or JSON
// (docs/topo.md, "Topology JSON"), and read back from that JSON (`--from`).
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/records/topology_record.h"
#include "ccscope/topo/findings.h"
#include "ccscope/topo/nccl_env.h"
#include "ccscope/topo/paths.h"
#include "ccscope/topo/topology.h"

namespace ccscope::topo {

// One measured pair: two nodes (their first ranks), or two GPUs of a node.
struct MeasuredPair {
  std::string endpoint_a, endpoint_b;  // "node0", "node1"; "node0/GPU0"
  std::string path;                    // "socket over eth0", "NV4", "PIX"
  size_t round = 0;                    // the schedule's round it ran in (0-based)
  double expected_GBps = 0;            // 0 unknown
  double measured_GBps = 0;            // per direction (the slower one), GB/s
  bool below_threshold = false;        // measured < threshold x expected
};

struct TopologyReport {
  std::vector<HostTopology> nodes;
  NcclEnvironment env;
  bool sockets_only = false;  // the paths of a TCP-only backend (MPI)
  std::vector<NodePairPath> node_pairs;
  std::vector<MeasuredPair> measured;
  double threshold = 0.7;
  std::vector<Finding> findings;
};

// Fills node_pairs (every pair of nodes), the path and expected figure of each
// measured pair that has none ("node0"/"node1" a node pair, "node0/GPU0" a GPU
// pair), and the findings of the nodes, of the cluster's homogeneity and of
// the measured pairs below the threshold.
void complete_report(TopologyReport& report);

// The report's path records ("ccscope.topo_path/1", `topo --csv`): every GPU pair of every
// node, then every node pair, each with its measured figure where one was measured.
std::vector<records::TopologyPathRecord> path_records(const TopologyReport& report);

std::string topology_json(const TopologyReport& report);
// The nodes of a ccscope topology JSON document; TopologyError for anything else.
std::vector<HostTopology> read_topology_json(std::string_view text);

// The human view: per node the GPU/NIC matrix with legend, the GPU pairs'
// expected bandwidth, a node table, the node pairs, measured pairs, findings.
std::string render_topology_text(const TopologyReport& report);

}  // namespace ccscope::topo
