// The Communicator's optional collectives: a backend overrides the ones it runs.
#include "ccscope/collectives/communicator.h"

#include <string>

#include "ccscope/collectives/error.h"

namespace ccscope {
namespace {

[[noreturn]] void not_supported(const Communicator& comm, const char* collective) {
  throw UsageError(std::string(collective) + " is not supported by the " + comm.backend_name() +
                   " backend; choose another --backend");
}

}  // namespace

void Communicator::reduce(const void*, void*, size_t, DataType, ReduceOp, int) {
  not_supported(*this, "reduce");
}
void Communicator::gather(const void*, void*, size_t, DataType, int) {
  not_supported(*this, "gather");
}
void Communicator::scatter(const void*, void*, size_t, DataType, int) {
  not_supported(*this, "scatter");
}
void Communicator::all_to_all_v(const void*, std::span<const size_t>, std::span<const size_t>,
                                void*, std::span<const size_t>, std::span<const size_t>, DataType) {
  not_supported(*this, "all_to_all_v");
}

void check_all_to_all_v_spans(const Communicator& comm, std::span<const size_t> send_counts,
                              std::span<const size_t> send_displacements,
                              std::span<const size_t> recv_counts,
                              std::span<const size_t> recv_displacements) {
  const size_t n = static_cast<size_t>(comm.size());
  if (send_counts.size() != n || send_displacements.size() != n || recv_counts.size() != n ||
      recv_displacements.size() != n)
    throw UsageError("rank " + std::to_string(comm.rank()) + ", " + comm.backend_name() +
                     " backend: all_to_all_v needs one count and displacement per rank (" +
                     std::to_string(n) + ")");
}

}  // namespace ccscope
