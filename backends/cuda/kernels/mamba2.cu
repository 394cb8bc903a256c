// The Mamba-2 mixer's sequence kernels (MODEL.md, "Temporal mixer, Mamba-2", steps 4 and 5;
// BACKWARD.md, "Mamba-2" and its gated RMSNorm), over a batch of `bsz` sequences of T steps,
// one group, every buffer row-major:
//
//   x, y, g_y              (bsz, T, Di)    Di = nh Pd: channel d is lane d % Pd of head d / Pd
//   dt                     (bsz, T, nh)    one time step per head
//   A, D                   (nh)            A = -exp(A_log), the skip weights
//   Bc, Cc                 (bsz, T, N)     per step, shared by every head (one group)
//   ckpt                   (bsz, ceil(T / Q), N, Di)   the state before step c Q, chunk c
//   z, o, norm_w           (rows, Di), (Di)            the gated RMSNorm's gate, output, weight
//
// The scan is the sequential recurrence, not the chunked SSD matrix form: one thread per
// (sequence, channel) holds its row S[p, :] of its head's state (N values) and walks the T
// steps. The SSD form exists to turn the scan into matrix products for tensor cores; at
// boldcast's sizes (T of tens to a few hundred, N 16..64) the recurrence is O(T N) per thread
// with no O(Q^2) intra-chunk work, its reference semantics are MODEL.md's definition itself,
// and it shares the checkpoint scheme (and so the Q-independence proof) of mamba1.cu.
//
// Determinism: no atomics. Sums over channels (g_Bc, g_Cc per step) are per-block partials in
// thread order, then the blocks in order in a second kernel; sums over a head's lanes (g_dt),
// over time and sequences (g_A, g_D) are per-thread terms or per-thread running sums, summed in
// a fixed order by that second kernel. The decay `exp(dt A)` and the state update are one
// expression each (`m2_decay`, `m2_step`), used by the forward and by the backward's
// recomputation, so the recomputed states are the forward's bit for bit and the backward's
// result does not depend on Q. The gated RMSNorm reduces each row in a fixed-shape
// shared-memory tree and its weight gradient in fixed row chunks, then the chunks in order.

// SCAN_MAX_N and SCAN_SHARED, the scan's limits, are common.cuh's (mamba1.cu's too).
// The most threads of a gated-norm block: four columns a thread up to 1,024 columns.
#define M2_NORM_MAX_BLOCK 256
#define M2_EPS 1e-5f

// The head's decay of one step, `exp(dt A)`: the one expression of it.
__device__ __forceinline__ float m2_decay(float dt, float a) { return expf(dt * a); }

// One state element's update `S <- e S + (dt x) B`: the one expression of it (an explicit
// fmaf, so that NVRTC's contraction cannot make the forward's and the recomputation's differ).
__device__ __forceinline__ float m2_step(float e, float s, float dtx, float bn) { return fmaf(e, s, dtx * bn); }

// The scan's inputs and sizes, as every scan kernel takes them: common.cuh's and the heads.
struct M2Scan : ScanIn {
    int nh, pd;
};

// Step `row` (element i) of a lane of head h: `S <- exp(dt A) S + (dt x) B`, by m2_decay and
// m2_step; the forward's update and the backward's recomputation.
__device__ __forceinline__ void m2_update(const M2Scan& p, long long row, long long i, int h, float* st) {
    float dtv = p.dt[row * p.nh + h], e = m2_decay(dtv, p.a[h]), dtx = dtv * p.x[i];
    for (int j = 0; j < p.n; ++j) {
        st[j] = m2_step(e, st[j], dtx, p.bc[row * p.n + j]);
    }
}

// The scan `S_t = exp(dt_t A) S_{t-1} + dt_t x_t Bc_t^T` per head from S = 0,
// `y_t = S_t Cc_t + D x_t` (ungated: the gate is the RMSNorm's), and the state before step
// c Q into ckpt[s, c]. Launch: grid (ceil(Di / B), bsz), block (B) 1-D, N <= SCAN_MAX_N; thread
// (d, s) runs channel d (lane d % Pd of head d / Pd) of sequence s over all T steps, its N
// state values in order, in registers / local memory.
extern "C" __global__ void mamba2_scan_fwd(const float* __restrict__ x, const float* __restrict__ dt,
                                           const float* __restrict__ a, const float* __restrict__ bc,
                                           const float* __restrict__ cc, const float* __restrict__ dsk,
                                           float* __restrict__ y, float* __restrict__ ckpt, int time, int di, int n,
                                           int nh, int pd, int q) {
    M2Scan p = {{x, dt, a, bc, cc, dsk, time, di, n, q}, nh, pd};
    int h = (int)(first_index() / pd);
    auto update = [&](long long row, long long i, float* st) { m2_update(p, row, i, h, st); };
    auto output = [&](long long row, long long i, const float* st) {
        float acc = dsk[h] * x[i];
        for (int j = 0; j < n; ++j) {
            acc = fmaf(cc[row * n + j], st[j], acc);
        }
        y[i] = acc;
    };
    scan_fwd_walk(ckpt, time, di, n, q, update, output);
}

// The per-thread running values of the scan backward of one channel.
struct M2Carry {
    float g[SCAN_MAX_N];  // the carry Q = a_{t+1} G_{t+1} (this lane's row), zero before the last step
    float ga;           // sum over t of dt q (this lane's part of the Frobenius q_t), for g_A
    float gd;           // sum over t of g_y x, for g_D
};

// One step t of BACKWARD.md's Mamba-2 walk for channel d (valid thread), given this lane's
// state rows before and after the step (`prev`, `cur`, stride Di): writes g_x at (s, t, d) and
// the lane's g_dt term `x u + A q` into gdt_term (bsz, T, Di); the lane's terms of g_Cc_t
// (`g_y S_t`) and g_Bc_t (`dt G x`) into `sh[j B + tid]` and `sh[(N + j) B + tid]`.
__device__ void m2_back_step(const M2Scan& p, M2Carry& k, const float* prev, const float* cur, const float* g_y,
                             float* g_x, float* gdt_term, float* sh, long long s, long long d, int t) {
    int n = p.n, nb = blockDim.x, h = (int)(d / p.pd);
    unsigned tid = threadIdx.x;
    long long row = s * p.time + t, i = row * p.di + d;
    float dtv = p.dt[row * p.nh + h], xv = p.x[i], av = p.a[h], gy = g_y[i];
    float e = m2_decay(dtv, av), dtx = dtv * xv, u = 0.0f, qv = 0.0f;
    for (int j = 0; j < n; ++j) {
        float gg = fmaf(gy, p.cc[row * n + j], k.g[j]);
        u = fmaf(gg, p.bc[row * n + j], u);
        // `S_t - dt x B^T` is `a S_{t-1}`: the recomputed previous state times the decay.
        qv = fmaf(gg, e * prev[(long long)j * p.di], qv);
        k.g[j] = e * gg;
        sh[j * nb + tid] = gy * cur[(long long)j * p.di];
        sh[(n + j) * nb + tid] = gg * dtx;
    }
    g_x[i] = fmaf(p.dsk[h], gy, dtv * u);
    gdt_term[i] = fmaf(xv, u, av * qv);
    k.ga = fmaf(dtv, qv, k.ga);
    k.gd = fmaf(gy, xv, k.gd);
}

// The scan backward for the output gradient g_y: walks the chunks of Q steps from the last,
// recomputing each chunk's states from ckpt into the workspace hs (bsz, Q, N, Di), then
// walking its steps back. Overwrites g_x (bsz, T, Di) and the per-lane g_dt terms gdt_term
// (bsz, T, Di); writes the channel-block partials of g_Cc, g_Bc into part_bc (see
// scan_block_terms) and each thread's sums over time of its g_A and g_D terms into part_a,
// part_d (bsz, Di), all for mamba2_scan_bwd_final. Launch: as mamba2_scan_fwd, with
// B * 2 N <= SCAN_SHARED; threads past Di take part in the barriers with zero terms.
extern "C" __global__ void mamba2_scan_bwd(const float* __restrict__ x, const float* __restrict__ dt,
                                           const float* __restrict__ a, const float* __restrict__ bc,
                                           const float* __restrict__ cc, const float* __restrict__ dsk,
                                           const float* __restrict__ g_y, const float* __restrict__ ckpt,
                                           float* __restrict__ hs, float* __restrict__ g_x,
                                           float* __restrict__ gdt_term, float* __restrict__ part_bc,
                                           float* __restrict__ part_a, float* __restrict__ part_d, int time, int di,
                                           int n, int nh, int pd, int q) {
    __shared__ float sh[SCAN_SHARED];
    M2Scan p = {{x, dt, a, bc, cc, dsk, time, di, n, q}, nh, pd};
    long long d = first_index(), s = blockIdx.y;
    bool valid = d < di;
    M2Carry k;
    for (int j = 0; j < n; ++j) {
        k.g[j] = 0.0f;
    }
    k.ga = 0.0f;
    k.gd = 0.0f;
    ScanWalk w = {ckpt, hs, sh, part_bc, s, d, time, di, n, q};
    int h = (int)(d / pd);
    auto update = [&](long long row, long long i, float* st) { m2_update(p, row, i, h, st); };
    auto step = [&](int t, const float* prev, const float* cur) {
        m2_back_step(p, k, prev, cur, g_y, g_x, gdt_term, sh, s, d, t);
    };
    scan_bwd_walk(w, valid, update, step);
    if (valid) {
        part_a[s * di + d] = k.ga;
        part_d[s * di + d] = k.gd;
    }
}

// Second stage of the scan backward, each sum in a fixed order: `g_Cc[s, t, j]`, `g_Bc[s, t, j]`
// (overwritten) over the channel blocks of part_bc in order; `g_dt[s, t, h]` (overwritten) over
// the head's Pd lanes of gdt_term in order; `g_A[h] +=`, `g_D[h] +=` over the sequences, then
// within each the head's lanes, of part_a, part_d. Launch: 1-D, any shape; thread i handles
// elements i, i + G, ... of the bsz T 2 N gradients of Bc and Cc, then of the bsz T nh of dt,
// then of the 2 nh of A and D.
extern "C" __global__ void mamba2_scan_bwd_final(const float* __restrict__ part_bc,
                                                 const float* __restrict__ gdt_term, const float* __restrict__ part_a,
                                                 const float* __restrict__ part_d, float* __restrict__ g_bc,
                                                 float* __restrict__ g_cc, float* __restrict__ g_dt,
                                                 float* __restrict__ g_a, float* __restrict__ g_d, long long rows,
                                                 int blocks, int seqs, int n, int nh, int pd) {
    long long di = (long long)nh * pd;
    scan_final_bc(part_bc, g_bc, g_cc, rows, blocks, n);
    for (long long i = first_index(); i < rows * nh; i += grid_stride()) {
        const float* lanes = gdt_term + (i / nh) * di + (i % nh) * pd;
        float acc = 0.0f;
        for (int l = 0; l < pd; ++l) {
            acc += lanes[l];
        }
        g_dt[i] = acc;
    }
    for (long long i = first_index(); i < 2LL * nh; i += grid_stride()) {
        int h = (int)(i % nh);
        const float* part = i < nh ? part_a : part_d;
        float acc = 0.0f;
        for (int s = 0; s < seqs; ++s) {
            for (int l = 0; l < pd; ++l) {
                acc += part[s * di + (long long)h * pd + l];
            }
        }
        if (i < nh) {
            g_a[h] += acc;
        } else {
            g_d[h] += acc;
        }
    }
}

// The gate `v = y silu(z)`: the one expression of it, so the backward's recomputed v is the
// forward's.
__device__ __forceinline__ float m2_gate(float y, float z) { return y * (z * sigmoid_f(z)); }

// `r = 1 / sqrt(mean(v^2) + eps)` of one row of width m (every thread of the block calls it):
// thread t adds the squares of columns t, t + B, ... in order, then the block's tree.
__device__ float m2_row_rinv(const float* __restrict__ yr, const float* __restrict__ zr, int m) {
    float part = 0.0f;
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        float v = m2_gate(yr[i], zr[i]);
        part = fmaf(v, v, part);
    }
    // 1/m in double, then rounded, as the CPU backend's `E::of(1.0 / di as f64)`; not rsqrtf:
    // the correctly rounded sqrt then division.
    float inv_m = (float)(1.0 / (double)m);
    return 1.0f / sqrtf(block_sum(part) * inv_m + M2_EPS);
}

// The gated RMSNorm `o = v r w`, `v = y silu(z)`, `r = 1 / sqrt(mean(v^2) + eps)` over each
// row of (rows, m), and r into rinv (rows). Launch: grid (rows), block (B) with B a power of
// two <= M2_NORM_MAX_BLOCK; block `row` normalises row `row`, thread t columns t, t + B, ...
extern "C" __global__ void mamba2_gnorm_fwd(const float* __restrict__ y, const float* __restrict__ z,
                                            const float* __restrict__ w, float* __restrict__ o,
                                            float* __restrict__ rinv, int m) {
    long long row = blockIdx.x;
    const float *yr = y + row * m, *zr = z + row * m;
    float r = m2_row_rinv(yr, zr, m);
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        o[row * m + i] = m2_gate(yr[i], zr[i]) * r * w[i];
    }
    if (threadIdx.x == 0) {
        rinv[row] = r;
    }
}

// The gated RMSNorm's input gradients for g_o, overwritten: with `vr = v r` and
// `c1 = mean(vr w g_o)`, `g_v = r (w g_o - vr c1)`, `g_y = g_v silu(z)`,
// `g_z = g_v y silu'(z)`; r recomputed as the forward's, into rinv (rows) for the weight
// gradient. Launch: as mamba2_gnorm_fwd.
extern "C" __global__ void mamba2_gnorm_bwd_x(const float* __restrict__ y, const float* __restrict__ z,
                                              const float* __restrict__ w, const float* __restrict__ g_o,
                                              float* __restrict__ g_y, float* __restrict__ g_z,
                                              float* __restrict__ rinv, int m) {
    long long row = blockIdx.x;
    const float *yr = y + row * m, *zr = z + row * m, *gr = g_o + row * m;
    float r = m2_row_rinv(yr, zr, m);
    float part = 0.0f;
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        part = fmaf(m2_gate(yr[i], zr[i]) * r, w[i] * gr[i], part);
    }
    float c1 = block_sum(part) * (float)(1.0 / (double)m);
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        float zv = zr[i], vr = m2_gate(yr[i], zv) * r;
        float gv = r * (w[i] * gr[i] - vr * c1);
        g_y[row * m + i] = gv * (zv * sigmoid_f(zv));
        g_z[row * m + i] = gv * yr[i] * silu_grad_f(zv);
    }
    if (threadIdx.x == 0) {
        rinv[row] = r;
    }
}

// First stage of the norm weight's gradient: part[c, j] = sum over the rows of chunk c
// (`rows_per_chunk` rows) of `g_o v r` in row order. Launch: grid (ceil(m / B), chunks),
// block (B) 1-D, any B <= M2_NORM_MAX_BLOCK; the grid's thread j in x owns column j.
extern "C" __global__ void mamba2_gnorm_bwd_w_partial(const float* __restrict__ y, const float* __restrict__ z,
                                                      const float* __restrict__ g_o,
                                                      const float* __restrict__ rinv, float* __restrict__ part,
                                                      long long rows, int m, int rows_per_chunk) {
    ChunkColumn col;
    if (!chunk_column(m, rows, rows_per_chunk, &col)) {
        return;
    }
    long long j = col.j;
    float acc = 0.0f;
    for (long long r = col.r0; r < col.r1; ++r) {
        acc = fmaf(g_o[r * m + j], m2_gate(y[r * m + j], z[r * m + j]) * rinv[r], acc);
    }
    part[col.c * m + j] = acc;
}

// Second stage: `g_w[j] += sum_c part[c, j]`, chunks in order. Launch: 1-D, any shape; thread
// j handles columns j, j + G, ...
extern "C" __global__ void mamba2_gnorm_bwd_w_final(const float* __restrict__ part, float* __restrict__ g_w,
                                                    int chunks, int m) {
    for (long long j = first_index(); j < m; j += grid_stride()) {
        float acc = 0.0f;
        for (int c = 0; c < chunks; ++c) {
            acc += part[(long long)c * m + j];
        }
        g_w[j] += acc;
    }
}
