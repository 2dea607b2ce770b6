#pragma once
// The exit-code policy of every ccscope command (scripts, batch systems and
// `git bisect run` read them).
namespace ccscope::job {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;    // a check failed, wrong results, a rank died
inline constexpr int kExitUsage = 2;          // bad flags or input (one line says what to do)
inline constexpr int kExitHang = 3;           // the watchdog cut a hung operation short
inline constexpr int kExitCannotJudge = 125;  // `git bisect run`'s "skip"
// Stopped by SIGINT/SIGTERM: the shell's convention, 128 + the signal's number.
inline constexpr int exit_code_for_signal(int signal_number) { return 128 + signal_number; }

}  // namespace ccscope::job
