#include "local_figures.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "ccscope/training_probe/model.h"

namespace ccscope::diag {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Repetitions go on for at least this long and the best one counts: a rank
// that shares its core (or is preempted) still gets some undisturbed ones.
constexpr double kMinimumSeconds = 0.3;

// Weight (row, column): integers in [-3, 3], so sums stay exact in float.
float weight_value(size_t row, size_t column) {
  return static_cast<float>(static_cast<int>((row * 7 + column * 3) % 7) - 3);
}

}  // namespace

GemmFigure measure_gemm(size_t n, int repetitions) {
  std::vector<float> x(n * n), w(n * n), bias(n, 0.5f), y(n * n);
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < n; ++c) {
      x[r * n + c] = static_cast<float>(static_cast<int>((r + c) % 3) - 1);
      w[r * n + c] = weight_value(r, c);
    }
  double best = std::numeric_limits<double>::infinity();
  const auto began = std::chrono::steady_clock::now();
  for (int i = 0; i < std::max(1, repetitions) || seconds_since(began) < kMinimumSeconds; ++i) {
    const auto start = std::chrono::steady_clock::now();
    training_probe::linear_forward(x, n, n, n, w.data(), bias.data(), y.data());
    best = std::min(best, seconds_since(start));
  }
  GemmFigure figure;
  figure.GFLOPs = best > 0 ? 2.0 * static_cast<double>(n) * n * n / best / 1e9 : 0;
  // y[r][o] = sum_c x[r][c] w[o][c] + 0.5, exact: check every element.
  for (size_t r = 0; r < n; ++r)
    for (size_t o = 0; o < n; ++o) {
      double expected = 0.5;
      for (size_t c = 0; c < n; ++c) expected += double(x[r * n + c]) * w[o * n + c];
      if (y[r * n + o] != static_cast<float>(expected)) ++figure.wrong;
    }
  return figure;
}

MemoryFigure measure_memory_bandwidth(size_t elements, int repetitions) {
  std::vector<double> a(elements, 0.0), b(elements), c(elements);
  for (size_t i = 0; i < elements; ++i) {
    b[i] = static_cast<double>(i % 1000);
    c[i] = static_cast<double>(i % 7);
  }
  const double scalar = 3.0;
  double best = std::numeric_limits<double>::infinity();
  const auto began = std::chrono::steady_clock::now();
  for (int i = 0; i < std::max(1, repetitions) || seconds_since(began) < kMinimumSeconds; ++i) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t k = 0; k < elements; ++k) a[k] = b[k] + scalar * c[k];
    best = std::min(best, seconds_since(start));
  }
  MemoryFigure figure;
  figure.GBps = best > 0 ? 3.0 * sizeof(double) * static_cast<double>(elements) / best / 1e9 : 0;
  for (size_t k = 0; k < elements; ++k)
    if (a[k] != b[k] + scalar * c[k]) ++figure.wrong;
  return figure;
}

}  // namespace ccscope::diag
