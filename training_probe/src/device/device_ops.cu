// The training probe's kernels (kernels.cuh) and their launchers
// (kernel_launch.h). Compiled by nvcc with --fmad=false, so that the GPU's
// elementwise arithmetic rounds as the host's (no fused multiply-adds).
#include "kernel_launch.h"
#include "kernels.cuh"

namespace ccscope::training_probe::device::launch {
namespace {

constexpr unsigned kThreads = 256;
// Enough blocks to fill an H200 (132 SMs) several times over; the grid-stride
// loops cover the rest.
constexpr size_t kMaxBlocks = 4096;

unsigned blocks_for(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace

cudaError_t round(cudaStream_t stream, float* values, size_t n, int precision) {
  if (n == 0) return cudaSuccess;
  ccscope_round_kernel<<<blocks_for(n), kThreads, 0, stream>>>(values, n, precision);
  return cudaGetLastError();
}

cudaError_t to_16(cudaStream_t stream, const float* values, uint16_t* out16, size_t n,
                  int precision) {
  if (n == 0) return cudaSuccess;
  ccscope_to_16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(values, out16, n, precision);
  return cudaGetLastError();
}

cudaError_t from_16(cudaStream_t stream, const uint16_t* in16, float* values, size_t n,
                    int precision) {
  if (n == 0) return cudaSuccess;
  ccscope_from_16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in16, values, n, precision);
  return cudaGetLastError();
}

cudaError_t bias_activation(cudaStream_t stream, float* pre, const float* bias, float* out,
                            uint16_t* out16, size_t rows, size_t cols, int activation,
                            int precision) {
  if (rows * cols == 0) return cudaSuccess;
  ccscope_bias_activation_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(
      pre, bias, out, out16, rows, cols, activation, precision);
  return cudaGetLastError();
}

cudaError_t activation_backward(cudaStream_t stream, float* grad, const float* pre,
                                const float* out, size_t n, int activation, int precision) {
  if (n == 0) return cudaSuccess;
  ccscope_activation_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(grad, pre, out, n,
                                                                             activation, precision);
  return cudaGetLastError();
}

cudaError_t bias_grad(cudaStream_t stream, const float* dy, float* bias_grad, size_t rows,
                      size_t cols) {
  if (cols == 0) return cudaSuccess;
  ccscope_bias_grad_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(dy, bias_grad, rows, cols);
  return cudaGetLastError();
}

cudaError_t mse(cudaStream_t stream, const float* output, const float* target, float* diff,
                float* grad, size_t n, float factor) {
  if (n == 0) return cudaSuccess;
  ccscope_mse_kernel<<<blocks_for(n), kThreads, 0, stream>>>(output, target, diff, grad, n, factor);
  return cudaGetLastError();
}

cudaError_t nonfinite(cudaStream_t stream, const float* values, size_t n, int* flag) {
  if (n == 0) return cudaSuccess;
  ccscope_nonfinite_kernel<<<blocks_for(n), kThreads, 0, stream>>>(values, n, flag);
  return cudaGetLastError();
}

cudaError_t sgd(cudaStream_t stream, float* params, const float* grads, float* momentum_buffer,
                size_t n, float lr, float weight_decay, float momentum, int started) {
  if (n == 0) return cudaSuccess;
  ccscope_sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(params, grads, momentum_buffer, n, lr,
                                                             weight_decay, momentum, started);
  return cudaGetLastError();
}

cudaError_t adam(cudaStream_t stream, float* params, const float* grads, float* first,
                 float* second, size_t n, float lr, float weight_decay, float beta1, float beta2,
                 float one_minus_beta1, float one_minus_beta2, float bias2_sqrt, float step_size,
                 float eps, int decoupled) {
  if (n == 0) return cudaSuccess;
  ccscope_adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      params, grads, first, second, n, lr, weight_decay, beta1, beta2, one_minus_beta1,
      one_minus_beta2, bias2_sqrt, step_size, eps, decoupled);
  return cudaGetLastError();
}

cudaError_t round_copy(cudaStream_t stream, const float* master, float* params, uint16_t* params16,
                       size_t n, int precision) {
  if (n == 0) return cudaSuccess;
  ccscope_round_copy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(master, params, params16, n,
                                                                    precision);
  return cudaGetLastError();
}

cudaError_t gather_rows(cudaStream_t stream, const float* src, const uint32_t* index, float* dst,
                        size_t rows, size_t cols) {
  if (rows * cols == 0) return cudaSuccess;
  ccscope_gather_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(src, index, dst,
                                                                               rows, cols);
  return cudaGetLastError();
}

cudaError_t scatter_rows(cudaStream_t stream, const float* src, const uint32_t* index, float* dst,
                         size_t rows, size_t cols) {
  if (rows * cols == 0) return cudaSuccess;
  ccscope_scatter_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(src, index, dst,
                                                                                rows, cols);
  return cudaGetLastError();
}

cudaError_t combine_rows(cudaStream_t stream, float* y, const float* values, const int32_t* row,
                         const float* weight, size_t tokens, size_t slots, size_t cols) {
  if (tokens * cols == 0) return cudaSuccess;
  ccscope_combine_rows_kernel<<<blocks_for(tokens * cols), kThreads, 0, stream>>>(
      y, values, row, weight, tokens, slots, cols);
  return cudaGetLastError();
}

cudaError_t combine_backward(cudaStream_t stream, const float* dy, const float* values,
                             const uint32_t* token, const float* weight, float* d_rows,
                             float* d_weight, size_t rows, size_t cols) {
  if (rows == 0) return cudaSuccess;
  ccscope_combine_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(
      dy, values, token, weight, d_rows, d_weight, rows, cols);
  return cudaGetLastError();
}

cudaError_t embed(cudaStream_t stream, const float* tok_emb, const float* pos_emb,
                  const uint32_t* token, float* x, size_t rows, size_t cols, size_t batch,
                  int precision) {
  if (rows * cols == 0) return cudaSuccess;
  ccscope_embed_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(
      tok_emb, pos_emb, token, x, rows, cols, batch, precision);
  return cudaGetLastError();
}

cudaError_t embed_backward(cudaStream_t stream, const float* dx, const uint32_t* token,
                           float* tok_grad, float* pos_grad, size_t rows, size_t cols, size_t batch,
                           size_t vocab) {
  const size_t n = (vocab + rows / batch) * cols;
  if (n == 0) return cudaSuccess;
  ccscope_embed_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      dx, token, tok_grad, pos_grad, rows, cols, batch, vocab);
  return cudaGetLastError();
}

cudaError_t layer_norm(cudaStream_t stream, const float* x, const float* w, const float* b,
                       float* y, float* mean, float* rstd, size_t rows, size_t cols,
                       int precision) {
  if (rows == 0) return cudaSuccess;
  ccscope_layer_norm_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, w, b, y, mean, rstd, rows,
                                                                       cols, precision);
  return cudaGetLastError();
}

cudaError_t layer_norm_backward(cudaStream_t stream, const float* x, const float* mean,
                                const float* rstd, const float* dy, const float* w,
                                const float* residual, float* dx, size_t rows, size_t cols,
                                int precision) {
  if (rows == 0) return cudaSuccess;
  ccscope_layer_norm_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(
      x, mean, rstd, dy, w, residual, dx, rows, cols, precision);
  return cudaGetLastError();
}

cudaError_t layer_norm_params_backward(cudaStream_t stream, const float* x, const float* mean,
                                       const float* rstd, const float* dy, float* w_grad,
                                       float* b_grad, size_t rows, size_t cols) {
  if (cols == 0) return cudaSuccess;
  ccscope_layer_norm_params_backward_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(
      x, mean, rstd, dy, w_grad, b_grad, rows, cols);
  return cudaGetLastError();
}

cudaError_t bias_residual(cudaStream_t stream, const float* x, const float* y, const float* bias,
                          float* out, size_t rows, size_t cols, int precision) {
  if (rows * cols == 0) return cudaSuccess;
  ccscope_bias_residual_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(
      x, y, bias, out, rows, cols, precision);
  return cudaGetLastError();
}

cudaError_t gelu(cudaStream_t stream, const float* h, float* out, size_t n, int precision) {
  if (n == 0) return cudaSuccess;
  ccscope_gelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(h, out, n, precision);
  return cudaGetLastError();
}

cudaError_t gelu_backward(cudaStream_t stream, float* grad, const float* h, size_t n,
                          int precision) {
  if (n == 0) return cudaSuccess;
  ccscope_gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(grad, h, n, precision);
  return cudaGetLastError();
}

cudaError_t causal_softmax(cudaStream_t stream, float* scores, size_t count, size_t size,
                           int precision) {
  if (count * size == 0) return cudaSuccess;
  ccscope_causal_softmax_kernel<<<blocks_for(count * size), kThreads, 0, stream>>>(scores, count,
                                                                                   size, precision);
  return cudaGetLastError();
}

cudaError_t causal_softmax_backward(cudaStream_t stream, const float* probs, float* dp,
                                    size_t count, size_t size, int precision) {
  if (count * size == 0) return cudaSuccess;
  ccscope_causal_softmax_backward_kernel<<<blocks_for(count * size), kThreads, 0, stream>>>(
      probs, dp, count, size, precision);
  return cudaGetLastError();
}

cudaError_t cross_entropy(cudaStream_t stream, const float* logits, const uint32_t* target,
                          double* row_loss, float* dlogits, size_t rows, size_t vocab, float factor,
                          int precision) {
  if (rows == 0) return cudaSuccess;
  ccscope_cross_entropy_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(
      logits, target, row_loss, dlogits, rows, vocab, factor, precision);
  return cudaGetLastError();
}

}  // namespace ccscope::training_probe::device::launch
