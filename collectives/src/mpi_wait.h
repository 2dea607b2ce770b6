#pragma once
// Private helper: how a rank waits for MPI, spinning or yielding the core.
#include <mpi.h>
#include <sched.h>

#include <ctime>

#include "mpi_error.h"

namespace ccscope::detail {

// Tests until `test` reports done (or fails), yielding the core between tests:
// 64 sched_yield()s, then 10 us sleeps. Ranks that outnumber the cores spin
// against each other inside MPI's blocking calls, the waiting rank burning the
// slice its peer needs; MPI progresses inside its test calls. Returns the last
// MPI code.
template <typename Test>
int test_yielding(Test test) {
  for (int tests = 0;; ++tests) {
    int done = 0;
    const int code = test(&done);
    if (code != MPI_SUCCESS || done) return code;
    if (tests < 64) {
      sched_yield();
    } else {
      const timespec pause{0, 10000};  // 10 us
      nanosleep(&pause, nullptr);
    }
  }
}

// One MPI call: the blocking form, or with `yielding` its nonblocking form
// tested with test_yielding (its status into `status` when given). Returns
// MPI's code.
template <typename Blocking, typename Nonblocking>
int waited_call(bool yielding, Blocking blocking, Nonblocking nonblocking,
                MPI_Status* status = MPI_STATUS_IGNORE) {
  if (!yielding) return blocking();
  MPI_Request request = MPI_REQUEST_NULL;
  const int code = nonblocking(&request);
  if (code != MPI_SUCCESS) return code;
  return test_yielding([&](int* done) { return MPI_Test(&request, done, status); });
}

// waited_call, throwing BackendError with MPI's text (`what`) on failure.
template <typename Blocking, typename Nonblocking>
void call_waiting(bool yielding, const char* what, Blocking blocking, Nonblocking nonblocking) {
  check_mpi(waited_call(yielding, blocking, nonblocking), what);
}

}  // namespace ccscope::detail
