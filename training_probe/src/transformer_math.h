#pragma once
// The transformer's per-row arithmetic on the host (layer norm, GELU and the
// causal softmax, with their derivatives), shared by transformer.cpp's model and the GPU path's
// kernel tests, which hold the device kernels against it bit for bit.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace ccscope::training_probe::transformer_math {

constexpr double kLayerNormEps = 1e-5;  // nn.LayerNorm's

// nn.LayerNorm over the last dimension (biased variance): y, and per row the
// mean and 1/sqrt(var + eps) backward needs.
template <typename T>
void layer_norm(const std::vector<T>& x, size_t rows, size_t h, const T* w, const T* b,
                std::vector<T>& y, std::vector<T>& mean, std::vector<T>& rstd) {
  y.resize(rows * h);
  mean.resize(rows);
  rstd.resize(rows);
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x.data() + r * h;
    double sum = 0;
    for (size_t i = 0; i < h; ++i) sum += xr[i];
    const double mu = sum / static_cast<double>(h);
    double var = 0;
    for (size_t i = 0; i < h; ++i) var += (xr[i] - mu) * (xr[i] - mu);
    var /= static_cast<double>(h);
    mean[r] = static_cast<T>(mu);
    rstd[r] = static_cast<T>(1.0 / std::sqrt(var + kLayerNormEps));
    for (size_t i = 0; i < h; ++i) y[r * h + i] = (xr[i] - mean[r]) * rstd[r] * w[i] + b[i];
  }
}

// dx (assigned) from dy; dw, db accumulated.
template <typename T>
void layer_norm_grad(const std::vector<T>& x, const std::vector<T>& mean,
                     const std::vector<T>& rstd, const std::vector<T>& dy, size_t rows, size_t h,
                     const T* w, T* dw, T* db, std::vector<T>& dx) {
  dx.resize(rows * h);
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x.data() + r * h;
    const T* dr = dy.data() + r * h;
    double sum_g = 0, sum_gx = 0;  // over i of dxhat, dxhat * xhat
    for (size_t i = 0; i < h; ++i) {
      const T xhat = (xr[i] - mean[r]) * rstd[r];
      const T g = dr[i] * w[i];
      dw[i] += dr[i] * xhat;
      db[i] += dr[i];
      sum_g += g;
      sum_gx += static_cast<double>(g) * xhat;
    }
    const T mg = static_cast<T>(sum_g / static_cast<double>(h));
    const T mgx = static_cast<T>(sum_gx / static_cast<double>(h));
    for (size_t i = 0; i < h; ++i) {
      const T xhat = (xr[i] - mean[r]) * rstd[r];
      dx[r * h + i] = rstd[r] * (dr[i] * w[i] - mg - xhat * mgx);
    }
  }
}

// nn.GELU() (exact): x Phi(x).
template <typename T>
T gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2)));
}
template <typename T>
T gelu_derivative(T x) {
  const T phi = std::exp(T(-0.5) * x * x) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);  // pdf
  return T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2))) + x * phi;
}

// The causal softmax of one S x S score matrix, in place, row by row: each
// position over itself and the earlier ones, later ones 0.
template <typename T>
void causal_softmax(T* probs, size_t S) {
  for (size_t r = 0; r < S; ++r) {
    T* row = probs + r * S;
    T top = row[0];
    for (size_t c = 1; c <= r; ++c) top = std::max(top, row[c]);
    T sum = 0;
    for (size_t c = 0; c <= r; ++c) {
      row[c] = std::exp(row[c] - top);
      sum += row[c];
    }
    for (size_t c = 0; c <= r; ++c) row[c] /= sum;
    for (size_t c = r + 1; c < S; ++c) row[c] = 0;  // causal: no later position
  }
}

// Its backward from the probabilities: dS = P (dP - rowsum(P dP)), in place of dP.
template <typename T>
void causal_softmax_backward(const T* probs, T* dp, size_t S) {
  for (size_t r = 0; r < S; ++r) {
    T dot = 0;
    for (size_t c = 0; c <= r; ++c) dot += probs[r * S + c] * dp[r * S + c];
    for (size_t c = 0; c < S; ++c) dp[r * S + c] = probs[r * S + c] * (dp[r * S + c] - dot);
  }
}

}  // namespace ccscope::training_probe::transformer_math
