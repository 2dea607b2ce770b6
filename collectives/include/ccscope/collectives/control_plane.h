#pragma once
// The small host-side control collectives a tool needs beside the data path:
// a barrier, a gather of text, element-wise reductions of a few figures. World
// implements them over MPI_COMM_WORLD; point_to_point_control() implements them
// over any PointToPoint (the in-process transport in unit tests), so code that
// takes a ControlPlane runs without MPI.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ccscope/collectives/point_to_point.h"

namespace ccscope {

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() const = 0;
  // Every rank's text, by rank, on every rank.
  virtual std::vector<std::string> all_gather(const std::string& text) const = 0;
  // Element-wise reductions of `values` across ranks; every rank gets the result.
  virtual void all_reduce_max(std::span<double> values) const = 0;
  virtual void all_reduce_min(std::span<double> values) const = 0;
  virtual void all_reduce_sum(std::span<double> values) const = 0;
  virtual int64_t all_reduce_sum(int64_t value) const = 0;
};

// Over `p2p` (which must outlive it): gathers to rank 0, which answers every
// rank. Every rank must make the same calls in the same order.
std::unique_ptr<ControlPlane> point_to_point_control(PointToPoint& p2p);

}  // namespace ccscope
