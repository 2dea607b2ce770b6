#pragma once
// cuBLAS resolved at first use (dlopen), not linked into ccscope: the verbs
// that never train on a GPU then never map it (cuBLAS with cuBLASLt takes more
// virtual memory than a `ulimit -v` budget of 700 MB allows at start-up). The
// stand-in's libcublas.so.N is found the same way, by LD_LIBRARY_PATH.
#include <cublas_v2.h>

namespace ccscope::training_probe::device {

// The entry points the device operations call (cublas_v2.h's names map to
// the _v2 symbols, which these are).
struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetPointerMode_v2) set_pointer_mode;
  decltype(&cublasSetMathMode) set_math_mode;
  // (C++ overloads cublasGemmEx; the exported symbol takes a cublasComputeType_t)
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*,
                            cudaDataType, int, const void*, void*, cudaDataType, int,
                            cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasSdot_v2) sdot;
  decltype(&cublasSscal_v2) sscal;
  decltype(&cublasSnrm2_v2) snrm2;
  decltype(&cublasSaxpy_v2) saxpy;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

// libcublas.so.<the toolkit's major version>, loaded once (thread-safe).
// Throws DeviceError naming the library and dlopen's or dlsym's message.
const CublasApi& cublas();

}  // namespace ccscope::training_probe::device
