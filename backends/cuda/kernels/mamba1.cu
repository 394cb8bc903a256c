// The Mamba-1 mixer's sequence kernels (MODEL.md, "Temporal mixer, Mamba-1", steps 2 and 6;
// BACKWARD.md, "Small pieces" for the convolution and "Mamba-1" for the scan), over a batch of
// `bsz` sequences of T steps, every buffer row-major:
//
//   x, c, xs, dt, z, out   (bsz, T, Di)     conv input, conv output before / after SiLU, ...
//   conv_w (Di, K), conv_b (Di)             PyTorch's conv1d.weight (Di, 1, K) and bias
//   A (Di, N), D (Di)                       A = -exp(A_log), the skip weights
//   Bc, Cc (bsz, T, N)                      per step, shared by the Di channels
//   ckpt (bsz, ceil(T / Q), N, Di)          the state before step c Q, for every chunk c
//
// Determinism: no atomics. Every sum over channels, time or sequences is either one thread's
// loop in a fixed order or per-block partials (their in-block order fixed by thread index)
// summed by a second kernel in block order, so the bits depend on the sizes and launch shape
// only. The scan's state update is one expression (`m1_step`, an explicit fmaf so that NVRTC's
// contraction cannot make two copies differ), used by the forward and by the backward's
// recomputation, which therefore reproduces the forward's states bit for bit: the backward's
// result does not depend on the chunk length Q.

// The most state indices a scan thread holds in its local arrays.
#define M1_MAX_N 64
// Floats of the scan backward's shared array (32 KiB, under the 48 KiB static limit): a block
// needs 2 N of them per thread, so blockDim.x * 2 N <= M1_SHARED.
#define M1_SHARED 8192

// The logistic function without overflow, as act.cu's.
__device__ __forceinline__ float m1_sigmoid(float v) {
    if (v >= 0.0f) {
        return 1.0f / (1.0f + expf(-v));
    }
    float e = expf(v);
    return e / (1.0f + e);
}

// `silu'(v) = s (1 + v (1 - s))`.
__device__ __forceinline__ float m1_silu_grad(float v) {
    float s = m1_sigmoid(v);
    return s * (1.0f + v * (1.0f - s));
}

__device__ __forceinline__ long long m1_first() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ long long m1_stride() { return (long long)gridDim.x * blockDim.x; }

// `c[t, d] = b[d] + sum_j w[d, j] x[t - K + 1 + j, d]` (negative times left out), then
// `xs = silu(c)`; element i = (s, t, d) of (bsz, T, Di). Launch: 1-D, any shape; thread i
// handles elements i, i + G, ... (G the grid's threads), each summing its K taps in order.
extern "C" __global__ void mamba1_conv_fwd(const float* __restrict__ x, const float* __restrict__ w,
                                           const float* __restrict__ b, float* __restrict__ c,
                                           float* __restrict__ xs, long long rows, int time, int di, int k) {
    for (long long i = m1_first(); i < rows * di; i += m1_stride()) {
        int d = (int)(i % di);
        int t = (int)(i / di % time);
        float acc = b[d];
        for (int j = 0; j < k; ++j) {
            int src = t - (k - 1) + j;
            if (src >= 0) {
                acc = fmaf(w[(long long)d * k + j], x[i + (long long)(src - t) * di], acc);
            }
        }
        c[i] = acc;
        xs[i] = acc * m1_sigmoid(acc);
    }
}

// The conv output's gradient `g_c = g_xs silu'(c)`, then the pre-conv input's
// `g_x[t, d] = sum_j w[d, j] g_c[t + K - 1 - j, d]` (times at or past T left out) is
// `mamba1_conv_bwd_x`; this kernel writes g_c. Launch: 1-D, any shape (as mamba1_conv_fwd).
extern "C" __global__ void mamba1_conv_bwd_gc(const float* __restrict__ c, const float* __restrict__ g_xs,
                                              float* __restrict__ g_c, long long n) {
    for (long long i = m1_first(); i < n; i += m1_stride()) {
        g_c[i] = g_xs[i] * m1_silu_grad(c[i]);
    }
}

// `g_x[t, d] = sum_j w[d, j] g_c[t + K - 1 - j, d]`, overwritten; the taps in order of j.
// Launch: 1-D, any shape (as mamba1_conv_fwd).
extern "C" __global__ void mamba1_conv_bwd_x(const float* __restrict__ g_c, const float* __restrict__ w,
                                             float* __restrict__ g_x, long long rows, int time, int di, int k) {
    for (long long i = m1_first(); i < rows * di; i += m1_stride()) {
        int d = (int)(i % di);
        int t = (int)(i / di % time);
        float acc = 0.0f;
        for (int j = 0; j < k; ++j) {
            int dst = t + (k - 1) - j;
            if (dst < time) {
                acc = fmaf(w[(long long)d * k + j], g_c[i + (long long)(dst - t) * di], acc);
            }
        }
        g_x[i] = acc;
    }
}

// First stage of the conv's parameter gradients: for chunk r of `rows_per_chunk` rows of the
// (bsz T, Di) matrices, `part[r, j, d] = sum_rows g_c[row, d] x[row - K + 1 + j, d]` (same
// sequence, non-negative time) for j < K and `part[r, K, d] = sum_rows g_c[row, d]`, rows in
// order. Launch: grid (ceil(Di / B), chunks), block (B), any B <= 1024; the grid's thread j in
// x owns channel j of chunk blockIdx.y.
extern "C" __global__ void mamba1_conv_bwd_params_partial(const float* __restrict__ x, const float* __restrict__ g_c,
                                                          float* __restrict__ part, long long rows, int time, int di,
                                                          int k, int rows_per_chunk) {
    long long d = m1_first();
    long long r = blockIdx.y;
    if (d >= di) {
        return;
    }
    long long r0 = r * rows_per_chunk;
    long long r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
    float* out = part + r * (long long)(k + 1) * di + d;
    for (int j = 0; j <= k; ++j) {
        float acc = 0.0f;
        for (long long row = r0; row < r1; ++row) {
            float g = g_c[row * di + d];
            int src = (int)(row % time) - (k - 1) + j;
            if (j == k) {
                acc += g;
            } else if (src >= 0) {
                acc = fmaf(g, x[(row + src - row % time) * di + d], acc);
            }
        }
        out[(long long)j * di] = acc;
    }
}

// Second stage: `g_w[d, j] += sum_r part[r, j, d]`, `g_b[d] += sum_r part[r, K, d]`, chunks in
// order. Launch: 1-D, any shape; thread i handles elements i, i + G, ... of the (K + 1) Di.
extern "C" __global__ void mamba1_conv_bwd_params_final(const float* __restrict__ part, float* __restrict__ g_w,
                                                        float* __restrict__ g_b, int chunks, int di, int k) {
    for (long long i = m1_first(); i < (long long)(k + 1) * di; i += m1_stride()) {
        int j = (int)(i / di), d = (int)(i % di);
        float acc = 0.0f;
        for (int r = 0; r < chunks; ++r) {
            acc += part[(long long)r * (k + 1) * di + i];
        }
        if (j == k) {
            g_b[d] += acc;
        } else {
            g_w[(long long)d * k + j] += acc;
        }
    }
}

// One state element's step: the decay `e = exp(dt a)` and `h <- e h + (dt x) B`. The one
// expression of the state update, shared by the forward and the backward's recomputation.
__device__ __forceinline__ float m1_step(float dt, float a, float h, float dtx, float bn, float* e) {
    *e = expf(dt * a);
    return fmaf(*e, h, dtx * bn);
}

// The scan's inputs and sizes, as every scan kernel takes them.
struct M1Scan {
    const float* x;
    const float* dt;
    const float* a;
    const float* bc;
    const float* cc;
    const float* dsk;
    const float* z;
    int time, di, n, q;
};

// The selective scan, gated: `h_t = exp(dt_t A) h_{t-1} + dt_t Bc_t x_t` from h = 0,
// `out_t = (Cc_t . h_t + D x_t) silu(z_t)`, and the state before step c Q into ckpt[s, c].
// Launch: grid (ceil(Di / B), bsz), block (B) 1-D, N <= M1_MAX_N; thread (d, s) runs channel
// d of sequence s over all T steps and its N states in order, in registers / local memory.
extern "C" __global__ void mamba1_scan_fwd(const float* __restrict__ x, const float* __restrict__ dt,
                                           const float* __restrict__ a, const float* __restrict__ bc,
                                           const float* __restrict__ cc, const float* __restrict__ dsk,
                                           const float* __restrict__ z, float* __restrict__ out,
                                           float* __restrict__ ckpt, int time, int di, int n, int q) {
    long long d = m1_first();
    long long s = blockIdx.y;
    if (d >= di) {
        return;
    }
    float h[M1_MAX_N];
    for (int j = 0; j < n; ++j) {
        h[j] = 0.0f;
    }
    long long chunks = (time + q - 1) / q;
    for (int t = 0; t < time; ++t) {
        if (t % q == 0) {
            float* ck = ckpt + ((s * chunks + t / q) * n) * di + d;
            for (int j = 0; j < n; ++j) {
                ck[(long long)j * di] = h[j];
            }
        }
        long long row = s * time + t, i = row * di + d;
        float dtv = dt[i], xv = x[i], dtx = dtv * xv, y = dsk[d] * xv, e;
        for (int j = 0; j < n; ++j) {
            h[j] = m1_step(dtv, a[d * n + j], h[j], dtx, bc[row * n + j], &e);
            y = fmaf(cc[row * n + j], h[j], y);
        }
        out[i] = y * (z[i] * m1_sigmoid(z[i]));
    }
}

// Recomputes steps t0..t1 of channel d of sequence s from its checkpoint: the state after
// step t0 + u into hs[s, u, :, d] ((bsz, Q, N, Di)), each by m1_step as in the forward.
__device__ void m1_recompute(const M1Scan& p, const float* __restrict__ ckpt, float* __restrict__ hs, long long s,
                             long long d, int c) {
    int n = p.n, di = p.di;
    long long chunks = (p.time + p.q - 1) / p.q;
    const float* ck = ckpt + ((s * chunks + c) * n) * di + d;
    float h[M1_MAX_N];
    for (int j = 0; j < n; ++j) {
        h[j] = ck[(long long)j * di];
    }
    int t0 = c * p.q, t1 = t0 + p.q < p.time ? t0 + p.q : p.time;
    for (int t = t0; t < t1; ++t) {
        long long row = s * p.time + t, i = row * di + d;
        float dtv = p.dt[i], dtx = dtv * p.x[i], e;
        float* out = hs + ((s * p.q + (t - t0)) * n) * di + d;
        for (int j = 0; j < n; ++j) {
            h[j] = m1_step(dtv, p.a[d * n + j], h[j], dtx, p.bc[row * n + j], &e);
            out[(long long)j * di] = h[j];
        }
    }
}

// The per-thread running values of the scan backward of one channel.
struct M1Carry {
    float g[M1_MAX_N];   // the carry a_{t+1} G_{t+1}, zero before the last step
    float ga[M1_MAX_N];  // sum over t of G dt a_t h_{t-1}, the gradient of A[d, :]
    float gd;            // sum over t of g_y x, the gradient of D[d]
};

// One step t of the scan backward of channel d (valid thread), given the states before and
// after it (`prev`, `cur`, stride Di): the gate's backward, then BACKWARD.md's Mamba-1 walk;
// writes g_x, g_dt, g_z at (s, t, d) and the channel's terms of g_Cc_t (`g_y h_t`) and g_Bc_t
// (`G dt x`) into `sh[j B + tid]` and `sh[(N + j) B + tid]`.
__device__ void m1_back_step(const M1Scan& p, M1Carry& k, const float* prev, const float* cur, const float* g_out,
                             float* g_x, float* g_dt, float* g_z, float* sh, long long s, long long d, int t) {
    int n = p.n, nb = blockDim.x;
    unsigned tid = threadIdx.x;
    long long row = s * p.time + t, i = row * p.di + d;
    float dtv = p.dt[i], xv = p.x[i], zv = p.z[i];
    float y = p.dsk[d] * xv;
    for (int j = 0; j < n; ++j) {
        y = fmaf(p.cc[row * n + j], cur[(long long)j * p.di], y);
    }
    float sz = m1_sigmoid(zv);
    float gy = g_out[i] * (zv * sz);
    g_z[i] = g_out[i] * y * m1_silu_grad(zv);
    float sx = 0.0f, sd = 0.0f, dtx = dtv * xv;
    for (int j = 0; j < n; ++j) {
        float aj = p.a[d * n + j], e = expf(dtv * aj);
        float gg = fmaf(gy, p.cc[row * n + j], k.g[j]);
        float qv = gg * (e * prev[(long long)j * p.di]);
        sx = fmaf(gg, p.bc[row * n + j], sx);
        sd = fmaf(qv, aj, sd);
        k.ga[j] = fmaf(qv, dtv, k.ga[j]);
        k.g[j] = e * gg;
        sh[j * nb + tid] = gy * cur[(long long)j * p.di];
        sh[(n + j) * nb + tid] = gg * dtx;
    }
    g_x[i] = fmaf(p.dsk[d], gy, dtv * sx);
    g_dt[i] = fmaf(xv, sx, sd);
    k.gd = fmaf(gy, xv, k.gd);
}

// The block's sums over its threads (channels) of the 2 N terms in `sh`, thread order, into
// part_bc[s, t, blockIdx.x, :] ((bsz, T, ceil(Di / B), 2 N): g_Cc terms, then g_Bc). Every
// thread of the block calls it (two barriers).
__device__ void m1_block_terms(float* sh, float* part_bc, long long s, int t, int time, int n) {
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

// The scan backward for the output gradient g_out (of the gated output): walks the chunks of
// Q steps from the last, recomputing each chunk's states from ckpt into the workspace hs
// (bsz, Q, N, Di), then walking the chunk's steps back. Overwrites g_x (of the scan input x),
// g_dt, g_z (bsz, T, Di); writes the channel-block partials of g_Cc, g_Bc into part_bc (see
// m1_block_terms) and each thread's sums over time of g_A[d, :] and g_D[d] into part_a
// (bsz, Di, N) and part_d (bsz, Di), for mamba1_scan_bwd_final. Launch: as mamba1_scan_fwd,
// with B * 2 N <= M1_SHARED; threads past Di (d >= Di) take part in the barriers with zero
// terms. Thread (d, s) owns channel d of sequence s.
extern "C" __global__ void mamba1_scan_bwd(const float* __restrict__ x, const float* __restrict__ dt,
                                           const float* __restrict__ a, const float* __restrict__ bc,
                                           const float* __restrict__ cc, const float* __restrict__ dsk,
                                           const float* __restrict__ z, const float* __restrict__ g_out,
                                           const float* __restrict__ ckpt, float* __restrict__ hs,
                                           float* __restrict__ g_x, float* __restrict__ g_dt, float* __restrict__ g_z,
                                           float* __restrict__ part_bc, float* __restrict__ part_a,
                                           float* __restrict__ part_d, int time, int di, int n, int q) {
    __shared__ float sh[M1_SHARED];
    M1Scan p = {x, dt, a, bc, cc, dsk, z, time, di, n, q};
    long long d = m1_first(), s = blockIdx.y;
    bool valid = d < di;
    M1Carry k;
    for (int j = 0; j < n; ++j) {
        k.g[j] = 0.0f;
        k.ga[j] = 0.0f;
    }
    k.gd = 0.0f;
    int chunks = (time + q - 1) / q;
    for (int c = chunks - 1; c >= 0; --c) {
        int t0 = c * q, t1 = t0 + q < time ? t0 + q : time;
        if (valid) {
            m1_recompute(p, ckpt, hs, s, d, c);
        }
        for (int t = t1 - 1; t >= t0; --t) {
            if (valid) {
                const float* cur = hs + ((s * q + (t - t0)) * n) * di + d;
                const float* prev = t == t0 ? ckpt + ((s * chunks + c) * n) * di + d : cur - (long long)n * di;
                m1_back_step(p, k, prev, cur, g_out, g_x, g_dt, g_z, sh, s, d, t);
            } else {
                for (int j = 0; j < 2 * n; ++j) {
                    sh[j * blockDim.x + threadIdx.x] = 0.0f;
                }
            }
            m1_block_terms(sh, part_bc, s, t, time, n);
        }
    }
    if (valid) {
        for (int j = 0; j < n; ++j) {
            part_a[(s * di + d) * n + j] = k.ga[j];
        }
        part_d[s * di + d] = k.gd;
    }
}

// Second stage of the scan backward: over the channel blocks in order,
// `g_Cc[s, t, j] = sum_b part_bc[s, t, b, j]` and `g_Bc[s, t, j] = sum_b part_bc[s, t, b, N + j]`
// (overwritten); over the sequences in order, `g_A[d, j] += sum_s part_a[s, d, j]` and
// `g_D[d] += sum_s part_d[s, d]`. Launch: 1-D, any shape; thread i handles elements i, i + G,
// ... of the bsz T 2 N gradients of Bc and Cc, then of the Di N + Di of A and D.
extern "C" __global__ void mamba1_scan_bwd_final(const float* __restrict__ part_bc, const float* __restrict__ part_a,
                                                 const float* __restrict__ part_d, float* __restrict__ g_bc,
                                                 float* __restrict__ g_cc, float* __restrict__ g_a,
                                                 float* __restrict__ g_d, long long rows, int blocks, int seqs,
                                                 int di, int n) {
    for (long long i = m1_first(); i < rows * 2 * n; i += m1_stride()) {
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
    }
    for (long long i = m1_first(); i < (long long)di * n + di; i += m1_stride()) {
        bool is_a = i < (long long)di * n;
        float acc = 0.0f;
        for (int s = 0; s < seqs; ++s) {
            acc += is_a ? part_a[(long long)s * di * n + i] : part_d[(long long)s * di + i - (long long)di * n];
        }
        if (is_a) {
            g_a[i] += acc;
        } else {
            g_d[i - (long long)di * n] += acc;
        }
    }
}
