#include "ccscope/common/environment.h"

#include <algorithm>

namespace ccscope {

bool is_recorded_variable(std::string_view name) {
  static constexpr std::string_view kPrefixes[] = {
      "NCCL_", "UCX_",   "MPIR_",  "OMPI_", "CCSCOPE_", "CUDA_VISIBLE_DEVICES",
      "FI_",   "I_MPI_", "MALLOC_"};  // MALLOC_: glibc's thresholds change what MPI rows time
  for (std::string_view prefix : kPrefixes)
    if (name.starts_with(prefix)) return true;
  return false;
}

std::vector<std::pair<std::string, std::string>> recorded_environment(char** environment) {
  std::vector<std::pair<std::string, std::string>> found;
  for (char** entry = environment; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const size_t equals = text.find('=');
    if (equals == std::string_view::npos || !is_recorded_variable(text.substr(0, equals))) continue;
    found.emplace_back(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace ccscope
