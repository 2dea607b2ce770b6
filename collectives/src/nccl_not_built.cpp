// The NCCL backend's entry points for builds without CUDA/NCCL: they say so
// instead of failing to link, so front ends can offer a clear message.
#include <memory>
#include <string>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"

namespace ccscope {

std::unique_ptr<Communicator> make_nccl_communicator(const World& /*world*/,
                                                     const NcclOptions& /*options*/) {
  throw UsageError(
      "this ccscope was built without NCCL (configure with CUDA and NCCL present, "
      "-DCCSCOPE_CUDA=ON); use --backend mpi");
}

bool nccl_backend_usable() { return false; }
int visible_gpu_count() { return 0; }
std::string gpu_identity_for_local_rank(int /*local_rank*/) { return ""; }
bool nccl_backend_compiled() { return false; }
std::string nccl_version_string() { return ""; }
std::string cuda_runtime_version_string() { return ""; }

}  // namespace ccscope
