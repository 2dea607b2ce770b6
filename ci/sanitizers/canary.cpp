// Sanitizer canary for the asan preset (test sanitizer.canary, ci/sanitizers/canary_test.sh):
// proves that ci/sanitizers/lsan.supp hides only the third-party leak and that ccscope's
// own leaks and undefined behaviour still fail a test.
//   canary clean : MPI_Init/MPI_Finalize through ccscope's MpiSession (the libpciaccess leak
//                  under hwloc_topology_load happens here, and must be suppressed); exit 0
//   canary leak  : the same, plus 40 bytes leaked by this program's own code
//   canary ub    : a shift by 64 (UBSan must stop the program)
#include <cstdio>
#include <cstring>

#include "ccscope/collectives/world.h"

namespace {

// noinline: the leak's stack names this function, as it would name a ccscope function.
[[gnu::noinline]] int* leak_ten_ints() { return new int[10]; }  // never freed, on purpose

int* volatile g_sink = nullptr;

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "clean";
  if (std::strcmp(mode, "ub") == 0) {
    volatile int shift = 64;
    unsigned long long value = 1ULL << shift;  // undefined: shift >= width
    std::printf("shifted: %llu\n", value);
    return 0;
  }
  ccscope::MpiSession session(&argc, &argv);
  if (std::strcmp(mode, "leak") == 0) {
    g_sink = leak_ten_ints();
    g_sink = nullptr;  // the last pointer to it is gone
  }
  std::printf("canary %s: done\n", mode);
  return 0;
}
