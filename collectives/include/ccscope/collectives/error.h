#pragma once
#include <stdexcept>
#include <string>

namespace ccscope {

// A backend call failed; the message keeps the backend's own words
// (MPI_Error_string, ncclGetErrorString, cudaGetErrorString, strerror).
class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The caller asked for something the backend cannot do (a bad argument, a
// missing GPU). Front ends map it to exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An operation did not complete within its time bound.
class TimeoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ccscope
