// The forecasting loss (MODEL.md, "Targets and loss") and its gradient (BACKWARD.md, "Loss"),
// mirroring `loss_of` of backends/cpu/src/model.rs: `pred` (B, T, P, H, D), `tokens`
// (B, T, P, D), `target[b, t, p, h] = tokens[b, t + horizons[h], p]` for t < T_valid;
// loss = sum (pred - target)^2 / n over the n = B T_valid P H D valid elements, each square
// of an f32 difference taken and summed in f64; `g_pred = (float)(2 / n) (pred - target)` for
// t < T_valid, 0 after. The sum is two-stage with a fixed order (chunks of the valid
// elements, per block strided partials then a shared tree; then the chunks' sums likewise in
// one block): no atomics.

// Element e of a (b, steps, p, h, d) array as its coordinates.
struct LossAt {
    long long b, tt, pp, j;
    int h;
};

__device__ inline LossAt loss_at(long long e, int steps, int p, int nh, int d) {
    LossAt a;
    a.j = e % d;
    long long r = e / d;
    a.h = (int)(r % nh);
    r /= nh;
    a.pp = r % p;
    r /= p;
    a.tt = r % steps;
    a.b = r / steps;
    return a;
}

// The index in tokens of the target of prediction `a` (horizon hz[a.h]).
__device__ inline long long loss_target(LossAt a, int t, int p, int d, const int* __restrict__ hz) {
    return ((a.b * t + a.tt + hz[a.h]) * p + a.pp) * d + a.j;
}

// The valid element e (in (b, t < T_valid, p, h, d) order) as (pred index, tokens index).
__device__ void loss_index(long long e, int t, int tv, int p, int nh, int d, const int* __restrict__ hz,
                           long long* pi, long long* ti) {
    LossAt a = loss_at(e, tv, p, nh, d);
    *pi = ((a.b * t + a.tt) * p + a.pp) * nh * d + a.h * d + a.j;
    *ti = loss_target(a, t, p, d, hz);
}

// First stage: `partial[c]` = the sum of squared differences over the valid elements
// c chunk .. min(n, (c + 1) chunk). Launch: grid (ceil(n / chunk)), block (B) a power of two;
// thread t of block c takes the chunk's elements t, t + B, ... in order.
extern "C" __global__ void loss_mse_partial(const float* __restrict__ pred, const float* __restrict__ tokens,
                                            const int* __restrict__ hz, double* __restrict__ partial, long long n,
                                            long long chunk, int t, int tv, int p, int nh, int d) {
    long long c0 = blockIdx.x * chunk;
    long long c1 = c0 + chunk < n ? c0 + chunk : n;
    double acc = 0.0;
    for (long long e = c0 + threadIdx.x; e < c1; e += blockDim.x) {
        long long pi, ti;
        loss_index(e, t, tv, p, nh, d, hz, &pi, &ti);
        float diff = pred[pi] - tokens[ti];
        acc += (double)diff * (double)diff;
    }
    double s = block_sum(acc);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = s;
    }
}

// Second stage: `out[0]` = the sum of the `parts` partials divided by n. Launch: grid (1),
// block (B) a power of two; thread t adds partials t, t + B, ..., then the tree.
extern "C" __global__ void loss_mse_final(const double* __restrict__ partial, double* __restrict__ out, int parts,
                                          double n) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) {
        acc += partial[i];
    }
    double s = block_sum(acc);
    if (threadIdx.x == 0) {
        out[0] = s / n;
    }
}

// The gradient over all of `pred`: `g[i] = scale (pred[i] - target)` for t < T_valid, else 0,
// with scale = (float)(2 / n) from the host. Launch: 1-D, any grid and block; a grid-stride
// loop, one element per thread per step.
extern "C" __global__ void loss_mse_bwd(const float* __restrict__ pred, const float* __restrict__ tokens,
                                        const int* __restrict__ hz, float* __restrict__ g, long long total, int t,
                                        int tv, int p, int nh, int d, float scale) {
    for (long long i = first_index(); i < total; i += grid_stride()) {
        LossAt a = loss_at(i, t, p, nh, d);
        if (a.tt >= tv) {
            g[i] = 0.0f;
            continue;
        }
        long long ti = loss_target(a, t, p, d, hz);
        g[i] = scale * (pred[i] - tokens[ti]);
    }
}
