#include "interruption.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

#include "ccscope/collectives/watchdog.h"

namespace ccscope::bench {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_announce = 0;
struct sigaction g_previous_int, g_previous_term;

// Only async-signal-safe calls here: write(2), watchdog_say_goodbye and _exit(2).
void on_signal(int signal_number) {
  if (g_signal != 0) {
    watchdog_say_goodbye();  // async-signal-safe: the watchdog must not report a death
    _exit(exit_code_for_signal(signal_number));
  }
  g_signal = signal_number;
  if (g_announce) {
    static const char kText[] =
        "ccscope bench: stopping after the current size (signal received; send it again to stop "
        "at once)\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kText, sizeof kText - 1);
  }
}

}  // namespace

InterruptHandlers::InterruptHandlers(bool announce) {
  g_signal = 0;
  g_announce = announce ? 1 : 0;
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

}  // namespace ccscope::bench
