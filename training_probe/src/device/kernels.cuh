#pragma once
// The training probe's elementwise device kernels: the arithmetic of model.cpp
// and optimizer.cpp, element by element, in the same operation order, so that
// (compiled with --fmad=false, IEEE division and square root) a GPU reproduces
// the host's fp32 results bit for bit; only tanhf may differ (CUDA's is within
// 2 ulp, glibc's within 1).
//
// This one file is compiled twice: by nvcc for the GPU (device_ops.cu), and,
// for tests only, by the host compiler into the CUDA stand-in's emulation
// library (training_probe/tests/device/kernels_emulation.cpp with
// standin/emulation/ccscope_kernel_emulation.h). So every kernel is extern "C",
// a grid-stride loop over independent elements (or one thread per column), and
// uses no shared memory, no __syncthreads and no warp intrinsics.
//
// precision: 0 fp32, 1 bf16, 2 fp16 (the order of training_probe::Precision).
// activation: 0 relu, 1 tanh, 2 none.
#include <stddef.h>
#include <stdint.h>

#define CCSCOPE_GRID_STRIDE(i, n)                                         \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
       i += (size_t)blockDim.x * gridDim.x)

// collectives/src/types.cpp's conversions (round to nearest even), for both sides.
__device__ inline uint16_t ccscope_float_to_bf16(float value) {
  unsigned int bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

__device__ inline float ccscope_bf16_to_float(uint16_t bits) {
  return __uint_as_float((unsigned int)bits << 16);
}

__device__ inline uint16_t ccscope_float_to_half(float value) {
  const unsigned int bits = __float_as_uint(value);
  const unsigned int sign = (bits >> 16) & 0x8000u;
  const unsigned int exponent = (bits >> 23) & 0xffu;
  unsigned int mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) return (uint16_t)(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  const int unbiased = (int)exponent - 127;
  if (unbiased > 15) return (uint16_t)(sign | 0x7c00u);
  if (unbiased >= -14) {
    unsigned int half = sign | ((unsigned int)(unbiased + 15) << 10) | (mantissa >> 13);
    const unsigned int rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
    return (uint16_t)half;
  }
  if (unbiased < -25) return (uint16_t)sign;
  mantissa |= 0x800000u;
  const int shift = -unbiased - 1;
  unsigned int half = sign | (mantissa >> shift);
  const unsigned int rest = mantissa & ((1u << shift) - 1u);
  const unsigned int halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
  return (uint16_t)half;
}

__device__ inline float ccscope_half_to_float(uint16_t half) {
  const unsigned int sign = (unsigned int)(half & 0x8000u) << 16;
  const unsigned int exponent = (half >> 10) & 0x1fu;
  const unsigned int mantissa = half & 0x3ffu;
  if (exponent == 0) {
    // mantissa * 2^-24, exact in float.
    const float magnitude = (float)mantissa * 5.9604644775390625e-08f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
  return __uint_as_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

__device__ inline uint16_t ccscope_to_16(int precision, float value) {
  return precision == 1 ? ccscope_float_to_bf16(value) : ccscope_float_to_half(value);
}

__device__ inline float ccscope_from_16(int precision, uint16_t bits) {
  return precision == 1 ? ccscope_bf16_to_float(bits) : ccscope_half_to_float(bits);
}

__device__ inline float ccscope_round(int precision, float value) {
  return precision == 0 ? value : ccscope_from_16(precision, ccscope_to_16(precision, value));
}

// values = round(values) in place.
extern "C" __global__ void ccscope_round_kernel(float* values, size_t n, int precision) {
  CCSCOPE_GRID_STRIDE(i, n) { values[i] = ccscope_round(precision, values[i]); }
}

// out16 = values in the 16-bit format (the GEMM's input copy).
extern "C" __global__ void ccscope_to_16_kernel(const float* values, uint16_t* out16, size_t n,
                                                int precision) {
  CCSCOPE_GRID_STRIDE(i, n) { out16[i] = ccscope_to_16(precision, values[i]); }
}

extern "C" __global__ void ccscope_from_16_kernel(const uint16_t* in16, float* values, size_t n,
                                                  int precision) {
  CCSCOPE_GRID_STRIDE(i, n) { values[i] = ccscope_from_16(precision, in16[i]); }
}

// pre [rows x cols] (the GEMM's x W^T) += bias, rounded to the format; out =
// the activation of it (model.cpp's forward_layer and activate); out16, if
// not null, the same in the 16-bit format for the next GEMM.
extern "C" __global__ void ccscope_bias_activation_kernel(float* pre, const float* bias, float* out,
                                                          uint16_t* out16, size_t rows, size_t cols,
                                                          int activation, int precision) {
  CCSCOPE_GRID_STRIDE(i, rows * cols) {
    const float p = ccscope_round(precision, pre[i] + bias[i % cols]);
    pre[i] = p;
    float o = p;
    if (activation == 0)
      o = p > 0 ? p : 0.0f;
    else if (activation == 1)
      o = ccscope_round(precision, tanhf(p));
    out[i] = o;
    if (out16 != nullptr) out16[i] = ccscope_to_16(precision, o);
  }
}

// grad (d out) becomes d pre: model.cpp's activation_backward.
extern "C" __global__ void ccscope_activation_backward_kernel(float* grad, const float* pre,
                                                              const float* out, size_t n,
                                                              int activation, int precision) {
  CCSCOPE_GRID_STRIDE(i, n) {
    if (activation == 0) {
      if (pre[i] <= 0) grad[i] = 0.0f;
    } else if (activation == 1) {
      grad[i] = ccscope_round(precision, grad[i] * (1.0f - out[i] * out[i]));
    }
  }
}

// bias_grad[c] += sum over rows of dy[r][c], rows in order (model.cpp's loop):
// one thread per column, so the sum's order is the host's.
extern "C" __global__ void ccscope_bias_grad_kernel(const float* dy, float* bias_grad, size_t rows,
                                                    size_t cols) {
  CCSCOPE_GRID_STRIDE(c, cols) {
    float sum = bias_grad[c];
    for (size_t r = 0; r < rows; ++r) sum += dy[r * cols + c];
    bias_grad[c] = sum;
  }
}

// diff = output - target, grad = factor * diff (mse_loss); the loss is the
// dot product of diff with itself (cuBLAS), over the denominator.
extern "C" __global__ void ccscope_mse_kernel(const float* output, const float* target, float* diff,
                                              float* grad, size_t n, float factor) {
  CCSCOPE_GRID_STRIDE(i, n) {
    const float d = output[i] - target[i];
    diff[i] = d;
    grad[i] = factor * d;
  }
}

// *flag = 1 if any value is inf or nan (fp16's overflow check); flag is never
// cleared here, so several calls accumulate.
extern "C" __global__ void ccscope_nonfinite_kernel(const float* values, size_t n, int* flag) {
  CCSCOPE_GRID_STRIDE(i, n) {
    if (!isfinite(values[i])) *flag = 1;
  }
}

// torch.optim.SGD as optimizer.cpp: d = g + wd p; buf = d (first step) or
// momentum buf + d; p -= lr buf. momentum_buffer null: no momentum.
extern "C" __global__ void ccscope_sgd_kernel(float* params, const float* grads,
                                              float* momentum_buffer, size_t n, float lr,
                                              float weight_decay, float momentum, int started) {
  CCSCOPE_GRID_STRIDE(i, n) {
    float d = grads[i];
    if (weight_decay != 0.0f) d += weight_decay * params[i];
    if (momentum_buffer != nullptr) {
      momentum_buffer[i] = started ? momentum * momentum_buffer[i] + d : d;
      d = momentum_buffer[i];
    }
    params[i] -= lr * d;
  }
}

// torch.optim.Adam / AdamW as optimizer.cpp (the step's scalars come from the
// host, computed there as optimizer.cpp computes them).
extern "C" __global__ void ccscope_adam_kernel(float* params, const float* grads, float* first,
                                               float* second, size_t n, float lr,
                                               float weight_decay, float beta1, float beta2,
                                               float one_minus_beta1, float one_minus_beta2,
                                               float bias2_sqrt, float step_size, float eps,
                                               int decoupled) {
  CCSCOPE_GRID_STRIDE(i, n) {
    float g = grads[i];
    if (decoupled)
      params[i] *= 1.0f - lr * weight_decay;
    else if (weight_decay != 0.0f)
      g += weight_decay * params[i];
    first[i] = beta1 * first[i] + one_minus_beta1 * g;
    second[i] = beta2 * second[i] + one_minus_beta2 * g * g;
    const float denominator = sqrtf(second[i]) / bias2_sqrt + eps;
    params[i] -= step_size * first[i] / denominator;
  }
}

// params = round(master) (mixed precision: the fp32 master copy stepped, the
// compute copy rounded back), and its 16-bit copy if not null.
extern "C" __global__ void ccscope_round_copy_kernel(const float* master, float* params,
                                                     uint16_t* params16, size_t n, int precision) {
  CCSCOPE_GRID_STRIDE(i, n) {
    const float p = ccscope_round(precision, master[i]);
    params[i] = p;
    if (params16 != nullptr) params16[i] = ccscope_to_16(precision, p);
  }
}

// Mixture of experts (moe.h): rows of width `cols` moved by an index.
// dst[r] = src[index[r]] (the dispatch's gather of tokens into send order and
// of received rows into each local expert's contiguous block).
extern "C" __global__ void ccscope_gather_rows_kernel(const float* src, const uint32_t* index,
                                                      float* dst, size_t rows, size_t cols) {
  CCSCOPE_GRID_STRIDE(i, rows * cols) {
    const size_t r = i / cols, c = i % cols;
    dst[i] = src[(size_t)index[r] * cols + c];
  }
}

// dst[index[r]] = src[r] (the indices distinct): back from the experts' blocks.
extern "C" __global__ void ccscope_scatter_rows_kernel(const float* src, const uint32_t* index,
                                                       float* dst, size_t rows, size_t cols) {
  CCSCOPE_GRID_STRIDE(i, rows * cols) {
    const size_t r = i / cols, c = i % cols;
    dst[(size_t)index[r] * cols + c] = src[i];
  }
}

// The combine: y[t] += weight[t][s] values[row[t][s]] for each of token t's
// `slots` rows in order (row -1: none; weight null: 1), one thread per element
// of y, so that a token's sum is added in the host's order (parallel_trainer.cpp).
extern "C" __global__ void ccscope_combine_rows_kernel(float* y, const float* values,
                                                       const int32_t* row, const float* weight,
                                                       size_t tokens, size_t slots, size_t cols) {
  CCSCOPE_GRID_STRIDE(i, tokens * cols) {
    const size_t t = i / cols, c = i % cols;
    float v = y[i];
    for (size_t s = 0; s < slots; ++s) {
      const int32_t r = row[t * slots + s];
      if (r < 0) continue;
      const float x = values[(size_t)r * cols + c];
      v += weight != nullptr ? weight[t * slots + s] * x : x;
    }
    y[i] = v;
  }
}

// The combine's backward, one thread per routed row r (token token[r], gate
// weight weight[r]): d_rows[r] = weight dy[token] and d_weight[r] = the dot
// product of dy[token] with the expert's output values[r], in double as the
// host path's.
extern "C" __global__ void ccscope_combine_backward_kernel(const float* dy, const float* values,
                                                           const uint32_t* token,
                                                           const float* weight, float* d_rows,
                                                           float* d_weight, size_t rows,
                                                           size_t cols) {
  CCSCOPE_GRID_STRIDE(r, rows) {
    const float g = weight[r];
    const float* d = dy + (size_t)token[r] * cols;
    double dot = 0.0;
    for (size_t c = 0; c < cols; ++c) {
      d_rows[r * cols + c] = g * d[c];
      dot += (double)d[c] * values[r * cols + c];
    }
    d_weight[r] = (float)dot;
  }
}

// ---- The transformer (transformer.cpp), rows in its [seq x batch] order:
// row r is position r / batch of sample r % batch.

// x[r] = tok_emb[token[r]] + pos_emb[r / batch], rounded (its embed).
extern "C" __global__ void ccscope_embed_kernel(const float* tok_emb, const float* pos_emb,
                                                const uint32_t* token, float* x, size_t rows,
                                                size_t cols, size_t batch, int precision) {
  CCSCOPE_GRID_STRIDE(i, rows * cols) {
    const size_t r = i / cols, c = i % cols;
    x[i] = ccscope_round(precision,
                         tok_emb[(size_t)token[r] * cols + c] + pos_emb[(r / batch) * cols + c]);
  }
}

// The embeddings' gradients (its embed_backward) without atomics: one thread
// per element of tok_grad [vocab x cols] and of pos_grad [positions x cols],
// each adding its rows' dx in row order, as the host's loop does.
extern "C" __global__ void ccscope_embed_backward_kernel(const float* dx, const uint32_t* token,
                                                         float* tok_grad, float* pos_grad,
                                                         size_t rows, size_t cols, size_t batch,
                                                         size_t vocab) {
  const size_t positions = rows / batch;
  CCSCOPE_GRID_STRIDE(i, (vocab + positions) * cols) {
    const size_t c = i % cols;
    if (i < vocab * cols) {
      const uint32_t v = (uint32_t)(i / cols);
      float sum = tok_grad[i];
      for (size_t r = 0; r < rows; ++r)
        if (token[r] == v) sum += dx[r * cols + c];
      tok_grad[i] = sum;
    } else {
      const size_t p = i / cols - vocab;
      float sum = pos_grad[p * cols + c];
      for (size_t r = p * batch; r < (p + 1) * batch; ++r) sum += dx[r * cols + c];
      pos_grad[p * cols + c] = sum;
    }
  }
}

// nn.LayerNorm over each row (its layer_norm), one thread per row: y rounded,
// the row's mean and 1/sqrt(var + eps) kept for backward.
extern "C" __global__ void ccscope_layer_norm_kernel(const float* x, const float* w, const float* b,
                                                     float* y, float* mean, float* rstd,
                                                     size_t rows, size_t cols, int precision) {
  CCSCOPE_GRID_STRIDE(r, rows) {
    const float* xr = x + r * cols;
    double sum = 0;
    for (size_t i = 0; i < cols; ++i) sum += xr[i];
    const double mu = sum / (double)cols;
    double var = 0;
    for (size_t i = 0; i < cols; ++i) var += (xr[i] - mu) * (xr[i] - mu);
    var /= (double)cols;
    const float m = (float)mu;
    const float s = (float)(1.0 / sqrt(var + 1e-5));
    mean[r] = m;
    rstd[r] = s;
    for (size_t i = 0; i < cols; ++i)
      y[r * cols + i] = ccscope_round(precision, (xr[i] - m) * s * w[i] + b[i]);
  }
}

// Its layer_norm_grad's input gradient, one thread per row: dx = rstd (dy w -
// mean(dy w) - xhat mean(dy w xhat)), plus `residual` (may be null) as the
// block adds it, rounded.
extern "C" __global__ void ccscope_layer_norm_backward_kernel(const float* x, const float* mean,
                                                              const float* rstd, const float* dy,
                                                              const float* w, const float* residual,
                                                              float* dx, size_t rows, size_t cols,
                                                              int precision) {
  CCSCOPE_GRID_STRIDE(r, rows) {
    const float* xr = x + r * cols;
    const float* dr = dy + r * cols;
    double sum_g = 0, sum_gx = 0;
    for (size_t i = 0; i < cols; ++i) {
      const float xhat = (xr[i] - mean[r]) * rstd[r];
      const float g = dr[i] * w[i];
      sum_g += g;
      sum_gx += (double)g * xhat;
    }
    const float mg = (float)(sum_g / (double)cols);
    const float mgx = (float)(sum_gx / (double)cols);
    for (size_t i = 0; i < cols; ++i) {
      const float xhat = (xr[i] - mean[r]) * rstd[r];
      float v = rstd[r] * (dr[i] * w[i] - mg - xhat * mgx);
      if (residual != nullptr) v += residual[r * cols + i];
      dx[r * cols + i] = ccscope_round(precision, v);
    }
  }
}

// Its layer_norm_grad's parameter gradients, one thread per column (rows in
// order): w_grad += dy xhat, b_grad += dy.
extern "C" __global__ void ccscope_layer_norm_params_backward_kernel(
    const float* x, const float* mean, const float* rstd, const float* dy, float* w_grad,
    float* b_grad, size_t rows, size_t cols) {
  CCSCOPE_GRID_STRIDE(i, cols) {
    float dw = w_grad[i], db = b_grad[i];
    for (size_t r = 0; r < rows; ++r) {
      const float xhat = (x[r * cols + i] - mean[r]) * rstd[r];
      dw += dy[r * cols + i] * xhat;
      db += dy[r * cols + i];
    }
    w_grad[i] = dw;
    b_grad[i] = db;
  }
}

// out = round(x + (y + bias[col])): a row-parallel output's bias, then the
// residual (its block_forward).
extern "C" __global__ void ccscope_bias_residual_kernel(const float* x, const float* y,
                                                        const float* bias, float* out, size_t rows,
                                                        size_t cols, int precision) {
  CCSCOPE_GRID_STRIDE(i, rows * cols) {
    out[i] = ccscope_round(precision, x[i] + (y[i] + bias[i % cols]));
  }
}

// nn.GELU() (exact, erf) as its gelu: out = round(gelu(h)).
__device__ inline float ccscope_gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * (float)0.70710678118654752440));
}
extern "C" __global__ void ccscope_gelu_kernel(const float* h, float* out, size_t n,
                                               int precision) {
  CCSCOPE_GRID_STRIDE(i, n) { out[i] = ccscope_round(precision, ccscope_gelu(h[i])); }
}

// grad = round(grad gelu'(h)) (its gelu_derivative).
extern "C" __global__ void ccscope_gelu_backward_kernel(float* grad, const float* h, size_t n,
                                                        int precision) {
  CCSCOPE_GRID_STRIDE(i, n) {
    const float x = h[i];
    // 1 / sqrt(2 pi) as the host's T(0.5 * M_2_SQRTPI * M_SQRT1_2).
    const float phi =
        expf(-0.5f * x * x) * (float)(0.5 * 1.12837916709551257390 * 0.70710678118654752440);
    const float d = 0.5f * (1.0f + erff(x * (float)0.70710678118654752440)) + x * phi;
    grad[i] = ccscope_round(precision, grad[i] * d);
  }
}

// Causal softmax of each row of `count` square [size x size] score matrices,
// in place, one thread per row (its attention_probs): row r of a matrix keeps
// columns 0..r, the rest 0; rounded.
extern "C" __global__ void ccscope_causal_softmax_kernel(float* scores, size_t count, size_t size,
                                                         int precision) {
  CCSCOPE_GRID_STRIDE(row_index, count * size) {
    const size_t r = row_index % size;
    float* row = scores + row_index * size;
    float top = row[0];
    for (size_t c = 1; c <= r; ++c) top = row[c] > top ? row[c] : top;
    float sum = 0;
    for (size_t c = 0; c <= r; ++c) {
      row[c] = expf(row[c] - top);
      sum += row[c];
    }
    for (size_t c = 0; c <= r; ++c) row[c] = ccscope_round(precision, row[c] / sum);
    for (size_t c = r + 1; c < size; ++c) row[c] = 0.0f;
  }
}

// The softmax's backward (its attention_grad), one thread per row: dp becomes
// round(p (dp - sum over c <= r of p dp)).
extern "C" __global__ void ccscope_causal_softmax_backward_kernel(const float* probs, float* dp,
                                                                  size_t count, size_t size,
                                                                  int precision) {
  CCSCOPE_GRID_STRIDE(row_index, count * size) {
    const size_t r = row_index % size;
    const float* p = probs + row_index * size;
    float* d = dp + row_index * size;
    float dot = 0;
    for (size_t c = 0; c <= r; ++c) dot += p[c] * d[c];
    for (size_t c = 0; c < size; ++c) d[c] = ccscope_round(precision, p[c] * (d[c] - dot));
  }
}

// Cross-entropy of each row of logits [rows x vocab] against target[r] (its
// head), one thread per row: row_loss[r] = log(sum exp(l - top)) - (l[target]
// - top) in double, and dlogits = round((softmax - one-hot) factor).
extern "C" __global__ void ccscope_cross_entropy_kernel(const float* logits, const uint32_t* target,
                                                        double* row_loss, float* dlogits,
                                                        size_t rows, size_t vocab, float factor,
                                                        int precision) {
  CCSCOPE_GRID_STRIDE(r, rows) {
    const float* row = logits + r * vocab;
    float top = row[0];
    for (size_t v = 1; v < vocab; ++v) top = row[v] > top ? row[v] : top;
    double sum = 0;
    for (size_t v = 0; v < vocab; ++v) sum += exp((double)(row[v] - top));
    row_loss[r] = log(sum) - (double)(row[target[r]] - top);
    for (size_t v = 0; v < vocab; ++v) {
      const double prob = exp((double)(row[v] - top)) / sum;
      dlogits[r * vocab + v] =
          ccscope_round(precision, (float)(prob - (v == target[r] ? 1.0 : 0.0)) * factor);
    }
  }
}

