// Elementwise activations and their backwards (BACKWARD.md, "Small pieces"), mirroring
// backends/cpu/src/ops/act.rs operation for operation, so that the shim's results have the
// CPU backend's bits: softplus (PyTorch's threshold 20), SiLU, and the gate `y * silu(z)`.
//
// Launch shape of every kernel here: 1-D, any grid and block (the loops stride over the
// grid, so a capped grid covers any `n`); thread i handles elements i, i + G, i + 2G, ...
// where G is the grid's thread count. No shared memory, no barriers.

// The logistic function, SiLU and its derivative are common.cuh's.

__device__ __forceinline__ float softplus_f(float v) { return v > 20.0f ? v : log1pf(expf(v)); }

__device__ __forceinline__ float softplus_grad_f(float v) { return v > 20.0f ? 1.0f : sigmoid_f(v); }

// An activation `y[i] = f(x[i])` and its backward `g_x[i] = g_y[i] * f'(x[i])`, each kernel
// below one of them.
template <class F>
__device__ __forceinline__ void act_map(const float* __restrict__ x, float* __restrict__ y, long long n, F f) {
    grid_loop(n, [&](long long i) {
        y[i] = f(x[i]);
    });
}
template <class F>
__device__ __forceinline__ void act_map_grad(const float* __restrict__ x, const float* __restrict__ g_y,
                                             float* __restrict__ g_x, long long n, F df) {
    grid_loop(n, [&](long long i) {
        g_x[i] = g_y[i] * df(x[i]);
    });
}

// `y[i] = softplus(v[i])`. Launch: 1-D, any shape (see the top of the file).
extern "C" __global__ void act_softplus_fwd(const float* __restrict__ v, float* __restrict__ y, long long n) {
    act_map(v, y, n, softplus_f);
}

// `g_v[i] = g_y[i] * softplus'(v[i])`. Launch: 1-D, any shape.
extern "C" __global__ void act_softplus_bwd(const float* __restrict__ v, const float* __restrict__ g_y,
                                            float* __restrict__ g_v, long long n) {
    act_map_grad(v, g_y, g_v, n, softplus_grad_f);
}

// `y[i] = silu(x[i])`. Launch: 1-D, any shape.
extern "C" __global__ void act_silu_fwd(const float* __restrict__ x, float* __restrict__ y, long long n) {
    act_map(x, y, n, silu_f);
}

// `g_x[i] = g_y[i] * silu'(x[i])`. Launch: 1-D, any shape.
extern "C" __global__ void act_silu_bwd(const float* __restrict__ x, const float* __restrict__ g_y,
                                        float* __restrict__ g_x, long long n) {
    act_map_grad(x, g_y, g_x, n, silu_grad_f);
}

// The gate: `out[i] = y[i] * silu(z[i])`. Launch: 1-D, any shape.
extern "C" __global__ void act_gate_fwd(const float* __restrict__ y, const float* __restrict__ z,
                                        float* __restrict__ out, long long n) {
    grid_loop(n, [&](long long i) {
        out[i] = y[i] * silu_f(z[i]);
    });
}

// Backward of the gate for the output gradient `g`: `g_y[i] = g[i] silu(z[i])` and
// `g_z[i] = g[i] y[i] silu'(z[i])` (multiplied left to right, as the CPU backend does).
// Launch: 1-D, any shape.
extern "C" __global__ void act_gate_bwd(const float* __restrict__ y, const float* __restrict__ z,
                                        const float* __restrict__ g, float* __restrict__ g_y,
                                        float* __restrict__ g_z, long long n) {
    grid_loop(n, [&](long long i) {
        g_y[i] = g[i] * silu_f(z[i]);
        g_z[i] = g[i] * y[i] * silu_grad_f(z[i]);
    });
}

// `y[i] += x[i]`: a sum the host would otherwise make (an offset added to the forecasts, a
// stacked gradient added back to its parts). Launch: 1-D, any shape.
extern "C" __global__ void act_add(const float* __restrict__ x, float* __restrict__ y, long long n) {
    grid_loop(n, [&](long long i) {
        y[i] = y[i] + x[i];
    });
}

// The decays of the scans, `a[i] = -exp(a_log[i])`. Launch: 1-D, any shape.
extern "C" __global__ void act_decay_fwd(const float* __restrict__ a_log, float* __restrict__ a, long long n) {
    grid_loop(n, [&](long long i) {
        a[i] = -expf(a_log[i]);
    });
}

// Backward of the decays: `g_a_log[i] += g_a[i] * a[i]` (dA / dA_log = A). Launch: 1-D, any shape.
extern "C" __global__ void act_decay_bwd(const float* __restrict__ a, const float* __restrict__ g_a,
                                         float* __restrict__ g_a_log, long long n) {
    grid_loop(n, [&](long long i) {
        g_a_log[i] = g_a_log[i] + g_a[i] * a[i];
    });
}
