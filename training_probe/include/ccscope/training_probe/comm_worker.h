#pragma once
// Runs a strategy's communication on its own thread, in issue order, as
// PyTorch's DDP reducer and FSDP run theirs on a separate stream/thread: the
// training thread submits an operation and goes on computing, and blocks only
// when it needs the result. That blocked time is the exposed communication.
// Synchronous mode (DDP --no-overlap) runs each operation on the caller.
//
// The communicator is used by the worker thread alone while the worker
// exists (MPI is initialised with MPI_THREAD_SERIALIZED for this).
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "ccscope/collectives/communicator.h"

namespace ccscope::training_probe {

struct CommCounters {
  double busy_seconds = 0;     // time operations ran (on the worker)
  double exposed_seconds = 0;  // time the training thread waited for them
  double bytes = 0;            // nccl-tests' bytes per rank of the operations
  size_t operations = 0;
};

class CommWorker {
 public:
  using Operation = std::function<void(Communicator&)>;
  CommWorker(Communicator& communicator, std::chrono::milliseconds timeout, bool asynchronous);
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  // Queues `operation` (which moves `bytes` per rank); returns its ticket.
  size_t submit(Operation operation, double bytes);
  // Blocks until operation `ticket` and every earlier one completed; rethrows
  // an operation's error; throws TimeoutError after the timeout.
  void wait(size_t ticket);
  void wait_all();
  // Called with the timeout's message before wait() throws (it may end the
  // process: the worker thread is stuck inside the backend).
  void on_timeout(std::function<void(const std::string&)> handler) {
    on_timeout_ = std::move(handler);
  }
  // Counters since the last take (the training loop takes them once per step).
  CommCounters take_counters();

 private:
  void run();
  Communicator& communicator_;
  std::chrono::milliseconds timeout_;
  bool asynchronous_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<size_t, Operation>> queue_;
  size_t submitted_ = 0;
  size_t completed_ = 0;
  bool stopping_ = false;
  bool timed_out_ = false;
  std::function<void(const std::string&)> on_timeout_;
  std::exception_ptr error_;
  CommCounters counters_;
  std::thread thread_;
};

}  // namespace ccscope::training_probe
