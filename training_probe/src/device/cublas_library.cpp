#include "cublas_library.h"

#include <dlfcn.h>

#include <string>

#include "device_ops.h"

namespace ccscope::training_probe::device {
namespace {

const std::string kLibrary = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

template <class F>
void resolve(void* library, const char* name, F& function) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) {
    const char* why = dlerror();
    throw DeviceError(kLibrary + ": no " + name + (why ? std::string(": ") + why : ""));
  }
  function = reinterpret_cast<F>(symbol);
}

CublasApi load() {
  // Never closed: the handles made through it live until the process ends.
  void* library = dlopen(kLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    throw DeviceError("cannot load " + kLibrary +
                      " (the GPU path's GEMMs): " + (why ? why : "unknown error"));
  }
  CublasApi api{};
  resolve(library, "cublasCreate_v2", api.create);
  resolve(library, "cublasDestroy_v2", api.destroy);
  resolve(library, "cublasSetStream_v2", api.set_stream);
  resolve(library, "cublasSetPointerMode_v2", api.set_pointer_mode);
  resolve(library, "cublasSetMathMode", api.set_math_mode);
  resolve(library, "cublasGemmEx", api.gemm_ex);
  resolve(library, "cublasSdot_v2", api.sdot);
  resolve(library, "cublasSscal_v2", api.sscal);
  resolve(library, "cublasSnrm2_v2", api.snrm2);
  resolve(library, "cublasSaxpy_v2", api.saxpy);
  resolve(library, "cublasGetStatusName", api.status_name);
  resolve(library, "cublasGetStatusString", api.status_string);
  return api;
}

}  // namespace

const CublasApi& cublas() {
  static const CublasApi api = load();
  return api;
}

}  // namespace ccscope::training_probe::device
