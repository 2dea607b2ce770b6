#pragma once
// The training probe's operations on a GPU (issue 25, item 1: the foundation
// of `ccscope train --backend nccl` on device memory): RAII owners of device
// memory (with a high-water-mark allocator), streams, events and a cuBLAS
// handle; the linear layer forward and backward through cublasGemmEx (real
// bf16/fp16 inputs, fp32 accumulation, TF32 off unless asked for); the
// elementwise work, loss and optimizer steps as kernels (kernels.cuh) that
// compute what model.cpp and optimizer.cpp compute on the host.
//
// Layouts are model.cpp's: row-major activations [batch x features], weights
// [out x in] (nn.Linear), every value a float on the host side. For bf16/fp16
// a GEMM's inputs are 16-bit copies (uint16_t words) of values already rounded
// to the format; its output is fp32, rounded to the format afterwards as the
// host path rounds.
//
// Every call queues work on the context's stream and returns before it ran,
// except where it says it synchronizes (results read back to the host).
// Errors throw DeviceError with CUDA's or cuBLAS's own name and text.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/optimizer.h"

namespace ccscope::training_probe::device {

class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws DeviceError "<what>: <cudaErrorName>: <cudaGetErrorString>" unless success.
void check(cudaError_t error, const std::string& what);
// Throws DeviceError "<what>: <CUBLAS_STATUS_...>: <cublasGetStatusString>" unless success.
void check(cublasStatus_t status, const std::string& what);

// cudaMemGetInfo on the current device.
struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};
DeviceMemoryInfo device_memory_info();

// cudaMalloc/cudaFree with the bytes this allocator holds and their
// high-water mark (what the probe's memory accounting is checked against).
class DeviceAllocator {
 public:
  DeviceAllocator() = default;
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;
  void* allocate(size_t bytes);
  void release(void* pointer, size_t bytes) noexcept;
  size_t bytes_in_use() const { return in_use_; }
  size_t peak_bytes() const { return peak_; }
  void reset_peak() { peak_ = in_use_; }

 private:
  size_t in_use_ = 0;
  size_t peak_ = 0;
};

// `count` elements of T in device memory from `allocator`; move-only.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceAllocator& allocator, size_t count)
      : allocator_(&allocator),
        data_(static_cast<T*>(allocator.allocate(count * sizeof(T)))),
        count_(count) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      allocator_ = other.allocator_;
      data_ = other.data_;
      count_ = other.count_;
      other.data_ = nullptr;
      other.count_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  // Asynchronous copies on `stream`: `host` must stay valid (and unread /
  // unchanged) until the stream got there.
  void upload(std::span<const T> host, cudaStream_t stream) {
    check_size(host.size());
    check(cudaMemcpyAsync(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice,
                          stream),
          "cudaMemcpyAsync host to device");
  }
  void download(std::span<T> host, cudaStream_t stream) const {
    check_size(host.size());
    check(cudaMemcpyAsync(host.data(), data_, host.size() * sizeof(T), cudaMemcpyDeviceToHost,
                          stream),
          "cudaMemcpyAsync device to host");
  }
  void zero(cudaStream_t stream) {
    check(cudaMemsetAsync(data_, 0, bytes(), stream), "cudaMemsetAsync");
  }

 private:
  void check_size(size_t n) const {
    if (n > count_) throw DeviceError("device buffer copy of more elements than the buffer holds");
  }
  void reset() noexcept {
    if (data_ != nullptr) allocator_->release(data_, count_ * sizeof(T));
    data_ = nullptr;
    count_ = 0;
  }
  DeviceAllocator* allocator_ = nullptr;
  T* data_ = nullptr;
  size_t count_ = 0;
};

class Stream {
 public:
  Stream();  // cudaStreamNonBlocking
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  // `stream` waits (on the device) until this event's record was reached.
  void wait_on(cudaStream_t stream) const;
  void synchronize() const;

 private:
  cudaEvent_t event_ = nullptr;
};

// A cuBLAS handle bound to a stream, host pointer mode, default math (no
// TF32: the GEMMs pick CUBLAS_COMPUTE_32F_FAST_TF32 only when asked).
class BlasHandle {
 public:
  explicit BlasHandle(cudaStream_t stream);
  ~BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// What every operation runs on.
struct Context {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;  // bound to `stream`
  bool tf32 = false;              // fp32 GEMMs with TF32 inputs (off: the loss check's default)
};

// The GEMM operand type of a precision: float for fp32, uint16_t words for bf16/fp16.
cudaDataType gemm_type(Precision precision);

// pre [batch x out] (fp32) = x [batch x in] W^T, W [out x in]; x and weight are
// of gemm_type(precision). Bias and activation: bias_activation.
void linear_forward(const Context& c, Precision precision, const void* x, const void* weight,
                    float* pre, size_t batch, size_t in, size_t out);

// pre += bias (per column), rounded to the format; out = activation(pre)
// (no activation: the last layer, out = pre); out16 (may be null) its 16-bit copy.
void bias_activation(const Context& c, Precision precision, std::optional<Activation> activation,
                     float* pre, const float* bias, float* out, uint16_t* out16, size_t batch,
                     size_t out_features);

// grad (d out) becomes d pre in place (model.cpp's activation_backward).
void activation_backward(const Context& c, Precision precision, Activation activation, float* grad,
                         const float* pre, const float* out, size_t n);

// model.cpp's backward of one layer: dW += dy^T x, db += column sums of dy,
// dx = dy W (bias_grad and dx may be null); then dW, db and dx rounded to the format.
// dy [batch x out] is fp32; for bf16/fp16 `dy16` (batch x out words) receives
// its 16-bit copy for the GEMMs (dy must then already be rounded to the
// format, or the GEMMs see it rounded where the host path does not).
void linear_backward(const Context& c, Precision precision, const void* x, const float* dy,
                     uint16_t* dy16, const void* weight, float* weight_grad, float* bias_grad,
                     float* dx, size_t batch, size_t in, size_t out);

// bias_grad += the column sums of dy [rows x cols], rounded (a row-parallel
// layer's bias under sequence parallelism: this rank's rows only).
void bias_grad(const Context& c, Precision precision, const float* dy, float* bias_grad,
               size_t rows, size_t cols);
// Row-major out [m x n] = alpha op(A) op(B) + beta out (op: transposed where
// ta/tb), leading dimensions as row strides; A and B of gemm_type(precision),
// out fp32 (transformer.cpp's gemm: attention's products per sample and head).
void gemm_rows(const Context& c, Precision precision, bool ta, bool tb, size_t m, size_t n,
               size_t k, float alpha, const void* a, size_t lda, const void* b, size_t ldb,
               float beta, float* out, size_t ldc);

// The transformer's elementwise and row work (kernels.cuh; transformer.cpp's
// loops in their order; each output rounded to the format where the host rounds
// it). Rows are [seq x batch]: row r is position r / batch of sample r % batch.
// x[r] = tok_emb[token[r]] + pos_emb[r / batch].
void embed(const Context& c, Precision precision, const float* tok_emb, const float* pos_emb,
           const uint32_t* token, float* x, size_t rows, size_t cols, size_t batch);
// tok_grad[token[r]] += dx[r] and pos_grad[r / batch] += dx[r], each element's
// rows in order (no atomics: deterministic).
void embed_backward(const Context& c, const float* dx, const uint32_t* token, float* tok_grad,
                    float* pos_grad, size_t rows, size_t cols, size_t batch, size_t vocab);
// y = LayerNorm(x) w + b per row; mean and rstd (1/sqrt(var + 1e-5)) per row kept.
void layer_norm(const Context& c, Precision precision, const float* x, const float* w,
                const float* b, float* y, float* mean, float* rstd, size_t rows, size_t cols);
// w_grad, b_grad += the parameters' gradients; dx = the input's gradient plus
// `residual` (may be null), rounded.
void layer_norm_backward(const Context& c, Precision precision, const float* x, const float* mean,
                         const float* rstd, const float* dy, const float* w, float* w_grad,
                         float* b_grad, const float* residual, float* dx, size_t rows, size_t cols);
// out = x + (y + bias) per column (a row-parallel output's bias and the residual).
void bias_residual(const Context& c, Precision precision, const float* x, const float* y,
                   const float* bias, float* out, size_t rows, size_t cols);
// out = GELU(h) (exact, erf); grad *= GELU'(h).
void gelu(const Context& c, Precision precision, const float* h, float* out, size_t n);
void gelu_backward(const Context& c, Precision precision, float* grad, const float* h, size_t n);
// Causal softmax of each row of `count` [size x size] score matrices, in place;
// its backward: dp = p (dp - rowsum(p dp)).
void causal_softmax(const Context& c, Precision precision, float* scores, size_t count,
                    size_t size);
void causal_softmax_backward(const Context& c, Precision precision, const float* probs, float* dp,
                             size_t count, size_t size);
// Per row: row_loss = the cross-entropy against target (double), dlogits =
// (softmax - one-hot) factor.
void cross_entropy(const Context& c, Precision precision, const float* logits,
                   const uint32_t* target, double* row_loss, float* dlogits, size_t rows,
                   size_t vocab, float factor);

// model.cpp's mse_loss: grad = (2 / (batch_total width)) grad_scale (output -
// target); returns sum (output - target)^2 / (batch_total width), the sum in
// fp32 by cublasSdot (the host sums in double). `diff` is a batch x width
// scratch. Synchronizes the stream (the loss comes back to the host).
double mse_loss(const Context& c, const float* output, const float* target, float* diff,
                float* grad, size_t batch, size_t width, size_t batch_total, float grad_scale);

void round_to(const Context& c, Precision precision, float* values, size_t n);
void to_16(const Context& c, Precision precision, const float* values, uint16_t* out16, size_t n);
void from_16(const Context& c, Precision precision, const uint16_t* in16, float* values, size_t n);
// params = round(master), params16 (may be null) its 16-bit copy: mixed precision's step end.
void round_copy(const Context& c, Precision precision, const float* master, float* params,
                uint16_t* params16, size_t n);

// Mixture of experts (kernels.cuh): dst[r] = src[index[r]], and dst[index[r]]
// = src[r] (distinct indices), for rows of `cols` values.
void gather_rows(const Context& c, const float* src, const uint32_t* index, float* dst, size_t rows,
                 size_t cols);
void scatter_rows(const Context& c, const float* src, const uint32_t* index, float* dst,
                  size_t rows, size_t cols);
// y[t] += weight[t][s] values[row[t][s]] over token t's `slots` rows in order
// (row -1: none; weight null: 1).
void combine_rows(const Context& c, float* y, const float* values, const int32_t* row,
                  const float* weight, size_t tokens, size_t slots, size_t cols);
// Per routed row r: d_rows[r] = weight[r] dy[token[r]]; d_weight[r] = dy[token[r]] . values[r].
void combine_backward(const Context& c, const float* dy, const float* values, const uint32_t* token,
                      const float* weight, float* d_rows, float* d_weight, size_t rows,
                      size_t cols);

// values *= factor (cublasSscal): fp16's unscaling, gradient clipping.
void scale(const Context& c, float* values, size_t n, float factor);
// The L2 norm of values (cublasSnrm2, fp32). Synchronizes the stream.
double norm(const Context& c, const float* values, size_t n);
// Whether any value is inf or nan (fp16's overflow check); `flag` is one int of
// device scratch. Synchronizes the stream.
bool any_nonfinite(const Context& c, const float* values, size_t n, int* flag);

// optimizer.cpp's Optimizer with its state (momentum, Adam's m and v) in
// device memory: the same arithmetic per element.
class DeviceOptimizer {
 public:
  DeviceOptimizer(DeviceAllocator& allocator, OptimizerOptions options, size_t parameters,
                  cudaStream_t stream);
  // `step` counts from 1.
  void step(const Context& c, float* parameters, const float* gradients, size_t step);
  size_t state_bytes() const { return (first_.size() + second_.size()) * sizeof(float); }
  const DeviceBuffer<float>& first_moment() const { return first_; }
  const DeviceBuffer<float>& second_moment() const { return second_; }

 private:
  OptimizerOptions options_;
  size_t parameters_;
  DeviceBuffer<float> first_;   // SGD momentum, Adam m
  DeviceBuffer<float> second_;  // Adam v
  bool started_ = false;
};

}  // namespace ccscope::training_probe::device
