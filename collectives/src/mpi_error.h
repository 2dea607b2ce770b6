#pragma once
// Private helper: turn an MPI return code into a BackendError keeping MPI's text.
#include <mpi.h>

#include <string>

#include "ccscope/collectives/error.h"

namespace ccscope::detail {

inline void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];  // MPI's own bound for error strings
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  throw BackendError(std::string(call) + " failed: " +
                     (length > 0 ? std::string(text, static_cast<size_t>(length))
                                 : "MPI error " + std::to_string(code)));
}

}  // namespace ccscope::detail
