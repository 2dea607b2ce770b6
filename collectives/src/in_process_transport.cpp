#include "ccscope/collectives/in_process_transport.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ccscope/collectives/error.h"

namespace ccscope {
namespace {

// Thrown in a rank whose wait was cut short because another rank failed; never
// leaves run().
struct Aborted {};

// Messages from one rank to another, in order.
struct Channel {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::vector<unsigned char>> queue;
  uint64_t pushed = 0;  // messages ever posted
  uint64_t popped = 0;  // messages ever received
};

class Shared {
 public:
  Shared(int ranks, const InProcessOptions& options) : ranks_(ranks), options_(options) {
    channels_.reserve(static_cast<size_t>(ranks) * static_cast<size_t>(ranks));
    for (int i = 0; i < ranks * ranks; ++i) channels_.push_back(std::make_unique<Channel>());
  }

  int ranks() const { return ranks_; }
  const InProcessOptions& options() const { return options_; }
  Channel& channel(int src, int dst) {
    return *channels_[static_cast<size_t>(src) * static_cast<size_t>(ranks_) +
                      static_cast<size_t>(dst)];
  }
  bool aborted() const { return aborted_.load(); }

  // Keeps the first real failure and wakes every waiting rank.
  void fail(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!first_error_) first_error_ = std::move(error);
    }
    aborted_.store(true);
    for (auto& channel : channels_) {
      std::lock_guard<std::mutex> lock(channel->mutex);
      channel->changed.notify_all();
    }
  }
  std::exception_ptr first_error() {
    std::lock_guard<std::mutex> lock(error_mutex_);
    return first_error_;
  }

 private:
  int ranks_;
  InProcessOptions options_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::atomic<bool> aborted_{false};
  std::mutex error_mutex_;
  std::exception_ptr first_error_;
};

class Endpoint final : public PointToPoint {
 public:
  Endpoint(Shared& shared, int rank) : shared_(shared), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return shared_.ranks(); }

  void send(int peer, const void* data, size_t bytes) override {
    check_peer(peer, "send to");
    uint64_t sequence = post(peer, data, bytes);
    if (shared_.options().synchronous_send) wait_received(peer, sequence, bytes);
  }

  void recv(int peer, void* data, size_t bytes) override {
    check_peer(peer, "recv from");
    take(peer, data, bytes);
  }

  void send_recv(int send_peer, const void* send_data, size_t send_bytes, int recv_peer,
                 void* recv_data, size_t recv_bytes) override {
    check_peer(send_peer, "send to");
    check_peer(recv_peer, "recv from");
    uint64_t sequence = post(send_peer, send_data, send_bytes);
    take(recv_peer, recv_data, recv_bytes);
    if (shared_.options().synchronous_send) wait_received(send_peer, sequence, send_bytes);
  }

 private:
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= shared_.ranks()) {
      throw UsageError("rank " + std::to_string(rank_) + ": " + what + " rank " +
                       std::to_string(peer) + ", but there are only " +
                       std::to_string(shared_.ranks()) + " ranks");
    }
  }

  std::string timeout_text(const std::string& what) const {
    return "rank " + std::to_string(rank_) + ": " + what + " timed out after " +
           std::to_string(shared_.options().timeout.count()) +
           " ms (in-process transport; a peer never matched it)";
  }

  // Waits under `lock` until `ready()`; throws Aborted or TimeoutError.
  template <typename Ready>
  void wait(Channel& channel, std::unique_lock<std::mutex>& lock, Ready ready,
            const std::string& what) {
    auto deadline = std::chrono::steady_clock::now() + shared_.options().timeout;
    bool done =
        channel.changed.wait_until(lock, deadline, [&] { return ready() || shared_.aborted(); });
    if (shared_.aborted() && !ready()) throw Aborted{};
    if (!done) throw TimeoutError(timeout_text(what));
  }

  uint64_t post(int peer, const void* data, size_t bytes) {
    std::vector<unsigned char> payload(bytes);
    if (bytes > 0) std::memcpy(payload.data(), data, bytes);
    Channel& channel = shared_.channel(rank_, peer);
    std::lock_guard<std::mutex> lock(channel.mutex);
    if (shared_.aborted()) throw Aborted{};
    channel.queue.push_back(std::move(payload));
    channel.changed.notify_all();
    return channel.pushed++;
  }

  void wait_received(int peer, uint64_t sequence, size_t bytes) {
    Channel& channel = shared_.channel(rank_, peer);
    std::unique_lock<std::mutex> lock(channel.mutex);
    wait(
        channel, lock, [&] { return channel.popped > sequence; },
        "send of " + std::to_string(bytes) + " bytes to rank " + std::to_string(peer));
  }

  void take(int peer, void* data, size_t bytes) {
    Channel& channel = shared_.channel(peer, rank_);
    std::vector<unsigned char> payload;
    {
      std::unique_lock<std::mutex> lock(channel.mutex);
      wait(
          channel, lock, [&] { return !channel.queue.empty(); },
          "recv of " + std::to_string(bytes) + " bytes from rank " + std::to_string(peer));
      payload = std::move(channel.queue.front());
      channel.queue.pop_front();
      ++channel.popped;
      channel.changed.notify_all();
    }
    if (payload.size() != bytes) {
      throw BackendError("rank " + std::to_string(rank_) + ": recv of " + std::to_string(bytes) +
                         " bytes from rank " + std::to_string(peer) + " matched a message of " +
                         std::to_string(payload.size()) + " bytes");
    }
    if (bytes > 0) std::memcpy(data, payload.data(), bytes);
  }

  Shared& shared_;
  int rank_;
};

}  // namespace

void InProcessTransport::run(int ranks, const std::function<void(PointToPoint&)>& body,
                             const InProcessOptions& options) {
  if (ranks < 1) {
    throw UsageError("in-process transport: need at least 1 rank, got " + std::to_string(ranks));
  }
  Shared shared(ranks, options);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&shared, &body, rank] {
      try {
        Endpoint endpoint(shared, rank);
        body(endpoint);
      } catch (const Aborted&) {
        // Another rank failed first; its error is the one reported.
      } catch (...) {
        shared.fail(std::current_exception());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (auto error = shared.first_error()) std::rethrow_exception(error);

  for (int src = 0; src < ranks; ++src) {
    for (int dst = 0; dst < ranks; ++dst) {
      Channel& channel = shared.channel(src, dst);
      if (!channel.queue.empty()) {
        throw BackendError("in-process transport: " + std::to_string(channel.queue.size()) +
                           " message(s) from rank " + std::to_string(src) + " to rank " +
                           std::to_string(dst) + " were never received");
      }
    }
  }
}

}  // namespace ccscope
