#pragma once
// SIGINT and SIGTERM during a ccscope job: a script, a batch system or
// `git bisect run` that stops a run must not read it as a good run, nor as a
// crash. The first signal is recorded (pending_signal); a body that can stop
// at a clean point (bench: after the current row, the ranks agreeing on it)
// polls it, and run_job ends the others' jobs at once (see run_job.h). Either
// way the process exits 128 + signal. A second signal ends the process at once
// with the same code.
#include <string>

#include "ccscope/job/exit_codes.h"

namespace ccscope::job {

class InterruptHandlers {
 public:
  // Installs the handlers; a non-empty `announcement` is printed on stderr
  // (one line, as given) when the first signal arrives.
  explicit InterruptHandlers(const std::string& announcement = "");
  ~InterruptHandlers();  // restores the previous handlers
  InterruptHandlers(const InterruptHandlers&) = delete;
  InterruptHandlers& operator=(const InterruptHandlers&) = delete;

  // The first signal received since construction, or 0.
  static int pending_signal();
};

// "SIGINT", "SIGTERM", else "signal N".
std::string signal_name(int signal_number);

}  // namespace ccscope::job
