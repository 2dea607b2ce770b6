// The cuBLAS stand-in (tests only; docs/standin.md): the handful of cuBLAS
// entry points the training probe's GPU path calls, computed on the host on
// the stream's worker thread of the CUDA runtime stand-in (runtime.h), so that
// results exist only once the stream got there, as on a GPU. Column-major
// cuBLAS semantics, fp32 accumulation in k order, 16-bit outputs rounded to
// nearest even once at the end. Strict: every operand must be device memory
// of the handle's device holding the whole matrix or vector the arguments
// describe; leading dimensions and sizes are refused as cuBLAS refuses them.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "elements.h"
#include "runtime.h"

using ccscope::standin::Resolved;

struct cublasContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
};

namespace {

namespace standin = ccscope::standin;

cublasStatus_t refuse(const char* function, const char* why,
                      cublasStatus_t status = CUBLAS_STATUS_INVALID_VALUE) {
  // cuBLAS logs through CUBLAS_LOGINFO_DBG; the stand-in always says why.
  std::fprintf(stderr, "ccscope cuBLAS stand-in: %s: %s\n", function, why);
  return status;
}

// The shadow (writable) address of `bytes` of device memory of `device` at
// `pointer`, or nullptr when the range is not that.
char* device_range(const void* pointer, size_t bytes, int device) {
  const Resolved r = standin::resolve(pointer, bytes == 0 ? 1 : bytes);
  if (r.kind != Resolved::kDevice || r.device != device) return nullptr;
  return r.shadow;
}

size_t type_bytes(cudaDataType type) {
  switch (type) {
    case CUDA_R_32F:
      return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF:
      return 2;
    default:
      return 0;
  }
}

float load(const char* base, cudaDataType type, size_t index) {
  switch (type) {
    case CUDA_R_32F: {
      float v;
      std::memcpy(&v, base + index * 4, 4);
      return v;
    }
    case CUDA_R_16F: {
      uint16_t b;
      std::memcpy(&b, base + index * 2, 2);
      return standin::half_to_float(b);
    }
    default: {
      uint16_t b;
      std::memcpy(&b, base + index * 2, 2);
      return standin::bf16_to_float(b);
    }
  }
}

void store(char* base, cudaDataType type, size_t index, float value) {
  if (type == CUDA_R_32F) {
    std::memcpy(base + index * 4, &value, 4);
    return;
  }
  const uint16_t b =
      type == CUDA_R_16F ? standin::float_to_half(value) : standin::float_to_bf16(value);
  std::memcpy(base + index * 2, &b, 2);
}

// TF32: 8 exponent bits, 10 mantissa bits; rounded to nearest, ties away from
// zero (PTX's cvt.rna.tf32.f32, what cuBLAS's fp32-input kernels use).
float round_to_tf32(float value) {
  if (!std::isfinite(value)) return value;
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits = (bits + 0x1000u) & ~0x1fffu;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// A scalar argument (alpha, beta): read now in host pointer mode, on the
// worker in device mode. Returns false for a device pointer that is not one.
struct Scalar {
  float value = 0;
  const char* device = nullptr;
  float get() const {
    if (device == nullptr) return value;
    float v;
    std::memcpy(&v, device, 4);
    return v;
  }
};

bool take_scalar(const cublasContext* h, const float* pointer, Scalar& out) {
  if (pointer == nullptr) return false;
  if (h->pointer_mode == CUBLAS_POINTER_MODE_HOST) {
    out.value = *pointer;
    return true;
  }
  out.device = device_range(pointer, 4, h->device);
  return out.device != nullptr;
}

cublasStatus_t enqueue(cublasContext* h, standin::Work work) {
  const cudaError_t e = standin::enqueue(h->stream, std::move(work));
  if (e != cudaSuccess)
    return refuse("enqueue", "the handle's stream is not a stream", CUBLAS_STATUS_EXECUTION_FAILED);
  return CUBLAS_STATUS_SUCCESS;
}

// Elements a column-major rows x cols matrix with leading dimension ld spans.
size_t matrix_elements(int rows, int cols, int ld) {
  if (rows == 0 || cols == 0) return 0;
  return static_cast<size_t>(ld) * static_cast<size_t>(cols - 1) + static_cast<size_t>(rows);
}

size_t vector_elements(int n, int inc) {
  return n <= 0 ? 0 : static_cast<size_t>(n - 1) * static_cast<size_t>(inc) + 1;
}

bool valid_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

struct Gemm {
  cublasOperation_t transa, transb;
  int m, n, k, lda, ldb, ldc;
  cudaDataType a_type, b_type, c_type;
  bool tf32 = false;
  Scalar alpha, beta;
  const char *a = nullptr, *b = nullptr;
  char* c = nullptr;
};

// C = alpha op(A) op(B) + beta C, column-major; fp32 accumulation over k in
// order for every element. op(A) and op(B) are first converted to fp32 (TF32
// rounded where asked), op(A) column-major, so that the inner loop runs over
// independent elements of a column of C (vectorised, each still summed in k order).
void run_gemm(const Gemm& g) {
  const float alpha = g.alpha.get();
  const float beta = g.beta.get();
  const size_t m = static_cast<size_t>(g.m), n = static_cast<size_t>(g.n),
               k = static_cast<size_t>(g.k);
  std::vector<float> a(m * k), b(k * n), sum(m);
  for (size_t l = 0; l < k; ++l)
    for (size_t i = 0; i < m; ++i) {
      const size_t index = g.transa == CUBLAS_OP_N ? l * g.lda + i : i * g.lda + l;
      const float v = load(g.a, g.a_type, index);
      a[l * m + i] = g.tf32 ? round_to_tf32(v) : v;
    }
  for (size_t j = 0; j < n; ++j)
    for (size_t l = 0; l < k; ++l) {
      const size_t index = g.transb == CUBLAS_OP_N ? j * g.ldb + l : l * g.ldb + j;
      const float v = load(g.b, g.b_type, index);
      b[j * k + l] = g.tf32 ? round_to_tf32(v) : v;
    }
  for (size_t j = 0; j < n; ++j) {
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (size_t l = 0; l < k; ++l) {
      const float bv = b[j * k + l];
      const float* column = a.data() + l * m;
      for (size_t i = 0; i < m; ++i) sum[i] += column[i] * bv;
    }
    for (size_t i = 0; i < m; ++i) {
      const size_t ci = j * g.ldc + i;
      // beta == 0: C is not read (it may hold NaN), as BLAS specifies.
      const float out =
          beta == 0.0f ? alpha * sum[i] : alpha * sum[i] + beta * load(g.c, g.c_type, ci);
      store(g.c, g.c_type, ci, out);
    }
  }
}

cublasStatus_t gemm(const char* function, cublasContext* h, cublasOperation_t transa,
                    cublasOperation_t transb, int m, int n, int k, const float* alpha,
                    const void* A, cudaDataType a_type, int lda, const void* B, cudaDataType b_type,
                    int ldb, const float* beta, void* C, cudaDataType c_type, int ldc, bool tf32) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!valid_op(transa) || !valid_op(transb))
    return refuse(function, "transa/transb is not an operation");
  if (m < 0 || n < 0 || k < 0) return refuse(function, "m, n and k must not be negative");
  const int a_rows = transa == CUBLAS_OP_N ? m : k, a_cols = transa == CUBLAS_OP_N ? k : m;
  const int b_rows = transb == CUBLAS_OP_N ? k : n, b_cols = transb == CUBLAS_OP_N ? n : k;
  if (lda < std::max(1, a_rows)) return refuse(function, "lda < max(1, rows of op(A)'s storage)");
  if (ldb < std::max(1, b_rows)) return refuse(function, "ldb < max(1, rows of op(B)'s storage)");
  if (ldc < std::max(1, m)) return refuse(function, "ldc < max(1, m)");
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  Gemm g{transa, transb, m, n, k, lda, ldb, ldc, a_type, b_type, c_type, tf32, {}, {}};
  if (!take_scalar(h, alpha, g.alpha) || !take_scalar(h, beta, g.beta))
    return refuse(function, "alpha/beta is null, or not device memory in device pointer mode");
  if (k > 0) {
    g.a = device_range(A, matrix_elements(a_rows, a_cols, lda) * type_bytes(a_type), h->device);
    g.b = device_range(B, matrix_elements(b_rows, b_cols, ldb) * type_bytes(b_type), h->device);
    if (g.a == nullptr || g.b == nullptr)
      return refuse(function,
                    "A or B is not device memory of the handle's GPU holding the whole matrix");
  }
  g.c = device_range(C, matrix_elements(m, n, ldc) * type_bytes(c_type), h->device);
  if (g.c == nullptr)
    return refuse(function, "C is not device memory of the handle's GPU holding the whole matrix");
  return enqueue(h, [g] { run_gemm(g); });
}

bool tf32_math(const cublasContext* h) {
  return (h->math_mode & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH;
}

// A level-1 vector operand: device memory of the handle's GPU holding n
// elements at stride inc (inc > 0; the stand-in knows no negative strides).
cublasStatus_t vector(const char* function, const cublasContext* h, const void* x, int n, int inc,
                      char*& shadow) {
  if (inc <= 0)
    return refuse(function, "the stand-in supports positive strides only",
                  CUBLAS_STATUS_NOT_SUPPORTED);
  shadow = device_range(x, vector_elements(n, inc) * 4, h->device);
  if (shadow == nullptr)
    return refuse(function, "a vector is not device memory of the handle's GPU holding n elements");
  return CUBLAS_STATUS_SUCCESS;
}

float at(const char* base, int inc, int i) {
  float v;
  std::memcpy(&v, base + static_cast<size_t>(i) * inc * 4, 4);
  return v;
}

// A reduction's result (dot, nrm2): host pointer mode waits for the stream, as
// cuBLAS blocks then; device mode writes it on the worker.
cublasStatus_t reduction_result(const char* function, cublasContext* h, float* result,
                                std::function<float()> compute) {
  if (result == nullptr) return refuse(function, "result is null");
  if (h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE) {
    char* out = device_range(result, 4, h->device);
    if (out == nullptr)
      return refuse(function, "result is not device memory in device pointer mode");
    return enqueue(h, [out, compute] {
      const float v = compute();
      std::memcpy(out, &v, 4);
    });
  }
  // The value would come back at the graph's launch, not now: cuBLAS refuses
  // host pointer mode results in a capture (and the wait here would never end).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(h->stream, &capture) == cudaSuccess &&
      capture != cudaStreamCaptureStatusNone)
    return refuse(function, "a host pointer mode result in a stream capture",
                  CUBLAS_STATUS_NOT_SUPPORTED);
  auto done = std::make_shared<std::promise<float>>();
  std::future<float> value = done->get_future();
  const cublasStatus_t s = enqueue(h, [done, compute] { done->set_value(compute()); });
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  *result = value.get();
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (standin::device_count() <= 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* h = new cublasContext();
  h->device = standin::current_device();
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (version == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  // The real library's texts.
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "error detected trying to check the license";
  }
  return "unknown error";
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  return gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, B,
              CUDA_R_32F, ldb, beta, C, CUDA_R_32F, ldc, tf32_math(handle));
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  (void)algo;  // every algorithm computes the same here
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool fp32_compute = computeType == CUBLAS_COMPUTE_32F ||
                            computeType == CUBLAS_COMPUTE_32F_PEDANTIC ||
                            computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
  if (!fp32_compute)
    return refuse("cublasGemmEx",
                  "the stand-in computes CUBLAS_COMPUTE_32F[_PEDANTIC|_FAST_TF32] only",
                  CUBLAS_STATUS_NOT_SUPPORTED);
  // cuBLAS's table for fp32 compute: A and B of one type; C that type or fp32.
  if (type_bytes(Atype) == 0 || Atype != Btype || (Ctype != Atype && Ctype != CUDA_R_32F))
    return refuse("cublasGemmEx", "unsupported combination of A/B/C types for fp32 compute",
                  CUBLAS_STATUS_NOT_SUPPORTED);
  if (computeType == CUBLAS_COMPUTE_32F_FAST_TF32 && Atype != CUDA_R_32F)
    return refuse("cublasGemmEx", "CUBLAS_COMPUTE_32F_FAST_TF32 takes fp32 inputs",
                  CUBLAS_STATUS_NOT_SUPPORTED);
  // TF32 where asked for, or where the math mode allows it for fp32 inputs
  // (CUBLAS_COMPUTE_32F_PEDANTIC never).
  const bool tf32 =
      Atype == CUDA_R_32F && (computeType == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                              (computeType == CUBLAS_COMPUTE_32F && tf32_math(handle)));
  return gemm("cublasGemmEx", handle, transa, transb, m, n, k, static_cast<const float*>(alpha), A,
              Atype, lda, B, Btype, ldb, static_cast<const float*>(beta), C, Ctype, ldc, tf32);
}

cublasStatus_t cublasSaxpy_v2(cublasHandle_t handle, int n, const float* alpha, const float* x,
                              int incx, float* y, int incy) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (n <= 0) return CUBLAS_STATUS_SUCCESS;
  Scalar a;
  if (!take_scalar(handle, alpha, a))
    return refuse("cublasSaxpy", "alpha is null or not device memory");
  char *xs = nullptr, *ys = nullptr;
  if (auto s = vector("cublasSaxpy", handle, x, n, incx, xs); s != CUBLAS_STATUS_SUCCESS) return s;
  if (auto s = vector("cublasSaxpy", handle, y, n, incy, ys); s != CUBLAS_STATUS_SUCCESS) return s;
  return enqueue(handle, [=] {
    const float av = a.get();
    for (int i = 0; i < n; ++i) {
      const float v = av * at(xs, incx, i) + at(ys, incy, i);
      std::memcpy(ys + static_cast<size_t>(i) * incy * 4, &v, 4);
    }
  });
}

cublasStatus_t cublasSscal_v2(cublasHandle_t handle, int n, const float* alpha, float* x,
                              int incx) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (n <= 0) return CUBLAS_STATUS_SUCCESS;
  Scalar a;
  if (!take_scalar(handle, alpha, a))
    return refuse("cublasSscal", "alpha is null or not device memory");
  char* xs = nullptr;
  if (auto s = vector("cublasSscal", handle, x, n, incx, xs); s != CUBLAS_STATUS_SUCCESS) return s;
  return enqueue(handle, [=] {
    const float av = a.get();
    for (int i = 0; i < n; ++i) {
      const float v = av * at(xs, incx, i);
      std::memcpy(xs + static_cast<size_t>(i) * incx * 4, &v, 4);
    }
  });
}

cublasStatus_t cublasSdot_v2(cublasHandle_t handle, int n, const float* x, int incx, const float* y,
                             int incy, float* result) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (n <= 0) return reduction_result("cublasSdot", handle, result, [] { return 0.0f; });
  char *xs = nullptr, *ys = nullptr;
  if (auto s = vector("cublasSdot", handle, x, n, incx, xs); s != CUBLAS_STATUS_SUCCESS) return s;
  if (auto s = vector("cublasSdot", handle, y, n, incy, ys); s != CUBLAS_STATUS_SUCCESS) return s;
  return reduction_result("cublasSdot", handle, result, [=] {
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += at(xs, incx, i) * at(ys, incy, i);
    return sum;
  });
}

cublasStatus_t cublasSnrm2_v2(cublasHandle_t handle, int n, const float* x, int incx,
                              float* result) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (n <= 0) return reduction_result("cublasSnrm2", handle, result, [] { return 0.0f; });
  char* xs = nullptr;
  if (auto s = vector("cublasSnrm2", handle, x, n, incx, xs); s != CUBLAS_STATUS_SUCCESS) return s;
  return reduction_result("cublasSnrm2", handle, result, [=] {
    // Squares summed in double (cuBLAS scales to avoid overflow; this is as safe).
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(at(xs, incx, i)) * at(xs, incx, i);
    return static_cast<float>(std::sqrt(sum));
  });
}

}  // extern "C"
