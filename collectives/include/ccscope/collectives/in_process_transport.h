#pragma once
// N ranks as N threads of one process, talking through PointToPoint: fast unit
// tests of the rank arithmetic of collective algorithms, without MPI.
#include <chrono>
#include <functional>

#include "ccscope/collectives/point_to_point.h"

namespace ccscope {

struct InProcessOptions {
  // Every wait (a recv for its message, a synchronous send for its receiver)
  // throws TimeoutError after this long, so a buggy algorithm fails instead of
  // hanging.
  std::chrono::milliseconds timeout{10000};
  // true: send returns only once the receiver took the message, like an MPI
  // rendezvous send, so algorithms that depend on buffering time out here too.
  // false: sends are buffered (eager) and never block.
  bool synchronous_send = true;
};

class InProcessTransport {
 public:
  // Runs `body` on `ranks` threads, one PointToPoint endpoint each, and joins
  // them. When a rank throws, the other ranks' waits are cut short and the first
  // exception is rethrown here. Messages sent but never received are reported as
  // BackendError after a run that otherwise succeeded.
  static void run(int ranks, const std::function<void(PointToPoint&)>& body,
                  const InProcessOptions& options = {});
};

}  // namespace ccscope
