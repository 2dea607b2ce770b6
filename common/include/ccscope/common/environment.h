#pragma once
// Which environment variables a run records (and a results file shows): those
// that change how NCCL, UCX, libfabric and the MPI libraries behave.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccscope {

// NCCL_*, UCX_*, MPIR_*, OMPI_*, CCSCOPE_*, FI_*, I_MPI_*, CUDA_VISIBLE_DEVICES.
bool is_recorded_variable(std::string_view name);
// The recorded variables of `environment` (environ's layout), sorted by name.
std::vector<std::pair<std::string, std::string>> recorded_environment(char** environment);

}  // namespace ccscope
