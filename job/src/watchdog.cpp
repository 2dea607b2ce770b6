#include "ccscope/job/watchdog.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/common/socket.h"

extern char** environ;

namespace ccscope {
namespace {

using Clock = std::chrono::steady_clock;

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
    RankProgress answered = parse_progress_line(reply);
    if (answered.answer == RankProgress::Answer::kAnswered) return answered;
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
  for (int r : ranks) {
    if (!out.empty()) out += ',';
    out += std::to_string(r);
  }
  return out;
}

// The watch connections' protocol. A connection to a listener starts with one
// byte: '?' asks for the progress line (one reply, then closed), 'W' opens a
// watch connection ("W <rank>\n", then held open until the end). On a watch
// connection each end sends kGoodbye before it closes on purpose.
constexpr char kProgressRequest = '?';
constexpr char kWatchRequest = 'W';
constexpr char kGoodbye = 'B';

// How long a dead rank's descriptor holder keeps its launcher descriptors open.
constexpr int kHoldSeconds = 2;
// How long the abort hook waits for a peer's connection to end.
constexpr long kAbortWaitMilliseconds = 200;

// ---- async-signal-safe helpers (the goodbye and the abort hook use them)

// A process's start time (clock ticks since boot, /proc/PID/stat field 22),
// which with its pid names it unambiguously on one machine; -1 if unknown.
long long process_start_time(pid_t pid) {
  char path[40] = "/proc/";
  size_t length = 6;
  char digits[24];
  size_t count = 0;
  for (long value = pid; value > 0 && count < sizeof digits; value /= 10)
    digits[count++] = static_cast<char>('0' + value % 10);
  while (count > 0) path[length++] = digits[--count];
  const char tail[] = "/stat";
  for (char c : tail) path[length++] = c;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[1024];
  ssize_t got = 0;
  while (got < static_cast<ssize_t>(sizeof text) - 1) {
    const ssize_t n = ::read(fd, text + got, sizeof text - 1 - static_cast<size_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += n;
  }
  ::close(fd);
  if (got <= 0) return -1;
  text[got] = '\0';
  const char* cursor = nullptr;  // after the name, which may hold spaces and ')'
  for (const char* c = text; *c != '\0'; ++c)
    if (*c == ')') cursor = c + 1;
  if (cursor == nullptr) return -1;
  for (int field = 3; field <= 22; ++field) {
    while (*cursor == ' ') ++cursor;
    if (*cursor == '\0') return -1;
    if (field == 22) {
      long long value = 0;
      for (; *cursor >= '0' && *cursor <= '9'; ++cursor) value = value * 10 + (*cursor - '0');
      return value;
    }
    while (*cursor != ' ' && *cursor != '\0') ++cursor;
  }
  return -1;
}

void write_stderr(const char* text, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(STDERR_FILENO, text + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

long long monotonic_microseconds() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long long>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
}

// Waits (at most `budget_ms`) until whoever reads stderr (a launcher's pipe or
// socket) has taken what this process wrote: a launcher forwards output and
// the end of the job on different channels (Hydra's proxy passes a rank's
// abort on before output it read in the same round), so the report must leave
// before the abort. A file or terminal needs no wait.
void drain_stderr(long budget_ms) {
  struct stat info {};
  if (::fstat(STDERR_FILENO, &info) != 0) return;
  const bool pipe = S_ISFIFO(info.st_mode), socket = S_ISSOCK(info.st_mode);
  if (!pipe && !socket) return;
  const long long deadline = monotonic_microseconds() + budget_ms * 1000;
  for (;;) {
    int queued = 0;
    if (::ioctl(STDERR_FILENO, pipe ? FIONREAD : TIOCOUTQ, &queued) != 0 || queued <= 0) return;
    if (monotonic_microseconds() >= deadline) return;
    const timespec pause{0, 50000};
    ::nanosleep(&pause, nullptr);
  }
}

// Ends the job through the launcher's simple PMI socket (MPICH's Hydra): the
// line MPI_Abort would send ("cmd=abort exitcode=N"), written directly, so that
// no MPI or transport state is touched from this thread or a signal handler
// (MPI_Abort from the watchdog thread runs beside the main thread inside MPI,
// whose transport may be crashing on the dead peer at that very moment, holding
// stdio locks MPI_Abort's message needs). Hydra's mpiexec exits with N at once.
bool pmi_abort(int pmi_fd, int exit_code) {
  if (pmi_fd < 0) return false;
  char command[48] = "cmd=abort exitcode=";
  size_t length = sizeof "cmd=abort exitcode=" - 1;
  char digits[12];
  size_t count = 0;
  unsigned value = static_cast<unsigned>(exit_code);
  do {
    digits[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && count < sizeof digits);
  while (count > 0) command[length++] = digits[--count];
  command[length++] = '\n';
  size_t done = 0;
  while (done < length) {
    const ssize_t n = ::send(pmi_fd, command + done, length - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// One watch connection. Filled before it is published (DeathWatch::count);
// afterwards only fd and state change, so that the abort hook can read it.
struct WatchSlot {
  enum State : int { kOpen, kSaidGoodbye, kEnded };
  std::atomic<int> fd{-1};
  std::atomic<int> state{kOpen};
  int rank = -1;
  bool report = false;  // this rank is the one to report the peer's death
  // The peer's descriptor holder, when it runs on this machine.
  pid_t holder = -1;
  long long holder_start = -1;
  std::string head, reason;  // the death line's fixed parts (when report)
  bool polled = true;        // (the loop thread's) still open, still polled
};

// This process's watch connections and what the goodbye and the abort hook
// need: a fixed table, published with a release store of the count; the
// descriptors are closed only after it has been withdrawn from g_death_watch.
struct DeathWatch {
  explicit DeathWatch(size_t capacity, const std::atomic<unsigned long long>& operation)
      : slots(new WatchSlot[capacity]), capacity(capacity), operation(operation) {}
  ~DeathWatch() {
    // A graceful close. close() with unread bytes (a peer's goodbye) makes the
    // kernel send a reset, and a reset can destroy the peer's unread copy of our
    // own goodbye: the peer then reports this rank dead (seen when two ranks
    // leave together after a refused --csv). So: no more writes (a FIN after the
    // goodbye), read what the peers send until they close too, at most 500 ms.
    std::vector<pollfd> open;
    for (size_t i = 0; i < count.load(); ++i)
      if (const int fd = slots[i].fd.load(); fd >= 0) {
        ::shutdown(fd, SHUT_WR);
        open.push_back({fd, POLLIN, 0});
      }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (!open.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0 || ::poll(open.data(), open.size(), static_cast<int>(left)) < 0) break;
      for (auto it = open.begin(); it != open.end();) {
        char sink[256];
        ssize_t got = 1;
        if (it->revents != 0)
          while ((got = ::recv(it->fd, sink, sizeof sink, MSG_DONTWAIT)) > 0) {
          }
        const bool closed =
            it->revents != 0 &&
            (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR));
        it = closed ? open.erase(it) : it + 1;
      }
    }
    for (size_t i = 0; i < count.load(); ++i)
      if (const int fd = slots[i].fd.load(); fd >= 0) ::close(fd);
  }
  DeathWatch(const DeathWatch&) = delete;
  DeathWatch& operator=(const DeathWatch&) = delete;

  // Takes ownership of `fd`; null when the table is full (fd closed).
  WatchSlot* add(int fd, int rank) {
    const size_t n = count.load(std::memory_order_relaxed);
    if (n >= capacity) {
      ::close(fd);
      return nullptr;
    }
    WatchSlot& slot = slots[n];
    slot.fd.store(fd, std::memory_order_relaxed);
    slot.rank = rank;
    return &slot;
  }
  void publish() {
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  void say_goodbye() const noexcept {
    const size_t n = count.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) {
      const int fd = slots[i].fd.load(std::memory_order_relaxed);
      if (fd >= 0) (void)::send(fd, &kGoodbye, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    leaving.store(true);
    // The exit is on purpose: the launcher may see it at once.
    const pid_t pid = holder.load(std::memory_order_relaxed);
    if (pid > 0) (void)::kill(pid, SIGKILL);
  }

  // The activity for the abort hook's line, kept as plain characters.
  void set_activity(const std::string& text, bool is_busy) {
    const size_t n = std::min(text.size(), sizeof phase / sizeof phase[0] - 1);
    for (size_t i = 0; i < n; ++i) phase[i].store(text[i], std::memory_order_relaxed);
    phase[n].store('\0', std::memory_order_relaxed);
    busy.store(is_busy, std::memory_order_release);
  }

  std::unique_ptr<WatchSlot[]> slots;
  const size_t capacity;
  std::atomic<size_t> count{0};
  std::atomic<pid_t> holder{-1};             // this rank's own descriptor holder
  mutable std::atomic<bool> leaving{false};  // this rank said goodbye: it reports no death
  std::atomic<bool> reported{false};         // a report (death or timeout) is out
  std::atomic<bool> death_reported{false};   // and it names a dead rank
  std::atomic<bool> line_out{false};         // the death line is written
  bool watches_all = false;                  // rank 0 or the deputy: reports deaths
  int pmi_fd = -1;                           // simple PMI (see pmi_abort), or -1
  const std::atomic<unsigned long long>& operation;
  std::atomic<char> phase[200] = {};
  std::atomic<bool> busy{false};
};
std::atomic<DeathWatch*> g_death_watch{nullptr};

// The dead rank's holder, to let go of once the report is out: on this
// machine only, where the launcher then takes the job down at once (elsewhere
// the holder keeps the launcher waiting while this rank ends the job). The
// start time proves that the pid is still that holder. Checked before the
// report is written: the kill must follow the write at once, as the launcher
// may end this process as soon as it has read the report. -1: none.
pid_t holder_to_release(const WatchSlot& slot) {
  if (slot.holder > 0 && slot.holder_start >= 0 &&
      process_start_time(slot.holder) == slot.holder_start)
    return slot.holder;
  return -1;
}
void release(pid_t holder) {
  if (holder > 0) (void)::kill(holder, SIGKILL);
}

// ---- the abort hook: a watcher whose own MPI library aborts because a peer
// died (UCX's shared-memory copy fails the moment the peer's memory is gone,
// before its sockets close) still names the dead rank first.

struct sigaction g_previous_abort_action;
std::atomic<bool> g_abort_hook_installed{false};

void append(char* buffer, size_t& length, size_t capacity, const char* text) {
  for (; *text != '\0' && length + 1 < capacity; ++text) buffer[length++] = *text;
}

void on_abort_signal(int signal_number) {
  const int saved_errno = errno;
  DeathWatch* watch = g_death_watch.load(std::memory_order_acquire);
  if (watch != nullptr && watch->watches_all && !watch->reported.load()) {
    // Is a peer dead? Its connection ends within milliseconds of its memory.
    const WatchSlot* dead = nullptr;
    for (long waited = 0; dead == nullptr && waited <= kAbortWaitMilliseconds; ++waited) {
      const size_t n = watch->count.load(std::memory_order_acquire);
      for (size_t i = 0; i < n && dead == nullptr; ++i) {
        const WatchSlot& slot = watch->slots[i];
        const int state = slot.state.load();
        if (!slot.report || state == WatchSlot::kSaidGoodbye) continue;
        if (state == WatchSlot::kEnded) {
          dead = &slot;
          continue;
        }
        char byte = 0;
        const ssize_t got = ::recv(slot.fd.load(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (got == 0 || (got < 0 && (errno == ECONNRESET || errno == EPIPE))) dead = &slot;
      }
      if (dead == nullptr) {
        const timespec millisecond{0, 1000000};
        ::nanosleep(&millisecond, nullptr);
      }
    }
    if (dead != nullptr) watch->death_reported.store(true);
    if (dead != nullptr && !watch->reported.exchange(true)) {
      // One write: on one machine, Hydra's proxy kills this process as soon as
      // it has read anything from it.
      char line[1024];
      size_t length = 0;
      append(line, length, sizeof line, dead->head.c_str());
      char phase[200];
      size_t phase_length = 0;
      for (; phase_length + 1 < sizeof phase; ++phase_length) {
        phase[phase_length] = watch->phase[phase_length].load(std::memory_order_relaxed);
        if (phase[phase_length] == '\0') break;
      }
      phase[phase_length] = '\0';
      if (watch->busy.load()) {
        append(line, length, sizeof line, phase);
        append(line, length, sizeof line, " (operation #");
        char digits[24];
        size_t count = 0;
        unsigned long long value = watch->operation.load(std::memory_order_relaxed);
        do {
          digits[count++] = static_cast<char>('0' + value % 10);
          value /= 10;
        } while (value > 0 && count < sizeof digits);
        while (count > 0 && length + 1 < sizeof line) line[length++] = digits[--count];
        append(line, length, sizeof line, ")");
      } else if (phase_length > 0) {
        append(line, length, sizeof line, "a pause after ");
        append(line, length, sizeof line, phase);
      } else {
        append(line, length, sizeof line, "start-up");
      }
      append(line, length, sizeof line, dead->reason.c_str());
      append(line, length, sizeof line, "; this rank fails on it too (SIGABRT)\n");
      const pid_t holder = holder_to_release(*dead);
      write_stderr(line, length);
      watch->line_out.store(true);
      release(holder);
      watch->say_goodbye();  // the root cause is reported; let the launcher act
    }
  }
  // This abort follows a reported death (the transport failing on the dead
  // peer): end with ccscope's code for it, not SIGABRT, which launchers would
  // mix into theirs (Hydra ORs the ranks' wait statuses: 9 | 6 = 15).
  if (watch != nullptr && watch->death_reported.load()) {
    // The abort must follow the line (the watchdog thread may be writing it).
    for (int waited = 0; !watch->line_out.load() && waited < 200; ++waited) {
      const timespec millisecond{0, 1000000};
      ::nanosleep(&millisecond, nullptr);
    }
    drain_stderr(200);
    (void)pmi_abort(watch->pmi_fd, kPeerDiedExitCode);
    ::_exit(kPeerDiedExitCode);
  }
  // Then what would have happened without the hook: the previous handler, or
  // the default action (the signal is blocked until this handler returns).
  ::sigaction(signal_number, &g_previous_abort_action, nullptr);
  g_abort_hook_installed.store(false);
  errno = saved_errno;
  ::raise(signal_number);
}

void install_abort_hook() {
  if (g_abort_hook_installed.exchange(true)) return;
  struct sigaction action {};
  action.sa_handler = on_abort_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  if (::sigaction(SIGABRT, &action, &g_previous_abort_action) != 0)
    g_abort_hook_installed.store(false);
}

// ---- the descriptor holder

// Starts the descriptor holder: a small process (/bin/sh, then sleep) that
// shares this rank's stdout, stderr and, under MPICH's Hydra, its PMI socket
// (PMI_FD), and nothing else. Launchers learn of a rank's death from those
// descriptors closing (Hydra's proxy then SIGKILLs the job at once) or wait for
// them before they end a job; while the holder lives they stay open, so that
// the watchers' report and MPI_Abort get through first. The holder reads a
// pipe whose other end only this process holds: at this process's death (EOF)
// it keeps the descriptors kHoldSeconds more, then exits. A goodbye kills it
// instead (the exit is on purpose). It stays in this rank's process group, so a
// launcher that kills the group ends it too, and its environment has no rank
// variables (PMI_RANK, OMPI_COMM_WORLD_RANK, ...), so that tools finding a
// rank's process by them do not take it for the rank. Returns its pid, or -1.
pid_t spawn_holder(Fd& keep_alive) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return -1;
  Fd read_end(ends[0]), write_end(ends[1]);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  if (posix_spawn_file_actions_init(&actions) != 0) return -1;
  if (posix_spawnattr_init(&attributes) != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return -1;
  }
  posix_spawn_file_actions_adddup2(&actions, read_end.get(), STDIN_FILENO);
  int first_closed = 3;
  if (const char* pmi_fd = std::getenv("PMI_FD")) {
    const int fd = std::atoi(pmi_fd);
    if (fd > 2 && ::fcntl(fd, F_GETFD) != -1) {
      posix_spawn_file_actions_adddup2(&actions, fd, 3);
      first_closed = 4;
    }
  }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&actions, first_closed);
#endif
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int signal_number : {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2})
    sigaddset(&defaults, signal_number);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  // This environment minus what marks a rank.
  std::vector<std::string> kept;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string variable(*entry);
    const std::string name = variable.substr(0, variable.find('='));
    const bool marks_rank = name.rfind("PMI_", 0) == 0 || name.rfind("PMIX_", 0) == 0 ||
                            name.rfind("OMPI_", 0) == 0 || name.rfind("SLURM_", 0) == 0 ||
                            name.rfind("MPI_LOCAL", 0) == 0 ||
                            name.find("RANK") != std::string::npos;
    if (!marks_rank) kept.push_back(variable);
  }
  std::vector<char*> environment;
  for (auto& variable : kept) environment.push_back(variable.data());
  environment.push_back(nullptr);
  std::string script = "read -r line; exec sleep " + std::to_string(kHoldSeconds);
  std::string shell = "/bin/sh", dash_c = "-c", name = "ccscope-watchdog-holder";
  char* arguments[] = {shell.data(), dash_c.data(), script.data(), name.data(), nullptr};
  pid_t pid = -1;
  const int failed =
      posix_spawn(&pid, "/bin/sh", &actions, &attributes, arguments, environment.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (failed != 0) return -1;
  keep_alive = std::move(write_end);
  return pid;
}

// ---- other I/O

// Connects to `port` at one of `addresses` within `budget` each; a blocking
// socket on success (invalid Fd otherwise).
Fd connect_to_peer(const std::vector<std::string>& addresses, int port,
                   std::chrono::milliseconds budget) {
  for (const auto& address : addresses) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) return Fd();
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    peer.sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, address.c_str(), &peer.sin_addr) != 1) continue;
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&peer), sizeof peer) != 0) {
      if (errno != EINPROGRESS) continue;
      if (!wait_for(fd.get(), POLLOUT, Clock::now() + budget)) continue;
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) continue;
    }
    return fd;
  }
  return Fd();
}

// Room for `wanted` more descriptors: raises the soft limit towards the hard
// one (rank 0 and the deputy hold one connection per rank).
void make_room_for_descriptors(size_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t need = static_cast<rlim_t>(wanted) + 256;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < need) {
    limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? need : std::min(need, limit.rlim_max);
    (void)::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// The rank's simple PMI socket (PMI_FD, as MPICH's Hydra sets it), when the
// MPI library is MPICH's (whose PMI client speaks that protocol); else -1.
int simple_pmi_fd() {
  const char* value = std::getenv("PMI_FD");
  if (value == nullptr || std::getenv("PMI_RANK") == nullptr) return -1;
  if (MpiSession::library_version().find("MPICH") == std::string::npos) return -1;
  const int fd = std::atoi(value);
  return fd > 2 && ::fcntl(fd, F_GETFD) != -1 ? fd : -1;
}

std::string host_of(int rank, const std::vector<std::string>& hosts) {
  return rank >= 0 && static_cast<size_t>(rank) < hosts.size() ? hosts[static_cast<size_t>(rank)]
                                                               : std::string("?");
}

// The death line: head + activity + reason + ending.
std::string death_head(int rank, long pid, const std::vector<std::string>& hosts) {
  std::string head = "ccscope: rank " + std::to_string(rank) + " (" + host_of(rank, hosts);
  if (pid > 0) head += ", pid " + std::to_string(pid);
  return head + ") died during ";
}
std::string death_reason(int self, int error) {
  return ": its watchdog connection to rank " + std::to_string(self) +
         (error == 0 || error == EPIPE ? " closed" : " was reset") +
         " without a goodbye (the process was killed, crashed or exited outside ccscope)";
}

}  // namespace

void watchdog_say_goodbye() noexcept {
  if (const DeathWatch* watch = g_death_watch.load(std::memory_order_acquire)) watch->say_goodbye();
}

bool watchdog_is_ending_job() noexcept {
  const DeathWatch* watch = g_death_watch.load(std::memory_order_acquire);
  return watch != nullptr && watch->reported.load();
}

int watch_deputy(const std::vector<std::string>& hosts) {
  if (hosts.size() < 2) return -1;
  for (size_t r = 1; r < hosts.size(); ++r)
    if (hosts[r] != hosts[0]) return static_cast<int>(r);
  return 1;
}

std::vector<int> watch_connections(int rank, const std::vector<std::string>& hosts) {
  const int deputy = watch_deputy(hosts);
  if (deputy < 0 || rank == 0) return {};
  if (rank == deputy) return {0};
  return {0, deputy};
}

int death_reporter(int dead, const std::vector<std::string>& hosts) {
  const int deputy = watch_deputy(hosts);
  if (deputy < 0 || dead < 0 || static_cast<size_t>(dead) >= hosts.size()) return -1;
  if (dead == 0) return deputy;
  if (dead == deputy) return 0;
  // The launcher kills the other ranks of a dead rank's node first: report
  // from another node when there is one.
  const auto& host = hosts[static_cast<size_t>(dead)];
  if (host == hosts[0] && host != hosts[static_cast<size_t>(deputy)]) return deputy;
  return 0;
}

DeathVerdict judge_peer_loss(const PeerLoss& loss, int self, const std::vector<std::string>& hosts,
                             const std::string& activity) {
  DeathVerdict verdict;
  if (loss.said_goodbye) return verdict;  // it left on purpose (and said why, if it failed)
  // No answer from the peer's host at all: the link or the node, not the
  // process; the stall report names those when the job stops moving.
  if (loss.error == ETIMEDOUT || loss.error == EHOSTUNREACH || loss.error == ENETUNREACH ||
      loss.error == EHOSTDOWN || loss.error == ENETDOWN)
    return verdict;
  verdict.died = true;
  verdict.report = death_reporter(loss.rank, hosts) == self;
  if (verdict.report)
    verdict.line = death_head(loss.rank, loss.pid, hosts) +
                   (activity.empty() ? std::string("start-up") : activity) +
                   death_reason(self, loss.error) + "; ending the job with exit code " +
                   std::to_string(kPeerDiedExitCode) + "\n";
  return verdict;
}

std::string format_progress_line(const RankProgress& progress) {
  std::string phase = progress.phase;
  for (char& c : phase)
    if (c == '\n' || c == '\r') c = ' ';
  return std::to_string(progress.rank) + " " + (progress.busy ? "1" : "0") + " " +
         std::to_string(progress.operation) + " " + std::to_string(progress.stalled_seconds) + " " +
         (progress.waiting_for.empty() ? "-" : join_ranks(progress.waiting_for)) + " " + phase +
         "\n";
}

RankProgress parse_progress_line(const std::string& line) {
  RankProgress progress;
  std::istringstream fields(line);
  int busy = 0;
  std::string waiting;
  if (!(fields >> progress.rank >> busy >> progress.operation >> progress.stalled_seconds >>
        waiting))
    return progress;  // kNoAnswer
  if (waiting != "-") {
    std::istringstream list(waiting);
    for (std::string item; std::getline(list, item, ',');) {
      char* end = nullptr;
      const long rank = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || rank < 0) return RankProgress{};
      progress.waiting_for.push_back(static_cast<int>(rank));
    }
  }
  progress.busy = busy != 0;
  std::getline(fields >> std::ws, progress.phase);
  progress.answer = RankProgress::Answer::kAnswered;
  return progress;
}

std::string stall_evidence_within(const std::function<std::string()>& evidence,
                                  std::chrono::milliseconds limit) {
  // Shared with the thread, which may outlive this call (a query that hangs).
  auto result = std::make_shared<std::promise<std::string>>();
  std::future<std::string> answer = result->get_future();
  std::thread([evidence, result] {
    try {
      result->set_value(evidence());
    } catch (const std::exception& e) {
      result->set_value(std::string("could not be had: ") + e.what());
    } catch (...) {
      result->set_value("could not be had");
    }
  }).detach();
  std::string text =
      answer.wait_for(limit) == std::future_status::ready
          ? answer.get()
          : "no answer within " + std::to_string(limit.count() / 1000.0).substr(0, 4) + " s";
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out += (line.rfind("ccscope: ", 0) == 0 ? "" : "ccscope: ") + line + "\n";
  return out;
}

std::string describe_stall(const std::vector<RankProgress>& ranks,
                           const std::vector<std::string>& hosts, double timeout_seconds,
                           int reporter) {
  auto host = [&](int rank) {
    return rank >= 0 && static_cast<size_t>(rank) < hosts.size() ? hosts[static_cast<size_t>(rank)]
                                                                 : std::string("?");
  };
  auto waits_by_design = [](const RankProgress& r) {
    return r.answer == RankProgress::Answer::kAnswered && !r.waiting_for.empty();
  };
  // Only ranks that run the operations compare their counts: a rank waiting
  // for its group by design has run fewer and is not behind.
  unsigned long long furthest = 0;
  for (const auto& r : ranks)
    if (r.answer == RankProgress::Answer::kAnswered && !waits_by_design(r) &&
        r.operation > furthest)
      furthest = r.operation;
  std::vector<int> silent, gone, unreachable, behind, waiting, by_design;
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
        if (waits_by_design(r)) {
          by_design.push_back(r.rank);
        } else if (r.operation < furthest) {
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
  // The reporter itself waited by design past its wait's limit, and every rank
  // answers: the ranks it waits for did not finish in time.
  const auto reporter_progress =
      std::find_if(ranks.begin(), ranks.end(),
                   [&](const RankProgress& r) { return r.rank == reporter && waits_by_design(r); });
  bool wait_outlasted = false;
  if (culprits.empty() && reporter_progress != ranks.end()) {
    wait_outlasted = true;
    for (int r : reporter_progress->waiting_for) {
      culprits.push_back(r);
      std::erase(waiting, r);
      const auto p = std::find_if(ranks.begin(), ranks.end(),
                                  [&](const RankProgress& q) { return q.rank == r; });
      if (p != ranks.end() && p->answer == RankProgress::Answer::kAnswered)
        lines << "ccscope: rank " << r << " (" << host(r) << ") has not finished: operation #"
              << p->operation << " of " << (p->phase.empty() ? "-" : p->phase) << ", "
              << static_cast<long long>(p->stalled_seconds) << " s since its last one\n";
    }
  }
  for (int r : by_design) {
    const auto p = std::find_if(ranks.begin(), ranks.end(),
                                [&](const RankProgress& q) { return q.rank == r; });
    lines << "ccscope: rank " << r << " (" << host(r) << ") waits by design for rank(s) "
          << join_ranks(p->waiting_for) << " (" << (p->phase.empty() ? "-" : p->phase) << ")\n";
  }
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
  out << "ccscope: timeout: "
      << (wait_outlasted ? "a wait for the group lasted " : "no progress for ") << timeout_seconds
      << " s. ";
  if (!culprits.empty()) {
    std::sort(culprits.begin(), culprits.end());
    out << "Rank(s) that did not finish: " << join_ranks(culprits) << ".";
    if (!waiting.empty()) out << " Rank(s) " << join_ranks(waiting) << " are waiting for them.";
  } else {
    out << "Every rank answered and all wait in the same operation (#" << furthest
        << "): no rank is behind; suspect the network or the transport between them.";
  }
  if (!by_design.empty())
    out << " Rank(s) " << join_ranks(by_design) << " wait for their group by design.";
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
    if (world.size() > 1) {
      holder_ = spawn_holder(holder_pipe_);
      holder_start_ = holder_ > 0 ? process_start_time(holder_) : -1;
    }
    // port, pid, holder pid and start time, addresses
    std::string card = std::to_string(ntohs(any.sin_port)) + " " + std::to_string(::getpid()) +
                       " " + std::to_string(holder_) + " " + std::to_string(holder_start_);
    const std::vector<std::string> own_addresses = local_addresses();
    for (const auto& address : own_addresses) card += " " + address;
    const std::vector<std::string> cards = world.all_gather(card);
    for (size_t r = 0; r < cards.size(); ++r) {
      std::istringstream fields(cards[r]);
      Peer peer;
      fields >> peer.port >> peer.pid >> peer.holder >> peer.holder_start;
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
    open_watch_connections();
    last_operation_ = operation_.load();
    last_change_ = Clock::now();
    thread_ = std::thread([this] { loop(); });
  }

  ~Impl() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    // Leaving on purpose: the watchers must not take the closed connections
    // for a death, nor the launcher wait for the holder.
    watch_->say_goodbye();
    DeathWatch* self = watch_.get();
    g_death_watch.compare_exchange_strong(self, nullptr);
    if (holder_ > 0) {
      while (::waitpid(holder_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }

  void begin_phase(std::string description) {
    std::lock_guard lock(mutex_);
    phase_ = std::move(description);
    busy_ = true;
    waiting_for_.clear();
    last_change_ = Clock::now();
    watch_->set_activity(phase_, true);
  }
  void end_phase() {
    std::lock_guard lock(mutex_);
    busy_ = false;
    waiting_for_.clear();
    watch_->set_activity(phase_, false);
  }
  void begin_wait(std::string description, std::vector<int> awaited,
                  std::chrono::milliseconds limit) {
    std::lock_guard lock(mutex_);
    phase_ = std::move(description);
    busy_ = true;
    std::erase(awaited, world_.rank());
    waiting_for_ = std::move(awaited);
    wait_limit_ = limit;
    last_change_ = Clock::now();
    watch_->set_activity(phase_, true);
  }
  void set_stall_evidence(std::function<std::string()> evidence, std::chrono::milliseconds limit) {
    std::lock_guard lock(mutex_);
    evidence_ = std::move(evidence);
    evidence_limit_ = limit;
  }

 private:
  struct Peer {
    int port = 0;
    long pid = 0;
    long holder = -1;  // its descriptor holder's pid and start time
    long long holder_start = -1;
    std::vector<std::string> addresses;
  };
  // A connection accepted but not yet identified by its first byte.
  struct Pending {
    Fd fd;
    std::string received;
    Clock::time_point deadline;
  };

  // Connects to this rank's watchers (rank 0 and the deputy); they accept in
  // their thread (the listen backlog holds the connection until then).
  void open_watch_connections() {
    const std::vector<std::string>& hosts = world_.hostnames();
    const std::vector<int> targets = watch_connections(world_.rank(), hosts);
    const bool watches_all =
        world_.size() > 1 && (world_.rank() == 0 || world_.rank() == watch_deputy(hosts));
    const size_t expected = watches_all ? static_cast<size_t>(world_.size()) : targets.size() + 1;
    if (watches_all) make_room_for_descriptors(expected);
    watch_ = std::make_unique<DeathWatch>(expected, operation_);
    watch_->watches_all = watches_all;
    watch_->pmi_fd = simple_pmi_fd();
    watch_->holder.store(holder_);
    for (int target : targets) {
      const Peer& peer = peers_[static_cast<size_t>(target)];
      Fd fd = connect_to_peer(peer.addresses, peer.port, std::chrono::milliseconds(2000));
      if (fd.get() < 0) continue;  // no death watch for this pair; the stall report still works
      const std::string hello =
          std::string(1, kWatchRequest) + " " + std::to_string(world_.rank()) + "\n";
      if (::send(fd.get(), hello.data(), hello.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(hello.size()))
        continue;
      add_watch(std::move(fd), target, false);
    }
    g_death_watch.store(watch_.get(), std::memory_order_release);
    if (watches_all) install_abort_hook();
    // exit() from anywhere (not _exit, not a death) is on purpose too.
    static const bool registered = std::atexit([] { watchdog_say_goodbye(); }) == 0;
    (void)registered;
  }

  void add_watch(Fd fd, int rank, bool said_goodbye) {
    const int raw = fd.get();
    WatchSlot* slot = watch_->add(raw, rank);
    (void)fd.release();
    if (slot == nullptr) return;
    const std::vector<std::string>& hosts = world_.hostnames();
    slot->report = death_reporter(rank, hosts) == world_.rank();
    if (slot->report) {
      const Peer& peer = peers_[static_cast<size_t>(rank)];
      slot->head = death_head(rank, peer.pid, hosts);
      slot->reason = death_reason(world_.rank(), 0);
      if (hosts[static_cast<size_t>(rank)] == world_.hostname()) {
        slot->holder = static_cast<pid_t>(peer.holder);
        slot->holder_start = peer.holder_start;
      }
    }
    if (said_goodbye) slot->state.store(WatchSlot::kSaidGoodbye);
    watch_->publish();
    polled_.push_back(slot);
  }

  void loop() {
    std::vector<pollfd> entries;
    while (!stop_.load()) {
      // [0] the listener, then the watch connections, then the pending ones.
      entries.clear();
      entries.push_back({listener_.get(), POLLIN, 0});
      for (const WatchSlot* slot : polled_) entries.push_back({slot->fd.load(), POLLIN, 0});
      for (const auto& pending : pending_) entries.push_back({pending.fd.get(), POLLIN, 0});
      const size_t watching = polled_.size(), waiting = pending_.size();
      if (::poll(entries.data(), entries.size(), 100) > 0) {
        for (size_t i = 0; i < watching; ++i)
          if (entries[1 + i].revents != 0) read_watch(*polled_[i]);
        for (size_t i = 0; i < waiting; ++i)
          if (entries[1 + watching + i].revents != 0) read_pending(pending_[i]);
        if (entries[0].revents & POLLIN) accept_one();
      }
      const auto now = Clock::now();
      std::erase_if(pending_, [&](const Pending& p) { return p.fd.get() < 0 || now > p.deadline; });
      std::erase_if(polled_, [](const WatchSlot* slot) { return !slot->polled; });
      check_progress();
    }
  }

  void accept_one() {
    Fd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (client.get() < 0) return;
    // A stuck asker must not hold a slot for long.
    pending_.push_back({std::move(client), {}, Clock::now() + std::chrono::milliseconds(2000)});
  }

  void read_pending(Pending& pending) {
    char chunk[64];
    const ssize_t got = ::recv(pending.fd.get(), chunk, sizeof chunk, 0);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got <= 0) {
      pending.fd = Fd();
      return;
    }
    pending.received.append(chunk, static_cast<size_t>(got));
    if (pending.received[0] == kProgressRequest) {
      const std::string line = progress_line();
      (void)::send(pending.fd.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      pending.fd = Fd();
      return;
    }
    if (pending.received[0] != kWatchRequest || pending.received.size() > 32) {
      pending.fd = Fd();
      return;
    }
    const size_t end = pending.received.find('\n');
    if (end == std::string::npos) return;  // the rest of the hello is on its way
    int rank = -1;
    std::istringstream(pending.received.substr(1, end - 1)) >> rank;
    if (rank >= 0 && rank < world_.size() && rank != world_.rank())
      add_watch(std::move(pending.fd), rank,
                pending.received.find(kGoodbye, end) != std::string::npos);
    pending.fd = Fd();
  }

  void read_watch(WatchSlot& slot) {
    char chunk[64];
    const ssize_t got = ::recv(slot.fd.load(), chunk, sizeof chunk, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got > 0) {
      if (std::memchr(chunk, kGoodbye, static_cast<size_t>(got)) != nullptr) {
        slot.state.store(WatchSlot::kSaidGoodbye);
        // Rank 0 or the deputy leaving on purpose ends the job (a death it
        // reported, a stop, the end): the launcher then kills the other ranks,
        // which are no deaths to report (srun and mpirun did, after rank 0's line).
        if (slot.rank == 0 || slot.rank == watch_deputy(world_.hostnames()))
          reporter_left_.store(true);
      }
      return;
    }
    PeerLoss loss;
    loss.rank = slot.rank;
    loss.pid = peers_[static_cast<size_t>(slot.rank)].pid;
    loss.error = got == 0 ? 0 : errno;
    // The descriptor stays open (the abort hook may read it); it is no longer polled.
    slot.polled = false;
    int open = WatchSlot::kOpen;
    loss.said_goodbye = !slot.state.compare_exchange_strong(open, WatchSlot::kEnded);
    peer_lost(loss, slot);
  }

  std::string activity() {
    std::lock_guard lock(mutex_);
    const auto operation = operation_.load(std::memory_order_relaxed);
    if (busy_) return phase_ + " (operation #" + std::to_string(operation) + ")";
    if (!phase_.empty()) return "a pause after " + phase_;
    return "";
  }

  void peer_lost(const PeerLoss& loss, const WatchSlot& slot) {
    // A rank that is leaving on purpose reports no death: the peers leave with
    // it, and their goodbyes can be lost (a peer's close may reset the
    // connection before its goodbye is read).
    if (stop_.load() || watch_->leaving.load() || reporter_left_.load()) return;
    const DeathVerdict verdict =
        judge_peer_loss(loss, world_.rank(), world_.hostnames(), activity());
    if (!verdict.report) return;
    {
      std::lock_guard lock(mutex_);
      if (expired_) return;  // already ending the job with a timeout report
      expired_ = true;
    }
    watch_->death_reported.store(true);  // (first: the abort hook reads them in this order)
    if (watch_->reported.exchange(true)) return;  // the abort hook was first
    // The launcher takes the job down within milliseconds of a death (Hydra:
    // SIGKILL at once; Open MPI: SIGTERM after 1 s): report first, then end it.
    const pid_t holder = holder_to_release(slot);
    write_stderr(verdict.line.data(), verdict.line.size());
    watch_->line_out.store(true);
    release(holder);
    drain_stderr(200);
    end_job(kPeerDiedExitCode);
  }

  // Ends the whole job: through simple PMI where the launcher speaks it
  // (pmi_abort), else (or when that has not ended this process in 2 s) with
  // MPI_Abort. A plain exit of this process can leave the launcher (Hydra
  // across nodes) waiting on a stopped rank forever. The main thread is blocked
  // inside MPI/NCCL, so MPI_Abort from this thread is outside FUNNELED's
  // promise: if nothing has ended the process in 10 s, leave without it.
  [[noreturn]] void end_job(int exit_code) {
    watch_->say_goodbye();  // this end is on purpose; the report says why
    std::thread([exit_code] {
      std::this_thread::sleep_for(std::chrono::seconds(10));
      ::_exit(exit_code);
    }).detach();
    if (pmi_abort(watch_->pmi_fd, exit_code)) std::this_thread::sleep_for(std::chrono::seconds(2));
    world_.abort(exit_code);
  }

  std::string progress_line() {
    std::lock_guard lock(mutex_);
    RankProgress mine;
    mine.rank = world_.rank();
    mine.busy = busy_;
    mine.operation = operation_.load(std::memory_order_relaxed);
    mine.stalled_seconds = std::chrono::duration<double>(Clock::now() - last_change_).count();
    mine.waiting_for = waiting_for_;
    mine.phase = phase_;
    return format_progress_line(mine);
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
      // A timeout of 0 is none (-T 0): stalls are never reported; deaths still are.
      // A wait for the group is timed as a whole, against its own limit.
      const auto limit = waiting_for_.empty() ? timeout_ : wait_limit_;
      if (!busy_ || timeout_.count() <= 0 || now - last_change_ < limit || expired_) return;
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
    bool waiting = false;
    std::chrono::milliseconds limit = timeout_, evidence_limit{0};
    std::function<std::string()> evidence;
    {
      std::lock_guard lock(mutex_);
      waiting = !waiting_for_.empty();
      if (waiting) limit = wait_limit_;
      evidence = evidence_;
      evidence_limit = evidence_limit_;
    }
    // The lowest rank that is stalled reports; others only confirm and exit.
    // A rank waiting for its group by design stalls only when its whole wait
    // outlasts its limit: it is not the reporter of the others' timeout, and
    // one whose wait ran out defers only to a lower rank waiting as well.
    bool reporter = true;
    for (const auto& r : ranks)
      if (r.rank < world_.rank() && r.answer == RankProgress::Answer::kAnswered && r.busy &&
          r.waiting_for.empty() != waiting)
        reporter = false;
    const double seconds = std::chrono::duration<double>(limit).count();
    watch_->reported.store(true);
    if (reporter) {
      const std::string report = describe_stall(ranks, world_.hostnames(), seconds, world_.rank());
      std::fwrite(report.data(), 1, report.size(), stderr);
      std::fflush(stderr);
      // Evidence from elsewhere (NCCL's RAS), after the report: a query that
      // hangs cannot hold the report back.
      if (evidence) {
        const std::string text = stall_evidence_within(evidence, evidence_limit);
        std::fwrite(text.data(), 1, text.size(), stderr);
        std::fflush(stderr);
      }
      // The launcher forwards this output and handles the abort on different
      // channels; give the output a head start, or Hydra may end the job first
      // and drop the report (seen in the virtual cluster with a node cut off).
      std::this_thread::sleep_for(std::chrono::seconds(1));
    } else {
      // Give the reporter time to ask this rank (and its evidence) before the job goes away.
      std::this_thread::sleep_for(std::chrono::seconds(5) +
                                  (evidence ? evidence_limit : std::chrono::milliseconds(0)));
      std::fprintf(stderr, "ccscope: rank %d (%s): timeout after %g s in %s\n", world_.rank(),
                   world_.hostname().c_str(), seconds, progress_line().c_str());
      std::fflush(stderr);
    }
    std::fflush(stdout);
    end_job(kTimeoutExitCode);
  }

  const World& world_;
  const std::chrono::milliseconds timeout_;
  const std::atomic<unsigned long long>& operation_;
  Fd listener_;
  std::vector<Peer> peers_;
  pid_t holder_ = -1;  // this rank's descriptor holder (spawn_holder)
  long long holder_start_ = -1;
  Fd holder_pipe_;  // the holder's pipe: closed by this process's end
  std::unique_ptr<DeathWatch> watch_;
  // The loop thread's (the constructor's before it starts).
  std::vector<WatchSlot*> polled_;  // watch connections still open
  std::vector<Pending> pending_;
  std::mutex mutex_;
  std::string phase_;
  bool busy_ = false;
  std::vector<int> waiting_for_;  // begin_wait's ranks, until the next phase
  std::chrono::milliseconds wait_limit_{0};
  std::function<std::string()> evidence_;
  std::chrono::milliseconds evidence_limit_{0};
  bool expired_ = false;
  unsigned long long last_operation_ = 0;
  Clock::time_point last_change_;
  std::atomic<bool> stop_{false};
  // Rank 0 or the deputy said goodbye: the job is ending, later losses are its consequence.
  std::atomic<bool> reporter_left_{false};
  std::thread thread_;
};

HangWatchdog::HangWatchdog(const World& world, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(world, timeout, operation_)) {}
HangWatchdog::~HangWatchdog() = default;
void HangWatchdog::begin_phase(std::string description) {
  impl_->begin_phase(std::move(description));
}
void HangWatchdog::end_phase() { impl_->end_phase(); }
void HangWatchdog::begin_wait(std::string description, std::vector<int> awaited,
                              std::chrono::milliseconds limit) {
  impl_->begin_wait(std::move(description), std::move(awaited), limit);
}
void HangWatchdog::set_stall_evidence(std::function<std::string()> evidence,
                                      std::chrono::milliseconds limit) {
  impl_->set_stall_evidence(std::move(evidence), limit);
}

}  // namespace ccscope
