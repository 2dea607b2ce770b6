#include "ccscope/job/interruption.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <string>

#include "ccscope/job/watchdog.h"

namespace ccscope::job {
namespace {

volatile std::sig_atomic_t g_signal = 0;
// The announcement, copied where the handler can write it without allocating.
char g_announcement[256];
volatile std::sig_atomic_t g_announcement_length = 0;
struct sigaction g_previous_int, g_previous_term;

// Only async-signal-safe calls here: write(2), watchdog_say_goodbye and _exit(2).
void on_signal(int signal_number) {
  if (g_signal != 0) {
    watchdog_say_goodbye();  // async-signal-safe: the watchdog must not report a death
    _exit(exit_code_for_signal(signal_number));
  }
  g_signal = signal_number;
  if (g_announcement_length > 0) {
    [[maybe_unused]] ssize_t n =
        ::write(STDERR_FILENO, g_announcement, static_cast<size_t>(g_announcement_length));
  }
}

}  // namespace

InterruptHandlers::InterruptHandlers(const std::string& announcement) {
  g_signal = 0;
  g_announcement_length = 0;
  const size_t length = std::min(announcement.size(), sizeof g_announcement);
  std::memcpy(g_announcement, announcement.data(), length);
  g_announcement_length = static_cast<std::sig_atomic_t>(length);
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // MPI's and NCCL's system calls carry on
  ::sigaction(SIGINT, &action, &g_previous_int);
  ::sigaction(SIGTERM, &action, &g_previous_term);
}

InterruptHandlers::~InterruptHandlers() {
  ::sigaction(SIGINT, &g_previous_int, nullptr);
  ::sigaction(SIGTERM, &g_previous_term, nullptr);
}

int InterruptHandlers::pending_signal() { return g_signal; }

std::string signal_name(int signal_number) {
  switch (signal_number) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal " + std::to_string(signal_number);
  }
}

}  // namespace ccscope::job
