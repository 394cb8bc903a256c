// The device helpers every kernel file shares. Each kernel file's program is this header
// followed by the file (src/kernels.rs for NVRTC, the shim's `#include`s for g++), so a
// helper here is the one definition of it: the activations, indexing and reductions that
// several files need round and sum exactly alike.
//
// Functions are `inline` or templates so that a program that leaves one unused compiles
// without a warning in the shim.

// The first element of this thread and the grid-wide stride of a 1-D grid-stride loop.
__device__ __forceinline__ long long first_index() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ long long grid_stride() { return (long long)gridDim.x * blockDim.x; }

// `f(i)` for this thread's elements i, i + G, i + 2G, ... below n (G the grid's threads).
template <class F>
__device__ __forceinline__ void grid_loop(long long n, F f) {
    for (long long i = first_index(); i < n; i += grid_stride()) {
        f(i);
    }
}

// The logistic function without overflow: `1 / (1 + e^-x)` for x >= 0, else `e^x / (1 + e^x)`.
__device__ __forceinline__ float sigmoid_f(float x) {
    if (x >= 0.0f) {
        return 1.0f / (1.0f + expf(-x));
    }
    float e = expf(x);
    return e / (1.0f + e);
}

__device__ __forceinline__ float silu_f(float x) { return x * sigmoid_f(x); }

// `silu'(x) = s (1 + x (1 - s))`, `s = sigmoid(x)`.
__device__ __forceinline__ float silu_grad_f(float x) {
    float s = sigmoid_f(x);
    return s * (1.0f + x * (1.0f - s));
}

// The first stage of a column sum in chunks of `rows_per_chunk` rows, on the grid
// (ceil(width / B), chunks): this thread's column j, its chunk c (blockIdx.y) and the chunk's
// rows [r0, r1). False for a thread past the width, which has nothing to sum.
struct ChunkColumn {
    long long j, c, r0, r1;
};
__device__ __forceinline__ bool chunk_column(long long width, long long rows, int rows_per_chunk, ChunkColumn* cc) {
    long long j = first_index(), c = blockIdx.y, r0 = c * rows_per_chunk;
    *cc = {j, c, r0, r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows};
    return j < width;
}

// The sum over the block of each thread's `v`: a shared-memory tree (pairs at distance B/2,
// then B/4, ...), so the bits depend on the block size only. Every thread of the block must
// call it (it holds barriers) and gets the total. blockDim.x must be a power of two
// (<= 1024); y = z = 1.
template <class T>
__device__ T block_sum(T v) {
    __shared__ T s[1024];
    unsigned t = threadIdx.x;
    s[t] = v;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (t < h) {
            s[t] += s[t + h];
        }
        __syncthreads();
    }
    T total = s[0];
    // Every thread has read the total before any call writes `s` again.
    __syncthreads();
    return total;
}

// The scans of mamba1.cu and mamba2.cu: the most state indices a scan thread holds in its
// local arrays, and the floats of the scan backward's shared array (32 KiB, under the 48 KiB
// static limit): a block needs 2 N of them per thread, so blockDim.x * 2 N <= SCAN_SHARED.
#define SCAN_MAX_N 64
#define SCAN_SHARED 8192

// Both scans' inputs and sizes, as every scan kernel takes them: x (bsz, T, Di), dt, A, Bc and
// Cc (bsz, T, N), the skip weights D; each file's scan adds what is its own.
struct ScanIn {
    const float* x;
    const float* dt;
    const float* a;
    const float* bc;
    const float* cc;
    const float* dsk;
    int time, di, n, q;
};

// Both scans' forward, at step t of channel d of sequence s: at a chunk start (t % q == 0),
// the state before the step (`h`, N values) into ckpt[s, t / q] ((bsz, ceil(T / Q), N, Di)).
__device__ inline void scan_save_ckpt(float* __restrict__ ckpt, const float* h, long long s, long long d, int t,
                                      int time, int di, int n, int q) {
    if (t % q != 0) {
        return;
    }
    long long chunks = (time + q - 1) / q;
    float* ck = ckpt + ((s * chunks + t / q) * n) * di + d;
    for (int j = 0; j < n; ++j) {
        ck[(long long)j * di] = h[j];
    }
}

// Both scans' backward: the block's sums over its threads (channels) of the 2 N terms in
// `sh`, thread order, into part_bc[s, t, blockIdx.x, :] ((bsz, T, ceil(Di / B), 2 N): g_Cc
// terms, then g_Bc). Every thread of the block calls it (two barriers).
__device__ inline void scan_block_terms(float* sh, float* part_bc, long long s, int t, int time, int n) {
    __syncthreads();
    int nb = blockDim.x;
    float* out = part_bc + ((s * time + t) * gridDim.x + blockIdx.x) * 2LL * n;
    for (int j = threadIdx.x; j < 2 * n; j += nb) {
        float acc = 0.0f;
        for (int u = 0; u < nb; ++u) {
            acc += sh[j * nb + u];
        }
        out[j] = acc;
    }
    // Every sum has read `sh` before the next step writes it.
    __syncthreads();
}

// Both scans' second stage for Bc and Cc: over the channel blocks in order,
// `g_Cc[s, t, j] = sum_b part_bc[s, t, b, j]` and `g_Bc[s, t, j] = sum_b part_bc[s, t, b, N + j]`
// (overwritten), over the grid-stride loop of the rows 2 N elements.
__device__ inline void scan_final_bc(const float* __restrict__ part_bc, float* __restrict__ g_bc,
                                     float* __restrict__ g_cc, long long rows, int blocks, int n) {
    grid_loop(rows * 2 * n, [&](long long i) {
        long long row = i / (2 * n);
        int j = (int)(i % (2 * n));
        float acc = 0.0f;
        for (int b = 0; b < blocks; ++b) {
            acc += part_bc[(row * blocks + b) * 2 * n + j];
        }
        if (j < n) {
            g_cc[row * n + j] = acc;
        } else {
            g_bc[row * n + j - n] = acc;
        }
    });
}

// Where a scan backward's thread walks: its sequence s and channel d, the checkpoints
// (bsz, ceil(T / Q), N, Di), the recomputed states hs (bsz, Q, N, Di), the block's shared
// terms and their partial sums part_bc (see scan_block_terms).
struct ScanWalk {
    const float* ckpt;
    float* hs;
    float* sh;
    float* part_bc;
    long long s, d;
    int time, di, n, q;
};

// Both scans' forward for thread (d, s) of the grid (ceil(Di / B), bsz): the N states from
// zero, each chunk's first state saved (scan_save_ckpt), then per step `update(row, i, h)`,
// the state update the backward recomputes with, and `out(row, i, h)` from the new states
// (row = s T + t, i = row Di + d).
template <class U, class O>
__device__ void scan_fwd_walk(float* __restrict__ ckpt, int time, int di, int n, int q, U update, O out) {
    long long d = first_index(), s = blockIdx.y;
    if (d >= di) {
        return;
    }
    float h[SCAN_MAX_N];
    for (int j = 0; j < n; ++j) {
        h[j] = 0.0f;
    }
    for (int t = 0; t < time; ++t) {
        scan_save_ckpt(ckpt, h, s, d, t, time, di, n, q);
        long long row = s * time + t, i = row * di + d;
        update(row, i, h);
        out(row, i, h);
    }
}

// Recomputes chunk c of the walk's thread from its checkpoint by the forward's `update`: the
// state after step t0 + u into hs[s, u, :, d] ((bsz, Q, N, Di)).
template <class U>
__device__ void scan_recompute(const ScanWalk& w, int c, U update) {
    int n = w.n, di = w.di, q = w.q;
    long long chunks = (w.time + q - 1) / q;
    const float* ck = w.ckpt + ((w.s * chunks + c) * n) * di + w.d;
    float h[SCAN_MAX_N];
    for (int j = 0; j < n; ++j) {
        h[j] = ck[(long long)j * di];
    }
    int t0 = c * q, t1 = t0 + q < w.time ? t0 + q : w.time;
    for (int t = t0; t < t1; ++t) {
        long long row = w.s * w.time + t;
        update(row, row * di + w.d, h);
        float* out = w.hs + ((w.s * q + (t - t0)) * n) * di + w.d;
        for (int j = 0; j < n; ++j) {
            out[(long long)j * di] = h[j];
        }
    }
}

// Both scans' backward walk: the chunks of Q steps from the last, each recomputed from its
// checkpoint by the forward's `update` (scan_recompute) then walked back step by step
// (`step(t, prev, cur)`, the states before and after step t, stride Di), each step's terms
// summed by scan_block_terms. A thread past Di (`!valid`) writes zero terms, so that it takes
// part in every barrier.
template <class U, class S>
__device__ void scan_bwd_walk(const ScanWalk& w, bool valid, U update, S step) {
    int n = w.n, q = w.q, chunks = (w.time + q - 1) / q;
    for (int c = chunks - 1; c >= 0; --c) {
        int t0 = c * q, t1 = t0 + q < w.time ? t0 + q : w.time;
        if (valid) {
            scan_recompute(w, c, update);
        }
        for (int t = t1 - 1; t >= t0; --t) {
            if (valid) {
                const float* cur = w.hs + ((w.s * q + (t - t0)) * n) * w.di + w.d;
                const float* prev =
                    t == t0 ? w.ckpt + ((w.s * chunks + c) * n) * w.di + w.d : cur - (long long)n * w.di;
                step(t, prev, cur);
            } else {
                for (int j = 0; j < 2 * n; ++j) {
                    w.sh[j * blockDim.x + threadIdx.x] = 0.0f;
                }
            }
            scan_block_terms(w.sh, w.part_bc, w.s, t, w.time, n);
        }
    }
}
