// The CPU shim: what a kernel file of `kernels/` needs from CUDA, defined for g++ (C++20), so
// that the same source runs on the CPU. A kernel TU includes this header, then one `.cu` file,
// then declares its launchers with SHIM_LAUNCHER.
//
// Execution model (launch.cpp): blocks run one after another; within a block every thread is
// an OS thread, all running concurrently, and `__syncthreads()` is a std::barrier they all
// meet at. So a barrier orders memory exactly as on a GPU (the barrier's arrive/wait is a
// release/acquire pair), and a thread that reads shared memory without one races as it would
// on a GPU, instead of silently seeing the value a sequential emulation would give it.
//
// `__shared__` is `static`: one instance per kernel, not per block. That is exact because
// only one block runs at a time (launches are serialized by a process-wide lock, and a
// block's threads all pass the block-end barrier before any thread starts the next block),
// and because CUDA gives a block's shared memory no initial value, so no kernel may read it
// before writing it; a block cannot observe the previous block's leftovers any more than on a
// GPU without a bug the GPU would have too.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

// Qualifiers. `__device__` functions get internal linkage: each kernel file is its own TU
// (as it is its own NVRTC program), so same-named helpers in two files never collide.
#define __global__
#define __device__ static
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ static
// g++ knows `__restrict__` already.

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// Set by the launcher for each thread it runs; thread-local so every OS thread sees its own.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

namespace shim {
// Waits at the block's barrier; `line` identifies the call site, so that threads meeting at
// different `__syncthreads()` (undefined behaviour on a GPU) abort the launch with a message.
void sync_threads(int line);

// The launch dimensions as the Rust side passes them (C layout).
struct Dim {
    unsigned x, y, z;
};

// Runs `body` for every thread of every block; aborts with a message for a block of more
// than 1024 threads or an empty grid or block.
void launch_impl(const char* name, Dim grid, Dim block, void (*body)(void*), void* ctx);

template <class F>
void launch(const char* name, Dim grid, Dim block, F f) {
    launch_impl(name, grid, block, [](void* c) { (*static_cast<F*>(c))(); }, &f);
}
}  // namespace shim

#define __syncthreads() ::shim::sync_threads(__LINE__)

// The device math NVRTC provides without a header, where the C library lacks it. The rest
// (`expf`, `log1pf`, `sqrtf`, `fmaxf`, `fabsf`, `sqrt`, ...) are <cmath>'s, i.e. glibc's,
// the same functions Rust's `f32::exp`, `ln_1p`, ... call on Linux.
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
// The reinterpreting casts between a float and its bit pattern (kernels/autocast.cu).
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }

#define SHIM_STRIP(...) __VA_ARGS__
// `SHIM_LAUNCHER(k, (T a, U b), (a, b))` defines `extern "C" void shim_launch_k(grid, block,
// T a, U b)`, which runs kernel `k` over the grid.
#define SHIM_LAUNCHER(kernel, PARAMS, ARGS) \
    extern "C" void shim_launch_##kernel(::shim::Dim grid, ::shim::Dim block, SHIM_STRIP PARAMS) { \
        ::shim::launch(#kernel, grid, block, [=] { kernel ARGS; }); \
    }
