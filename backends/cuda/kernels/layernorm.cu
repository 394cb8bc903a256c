// LayerNorm over the rows of a (rows, m) matrix (MODEL.md: eps 1e-5, biased variance) and its
// backward (BACKWARD.md, "Small pieces"), mirroring backends/cpu/src/ops/layernorm.rs:
// `xh = (x - mean) r`, `r = 1 / sqrt(var + eps)`, `y = xh w + b`;
// `g_w += sum_rows g_y xh`, `g_b += sum_rows g_y`, `g_x += r (g_y w - mean(g_y w) - xh mean(g_y w xh))`.
//
// Every sum has a fixed order that depends only on m and the block size, never on timing, so
// the bits are the same from launch to launch: within a row, thread t adds the elements
// t, t + B, t + 2B, ... in that order, then the B partial sums meet in a shared-memory tree
// (pairs at distance B/2, then B/4, ...). The weight and bias gradients, sums over rows, are
// fixed chunks of rows summed in row order, then the chunks in chunk order: no atomics.
// The per-element arithmetic is the CPU backend's, in its order; only the sums' order differs.

#define LN_EPS 1e-5f

// Mean and r = 1 / sqrt(var + eps) of one row, two passes as on the CPU (the variance of
// embeddings can be small next to their mean, where E[x^2] - E[x]^2 cancels).
__device__ void ln_row_stats(const float* __restrict__ xr, int m, float* mean_out, float* r_out) {
    float part = 0.0f;
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        part += xr[i];
    }
    float mean = block_sum(part) / (float)m;
    part = 0.0f;
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        float d = xr[i] - mean;
        part += d * d;
    }
    float var = block_sum(part) / (float)m;
    *mean_out = mean;
    // Not rsqrtf: the CPU backend's correctly rounded sqrt then division.
    *r_out = 1.0f / sqrtf(var + LN_EPS);
}

// `y = LayerNorm(x) w + b` for x, y of (gridDim.x, m). Launch: grid (rows), block (B) with B
// a power of two <= 1024; block `row` normalises row `row`, thread t the columns t, t + B, ...
extern "C" __global__ void layernorm_fwd(const float* __restrict__ x, const float* __restrict__ w,
                                         const float* __restrict__ b, float* __restrict__ y, int m) {
    long long row = blockIdx.x;
    const float* xr = x + row * m;
    float* yr = y + row * m;
    float mean, r;
    ln_row_stats(xr, m, &mean, &r);
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        yr[i] = (xr[i] - mean) * r * w[i] + b[i];
    }
}

// The input gradient of LayerNorm, accumulated: `g_x += r (a - mean(a) - xh mean(a xh))`,
// `a = g_y w`, and each row's (mean, r) into `stats` (rows, 2) for the parameter gradients.
// Launch: as layernorm_fwd.
extern "C" __global__ void layernorm_bwd_x(const float* __restrict__ x, const float* __restrict__ w,
                                           const float* __restrict__ g_y, float* __restrict__ g_x,
                                           float* __restrict__ stats, int m) {
    long long row = blockIdx.x;
    const float* xr = x + row * m;
    const float* gyr = g_y + row * m;
    float* gxr = g_x + row * m;
    float mean, r;
    ln_row_stats(xr, m, &mean, &r);
    float pa = 0.0f, paxh = 0.0f;
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        pa += gyr[i] * w[i];
        paxh += gyr[i] * w[i] * ((xr[i] - mean) * r);
    }
    // 1/m in double, then rounded: the CPU backend's `E::of(1.0 / m as f64)`.
    float inv_m = (float)(1.0 / (double)m);
    float ma = block_sum(pa) * inv_m;
    float maxh = block_sum(paxh) * inv_m;
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        float xh = (xr[i] - mean) * r;
        gxr[i] += r * (gyr[i] * w[i] - ma - xh * maxh);
    }
    if (threadIdx.x == 0) {
        stats[2 * row] = mean;
        stats[2 * row + 1] = r;
    }
}

// First stage of the parameter gradients: `part` (chunks, 2, m) gets, for chunk c of
// `rows_per_chunk` rows, `sum g_y xh` and `sum g_y` over the chunk's rows in row order.
// Launch: grid (ceil(m / B), chunks), block (B), any B <= 1024; thread j of the grid's x
// dimension owns column j.
extern "C" __global__ void layernorm_bwd_params_partial(const float* __restrict__ x, const float* __restrict__ g_y,
                                                        const float* __restrict__ stats, float* __restrict__ part,
                                                        long long rows, int m, int rows_per_chunk) {
    ChunkColumn col;
    if (!chunk_column(m, rows, rows_per_chunk, &col)) {
        return;
    }
    long long j = col.j, c = col.c;
    float sw = 0.0f, sb = 0.0f;
    for (long long r = col.r0; r < col.r1; ++r) {
        float g = g_y[r * m + j];
        float xh = (x[r * m + j] - stats[2 * r]) * stats[2 * r + 1];
        sw += g * xh;
        sb += g;
    }
    part[(2 * c) * m + j] = sw;
    part[(2 * c + 1) * m + j] = sb;
}

// Second stage: `g_w[j] += sum_c part[c, 0, j]`, `g_b[j] += sum_c part[c, 1, j]`, chunks in
// order. Launch: 1-D, any grid and block; thread j handles columns j, j + G, ...
extern "C" __global__ void layernorm_bwd_params_final(const float* __restrict__ part, float* __restrict__ g_w,
                                                      float* __restrict__ g_b, int chunks, int m) {
    for (long long j = first_index(); j < m; j += grid_stride()) {
        float sw = 0.0f, sb = 0.0f;
        for (int c = 0; c < chunks; ++c) {
            sw += part[(2LL * c) * m + j];
            sb += part[(2LL * c + 1) * m + j];
        }
        g_w[j] += sw;
        g_b[j] += sb;
    }
}
