#pragma once
// Launchers of kernels.cuh's kernels (defined in device_ops.cu, the one file
// nvcc compiles): each queues its kernel on `stream` and returns the launch's
// error (cudaGetLastError), never waiting. n == 0 launches nothing.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ccscope::training_probe::device::launch {

cudaError_t round(cudaStream_t stream, float* values, size_t n, int precision);
cudaError_t to_16(cudaStream_t stream, const float* values, uint16_t* out16, size_t n,
                  int precision);
cudaError_t from_16(cudaStream_t stream, const uint16_t* in16, float* values, size_t n,
                    int precision);
cudaError_t bias_activation(cudaStream_t stream, float* pre, const float* bias, float* out,
                            uint16_t* out16, size_t rows, size_t cols, int activation,
                            int precision);
cudaError_t activation_backward(cudaStream_t stream, float* grad, const float* pre,
                                const float* out, size_t n, int activation, int precision);
cudaError_t bias_grad(cudaStream_t stream, const float* dy, float* bias_grad, size_t rows,
                      size_t cols);
cudaError_t mse(cudaStream_t stream, const float* output, const float* target, float* diff,
                float* grad, size_t n, float factor);
cudaError_t nonfinite(cudaStream_t stream, const float* values, size_t n, int* flag);
cudaError_t sgd(cudaStream_t stream, float* params, const float* grads, float* momentum_buffer,
                size_t n, float lr, float weight_decay, float momentum, int started);
cudaError_t adam(cudaStream_t stream, float* params, const float* grads, float* first,
                 float* second, size_t n, float lr, float weight_decay, float beta1, float beta2,
                 float one_minus_beta1, float one_minus_beta2, float bias2_sqrt, float step_size,
                 float eps, int decoupled);
cudaError_t round_copy(cudaStream_t stream, const float* master, float* params, uint16_t* params16,
                       size_t n, int precision);

// Mixture of experts: kernels.cuh's row moves and combine.
cudaError_t gather_rows(cudaStream_t stream, const float* src, const uint32_t* index, float* dst,
                        size_t rows, size_t cols);
cudaError_t scatter_rows(cudaStream_t stream, const float* src, const uint32_t* index, float* dst,
                         size_t rows, size_t cols);
cudaError_t combine_rows(cudaStream_t stream, float* y, const float* values, const int32_t* row,
                         const float* weight, size_t tokens, size_t slots, size_t cols);
cudaError_t combine_backward(cudaStream_t stream, const float* dy, const float* values,
                             const uint32_t* token, const float* weight, float* d_rows,
                             float* d_weight, size_t rows, size_t cols);

// The transformer: kernels.cuh's embedding, layer norm, GELU, causal softmax,
// cross-entropy and residual kernels.
cudaError_t embed(cudaStream_t stream, const float* tok_emb, const float* pos_emb,
                  const uint32_t* token, float* x, size_t rows, size_t cols, size_t batch,
                  int precision);
cudaError_t embed_backward(cudaStream_t stream, const float* dx, const uint32_t* token,
                           float* tok_grad, float* pos_grad, size_t rows, size_t cols, size_t batch,
                           size_t vocab);
cudaError_t layer_norm(cudaStream_t stream, const float* x, const float* w, const float* b,
                       float* y, float* mean, float* rstd, size_t rows, size_t cols, int precision);
cudaError_t layer_norm_backward(cudaStream_t stream, const float* x, const float* mean,
                                const float* rstd, const float* dy, const float* w,
                                const float* residual, float* dx, size_t rows, size_t cols,
                                int precision);
cudaError_t layer_norm_params_backward(cudaStream_t stream, const float* x, const float* mean,
                                       const float* rstd, const float* dy, float* w_grad,
                                       float* b_grad, size_t rows, size_t cols);
cudaError_t bias_residual(cudaStream_t stream, const float* x, const float* y, const float* bias,
                          float* out, size_t rows, size_t cols, int precision);
cudaError_t gelu(cudaStream_t stream, const float* h, float* out, size_t n, int precision);
cudaError_t gelu_backward(cudaStream_t stream, float* grad, const float* h, size_t n,
                          int precision);
cudaError_t causal_softmax(cudaStream_t stream, float* scores, size_t count, size_t size,
                           int precision);
cudaError_t causal_softmax_backward(cudaStream_t stream, const float* probs, float* dp,
                                    size_t count, size_t size, int precision);
cudaError_t cross_entropy(cudaStream_t stream, const float* logits, const uint32_t* target,
                          double* row_loss, float* dlogits, size_t rows, size_t vocab, float factor,
                          int precision);

}  // namespace ccscope::training_probe::device::launch
