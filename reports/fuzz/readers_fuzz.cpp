// libFuzzer target over parse_results (every format read_results reads).
// Build: cmake --preset fuzz && cmake --build --preset fuzz
// Run:   build-fuzz/reports/fuzz/readers_fuzz -dict=reports/fuzz/readers.dict \
//          -max_total_time=300 <new-corpus-dir> reports/tests/inputs/nccl-tests \
//          reports/tests/inputs/osu reports/tests/data reports/fuzz/seeds
// (seeds/: ccscope CSV and JSON as its writers wrote them.)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "readers_fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string problem =
      ccscope::reports::fuzz::check_one_input({reinterpret_cast<const char*>(data), size});
  if (!problem.empty()) {
    std::fprintf(stderr, "readers_fuzz: %s\n", problem.c_str());
    std::abort();  // libFuzzer saves the input as crash-*
  }
  return 0;
}
