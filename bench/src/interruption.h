#pragma once
// SIGINT and SIGTERM during `ccscope bench`: a script, a batch system or
// `git bisect run` that stops a sweep must not read it as a good run. The
// first signal asks the ranks to stop after the current row (they agree on it
// after every row, so that all stop at the same one); the records written so
// far stay, the JSON keeps "complete": false, and the process exits 128 +
// signal. A second signal ends the process at once with the same code.
#include <string>

namespace ccscope::bench {

class InterruptHandlers {
 public:
  // Installs the handlers; `announce` makes this process print one line on
  // stderr when the first signal arrives (rank 0).
  explicit InterruptHandlers(bool announce);
  ~InterruptHandlers();  // restores the previous handlers
  InterruptHandlers(const InterruptHandlers&) = delete;
  InterruptHandlers& operator=(const InterruptHandlers&) = delete;

  // The first signal received since construction, or 0.
  static int pending_signal();
};

// The shell's convention for a process ended by a signal: 128 + its number.
inline int exit_code_for_signal(int signal_number) { return 128 + signal_number; }
// "SIGINT", "SIGTERM", else "signal N".
std::string signal_name(int signal_number);

}  // namespace ccscope::bench
