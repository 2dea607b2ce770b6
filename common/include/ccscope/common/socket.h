#pragma once
// Small POSIX socket helpers, each once: the descriptor owner, IPv4 addresses of
// this host, bounded waits, reads and writes, and a TCP connect with a deadline.
// Used by the hang watchdog's side channel and the rendezvous of launches
// without MPI.
#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ccscope {

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

using SocketClock = std::chrono::steady_clock;

// "call: strerror(errno)".
std::string errno_text(const char* call);

// IPv4 addresses of the interfaces that are up, loopback last (a peer on
// another node can only reach the others).
std::vector<std::string> local_addresses();

// Waits for `events` (poll's) on fd until the deadline; false on timeout or error.
bool wait_for(int fd, short events, SocketClock::time_point deadline);

// Writes/reads exactly `bytes` before `deadline` (a blocking or non-blocking
// socket); false on timeout, error or end of stream (errno tells which: 0 for
// the peer closing).
bool write_all(int fd, const void* data, size_t bytes, SocketClock::time_point deadline);
bool read_all(int fd, void* data, size_t bytes, SocketClock::time_point deadline);

// A TCP connection to `host` (a name or an IPv4 address) at `port` within
// `deadline`; an invalid Fd and `error` set when none was made. Blocking mode
// on success.
Fd connect_tcp(const std::string& host, int port, SocketClock::time_point deadline,
               std::string& error);

}  // namespace ccscope
