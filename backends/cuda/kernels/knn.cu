// The attention of each parcel over its k neighbours (MODEL.md, "Spatial mixer") between the
// projections, and its backward (BACKWARD.md, "Attention over the neighbours"), mirroring
// `attend` and `attend_backward` of backends/cpu/src/knn.rs. The projections are matrix
// products done elsewhere; these kernels see their stacked output `qkv` (rows, 3M), each row
// `[q | kk | v]`, rows = groups P in the model's (B, T, P) order, so row `g P + p` is parcel p
// of group g and attends to rows `g P + adj[p, j]`, j < k, of the same group.
//
// Forward: `s_j = <q[p], kk[a_j]> c`, `w = softmax_j(s)` (maximum subtracted), `att[p] =
// sum_j w_j v[a_j]`. Backward, from `g_att`: `g_w_j = <g_att[p], v[a_j]>`,
// `gs_j = w_j (g_w_j - sum_l w_l g_w_l) c`, `g_q[p] = sum_j gs_j kk[a_j]`, and the scatters
// `g_kk[a] = sum gs_j q[p]`, `g_v[a] = sum w_j g_att[p]` over the slots (p, j) with
// a_j = a. The scatters are gathers over a reverse adjacency built on the host (for each
// parcel, its slots p k + j in increasing order): no atomics, and the CPU backend's order of
// addition (p, then j, ascending), so the same inputs give the same bits.
//
// The dot products are sums with a fixed order (thread t: elements t, t + B, ...; then a
// shared-memory tree); the softmax runs on thread 0 in j order, as on the CPU.

// The most neighbours a row may have (the shared arrays' size; the host refuses more).
#define KNN_MAX_K 64

// `<a, b>` over m elements, by the whole block (every thread gets it).
__device__ float knn_block_dot(const float* __restrict__ a, const float* __restrict__ b, int m) {
    float part = 0.0f;
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        part += a[i] * b[i];
    }
    return block_sum(part);
}

// Where block `row` (blockIdx.x) reads its neighbours: the first row of its group (`base`),
// its parcel's k entries of adj (`nb`) and the width of a qkv row (`w3`).
struct KnnRow {
    long long row, base;
    const int* nb;
    long long w3;
};

__device__ __forceinline__ KnnRow knn_row(const int* __restrict__ adj, int parcels, int m, int k) {
    long long row = blockIdx.x;
    return {row, row - row % parcels, adj + (row % parcels) * k, 3LL * m};
}

// `out[j] = <a, the columns col.. of neighbour j's qkv row> scale` for j < k: each a block
// dot (every thread calls it), written by thread 0.
__device__ void knn_neighbour_dots(const KnnRow& r, const float* __restrict__ a, const float* __restrict__ qkv,
                                   long long col, int m, int k, float scale, float* out) {
    for (int j = 0; j < k; ++j) {
        float s = knn_block_dot(a, qkv + (r.base + r.nb[j]) * r.w3 + col, m) * scale;
        if (threadIdx.x == 0) {
            out[j] = s;
        }
    }
}

// Forward. Launch: grid (groups P), block (B) with B a power of two <= 1024; block `row` is
// parcel p = row mod P of group row / P: its threads compute the k scores together (one
// block dot each), thread 0 the softmax, then thread t the columns t, t + B, ... of att.
// Writes w (rows, k) and att (rows, m).
extern "C" __global__ void knn_attend_fwd(const float* __restrict__ qkv, const int* __restrict__ adj,
                                          float* __restrict__ w, float* __restrict__ att, int parcels, int m, int k,
                                          float sc) {
    __shared__ float sw[KNN_MAX_K];
    KnnRow r = knn_row(adj, parcels, m, k);
    long long row = r.row, base = r.base, w3 = r.w3;
    const int* nb = r.nb;
    knn_neighbour_dots(r, qkv + row * w3, qkv, m, m, k, sc, sw);
    if (threadIdx.x == 0) {
        // The CPU's softmax: the maximum (from the first score, which the CPU's fold from -inf
        // gives too), the exponentials (expf here, the CPU's exp_nonpos there), their sum in
        // j order, then each weight divided by it.
        float mx = sw[0];
        for (int j = 1; j < k; ++j) {
            mx = fmaxf(mx, sw[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j < k; ++j) {
            sw[j] = expf(sw[j] - mx);
            sum += sw[j];
        }
        for (int j = 0; j < k; ++j) {
            sw[j] /= sum;
            w[row * k + j] = sw[j];
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < k; ++j) {
            acc += sw[j] * qkv[(base + nb[j]) * w3 + 2 * m + i];
        }
        att[row * m + i] = acc;
    }
}

// Backward, first kernel: the score gradients `gs` (rows, k) and g_q into the q columns of
// g_qkv (rows, 3m). Launch: as knn_attend_fwd; the block computes the k dots g_w_j
// together, thread 0 `gs`, then thread t the columns t, t + B, ... of g_q.
extern "C" __global__ void knn_attend_bwd_q(const float* __restrict__ qkv, const int* __restrict__ adj,
                                            const float* __restrict__ w, const float* __restrict__ g_att,
                                            float* __restrict__ gs, float* __restrict__ g_qkv, int parcels, int m,
                                            int k, float sc) {
    __shared__ float sg[KNN_MAX_K];
    KnnRow r = knn_row(adj, parcels, m, k);
    long long row = r.row, base = r.base, w3 = r.w3;
    const int* nb = r.nb;
    const float* wr = w + row * k;
    // A scale of 1 leaves each dot's bits as they are.
    knn_neighbour_dots(r, g_att + row * m, qkv, 2LL * m, m, k, 1.0f, sg);
    if (threadIdx.x == 0) {
        // Softmax backward: the weighted mean of g_w, then each slot's share, scaled by c.
        float wg = 0.0f;
        for (int j = 0; j < k; ++j) {
            wg += wr[j] * sg[j];
        }
        for (int j = 0; j < k; ++j) {
            sg[j] = wr[j] * (sg[j] - wg) * sc;
            gs[row * k + j] = sg[j];
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < k; ++j) {
            acc += sg[j] * qkv[(base + nb[j]) * w3 + m + i];
        }
        g_qkv[row * w3 + i] = acc;
    }
}

// Backward, second kernel: the scatters as gathers. Row `row` (parcel a of its group) sums,
// over its incoming slots e = p k + j in `rev[rev_start[a] .. rev_start[a + 1]]` (increasing),
// `g_kk[row] = sum gs[e] q[p]` and `g_v[row] = sum w[e] g_att[p]` into the kk and v columns of
// g_qkv. Launch: 1-D, any grid and block; thread i of the grid owns element i of the
// (rows, m) pair of columns, in a grid-stride loop; no shared memory, no barrier.
extern "C" __global__ void knn_attend_bwd_kv(const float* __restrict__ qkv, const int* __restrict__ rev_start,
                                             const int* __restrict__ rev, const float* __restrict__ w,
                                             const float* __restrict__ g_att, const float* __restrict__ gs,
                                             float* __restrict__ g_qkv, long long rows, int parcels, int m, int k) {
    long long n = rows * m;
    long long w3 = 3LL * m;
    for (long long e = first_index(); e < n; e += grid_stride()) {
        long long row = e / m;
        int i = (int)(e % m);
        long long base = row - row % parcels;
        int a = (int)(row % parcels);
        float gk = 0.0f, gv = 0.0f;
        for (int s = rev_start[a]; s < rev_start[a + 1]; ++s) {
            long long src = base + rev[s] / k;
            long long slot = base * k + rev[s];
            gk += gs[slot] * qkv[src * w3 + i];
            gv += w[slot] * g_att[src * m + i];
        }
        g_qkv[row * w3 + m + i] = gk;
        g_qkv[row * w3 + 2 * m + i] = gv;
    }
}
