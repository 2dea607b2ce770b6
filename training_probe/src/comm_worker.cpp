#include "ccscope/training_probe/comm_worker.h"

#include <chrono>

#include "ccscope/collectives/error.h"

namespace ccscope::training_probe {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

CommWorker::CommWorker(Communicator& communicator, std::chrono::milliseconds timeout,
                       bool asynchronous)
    : communicator_(communicator), timeout_(timeout), asynchronous_(asynchronous) {
  if (asynchronous_) thread_ = std::thread([this] { run(); });
}

CommWorker::~CommWorker() {
  if (!thread_.joinable()) return;
  if (timed_out_) {
    // The worker is stuck inside the backend: joining would hang; the
    // process is ending with the timeout's error anyway.
    thread_.detach();
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

size_t CommWorker::submit(Operation operation, double bytes) {
  size_t ticket = 0;
  {
    std::lock_guard lock(mutex_);
    ticket = ++submitted_;
    counters_.bytes += bytes;
    ++counters_.operations;
    if (asynchronous_) queue_.emplace_back(ticket, std::move(operation));
  }
  if (asynchronous_) {
    changed_.notify_all();
    return ticket;
  }
  // Synchronous: the caller runs it, and all of it is exposed.
  const auto start = std::chrono::steady_clock::now();
  operation(communicator_);
  communicator_.wait(timeout_);
  const double took = seconds_since(start);
  std::lock_guard lock(mutex_);
  counters_.busy_seconds += took;
  counters_.exposed_seconds += took;
  completed_ = ticket;
  return ticket;
}

void CommWorker::run() {
  for (;;) {
    std::pair<size_t, Operation> job;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // what is still queued is dropped: its buffers are going
      job = std::move(queue_.front());
      queue_.pop_front();
      if (error_) {  // after a failure the rest is not run, only completed
        completed_ = job.first;
        changed_.notify_all();
        continue;
      }
    }
    const auto start = std::chrono::steady_clock::now();
    std::exception_ptr failure;
    try {
      job.second(communicator_);
      communicator_.wait(timeout_);
    } catch (...) {
      failure = std::current_exception();
    }
    const double took = seconds_since(start);
    {
      std::lock_guard lock(mutex_);
      counters_.busy_seconds += took;
      completed_ = job.first;
      if (failure && !error_) error_ = failure;
    }
    changed_.notify_all();
  }
}

void CommWorker::wait(size_t ticket) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  if (!changed_.wait_for(lock, timeout_, [&] { return completed_ >= ticket; })) {
    timed_out_ = true;
    const std::string what = "training probe: a communication operation did not complete within " +
                             std::to_string(timeout_.count()) +
                             " ms (a rank stopped or the network stalled)";
    if (on_timeout_) {
      lock.unlock();
      on_timeout_(what);
    }
    throw TimeoutError(what);
  }
  if (asynchronous_) counters_.exposed_seconds += seconds_since(start);
  if (error_) std::rethrow_exception(error_);
}

void CommWorker::wait_all() {
  size_t last = 0;
  {
    std::lock_guard lock(mutex_);
    last = submitted_;
  }
  wait(last);
}

CommCounters CommWorker::take_counters() {
  std::lock_guard lock(mutex_);
  CommCounters taken = counters_;
  counters_ = CommCounters{};
  return taken;
}

}  // namespace ccscope::training_probe
