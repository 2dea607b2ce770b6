#include "backend_choice.h"

#include <map>
#include <utility>

namespace ccscope::bench {

BackendChoice choose_default_backend(const std::vector<std::string>& hosts,
                                     const std::vector<std::string>& gpu_ids, bool isolate_ranks) {
  bool any_gpu = false;
  for (const auto& id : gpu_ids) any_gpu = any_gpu || !id.empty();
  if (!any_gpu) return {"mpi", ""};
  for (size_t r = 0; r < gpu_ids.size(); ++r)
    if (gpu_ids[r].empty())
      return {"mpi", "rank " + std::to_string(r) + (r < hosts.size() ? " (" + hosts[r] + ")" : "") +
                         " sees no GPU, so the default backend is mpi"};
  if (isolate_ranks) return {"nccl", ""};
  std::map<std::pair<std::string, std::string>, size_t> first_user;  // (host, GPU) -> rank
  for (size_t r = 0; r < gpu_ids.size(); ++r) {
    const std::string host = r < hosts.size() ? hosts[r] : std::string();
    const auto [it, fresh] = first_user.emplace(std::make_pair(host, gpu_ids[r]), r);
    if (!fresh)
      return {"mpi", "ranks " + std::to_string(it->second) + " and " + std::to_string(r) + " on " +
                         host + " would share GPU " + gpu_ids[r] +
                         ", which NCCL refuses, so the default backend is mpi; --backend nccl "
                         "--isolate-ranks lets ranks share a GPU"};
  }
  return {"nccl", ""};
}

}  // namespace ccscope::bench
