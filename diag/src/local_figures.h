#pragma once
// Stage 1's figures of one rank alone: what its cores and memory deliver.
#include <cstddef>

namespace ccscope::diag {

struct GemmFigure {
  double GFLOPs = 0;  // the best of the repetitions, 2 n^3 / time
  size_t wrong = 0;   // output elements that differ from their exact value
};
// An n x n x n float GEMM through the training probe's layer (OpenBLAS). The
// inputs are small integers, so every output element is exact in float and is
// checked against its formula.
GemmFigure measure_gemm(size_t n, int repetitions);

struct MemoryFigure {
  double GBps = 0;  // STREAM triad a = b + s c: 3 x 8 bytes per element over the best time
                    // (repeated for at least 0.3 s)
  size_t wrong = 0;
};
MemoryFigure measure_memory_bandwidth(size_t elements, int repetitions);

}  // namespace ccscope::diag
