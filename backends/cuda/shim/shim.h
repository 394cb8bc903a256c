// The CPU shim: what a kernel file of `kernels/` needs from CUDA, defined for g++ (C++20), so
// that the same source runs on the CPU. A kernel TU includes this header, then one `.cu` file,
// then lists its kernels with SHIM_TABLE (the end of this file).
//
// Execution model (launch.cpp): blocks run one after another; within a block every thread is
// a fiber on the launching OS thread, and `__syncthreads()` switches to the next fiber. A
// block runs in phases: every thread runs up to its next barrier (or its end) before any runs
// past it, so memory written before a barrier is seen after it, as on a GPU. Within a phase
// the threads run one after another, in increasing index in even blocks and decreasing in odd
// ones: a thread that reads shared memory another writes in the same phase (a race on a GPU)
// sees the write in some blocks and misses it in others, so the race changes the result
// instead of being hidden by one fixed order.
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
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

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

// Set by the launcher before it resumes each thread's fiber; thread-local because launches
// from different OS threads are serialized but each runs on its own thread.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

namespace shim {
// Waits at the block's barrier; `file` and `line` identify the call site, so that threads
// meeting at different `__syncthreads()` (undefined behaviour on a GPU) abort the launch with
// a message.
void sync_threads(const char* file, int line);

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

#define __syncthreads() ::shim::sync_threads(__FILE__, __LINE__)

// The device math NVRTC provides without a header, where the C library lacks it. The rest
// (`expf`, `log1pf`, `sqrtf`, `fmaxf`, `fabsf`, `sqrt`, ...) are <cmath>'s, i.e. glibc's,
// the same functions Rust's `f32::exp`, `ln_1p`, ... call on Linux.
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
// The reinterpreting casts between a float and its bit pattern (kernels/autocast.cu).
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }

// The generic launcher, the shim's `cuLaunchKernel`: `params[i]` points at the value of the
// kernel's parameter i, as CUDA's `kernelParams` do, so the Rust side (src/exec.rs) builds one
// parameter array for both the shim and a device. Each kernel file lists its kernels with
// SHIM_TABLE / SHIM_ENTRY; an entry carries the kernel's name, its launcher and its signature,
// one letter per parameter (see `code` below), which the Rust side checks every argument list
// against before a launch, so that a list that does not match the kernel fails in the shim
// (and in CI) instead of reading the wrong bytes on a GPU.
namespace shim {
// `name` is the entry's own name, passed back by the caller for the shim's messages.
using Params = void (*)(const char* name, Dim grid, Dim block, void** params);

struct Entry {
    const char* name;
    Params launch;
    const char* signature;
};

// One letter per parameter type: lower case reads, upper case writes (pointers); scalars.
template <class T>
constexpr char code() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, const float*>) return 'f';
    else if constexpr (std::is_same_v<U, float*>) return 'F';
    else if constexpr (std::is_same_v<U, const double*>) return 'd';
    else if constexpr (std::is_same_v<U, double*>) return 'D';
    else if constexpr (std::is_same_v<U, const int*>) return 'i';
    else if constexpr (std::is_same_v<U, int*>) return 'I';
    else if constexpr (std::is_same_v<U, const unsigned short*>) return 'h';
    else if constexpr (std::is_same_v<U, unsigned short*>) return 'H';
    else if constexpr (std::is_same_v<U, int>) return '4';
    else if constexpr (std::is_same_v<U, long long>) return '8';
    else if constexpr (std::is_same_v<U, unsigned>) return 'u';
    else if constexpr (std::is_same_v<U, float>) return 's';
    else if constexpr (std::is_same_v<U, double>) return 'S';
    else static_assert(sizeof(T) == 0, "a kernel parameter type the generic launcher does not know");
}

template <class... A>
struct Signature {
    static constexpr char text[sizeof...(A) + 1] = {code<A>()..., '\0'};
};

template <auto K, class... A, size_t... I>
void run_params(const char* name, Dim grid, Dim block, void** p, void (*)(A...), std::index_sequence<I...>) {
    std::tuple<std::remove_cv_t<A>...> args{*static_cast<std::remove_cv_t<A>*>(p[I])...};
    launch(name, grid, block, [=] { std::apply(K, args); });
}

template <auto K, class... A>
constexpr Entry entry(const char* name, void (*)(A...)) {
    return Entry{name,
                 [](const char* n, Dim grid, Dim block, void** p) {
                     run_params<K>(n, grid, block, p, K, std::index_sequence_for<A...>{});
                 },
                 Signature<A...>::text};
}
}  // namespace shim

// `SHIM_ENTRY(k)`: the table entry of kernel `k`.
#define SHIM_ENTRY(kernel) ::shim::entry<&kernel>(#kernel, &kernel)
// `SHIM_TABLE(file, SHIM_ENTRY(a), SHIM_ENTRY(b), ...)` defines `extern "C" const Entry*
// shim_table_<file>(size_t* n)`, the kernels of one kernel file in src/kernels.rs's order.
#define SHIM_TABLE(file, ...) \
    extern "C" const ::shim::Entry* shim_table_##file(size_t* n) { \
        static const ::shim::Entry table[] = {__VA_ARGS__}; \
        *n = sizeof table / sizeof table[0]; \
        return table; \
    }
