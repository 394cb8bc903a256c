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

// SCAN_MAX_N and SCAN_SHARED, the scan's limits, are common.cuh's (mamba2.cu's too).

// `c[t, d] = b[d] + sum_j w[d, j] x[t - K + 1 + j, d]` (negative times left out), then
// `xs = silu(c)`; element i = (s, t, d) of (bsz, T, Di). Launch: 1-D, any shape; thread i
// handles elements i, i + G, ... (G the grid's threads), each summing its K taps in order.
extern "C" __global__ void mamba1_conv_fwd(const float* __restrict__ x, const float* __restrict__ w,
                                           const float* __restrict__ b, float* __restrict__ c,
                                           float* __restrict__ xs, long long rows, int time, int di, int k) {
    for (long long i = first_index(); i < rows * di; i += grid_stride()) {
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
        xs[i] = acc * sigmoid_f(acc);
    }
}

// The conv output's gradient `g_c = g_xs silu'(c)`, then the pre-conv input's
// `g_x[t, d] = sum_j w[d, j] g_c[t + K - 1 - j, d]` (times at or past T left out) is
// `mamba1_conv_bwd_x`; this kernel writes g_c. Launch: 1-D, any shape (as mamba1_conv_fwd).
extern "C" __global__ void mamba1_conv_bwd_gc(const float* __restrict__ c, const float* __restrict__ g_xs,
                                              float* __restrict__ g_c, long long n) {
    for (long long i = first_index(); i < n; i += grid_stride()) {
        g_c[i] = g_xs[i] * silu_grad_f(c[i]);
    }
}

// `g_x[t, d] = sum_j w[d, j] g_c[t + K - 1 - j, d]`, overwritten; the taps in order of j.
// Launch: 1-D, any shape (as mamba1_conv_fwd).
extern "C" __global__ void mamba1_conv_bwd_x(const float* __restrict__ g_c, const float* __restrict__ w,
                                             float* __restrict__ g_x, long long rows, int time, int di, int k) {
    for (long long i = first_index(); i < rows * di; i += grid_stride()) {
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
    ChunkColumn col;
    if (!chunk_column(di, rows, rows_per_chunk, &col)) {
        return;
    }
    long long d = col.j;
    float* out = part + col.c * (long long)(k + 1) * di + d;
    for (int j = 0; j <= k; ++j) {
        float acc = 0.0f;
        for (long long row = col.r0; row < col.r1; ++row) {
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
    for (long long i = first_index(); i < (long long)(k + 1) * di; i += grid_stride()) {
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

// The scan's inputs and sizes, as every scan kernel takes them: common.cuh's and the gate's z.
struct M1Scan : ScanIn {
    const float* z;
};

// Step `row` (element i) of channel d: `h <- exp(dt A) h + (dt x) B`, each state element by
// m1_step; the forward's update and the backward's recomputation.
__device__ __forceinline__ void m1_update(const M1Scan& p, long long row, long long i, long long d, float* h) {
    float dtv = p.dt[i], dtx = dtv * p.x[i], e;
    for (int j = 0; j < p.n; ++j) {
        h[j] = m1_step(dtv, p.a[d * p.n + j], h[j], dtx, p.bc[row * p.n + j], &e);
    }
}

// The selective scan, gated: `h_t = exp(dt_t A) h_{t-1} + dt_t Bc_t x_t` from h = 0,
// `out_t = (Cc_t . h_t + D x_t) silu(z_t)`, and the state before step c Q into ckpt[s, c].
// Launch: grid (ceil(Di / B), bsz), block (B) 1-D, N <= SCAN_MAX_N; thread (d, s) runs channel
// d of sequence s over all T steps and its N states in order, in registers / local memory.
extern "C" __global__ void mamba1_scan_fwd(const float* __restrict__ x, const float* __restrict__ dt,
                                           const float* __restrict__ a, const float* __restrict__ bc,
                                           const float* __restrict__ cc, const float* __restrict__ dsk,
                                           const float* __restrict__ z, float* __restrict__ out,
                                           float* __restrict__ ckpt, int time, int di, int n, int q) {
    M1Scan p = {{x, dt, a, bc, cc, dsk, time, di, n, q}, z};
    long long d = first_index();
    auto update = [&](long long row, long long i, float* h) { m1_update(p, row, i, d, h); };
    auto gated = [&](long long row, long long i, const float* h) {
        float y = dsk[d] * x[i];
        for (int j = 0; j < n; ++j) {
            y = fmaf(cc[row * n + j], h[j], y);
        }
        out[i] = y * (z[i] * sigmoid_f(z[i]));
    };
    scan_fwd_walk(ckpt, time, di, n, q, update, gated);
}

// The per-thread running values of the scan backward of one channel.
struct M1Carry {
    float g[SCAN_MAX_N];   // the carry a_{t+1} G_{t+1}, zero before the last step
    float ga[SCAN_MAX_N];  // sum over t of G dt a_t h_{t-1}, the gradient of A[d, :]
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
    float sz = sigmoid_f(zv);
    float gy = g_out[i] * (zv * sz);
    g_z[i] = g_out[i] * y * silu_grad_f(zv);
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

// The scan backward for the output gradient g_out (of the gated output): walks the chunks of
// Q steps from the last, recomputing each chunk's states from ckpt into the workspace hs
// (bsz, Q, N, Di), then walking the chunk's steps back. Overwrites g_x (of the scan input x),
// g_dt, g_z (bsz, T, Di); writes the channel-block partials of g_Cc, g_Bc into part_bc (see
// scan_block_terms) and each thread's sums over time of g_A[d, :] and g_D[d] into part_a
// (bsz, Di, N) and part_d (bsz, Di), for mamba1_scan_bwd_final. Launch: as mamba1_scan_fwd,
// with B * 2 N <= SCAN_SHARED; threads past Di (d >= Di) take part in the barriers with zero
// terms. Thread (d, s) owns channel d of sequence s.
extern "C" __global__ void mamba1_scan_bwd(const float* __restrict__ x, const float* __restrict__ dt,
                                           const float* __restrict__ a, const float* __restrict__ bc,
                                           const float* __restrict__ cc, const float* __restrict__ dsk,
                                           const float* __restrict__ z, const float* __restrict__ g_out,
                                           const float* __restrict__ ckpt, float* __restrict__ hs,
                                           float* __restrict__ g_x, float* __restrict__ g_dt, float* __restrict__ g_z,
                                           float* __restrict__ part_bc, float* __restrict__ part_a,
                                           float* __restrict__ part_d, int time, int di, int n, int q) {
    __shared__ float sh[SCAN_SHARED];
    M1Scan p = {{x, dt, a, bc, cc, dsk, time, di, n, q}, z};
    long long d = first_index(), s = blockIdx.y;
    bool valid = d < di;
    M1Carry k;
    for (int j = 0; j < n; ++j) {
        k.g[j] = 0.0f;
        k.ga[j] = 0.0f;
    }
    k.gd = 0.0f;
    ScanWalk w = {ckpt, hs, sh, part_bc, s, d, time, di, n, q};
    auto update = [&](long long row, long long i, float* h) { m1_update(p, row, i, d, h); };
    auto step = [&](int t, const float* prev, const float* cur) {
        m1_back_step(p, k, prev, cur, g_out, g_x, g_dt, g_z, sh, s, d, t);
    };
    scan_bwd_walk(w, valid, update, step);
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
    scan_final_bc(part_bc, g_bc, g_cc, rows, blocks, n);
    for (long long i = first_index(); i < (long long)di * n + di; i += grid_stride()) {
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
