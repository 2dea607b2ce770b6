#pragma once
// Compiles CUDA kernel source with the host compiler for the CUDA runtime
// stand-in (tests only; docs/standin.md, "Kernels"). A test-only library
// lib<name>_emulation.so includes this header, then the kernel source (the
// very file nvcc compiles for the GPU), then names each kernel once with
// CCSCOPE_EMULATE_KERNEL(kernel); the stand-in runtime loads it from its own
// lib directory and runs the kernel a launch names, on the stream's worker.
//
// What a kernel may use to be emulated: threadIdx/blockIdx/blockDim/gridDim
// (every block and thread of the launch runs, one after another), plain
// arithmetic and <cmath>, atomicAdd (a plain add: threads run one at a time),
// the bit casts below. No __shared__ memory, no __syncthreads, no warp
// intrinsics: each thread runs to its end before the next starts. Kernels are
// extern "C" so that their device name (what __cudaRegisterFunction reports)
// is their identifier.
#include <cuda_runtime_api.h>  // dim3, uint3; host_defines.h empties __global__ and friends

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernel_emulation.h"

namespace ccscope::standin::emulation {
// The running thread's coordinates; thread_local as several streams' workers
// may run kernels at once.
inline thread_local uint3 thread_index{};
inline thread_local uint3 block_index{};
inline thread_local dim3 block_shape{};
inline thread_local dim3 grid_shape{};
}  // namespace ccscope::standin::emulation

#define threadIdx (::ccscope::standin::emulation::thread_index)
#define blockIdx (::ccscope::standin::emulation::block_index)
#define blockDim (::ccscope::standin::emulation::block_shape)
#define gridDim (::ccscope::standin::emulation::grid_shape)

using std::isfinite;
using std::isnan;

inline float atomicAdd(float* address, float value) {
  const float old = *address;
  *address = old + value;
  return old;
}
inline int atomicAdd(int* address, int value) {
  const int old = *address;
  *address = old + value;
  return old;
}
inline unsigned int __float_as_uint(float value) {
  unsigned int bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}
inline float __uint_as_float(unsigned int bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

namespace ccscope::standin::emulation {

// A pointer argument becomes the stand-in's writable mapping of the same
// bytes; it must be null, device memory of the current GPU, or pinned host
// memory (host-addressable on a GPU too). Anything else is what a GPU would
// fault on (cudaErrorIllegalAddress), refused before the launch.
template <class T>
cudaError_t translate(T& value, size_t index, std::string& message) {
  if constexpr (std::is_pointer_v<T>) {
    if (value == nullptr) return cudaSuccess;
    const Resolved r = resolve(value, 1);
    if (r.kind == Resolved::kPinnedHost) return cudaSuccess;
    if (r.kind != Resolved::kDevice || r.device != current_device()) {
      char text[160];
      std::snprintf(text, sizeof(text),
                    "argument %zu (%p) is not device memory of the current GPU (%d)", index,
                    static_cast<const void*>(value), current_device());
      message = text;
      return cudaErrorIllegalAddress;
    }
    using Pointee = std::remove_pointer_t<T>;
    value = reinterpret_cast<T>(
        reinterpret_cast<std::conditional_t<std::is_const_v<Pointee>, const char*, char*>>(
            r.shadow));
  }
  return cudaSuccess;
}

template <class... A, size_t... I>
std::tuple<std::decay_t<A>...> read_arguments(void** args, std::index_sequence<I...>) {
  return std::tuple<std::decay_t<A>...>(*static_cast<std::decay_t<A>*>(args[I])...);
}

template <class... A>
cudaError_t emulate_launch(void (*kernel)(A...), void** args, LaunchShape shape, Work& work,
                           std::string& message) {
  auto values = read_arguments<A...>(args, std::index_sequence_for<A...>{});
  cudaError_t error = cudaSuccess;
  size_t index = 0;
  std::apply(
      [&](auto&... value) {
        ((error = error == cudaSuccess ? translate(value, index++, message) : error), ...);
      },
      values);
  if (error != cudaSuccess) return error;
  work = [kernel, values, shape] {
    grid_shape = shape.grid;
    block_shape = shape.block;
    for (unsigned bz = 0; bz < shape.grid.z; ++bz)
      for (unsigned by = 0; by < shape.grid.y; ++by)
        for (unsigned bx = 0; bx < shape.grid.x; ++bx)
          for (unsigned tz = 0; tz < shape.block.z; ++tz)
            for (unsigned ty = 0; ty < shape.block.y; ++ty)
              for (unsigned tx = 0; tx < shape.block.x; ++tx) {
                block_index = {bx, by, bz};
                thread_index = {tx, ty, tz};
                std::apply(kernel, values);
              }
  };
  return cudaSuccess;
}

}  // namespace ccscope::standin::emulation

// Registers `kernel` (an extern "C" __global__ function of the included
// source) under its name.
#define CCSCOPE_EMULATE_KERNEL(kernel)                                                     \
  [[maybe_unused]] static const bool ccscope_emulated_##kernel = [] {                      \
    ::ccscope::standin::register_kernel_emulation(                                         \
        #kernel, [](void** args, ::ccscope::standin::LaunchShape shape,                    \
                    ::ccscope::standin::Work& work, std::string& message) {                \
          return ::ccscope::standin::emulation::emulate_launch(&kernel, args, shape, work, \
                                                               message);                   \
        });                                                                                \
    return true;                                                                           \
  }()
