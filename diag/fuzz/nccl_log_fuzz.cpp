// libFuzzer target over the NCCL debug-log analysis (analyze_nccl_logs and
// its JSON, text and checks).
// Build: cmake --preset fuzz && cmake --build --preset fuzz
// Run:   build-fuzz/diag/fuzz/nccl_log_fuzz -dict=diag/fuzz/nccl_log.dict \
//          -max_total_time=300 <new-corpus-dir> diag/fuzz/seeds diag/tests/nccl_logs
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nccl_log_fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string problem =
      ccscope::diag::nccl_log_fuzz::check_one_input({reinterpret_cast<const char*>(data), size});
  if (!problem.empty()) {
    std::fprintf(stderr, "nccl_log_fuzz: %s\n", problem.c_str());
    std::abort();  // libFuzzer saves the input as crash-*
  }
  return 0;
}
