#pragma once
// Factories for the concrete backends. A backend that was not compiled in, or
// that finds no usable device, reports it with UsageError.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/point_to_point.h"
#include "ccscope/collectives/world.h"

namespace ccscope {

std::unique_ptr<Communicator> make_mpi_communicator(const World& world);
struct MpiOptions {
  // Over the world's first `first_ranks` ranks (MPI_Comm_split; the factory
  // returns nullptr on the other ranks); 0: every rank.
  int first_ranks = 0;
  // Over the ranks that pass the same color (MPI_Comm_split, ordered by world
  // rank): a training probe's tensor-, pipeline- and data-parallel groups.
  // Negative: this rank joins none (nullptr). Unset: first_ranks decides.
  std::optional<int> color;
  // Wait in the nonblocking form of each collective, yielding the core between
  // tests, instead of the blocking call's busy poll: a rank's other threads
  // (the training probe's compute) keep the core while communication waits.
  bool yielding_waits = false;
};
// Collective: every rank of the world must call it.
std::unique_ptr<Communicator> make_mpi_communicator(const World& world, const MpiOptions& options);
// The reference algorithms (ring all-reduce/all-gather/reduce-scatter, chain
// broadcast, pairwise all-to-all) over MPI point-to-point on host memory, to set
// beside MPI's own algorithm choice. Collective: every rank must call it.
std::unique_ptr<Communicator> make_ring_communicator(const World& world);
// The same algorithms over any PointToPoint (which must outlive the communicator):
// the in-process transport runs a whole sweep in a unit test.
std::unique_ptr<Communicator> make_ring_communicator(PointToPoint& p2p);

// gloo (PyTorch's CPU collectives) on host memory over its TCP transport. It
// needs only the World: the ranks' addresses are exchanged with one
// World::all_gather, never through MPI or a store server. Each rank listens on
// the interface CCSCOPE_GLOO_IFACE names, else GLOO_SOCKET_IFNAME's (PyTorch's),
// else the address its host name resolves to (when an interface has it, not
// loopback), else its first interface that is up and not loopback.
struct GlooOptions {
  // As MpiOptions: over the world's first `first_ranks` ranks (0: every rank),
  // or over the ranks that pass the same color (ordered by world rank; negative:
  // none). The factory returns nullptr on a rank outside.
  int first_ranks = 0;
  std::optional<int> color;
  // How long one operation (and the connection at start) may wait for a peer
  // before it fails with TimeoutError.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};
// Collective: every rank of the world must call it. Throws UsageError when
// this ccscope was built without gloo.
std::unique_ptr<Communicator> make_gloo_communicator(const World& world,
                                                     const GlooOptions& options);
bool gloo_backend_compiled();
// The world's point-to-point over gloo (collective; diag's and topo's pair
// measurements in a world without MPI).
std::unique_ptr<PointToPoint> make_gloo_point_to_point(const World& world);

struct NcclOptions {
  // Give every rank its own NCCL_HOSTID so that NCCL connects even ranks of one
  // node through its network transport (and several ranks may share one GPU).
  bool isolate_ranks = false;
  // As MpiOptions: over the ranks that pass the same color (ordered by world
  // rank; negative: none), or over the world's first `first_ranks` (0: all).
  // One NCCL communicator per group, its id made by the group's first rank and
  // exchanged over the World (as PyTorch's new_group). The factory returns
  // nullptr on a rank outside. Collective: every rank of the world calls it.
  std::optional<int> color;
  int first_ranks = 0;
};
std::unique_ptr<Communicator> make_nccl_communicator(const World& world,
                                                     const NcclOptions& options);

// True when the NCCL backend was compiled in and this process sees a GPU.
bool nccl_backend_usable();
// CUDA devices this process sees; 0 without a GPU or without NCCL compiled in.
int visible_gpu_count();
// The PCI bus id ("0000:00:06.0") of the GPU the NCCL backend gives the rank
// with this local rank (local_rank mod visible GPUs); "" without a GPU.
std::string gpu_identity_for_local_rank(int local_rank);
bool nccl_backend_compiled();
// "2.28.9" or "" when NCCL is not compiled in; likewise the CUDA runtime version.
std::string nccl_version_string();
std::string cuda_runtime_version_string();
// The NVIDIA driver version ("570.86.15") from NVML, loaded at run time with dlopen;
// "" when there is no NVIDIA driver. Works in builds without CUDA.
std::string gpu_driver_version_string();

}  // namespace ccscope
