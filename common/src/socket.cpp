#include "ccscope/common/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ccscope {

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

std::vector<std::string> local_addresses() {
  std::vector<std::string> external, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
      if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
      if (!(it->ifa_flags & IFF_UP)) continue;
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, text,
                sizeof text);
      ((it->ifa_flags & IFF_LOOPBACK) ? loopback : external).push_back(text);
    }
    freeifaddrs(list);
  }
  external.insert(external.end(), loopback.begin(), loopback.end());
  return external;
}

bool wait_for(int fd, short events, SocketClock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SocketClock::now());
    if (left.count() <= 0) {
      errno = ETIMEDOUT;
      return false;
    }
    pollfd entry{fd, events, 0};
    // (in steps of at most an hour: poll takes an int of milliseconds)
    const int ready =
        ::poll(&entry, 1, static_cast<int>(std::min<long long>(left.count(), 3600000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

bool write_all(int fd, const void* data, size_t bytes, SocketClock::time_point deadline) {
  const char* next = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t sent = ::send(fd, next, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      next += sent;
      bytes -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd, POLLOUT, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool read_all(int fd, void* data, size_t bytes, SocketClock::time_point deadline) {
  char* next = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t got = ::recv(fd, next, bytes, MSG_DONTWAIT);
    if (got > 0) {
      next += got;
      bytes -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) {
      errno = 0;  // the peer closed
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLIN, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

Fd connect_tcp(const std::string& host, int port, SocketClock::time_point deadline,
               std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int code = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); code != 0) {
    error = "cannot resolve " + host + ": " + ::gai_strerror(code);
    return Fd();
  }
  error = "no address for " + host;
  for (addrinfo* it = found; it != nullptr; it = it->ai_next) {
    Fd fd(::socket(it->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      error = errno_text("socket");
      continue;
    }
    if (::connect(fd.get(), it->ai_addr, it->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        error = errno_text("connect");
        continue;
      }
      if (!wait_for(fd.get(), POLLOUT, deadline)) {
        error = "connect: timed out";
        continue;
      }
      int code = 0;
      socklen_t length = sizeof code;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &code, &length);
      if (code != 0) {
        error = std::string("connect: ") + std::strerror(code);
        continue;
      }
    }
    const int flags = ::fcntl(fd.get(), F_GETFL);
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::freeaddrinfo(found);
    error.clear();
    return fd;
  }
  ::freeaddrinfo(found);
  return Fd();
}

}  // namespace ccscope
