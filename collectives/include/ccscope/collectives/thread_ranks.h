#pragma once
// Ranks as threads (nccl-tests' -g N): N threads of one process each act as one
// rank of a world of (processes x N) ranks, thread t of process p being rank
// p*N + t. Their control collectives meet inside the process first; the last
// thread to arrive carries the process's parts over the process's world (MPI or
// the rendezvous), one call at a time (what MPI_THREAD_SERIALIZED allows).
#include <memory>

#include "ccscope/collectives/world.h"

namespace ccscope {

namespace detail {
struct ThreadGroupState;
}

class ThreadRanks {
 public:
  // `process_world` must outlive every thread's world.
  ThreadRanks(const World& process_world, int threads);
  ~ThreadRanks();
  int threads() const;
  // Called on thread `index` in [0, threads()); collective over every thread of
  // every process: that thread's world (named after the process's host).
  World world_of(int index) const;

 private:
  std::shared_ptr<detail::ThreadGroupState> state_;
};

}  // namespace ccscope
