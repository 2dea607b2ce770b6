#pragma once
// The set of ranks of one job, as the launcher started them: who am I, where am
// I, who shares my node. Also the small host-side control collectives (barrier,
// gathers of figures) that tools need whatever backend carries the data. They
// travel over a WorldChannel: MPI_COMM_WORLD under an MPI launcher, the TCP
// rendezvous of a launch without MPI (rendezvous.h) otherwise.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ccscope/collectives/control_plane.h"

namespace ccscope {

// How a World's control collectives travel (one per process, shared by the
// World's copies). Calls come from one thread at a time, except abort().
class WorldChannel {
 public:
  enum class Reduction { kMax, kMin, kSum };
  virtual ~WorldChannel() = default;
  // "mpi", "rendezvous", "threads over ...", for messages.
  virtual std::string name() const = 0;
  // `yielding`: wait with the core yielded (see World::set_yielding_waits);
  // a channel that always sleeps while it waits ignores it.
  virtual void barrier(bool yielding) const = 0;
  virtual std::vector<std::string> all_gather(const std::string& text, bool yielding) const = 0;
  virtual void all_reduce(std::span<double> values, Reduction reduction, bool yielding) const = 0;
  virtual int64_t all_reduce_sum(int64_t value, bool yielding) const = 0;
  // Throws TimeoutError after `timeout`.
  virtual void sleeping_barrier(std::chrono::milliseconds timeout) const = 0;
  virtual void broadcast(std::vector<char>& bytes, int root) const = 0;
  // Ends every rank of the job with `exit_code`; may be called from any thread.
  [[noreturn]] virtual void abort(int exit_code) const = 0;
};

// Initialises MPI on construction and finalises it on destruction (RAII).
class MpiSession {
 public:
  // How long MPI_Finalize may take before finalize() gives up on it.
  static constexpr std::chrono::seconds kFinalizeBound{15};

  MpiSession(int* argc, char*** argv);
  // Finalizes (bounded as finalize() is, exit code 1) unless finalize() ran.
  ~MpiSession();
  // MPI_Finalize, bounded: a tool's results are out when it gets here, and MPICH
  // 4.0 over UCX now and then never returns from it (one rank flushing an
  // endpoint, its peers in the PMI barrier). After `bound` this rank says so on
  // stderr and ends the job with `exit_code` without it (an abort through the
  // launcher's PMI-1 where it has one, then _exit). Returns `exit_code`, for
  // `return session.finalize(code);`.
  int finalize(int exit_code, std::chrono::milliseconds bound = kFinalizeBound);
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  // MPI_Get_library_version, first line (callable before MPI_Init).
  static std::string library_version();
  // True between MPI_Init and MPI_Finalize: the MPI backends are usable.
  static bool active();
  // True when the library granted MPI_THREAD_SERIALIZED or more (calls from
  // one thread at a time, any thread): the training probe's overlap needs it.
  static bool serialized_threads();
};

class World : public ControlPlane {
 public:
  // Collective over MPI_COMM_WORLD: exchanges hostnames to find nodes.
  // `node_name` replaces this host's name when set (Slurm's node name).
  static World from_mpi(const std::string& node_name = "");
  // Collective over the ranks of `channel` (rank and size as it says): exchanges
  // hostnames (`node_name`, else this host's) to find nodes.
  static World from_channel(std::shared_ptr<const WorldChannel> channel, int rank, int size,
                            const std::string& node_name = "");
  // "mpi", "rendezvous" or "threads over mpi" (thread_ranks.h).
  std::string channel_name() const { return channel().name(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int node_index() const { return node_index_; }
  int node_count() const { return node_count_; }
  // The largest number of ranks on one node.
  int max_ranks_per_node() const { return max_ranks_per_node_; }
  const std::string& hostname() const { return hostnames_[static_cast<size_t>(rank_)]; }
  const std::vector<std::string>& hostnames() const { return hostnames_; }

  // How this rank waits in the control collectives below: MPI's blocking
  // calls (spinning, the default), or their nonblocking forms tested with the
  // core yielded in between, for ranks that outnumber their host's CPUs (the
  // job layer decides once per job: job::wait_policy).
  void set_yielding_waits(bool yielding) { yielding_waits_ = yielding; }
  bool yielding_waits() const { return yielding_waits_; }

  // Control collectives over the world's channel (host memory, any backend).
  void barrier() const override;
  std::vector<std::string> all_gather(const std::string& text) const override;
  // Element-wise reductions of `values` across ranks; every rank gets the result.
  void all_reduce_max(std::span<double> values) const override;
  void all_reduce_min(std::span<double> values) const override;
  void all_reduce_sum(std::span<double> values) const override;
  int64_t all_reduce_sum(int64_t value) const override;
  // A barrier that waits asleep (MPI: MPI_Ibarrier tested every millisecond), so
  // that ranks sitting out a run leave the cores to the ranks computing;
  // throws TimeoutError after `timeout`.
  void sleeping_barrier(std::chrono::milliseconds timeout) const;
  // Broadcasts `bytes` from `root`, resizing on receivers.
  void broadcast(std::vector<char>& bytes, int root) const;
  // Ends every rank of the job (MPI_Abort, or the rendezvous' abort) with `exit_code`,
  // after kOutputDrainPause, so that the launcher forwards what the rank printed first.
  [[noreturn]] void abort(int exit_code) const;
  static constexpr std::chrono::milliseconds kOutputDrainPause{500};
  // Builds a World from hostnames alone (for unit tests of node arithmetic).
  static World from_hostnames(int rank, std::vector<std::string> hostnames);

 private:
  const WorldChannel& channel() const;
  std::shared_ptr<const WorldChannel> channel_;  // null: MPI_COMM_WORLD
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int node_index_ = 0;
  int node_count_ = 1;
  int max_ranks_per_node_ = 1;
  std::vector<std::string> hostnames_;
  bool yielding_waits_ = false;
};

}  // namespace ccscope
