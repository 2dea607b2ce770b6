#pragma once
// Environment sanity over what every rank saw: NCCL/UCX/MPI variables that
// name devices a node does not have, that disable the fast paths, or that
// differ between ranks; two ranks of a node on one GPU; libraries of
// different versions. Pure: the runner gathers the RankEnvironments over MPI.
#include <string>
#include <utility>
#include <vector>

#include "ccscope/diag/check.h"
#include "ccscope/topo/topology.h"

namespace ccscope::diag {

struct RankEnvironment {
  int rank = 0;
  std::string host;
  int local_rank = 0;  // index among the ranks of `host`, in rank order
  // The recorded variables (ccscope/common/environment.h: NCCL_*, UCX_*,
  // CUDA_VISIBLE_DEVICES, ...), as (name, value).
  std::vector<std::pair<std::string, std::string>> variables;
  std::vector<topo::Nic> nics;         // this node's interfaces and RDMA ports; empty: unknown
  std::vector<std::string> gpu_uuids;  // the node's GPUs (may be empty on CPU)
  std::string gpu_in_use;              // identity (UUID or PCI bus id) of its GPU, "" none
  std::string nccl_version;            // "" when NCCL is absent
  std::string mpi_library;             // MPI library version line
  std::string ccscope_version;
};

// Checks of Stage::kCluster, each naming the hosts and ranks concerned:
//  FAIL env.socket_ifname   NCCL_SOCKET_IFNAME matches no running interface of
//                           a node; or, across nodes, NCCL's socket interfaces
//                           there are loopback only
//  WARN env.socket_ifname   across nodes, only docker*/veth*/virbr* interfaces
//  FAIL env.ib_hca          NCCL_IB_HCA matches none of a node's RDMA ports
//  WARN env.ib_disabled     NCCL_IB_DISABLE / NCCL_NET=Socket turns active
//                           IB/RoCE ports into socket traffic
//  WARN env.nccl_debug      NCCL_DEBUG set on some ranks only (or to different levels)
//  WARN env.variable_mismatch  one per recorded variable whose value (or
//                           presence) differs between ranks; not judged:
//                           CUDA_VISIBLE_DEVICES (per local rank by nature),
//                           NCCL_HOSTID, NCCL_DEBUG, CCSCOPE_TEST_*, and the
//                           launcher's per-rank OMPI_* variables
//  FAIL env.gpu_shared      two ranks of a node on one GPU (gpu_in_use, else
//                           CUDA_VISIBLE_DEVICES[local_rank % count] on a
//                           node with GPUs);
//                           WARN when each has its own NCCL_HOSTID (ccscope's
//                           --isolate-ranks: NCCL allows it and uses sockets)
//  FAIL env.nccl_version, WARN env.mpi_version, WARN env.ccscope_version: differ between ranks
//  WARN env.p2p_disabled / env.shm_disabled: NCCL_P2P_DISABLE=1 / NCCL_SHM_DISABLE=1
//  PASS env.consistent      none of the above (SKIP when `ranks` is empty)
std::vector<Check> check_environment(const std::vector<RankEnvironment>& ranks);

}  // namespace ccscope::diag
