#include "ccscope/collectives/watchdog.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "ccscope/collectives/error.h"

namespace ccscope {
namespace {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// IPv4 addresses of the interfaces that are up, loopback last (a peer on
// another node can only reach the others).
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

// Waits for `events` on fd until the deadline; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(left.count()));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

// Asks one peer for its progress line. Tries each address in turn.
RankProgress ask_peer(int rank, const std::vector<std::string>& addresses, int port,
                      std::chrono::milliseconds budget) {
  RankProgress progress;
  progress.rank = rank;
  progress.answer = RankProgress::Answer::kUnreachable;
  bool any_refused = false;  // a host answered that nothing listens: the process is gone
  // Every address's failure is kept: "10.0.0.3: connect timed out; 10.1.0.3: ...".
  auto failed = [&](const std::string& why) {
    progress.detail += (progress.detail.empty() ? "" : "; ") + why;
  };
  if (addresses.empty()) progress.detail = "no address to reach it";
  for (const auto& address : addresses) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      failed(errno_text("socket"));
      continue;
    }
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    peer.sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, address.c_str(), &peer.sin_addr) != 1) continue;
    const auto deadline = Clock::now() + budget;
    int error = 0;
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&peer), sizeof peer) != 0 &&
        errno != EINPROGRESS) {
      error = errno;
    } else if (!wait_for(fd.get(), POLLOUT, deadline)) {
      failed(address + ": connect timed out");
      continue;
    } else {
      socklen_t length = sizeof error;
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    }
    if (error != 0) {
      any_refused = any_refused || error == ECONNREFUSED;
      failed(address + ": " + std::strerror(error));
      continue;
    }
    // Connected: the kernel accepted for the listener even if the process is
    // stopped, so silence from here on means the process itself does not run.
    const char request = '?';
    if (::send(fd.get(), &request, 1, MSG_NOSIGNAL) != 1) continue;
    std::string reply;
    while (reply.find('\n') == std::string::npos) {
      if (!wait_for(fd.get(), POLLIN, deadline)) break;
      char chunk[512];
      const ssize_t got = ::recv(fd.get(), chunk, sizeof chunk, 0);
      if (got <= 0) break;
      reply.append(chunk, static_cast<size_t>(got));
    }
    std::istringstream fields(reply);
    int busy = 0;
    if (fields >> progress.rank >> busy >> progress.operation >> progress.stalled_seconds) {
      progress.busy = busy != 0;
      std::getline(fields >> std::ws, progress.phase);
      progress.answer = RankProgress::Answer::kAnswered;
      progress.detail.clear();
      return progress;
    }
    progress.rank = rank;
    progress.answer = RankProgress::Answer::kNoAnswer;
    progress.detail = "connected but got no answer within " +
                      std::to_string(budget.count() / 1000.0).substr(0, 3) + " s";
    return progress;
  }
  if (any_refused) progress.answer = RankProgress::Answer::kGone;
  return progress;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

}  // namespace

std::string describe_stall(const std::vector<RankProgress>& ranks,
                           const std::vector<std::string>& hosts, double timeout_seconds,
                           int reporter) {
  auto host = [&](int rank) {
    return rank >= 0 && static_cast<size_t>(rank) < hosts.size() ? hosts[static_cast<size_t>(rank)]
                                                                 : std::string("?");
  };
  unsigned long long furthest = 0;
  for (const auto& r : ranks)
    if (r.answer == RankProgress::Answer::kAnswered && r.operation > furthest)
      furthest = r.operation;
  std::vector<int> silent, gone, unreachable, behind, waiting;
  std::ostringstream lines;
  for (const auto& r : ranks) {
    switch (r.answer) {
      case RankProgress::Answer::kNoAnswer:
        silent.push_back(r.rank);
        lines << "ccscope: rank " << r.rank << " (" << host(r.rank)
              << ") does not answer: stopped (SIGSTOP), hung outside ccscope, or unreachable"
              << (r.detail.empty() ? "" : " [" + r.detail + "]") << "\n";
        break;
      case RankProgress::Answer::kGone:
        gone.push_back(r.rank);
        lines << "ccscope: rank " << r.rank << " (" << host(r.rank)
              << ") is gone: its process exited or was killed"
              << (r.detail.empty() ? "" : " [" + r.detail + "]") << "\n";
        break;
      case RankProgress::Answer::kUnreachable:
        unreachable.push_back(r.rank);
        lines << "ccscope: rank " << r.rank << " (" << host(r.rank)
              << ") cannot be reached: its node or network link is down, or a firewall drops "
                 "the connection"
              << (r.detail.empty() ? "" : " [" + r.detail + "]") << "\n";
        break;
      case RankProgress::Answer::kAnswered:
        if (r.operation < furthest) {
          behind.push_back(r.rank);
          lines << "ccscope: rank " << r.rank << " (" << host(r.rank) << ") is behind: operation #"
                << r.operation << " of " << (r.phase.empty() ? "-" : r.phase)
                << ", no progress for " << static_cast<long long>(r.stalled_seconds) << " s\n";
        } else {
          waiting.push_back(r.rank);
        }
        break;
    }
  }
  std::vector<int> culprits = silent;
  culprits.insert(culprits.end(), gone.begin(), gone.end());
  culprits.insert(culprits.end(), unreachable.begin(), unreachable.end());
  culprits.insert(culprits.end(), behind.begin(), behind.end());
  // Nodes none of whose ranks the reporter can reach. Such a node is named as
  // cut off only when some other node still answers; when only the reporter's
  // own node answers, the reporter's link is as likely to be the broken one.
  const std::string own_node = host(reporter);
  std::vector<std::string> unreachable_nodes;
  for (int r : unreachable) {
    const std::string node = host(r);
    if (node == own_node || std::find(unreachable_nodes.begin(), unreachable_nodes.end(), node) !=
                                unreachable_nodes.end())
      continue;
    const bool whole_node = std::all_of(ranks.begin(), ranks.end(), [&](const RankProgress& p) {
      return host(p.rank) != node || p.answer == RankProgress::Answer::kUnreachable;
    });
    if (whole_node) unreachable_nodes.push_back(node);
  }
  const bool another_node_answers =
      std::any_of(ranks.begin(), ranks.end(), [&](const RankProgress& p) {
        return host(p.rank) != own_node && p.answer == RankProgress::Answer::kAnswered;
      });
  if (another_node_answers) {
    for (const auto& node : unreachable_nodes)
      lines << "ccscope: node " << node
            << " is cut off: none of its ranks can be reached while other nodes answer; check "
               "its network link\n";
  } else if (unreachable_nodes.size() == 1) {
    lines << "ccscope: nodes " << own_node << " and " << unreachable_nodes.front()
          << " cannot reach each other: the network link of either may be down\n";
  } else if (unreachable_nodes.size() > 1) {
    lines << "ccscope: no other node can be reached from " << own_node << " ("
          << unreachable_nodes.size() << " nodes): check " << own_node
          << "'s own network link first\n";
  }
  std::ostringstream out;
  out << "ccscope: timeout: no progress for " << timeout_seconds << " s. ";
  if (!culprits.empty()) {
    std::sort(culprits.begin(), culprits.end());
    out << "Rank(s) that did not finish: " << join_ranks(culprits) << ".";
    if (!waiting.empty()) out << " Rank(s) " << join_ranks(waiting) << " are waiting for them.";
  } else {
    out << "Every rank answered and all wait in the same operation (#" << furthest
        << "): no rank is behind; suspect the network or the transport between them.";
  }
  out << "\n" << lines.str();
  for (const auto& r : ranks) {
    if (r.answer == RankProgress::Answer::kAnswered && r.operation == furthest &&
        !waiting.empty() && r.rank == waiting.front()) {
      out << "ccscope: waiting ranks are in operation #" << r.operation << " of "
          << (r.phase.empty() ? "-" : r.phase) << "\n";
    }
  }
  return out.str();
}

class HangWatchdog::Impl {
 public:
  Impl(const World& world, std::chrono::milliseconds timeout,
       const std::atomic<unsigned long long>& operation)
      : world_(world), timeout_(timeout), operation_(operation) {
    listener_ = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listener_.get() < 0) throw BackendError("watchdog: " + errno_text("socket"));
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t length = sizeof any;
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
        ::listen(listener_.get(), SOMAXCONN) != 0 ||  // every rank may ask at once
        ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&any), &length) != 0)
      throw BackendError("watchdog: " + errno_text("bind/listen"));
    std::string card = std::to_string(ntohs(any.sin_port));
    const std::vector<std::string> own_addresses = local_addresses();
    for (const auto& address : own_addresses) card += " " + address;
    const std::vector<std::string> cards = world.all_gather(card);
    for (size_t r = 0; r < cards.size(); ++r) {
      std::istringstream fields(cards[r]);
      Peer peer;
      fields >> peer.port;
      // An address this node also has (loopback, docker0's 172.17.0.1, ...)
      // reaches a peer only on this node; for one elsewhere it would reach some
      // process here and hide the real reason (a link that is down).
      const bool same_node = world.hostnames()[r] == world.hostname();
      for (std::string address; fields >> address;) {
        const bool also_here =
            address.rfind("127.", 0) == 0 ||
            std::find(own_addresses.begin(), own_addresses.end(), address) != own_addresses.end();
        if (same_node || !also_here) peer.addresses.push_back(address);
      }
      peers_.push_back(std::move(peer));
    }
    last_operation_ = operation_.load();
    last_change_ = Clock::now();
    thread_ = std::thread([this] { loop(); });
  }

  ~Impl() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

  void begin_phase(std::string description) {
    std::lock_guard lock(mutex_);
    phase_ = std::move(description);
    busy_ = true;
    last_change_ = Clock::now();
  }
  void end_phase() {
    std::lock_guard lock(mutex_);
    busy_ = false;
  }

 private:
  struct Peer {
    int port = 0;
    std::vector<std::string> addresses;
  };

  void loop() {
    while (!stop_.load()) {
      pollfd entry{listener_.get(), POLLIN, 0};
      if (::poll(&entry, 1, 100) > 0) answer_one();
      check_progress();
    }
  }

  std::string progress_line() {
    std::lock_guard lock(mutex_);
    const double stalled = std::chrono::duration<double>(Clock::now() - last_change_).count();
    std::string phase = phase_;
    for (char& c : phase)
      if (c == '\n' || c == '\r') c = ' ';
    return std::to_string(world_.rank()) + " " + (busy_ ? "1" : "0") + " " +
           std::to_string(operation_.load(std::memory_order_relaxed)) + " " +
           std::to_string(stalled) + " " + phase + "\n";
  }

  void answer_one() {
    Fd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (client.get() < 0) return;
    // One request byte, bounded wait: a stuck asker must not stall the watchdog.
    if (!wait_for(client.get(), POLLIN, Clock::now() + std::chrono::milliseconds(500))) return;
    char request = 0;
    if (::recv(client.get(), &request, 1, 0) != 1) return;
    const std::string line = progress_line();
    (void)::send(client.get(), line.data(), line.size(), MSG_NOSIGNAL);
  }

  void check_progress() {
    const auto now = Clock::now();
    {
      std::lock_guard lock(mutex_);
      const auto current = operation_.load(std::memory_order_relaxed);
      if (current != last_operation_) {
        last_operation_ = current;
        last_change_ = now;
        return;
      }
      if (!busy_ || now - last_change_ < timeout_ || expired_) return;
      expired_ = true;
    }
    // Ask the others from a separate thread so that this one keeps answering.
    std::thread([this] { expire(); }).detach();
  }

  void expire() {
    const int size = world_.size();
    std::vector<std::future<RankProgress>> answers;
    for (int r = 0; r < size; ++r) {
      answers.push_back(std::async(std::launch::async, [this, r] {
        return ask_peer(r, peers_[static_cast<size_t>(r)].addresses,
                        peers_[static_cast<size_t>(r)].port, std::chrono::milliseconds(2000));
      }));
    }
    std::vector<RankProgress> ranks;
    for (auto& answer : answers) ranks.push_back(answer.get());
    // The lowest rank that is stalled reports; others only confirm and exit.
    bool reporter = true;
    for (const auto& r : ranks)
      if (r.rank < world_.rank() && r.answer == RankProgress::Answer::kAnswered && r.busy)
        reporter = false;
    const double seconds = std::chrono::duration<double>(timeout_).count();
    if (reporter) {
      const std::string report = describe_stall(ranks, world_.hostnames(), seconds, world_.rank());
      std::fwrite(report.data(), 1, report.size(), stderr);
      std::fflush(stderr);
      // The launcher forwards this output and handles the abort on different
      // channels; give the output a head start, or Hydra may end the job first
      // and drop the report (seen in the virtual cluster with a node cut off).
      std::this_thread::sleep_for(std::chrono::seconds(1));
    } else {
      // Give the reporter time to ask this rank before the job goes away.
      std::this_thread::sleep_for(std::chrono::seconds(5));
      std::fprintf(stderr, "ccscope: rank %d (%s): timeout after %g s in %s\n", world_.rank(),
                   world_.hostname().c_str(), seconds, progress_line().c_str());
      std::fflush(stderr);
    }
    std::fflush(stdout);
    // End the whole job through MPI: a plain exit of this process can leave the
    // launcher (Hydra across nodes) waiting on the stopped rank forever. The
    // main thread is blocked inside MPI/NCCL, so MPI_Abort from this thread is
    // outside FUNNELED's promise: if it has not ended the process in 10 s,
    // leave without it.
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(10));
      ::_exit(kTimeoutExitCode);
    }).detach();
    world_.abort(kTimeoutExitCode);
  }

  const World& world_;
  const std::chrono::milliseconds timeout_;
  const std::atomic<unsigned long long>& operation_;
  Fd listener_;
  std::vector<Peer> peers_;
  std::mutex mutex_;
  std::string phase_;
  bool busy_ = false;
  bool expired_ = false;
  unsigned long long last_operation_ = 0;
  Clock::time_point last_change_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

HangWatchdog::HangWatchdog(const World& world, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(world, timeout, operation_)) {}
HangWatchdog::~HangWatchdog() = default;
void HangWatchdog::begin_phase(std::string description) {
  impl_->begin_phase(std::move(description));
}
void HangWatchdog::end_phase() { impl_->end_phase(); }

}  // namespace ccscope
