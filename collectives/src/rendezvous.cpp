#include "ccscope/collectives/rendezvous.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/common/socket.h"
#include "gather_channel.h"

namespace ccscope {
namespace {

using Clock = SocketClock;
constexpr Clock::time_point kNever = Clock::time_point::max();

// One frame each way: a fixed header, then `length` bytes.
enum class Op : uint32_t { kHello = 1, kGather, kListen, kAbort, kReply, kAbortNotice };
enum class Status : int32_t { kOk = 0, kTimeout, kRefused };
constexpr uint32_t kMagic = 0x63637276;  // "ccrv"

struct Header {
  uint32_t magic = kMagic;
  Op op = Op::kReply;
  int32_t rank = 0;
  int32_t value = 0;  // hello: the world size this rank was told; reply: Status; abort: exit code
  uint64_t sequence = 0;
  uint64_t timeout_ms = 0;  // 0: wait without bound
  uint64_t length = 0;
};

bool send_frame(int fd, Header header, const std::string& payload, Clock::time_point deadline) {
  header.length = payload.size();
  return write_all(fd, &header, sizeof header, deadline) &&
         write_all(fd, payload.data(), payload.size(), deadline);
}

// False on end of stream or error; `payload` holds the frame's bytes.
bool receive_frame(int fd, Header& header, std::string& payload, Clock::time_point deadline) {
  if (!read_all(fd, &header, sizeof header, deadline) || header.magic != kMagic) return false;
  if (header.length > (uint64_t{1} << 34)) return false;  // not ours
  payload.assign(header.length, '\0');
  return read_all(fd, payload.data(), payload.size(), deadline);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i)
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) out += ", ... (" + std::to_string(ranks.size()) + " in all)";
  return out;
}

std::string seconds_text(std::chrono::milliseconds timeout) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(timeout.count()) / 1000.0);
  return text;
}

// Rank 0's side: one thread per connection; gathers complete when every rank's
// part is in.
class Server {
 public:
  Server(const RendezvousOptions& options) : options_(options) {
    listener_ = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!listener_.valid()) throw BackendError("rendezvous: " + errno_text("socket"));
    const int one = 1;
    ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    any.sin_port = htons(static_cast<uint16_t>(options.port));
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
        ::listen(listener_.get(), SOMAXCONN) != 0)
      throw UsageError("rank 0 cannot listen on port " + std::to_string(options.port) +
                       " for the rendezvous (" + options.source + "): " + std::strerror(errno) +
                       "; choose a free port (CCSCOPE_RENDEZVOUS_PORT)");
    hello_.assign(static_cast<size_t>(options.size), false);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  // Waits (bounded) until every connection has closed: the other ranks read
  // their last replies from this process.
  ~Server() {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    {
      std::unique_lock lock(mutex_);
      changed_.wait_until(lock, deadline, [&] { return open_connections_ == 0; });
      stopping_ = true;
      for (int fd : connection_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    changed_.notify_all();
    accept_thread_.join();
    for (auto& thread : connection_threads_) thread.join();
  }

 private:
  void accept_loop() {
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
      }
      pollfd entry{listener_.get(), POLLIN, 0};
      if (::poll(&entry, 1, 100) <= 0) continue;
      const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard lock(mutex_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      ++open_connections_;
      connection_fds_.push_back(fd);
      connection_threads_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int fd) {
    Header header;
    std::string payload;
    bool listening = false;
    int listener_rank = -1;
    while (receive_frame(fd, header, payload, kNever)) {
      Header reply;
      reply.sequence = header.sequence;
      std::string answer;
      if (header.op == Op::kHello) {
        answer = hello(header);
        reply.value = static_cast<int32_t>(answer.empty() ? Status::kOk : Status::kRefused);
      } else if (header.op == Op::kGather) {
        Status status = Status::kOk;
        answer = gather(header, std::move(payload), status);
        reply.value = static_cast<int32_t>(status);
      } else if (header.op == Op::kListen) {
        std::lock_guard lock(mutex_);
        listeners_.emplace_back(header.rank, fd);
        listening = true;
        listener_rank = header.rank;
        continue;  // no reply: the frame that follows is an abort notice
      } else if (header.op == Op::kAbort) {
        notify_abort(header.value);
      } else {
        break;
      }
      if (!send_frame(fd, reply, answer, Clock::now() + std::chrono::seconds(30))) break;
    }
    std::lock_guard lock(mutex_);
    if (listening)
      std::erase_if(listeners_,
                    [&](const auto& l) { return l.first == listener_rank && l.second == fd; });
    std::erase(connection_fds_, fd);
    ::close(fd);
    --open_connections_;
    changed_.notify_all();
  }

  // "" when welcome, else why not.
  std::string hello(const Header& header) {
    std::lock_guard lock(mutex_);
    if (header.value != options_.size)
      return "rank " + std::to_string(header.rank) + " was told the world has " +
             std::to_string(header.value) + " ranks, rank 0 that it has " +
             std::to_string(options_.size) + " (" + options_.source +
             "): the launch is inconsistent";
    if (header.rank < 0 || header.rank >= options_.size)
      return "rank " + std::to_string(header.rank) + " is outside the world of " +
             std::to_string(options_.size) + " ranks (" + options_.source + ")";
    if (hello_[static_cast<size_t>(header.rank)])
      return "two processes claim rank " + std::to_string(header.rank) + " (" + options_.source +
             "): each rank needs its own number";
    hello_[static_cast<size_t>(header.rank)] = true;
    return "";
  }

  struct Pending {
    std::vector<std::string> parts;
    std::vector<bool> arrived;
    int count = 0;
    int served = 0;
  };

  std::string gather(const Header& header, std::string part, Status& status) {
    std::unique_lock lock(mutex_);
    Pending& pending = gathers_[header.sequence];
    if (pending.parts.empty()) {
      pending.parts.resize(static_cast<size_t>(options_.size));
      pending.arrived.assign(static_cast<size_t>(options_.size), false);
    }
    const auto rank = static_cast<size_t>(header.rank);
    if (header.rank < 0 || rank >= pending.parts.size() || pending.arrived[rank]) {
      status = Status::kRefused;
      return "rendezvous: rank " + std::to_string(header.rank) + " sent collective #" +
             std::to_string(header.sequence) + " twice";
    }
    pending.parts[rank] = std::move(part);
    pending.arrived[rank] = true;
    if (++pending.count == options_.size) changed_.notify_all();
    const auto complete = [&] { return pending.count == options_.size || stopping_; };
    if (header.timeout_ms == 0) {
      changed_.wait(lock, complete);
    } else if (!changed_.wait_for(lock, std::chrono::milliseconds(header.timeout_ms), complete)) {
      std::vector<int> missing;
      for (size_t r = 0; r < pending.arrived.size(); ++r)
        if (!pending.arrived[r]) missing.push_back(static_cast<int>(r));
      status = Status::kTimeout;
      return (missing.size() == 1 ? "rank " : "ranks ") + rank_list(missing) + " of " +
             std::to_string(options_.size) + " did not arrive within " +
             seconds_text(std::chrono::milliseconds(header.timeout_ms)) + " (rendezvous at " +
             options_.host + ":" + std::to_string(options_.port) + ", " + options_.source + ")";
    }
    if (pending.count != options_.size) {
      status = Status::kRefused;
      return "rendezvous: rank 0 is leaving";
    }
    std::string packed = detail::pack_parts(pending.parts);
    if (++pending.served == options_.size) gathers_.erase(header.sequence);
    return packed;
  }

  // Tells every listening rank to end with `exit_code`; rank 0's own listener
  // last (it ends this process, and with it this server).
  void notify_abort(int exit_code) {
    std::vector<std::pair<int, int>> listeners;
    {
      std::lock_guard lock(mutex_);
      listeners = listeners_;
    }
    std::stable_partition(listeners.begin(), listeners.end(),
                          [](const auto& l) { return l.first != 0; });
    Header notice;
    notice.op = Op::kAbortNotice;
    notice.value = exit_code;
    for (const auto& [rank, fd] : listeners)
      (void)send_frame(fd, notice, "", Clock::now() + std::chrono::seconds(1));
  }

  RendezvousOptions options_;
  Fd listener_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bool> hello_;
  std::map<uint64_t, Pending> gathers_;
  std::vector<std::pair<int, int>> listeners_;  // (rank, fd)
  std::vector<int> connection_fds_;
  int open_connections_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> connection_threads_;
  std::thread accept_thread_;  // last: starts once the rest is built
};

class RendezvousChannel final : public detail::GatherChannel {
 public:
  explicit RendezvousChannel(const RendezvousOptions& options) : options_(options) {
    if (options.rank == 0) server_ = std::make_unique<Server>(options);
    const auto deadline = Clock::now() + options.timeout;
    main_ = connect(deadline);
    Header hello;
    hello.op = Op::kHello;
    hello.rank = options.rank;
    hello.value = options.size;
    const std::string refused = request(hello, "", deadline);
    if (!refused.empty()) throw UsageError(refused);
    listener_ = connect(deadline);
    Header listen;
    listen.op = Op::kListen;
    listen.rank = options.rank;
    if (!send_frame(listener_.get(), listen, "", deadline)) lost("listen");
    listen_thread_ = std::thread([this] { listen_for_abort(); });
    // Every rank has arrived once this first gather returns.
    try {
      gather("", options.timeout);
    } catch (...) {
      stop_listening();
      throw;
    }
  }

  ~RendezvousChannel() override {
    stop_listening();
    main_ = Fd();
    listener_ = Fd();
    server_.reset();  // rank 0: serves until the others have closed theirs
  }

  std::string name() const override { return "rendezvous"; }

  int channel_rank() const override { return options_.rank; }

  [[noreturn]] void abort(int exit_code) const override {
    std::fflush(stdout);
    std::fflush(stderr);
    // A connection of its own: the main one may be inside a gather on another thread.
    std::string error;
    const auto deadline = Clock::now() + std::chrono::seconds(3);
    Fd fd = connect_tcp(options_.host, options_.port, deadline, error);
    if (fd.valid()) {
      Header header;
      header.op = Op::kAbort;
      header.rank = options_.rank;
      header.value = exit_code;
      std::string reply;
      if (send_frame(fd.get(), header, "", deadline))
        (void)receive_frame(fd.get(), header, reply, deadline);
    }
    ::_exit(exit_code);
  }

 private:
  void stop_listening() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    if (listen_thread_.joinable()) listen_thread_.join();
  }

  Fd connect(Clock::time_point deadline) const {
    std::string error;
    for (;;) {
      // Rank 0 may not listen yet: try again until the deadline.
      Fd fd = connect_tcp(options_.host, options_.port,
                          std::min(deadline, Clock::now() + std::chrono::seconds(2)), error);
      if (fd.valid()) return fd;
      if (Clock::now() >= deadline)
        throw TimeoutError("rank " + std::to_string(options_.rank) +
                           " cannot reach the rendezvous at " + options_.host + ":" +
                           std::to_string(options_.port) + " (" + options_.source + ") within " +
                           seconds_text(options_.timeout) + ": " + error +
                           "; is rank 0 running, and is that its address?");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  [[noreturn]] void lost(const char* what) const {
    const std::string why = errno == 0 ? "connection closed" : std::strerror(errno);
    throw BackendError("rank " + std::to_string(options_.rank) + " lost the rendezvous at " +
                       options_.host + ":" + std::to_string(options_.port) +
                       " (rank 0's process) in " + what + ": " + why);
  }

  // Sends one request on the main connection and returns the reply's payload;
  // a refusal or timeout reply becomes the exception it names.
  std::string request(Header header, const std::string& payload, Clock::time_point deadline) const {
    std::lock_guard lock(mutex_);
    if (!send_frame(main_.get(), header, payload, deadline)) lost("a request");
    Header reply;
    std::string answer;
    if (!receive_frame(main_.get(), reply, answer, deadline)) {
      if (errno == ETIMEDOUT && header.op == Op::kHello)
        throw TimeoutError("rank " + std::to_string(options_.rank) +
                           ": rank 0 did not answer at the rendezvous within " +
                           seconds_text(options_.timeout));
      lost("a reply");
    }
    switch (static_cast<Status>(reply.value)) {
      case Status::kOk:
        return header.op == Op::kHello ? std::string() : answer;
      case Status::kTimeout:
        throw TimeoutError(answer);
      case Status::kRefused:
        if (header.op == Op::kHello) return answer;
        throw BackendError(answer);
    }
    throw BackendError("rendezvous: an unknown reply");
  }

  std::vector<std::string> gather(const std::string& part,
                                  std::chrono::milliseconds timeout) const override {
    Header header;
    header.op = Op::kGather;
    header.rank = options_.rank;
    header.sequence = sequence_++;
    header.timeout_ms = static_cast<uint64_t>(timeout.count());
    // The server answers by the timeout; a little beyond it, the connection is dead.
    const auto deadline =
        timeout.count() == 0 ? kNever : Clock::now() + timeout + std::chrono::seconds(5);
    return detail::unpack_parts(request(header, part, deadline),
                                static_cast<size_t>(options_.size));
  }

  void listen_for_abort() {
    Header header;
    std::string payload;
    if (!receive_frame(listener_.get(), header, payload, kNever)) return;  // closed: leaving
    if (header.op != Op::kAbortNotice) return;
    if (options_.before_abort_exit) options_.before_abort_exit();
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(header.value);
  }

  RendezvousOptions options_;
  std::unique_ptr<Server> server_;
  mutable std::mutex mutex_;  // one request at a time on the main connection
  mutable uint64_t sequence_ = 0;
  Fd main_;
  Fd listener_;
  std::thread listen_thread_;
};

}  // namespace

std::shared_ptr<const WorldChannel> join_rendezvous(const RendezvousOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size)
    throw UsageError("rendezvous: rank " + std::to_string(options.rank) + " of " +
                     std::to_string(options.size) + " is not a rank of the world");
  return std::make_shared<RendezvousChannel>(options);
}

}  // namespace ccscope
