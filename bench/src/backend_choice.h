#pragma once
// Which backend `ccscope bench` uses when --backend is not given (pure, unit tested).
#include <string>
#include <vector>

namespace ccscope::bench {

struct BackendChoice {
  std::string backend;  // "nccl" or "mpi"
  std::string note;     // why not nccl although GPUs are present; "" otherwise
};

// `hosts` and `gpu_ids` are by rank; a GPU id is the PCI bus id of the GPU the
// rank would use ("" = none). NCCL when every rank has a GPU and no two ranks of
// one host would share one (NCCL refuses that), or when --isolate-ranks makes
// sharing legal; else MPI.
BackendChoice choose_default_backend(const std::vector<std::string>& hosts,
                                     const std::vector<std::string>& gpu_ids, bool isolate_ranks);

}  // namespace ccscope::bench
