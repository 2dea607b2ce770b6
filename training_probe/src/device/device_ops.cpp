#include "device_ops.h"

#include <climits>
#include <cmath>

#include "cublas_library.h"
#include "kernel_launch.h"

namespace ccscope::training_probe::device {
namespace {

int precision_code(Precision precision) { return static_cast<int>(precision); }

int activation_code(std::optional<Activation> activation) {
  if (!activation) return 2;
  return *activation == Activation::kRelu ? 0 : 1;
}

// cuBLAS takes int sizes.
int blas_int(size_t value, const char* what) {
  if (value > static_cast<size_t>(INT_MAX))
    throw DeviceError(std::string(what) + ": " + std::to_string(value) +
                      " exceeds cuBLAS's int range");
  return static_cast<int>(value);
}

cublasComputeType_t compute_type(const Context& c, Precision precision) {
  return precision == Precision::kFloat32 && c.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                    : CUBLAS_COMPUTE_32F;
}

// Column-major cuBLAS over row-major matrices: a row-major R x C matrix is a
// column-major C x R one with leading dimension C.
void gemm(const Context& c, Precision precision, cublasOperation_t transa, cublasOperation_t transb,
          size_t m, size_t n, size_t k, const void* a, size_t lda, const void* b, size_t ldb,
          float beta, float* out, size_t ldc, const char* what, float alpha = 1.0f) {
  const cudaDataType type = gemm_type(precision);
  check(cublas().gemm_ex(c.blas, transa, transb, blas_int(m, what), blas_int(n, what),
                         blas_int(k, what), &alpha, a, type, blas_int(lda, what), b, type,
                         blas_int(ldb, what), &beta, out, CUDA_R_32F, blas_int(ldc, what),
                         compute_type(c, precision), CUBLAS_GEMM_DEFAULT),
        what);
}

}  // namespace

void check(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return;
  // A failed call also leaves its error as the thread's last error (as CUDA
  // does); taken here, so that the next launch's cudaGetLastError is its own.
  (void)cudaGetLastError();
  throw DeviceError(what + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

void check(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw DeviceError(what + ": " + cublas().status_name(status) + ": " +
                    cublas().status_string(status));
}

DeviceMemoryInfo device_memory_info() {
  DeviceMemoryInfo info;
  check(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo");
  return info;
}

void* DeviceAllocator::allocate(size_t bytes) {
  void* pointer = nullptr;
  if (bytes == 0) return nullptr;
  check(cudaMalloc(&pointer, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
  in_use_ += bytes;
  if (in_use_ > peak_) peak_ = in_use_;
  return pointer;
}

void DeviceAllocator::release(void* pointer, size_t bytes) noexcept {
  if (pointer == nullptr) return;
  cudaFree(pointer);  // a failure here is a stale pointer: nothing to recover in a destructor
  in_use_ -= bytes;
}

Stream::Stream() {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}
Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}
void Stream::synchronize() const { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

Event::Event(bool timing) {
  check(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
}
Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}
void Event::record(cudaStream_t stream) {
  check(cudaEventRecord(event_, stream), "cudaEventRecord");
}
void Event::wait_on(cudaStream_t stream) const {
  check(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
}
void Event::synchronize() const { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

BlasHandle::BlasHandle(cudaStream_t stream) {
  check(cublas().create(&handle_), "cublasCreate");
  try {
    check(cublas().set_stream(handle_, stream), "cublasSetStream");
    check(cublas().set_pointer_mode(handle_, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    check(cublas().set_math_mode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  } catch (...) {
    cublas().destroy(handle_);
    throw;
  }
}
BlasHandle::~BlasHandle() {
  if (handle_ != nullptr) cublas().destroy(handle_);
}

cudaDataType gemm_type(Precision precision) {
  switch (precision) {
    case Precision::kFloat32:
      return CUDA_R_32F;
    case Precision::kBFloat16:
      return CUDA_R_16BF;
    case Precision::kFloat16:
      return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

void linear_forward(const Context& c, Precision precision, const void* x, const void* weight,
                    float* pre, size_t batch, size_t in, size_t out) {
  // pre^T [out x batch] = W [out x in] x^T [in x batch]: W row-major is
  // column-major W^T (in x out, ld in), so op(A) = T; x row-major is
  // column-major x^T (in x batch, ld in).
  gemm(c, precision, CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, weight, in, x, in, 0.0f, pre, out,
       "cublasGemmEx (linear forward)");
}

void bias_activation(const Context& c, Precision precision, std::optional<Activation> activation,
                     float* pre, const float* bias, float* out, uint16_t* out16, size_t batch,
                     size_t out_features) {
  check(launch::bias_activation(c.stream, pre, bias, out, out16, batch, out_features,
                                activation_code(activation), precision_code(precision)),
        "bias/activation kernel launch");
}

void activation_backward(const Context& c, Precision precision, Activation activation, float* grad,
                         const float* pre, const float* out, size_t n) {
  check(launch::activation_backward(c.stream, grad, pre, out, n, activation_code(activation),
                                    precision_code(precision)),
        "activation backward kernel launch");
}

void linear_backward(const Context& c, Precision precision, const void* x, const float* dy,
                     uint16_t* dy16, const void* weight, float* weight_grad, float* bias_grad,
                     float* dx, size_t batch, size_t in, size_t out) {
  const void* dy_operand = dy;
  if (precision != Precision::kFloat32) {
    if (dy16 == nullptr)
      throw DeviceError("linear_backward: bf16/fp16 needs a 16-bit scratch for dy");
    to_16(c, precision, dy, dy16, batch * out);
    dy_operand = dy16;
  }
  // dW^T [in x out] += x^T [in x batch] dy [batch x out]: dy row-major is
  // column-major dy^T (out x batch, ld out), so op(B) = T.
  gemm(c, precision, CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, x, in, dy_operand, out, 1.0f,
       weight_grad, in, "cublasGemmEx (weight gradient)");
  round_to(c, precision, weight_grad, in * out);
  if (bias_grad != nullptr) device::bias_grad(c, precision, dy, bias_grad, batch, out);
  if (dx != nullptr) {
    // dx^T [in x batch] = W^T [in x out] dy^T [out x batch].
    gemm(c, precision, CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, weight, in, dy_operand, out, 0.0f,
         dx, in, "cublasGemmEx (input gradient)");
    round_to(c, precision, dx, batch * in);
  }
}

void bias_grad(const Context& c, Precision precision, const float* dy, float* bias_grad,
               size_t rows, size_t cols) {
  check(launch::bias_grad(c.stream, dy, bias_grad, rows, cols), "bias gradient kernel launch");
  round_to(c, precision, bias_grad, cols);
}

void gemm_rows(const Context& c, Precision precision, bool ta, bool tb, size_t m, size_t n,
               size_t k, float alpha, const void* a, size_t lda, const void* b, size_t ldb,
               float beta, float* out, size_t ldc) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, where a
  // row-major operand is its column-major transpose with the same leading dimension.
  gemm(c, precision, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, b,
       ldb, a, lda, beta, out, ldc, "cublasGemmEx (row-major product)", alpha);
}

double mse_loss(const Context& c, const float* output, const float* target, float* diff,
                float* grad, size_t batch, size_t width, size_t batch_total, float grad_scale) {
  const double denominator = static_cast<double>(batch_total) * static_cast<double>(width);
  const float factor = static_cast<float>(2.0 / denominator) * grad_scale;  // as model.cpp
  const size_t n = batch * width;
  check(launch::mse(c.stream, output, target, diff, grad, n, factor), "MSE kernel launch");
  float squares = 0.0f;
  check(cublas().sdot(c.blas, blas_int(n, "cublasSdot"), diff, 1, diff, 1, &squares),
        "cublasSdot (MSE)");
  return static_cast<double>(squares) / denominator;
}

void round_to(const Context& c, Precision precision, float* values, size_t n) {
  if (precision == Precision::kFloat32) return;
  check(launch::round(c.stream, values, n, precision_code(precision)), "rounding kernel launch");
}

void to_16(const Context& c, Precision precision, const float* values, uint16_t* out16, size_t n) {
  if (precision == Precision::kFloat32) throw DeviceError("to_16: fp32 has no 16-bit copy");
  check(launch::to_16(c.stream, values, out16, n, precision_code(precision)),
        "to-16-bit kernel launch");
}

void from_16(const Context& c, Precision precision, const uint16_t* in16, float* values, size_t n) {
  if (precision == Precision::kFloat32) throw DeviceError("from_16: fp32 has no 16-bit copy");
  check(launch::from_16(c.stream, in16, values, n, precision_code(precision)),
        "from-16-bit kernel launch");
}

void round_copy(const Context& c, Precision precision, const float* master, float* params,
                uint16_t* params16, size_t n) {
  check(launch::round_copy(c.stream, master, params, params16, n, precision_code(precision)),
        "round-copy kernel launch");
}

void gather_rows(const Context& c, const float* src, const uint32_t* index, float* dst, size_t rows,
                 size_t cols) {
  check(launch::gather_rows(c.stream, src, index, dst, rows, cols), "gather-rows kernel launch");
}

void scatter_rows(const Context& c, const float* src, const uint32_t* index, float* dst,
                  size_t rows, size_t cols) {
  check(launch::scatter_rows(c.stream, src, index, dst, rows, cols), "scatter-rows kernel launch");
}

void combine_rows(const Context& c, float* y, const float* values, const int32_t* row,
                  const float* weight, size_t tokens, size_t slots, size_t cols) {
  check(launch::combine_rows(c.stream, y, values, row, weight, tokens, slots, cols),
        "combine kernel launch");
}

void combine_backward(const Context& c, const float* dy, const float* values, const uint32_t* token,
                      const float* weight, float* d_rows, float* d_weight, size_t rows,
                      size_t cols) {
  check(launch::combine_backward(c.stream, dy, values, token, weight, d_rows, d_weight, rows, cols),
        "combine-backward kernel launch");
}

void embed(const Context& c, Precision precision, const float* tok_emb, const float* pos_emb,
           const uint32_t* token, float* x, size_t rows, size_t cols, size_t batch) {
  check(launch::embed(c.stream, tok_emb, pos_emb, token, x, rows, cols, batch,
                      precision_code(precision)),
        "embedding kernel launch");
}

void embed_backward(const Context& c, const float* dx, const uint32_t* token, float* tok_grad,
                    float* pos_grad, size_t rows, size_t cols, size_t batch, size_t vocab) {
  check(launch::embed_backward(c.stream, dx, token, tok_grad, pos_grad, rows, cols, batch, vocab),
        "embedding backward kernel launch");
}

void layer_norm(const Context& c, Precision precision, const float* x, const float* w,
                const float* b, float* y, float* mean, float* rstd, size_t rows, size_t cols) {
  check(launch::layer_norm(c.stream, x, w, b, y, mean, rstd, rows, cols, precision_code(precision)),
        "layer norm kernel launch");
}

void layer_norm_backward(const Context& c, Precision precision, const float* x, const float* mean,
                         const float* rstd, const float* dy, const float* w, float* w_grad,
                         float* b_grad, const float* residual, float* dx, size_t rows,
                         size_t cols) {
  check(launch::layer_norm_params_backward(c.stream, x, mean, rstd, dy, w_grad, b_grad, rows, cols),
        "layer norm parameter backward kernel launch");
  check(launch::layer_norm_backward(c.stream, x, mean, rstd, dy, w, residual, dx, rows, cols,
                                    precision_code(precision)),
        "layer norm backward kernel launch");
}

void bias_residual(const Context& c, Precision precision, const float* x, const float* y,
                   const float* bias, float* out, size_t rows, size_t cols) {
  check(launch::bias_residual(c.stream, x, y, bias, out, rows, cols, precision_code(precision)),
        "bias/residual kernel launch");
}

void gelu(const Context& c, Precision precision, const float* h, float* out, size_t n) {
  check(launch::gelu(c.stream, h, out, n, precision_code(precision)), "GELU kernel launch");
}

void gelu_backward(const Context& c, Precision precision, float* grad, const float* h, size_t n) {
  check(launch::gelu_backward(c.stream, grad, h, n, precision_code(precision)),
        "GELU backward kernel launch");
}

void causal_softmax(const Context& c, Precision precision, float* scores, size_t count,
                    size_t size) {
  check(launch::causal_softmax(c.stream, scores, count, size, precision_code(precision)),
        "causal softmax kernel launch");
}

void causal_softmax_backward(const Context& c, Precision precision, const float* probs, float* dp,
                             size_t count, size_t size) {
  check(
      launch::causal_softmax_backward(c.stream, probs, dp, count, size, precision_code(precision)),
      "causal softmax backward kernel launch");
}

void cross_entropy(const Context& c, Precision precision, const float* logits,
                   const uint32_t* target, double* row_loss, float* dlogits, size_t rows,
                   size_t vocab, float factor) {
  check(launch::cross_entropy(c.stream, logits, target, row_loss, dlogits, rows, vocab, factor,
                              precision_code(precision)),
        "cross-entropy kernel launch");
}

void scale(const Context& c, float* values, size_t n, float factor) {
  check(cublas().sscal(c.blas, blas_int(n, "cublasSscal"), &factor, values, 1), "cublasSscal");
}

double norm(const Context& c, const float* values, size_t n) {
  float result = 0.0f;
  check(cublas().snrm2(c.blas, blas_int(n, "cublasSnrm2"), values, 1, &result), "cublasSnrm2");
  return result;
}

bool any_nonfinite(const Context& c, const float* values, size_t n, int* flag) {
  check(cudaMemsetAsync(flag, 0, sizeof(int), c.stream), "cudaMemsetAsync (overflow flag)");
  check(launch::nonfinite(c.stream, values, n, flag), "overflow check kernel launch");
  int host = 0;
  check(cudaMemcpyAsync(&host, flag, sizeof(int), cudaMemcpyDeviceToHost, c.stream),
        "cudaMemcpyAsync (overflow flag)");
  check(cudaStreamSynchronize(c.stream), "cudaStreamSynchronize (overflow flag)");
  return host != 0;
}

DeviceOptimizer::DeviceOptimizer(DeviceAllocator& allocator, OptimizerOptions options,
                                 size_t parameters, cudaStream_t stream)
    : options_(options), parameters_(parameters) {
  const bool momentum = options.kind != OptimizerKind::kSgd || options.momentum != 0.0;
  if (momentum) {
    first_ = DeviceBuffer<float>(allocator, parameters);
    first_.zero(stream);
  }
  if (options.kind != OptimizerKind::kSgd) {
    second_ = DeviceBuffer<float>(allocator, parameters);
    second_.zero(stream);
  }
}

void DeviceOptimizer::step(const Context& c, float* parameters, const float* gradients,
                           size_t step) {
  const float lr = static_cast<float>(options_.lr);
  const float wd = static_cast<float>(options_.weight_decay);
  if (options_.kind == OptimizerKind::kSgd) {
    check(launch::sgd(c.stream, parameters, gradients, first_.data(), parameters_, lr, wd,
                      static_cast<float>(options_.momentum), started_ ? 1 : 0),
          "SGD kernel launch");
    started_ = true;
    return;
  }
  // The step's scalars exactly as optimizer.cpp computes them.
  const double t = static_cast<double>(step);
  const float bias1 = static_cast<float>(1.0 - std::pow(options_.beta1, t));
  const float bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(options_.beta2, t)));
  check(launch::adam(c.stream, parameters, gradients, first_.data(), second_.data(), parameters_,
                     lr, wd, static_cast<float>(options_.beta1), static_cast<float>(options_.beta2),
                     static_cast<float>(1.0 - options_.beta1),
                     static_cast<float>(1.0 - options_.beta2), bias2_sqrt, lr / bias1,
                     static_cast<float>(options_.eps),
                     options_.kind == OptimizerKind::kAdamW ? 1 : 0),
        "Adam kernel launch");
}

}  // namespace ccscope::training_probe::device
