#pragma once
// A WorldChannel whose collectives are all one all-gather: the rendezvous'
// (one request to rank 0's server) and the thread ranks' (threads of one
// process, then their process's channel). Reductions run on every rank over the
// gathered parts in rank order, so every rank computes the same result.
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "ccscope/collectives/world.h"

namespace ccscope::detail {

class GatherChannel : public WorldChannel {
 public:
  // Every rank's `part`, by rank. `timeout` 0: without bound; else TimeoutError
  // naming the ranks that did not arrive.
  virtual std::vector<std::string> gather(const std::string& part,
                                          std::chrono::milliseconds timeout) const = 0;
  // This rank's number in the channel (the root of broadcast is one).
  virtual int channel_rank() const = 0;

  void barrier(bool yielding) const override;
  std::vector<std::string> all_gather(const std::string& text, bool yielding) const override;
  void all_reduce(std::span<double> values, Reduction reduction, bool yielding) const override;
  int64_t all_reduce_sum(int64_t value, bool yielding) const override;
  void sleeping_barrier(std::chrono::milliseconds timeout) const override;
  void broadcast(std::vector<char>& bytes, int root) const override;
};

// Parts packed into one text and back (length-prefixed).
std::string pack_parts(const std::vector<std::string>& parts);
std::vector<std::string> unpack_parts(const std::string& packed, size_t count);

}  // namespace ccscope::detail
