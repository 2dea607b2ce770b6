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

}  // namespace ccscope
