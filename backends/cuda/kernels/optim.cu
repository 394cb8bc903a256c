// The optimizer step on the device, mirroring core/src/optim.rs: AdamW / Adam with coupled L2
// (one launch per parameter tensor, since the decay depends on the tensor), the global L2 norm
// of a gradient buffer, the clipping factor and the scaling by it.
//
// The norm is a deterministic two-stage reduction in f64 (the core accumulates in f64): block
// b sums the squares of its fixed chunk of elements (thread t: the chunk's elements t, t + B,
// ... in order, then a shared-memory tree), one block then sums the per-block partials the
// same way. The bits depend on n, the chunk and the block sizes only; no atomics.

// One Adam step on a tensor of n elements, exactly the core's `Adam::update` for f32: the
// scalars are the core's, computed on the host in f64 and rounded to f32 there (coupled = wd
// for Adam-L2 else 0, decoupled = lr wd for AdamW else 0, b1, b2, ob1 = 1 - b1, ob2 = 1 - b2,
// step = lr / (1 - b1^t), sbc2 = sqrt(1 - b2^t), eps). Launch: 1-D, any grid and block;
// thread i updates elements i, i + G, ...
extern "C" __global__ void optim_adam_step(float* __restrict__ p, const float* __restrict__ g,
                                           float* __restrict__ m, float* __restrict__ v, long long n,
                                           float coupled, float decoupled, float b1, float b2, float ob1,
                                           float ob2, float step, float sbc2, float eps) {
    for (long long i = first_index(); i < n; i += grid_stride()) {
        float w = p[i];
        float gi = g[i] + coupled * w;
        w = w - decoupled * w;
        float mi = b1 * m[i] + ob1 * gi;
        float vi = b2 * v[i] + ob2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = w - step * mi / (sqrtf(vi) / sbc2 + eps);
    }
}

// Stage 1 of the squared norm: `partial[b] = sum of g[i]^2` (in f64) over block b's chunk
// `[b chunk, min(n, (b + 1) chunk))`. Launch: grid (ceil(n / chunk)), block (B) with B a
// power of two <= 1024.
extern "C" __global__ void optim_sumsq_partial(const float* __restrict__ g, double* __restrict__ partial, long long n,
                                               long long chunk) {
    long long start = (long long)blockIdx.x * chunk;
    long long end = start + chunk < n ? start + chunk : n;
    double part = 0.0;
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        // A float's square is exact in double (24 + 24 significant bits <= 53).
        double x = (double)g[i];
        part += x * x;
    }
    double total = block_sum(part);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = total;
    }
}

// Stage 2: `out[0] = sum of partial[0..parts)`, `out[1] = sqrt(out[0])`, the global L2 norm.
// Launch: grid (1), block (B) with B a power of two <= 1024; thread t adds partials t, t + B, ...
extern "C" __global__ void optim_sumsq_final(const double* __restrict__ partial, double* __restrict__ out, int parts) {
    double part = 0.0;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) {
        part += partial[i];
    }
    double total = block_sum(part);
    if (threadIdx.x == 0) {
        out[0] = total;
        out[1] = sqrt(total);
    }
}

// The core's `clip_factor`: `factor[0] = min(1, max_norm / (norm[0] + 1e-6))`, as
// `torch.nn.utils.clip_grad_norm_`. Launch: grid (1), block (1).
extern "C" __global__ void optim_clip_factor(const double* __restrict__ norm, double max_norm, double* __restrict__ factor) {
    double f = max_norm / (norm[0] + 1e-6);
    factor[0] = f < 1.0 ? f : 1.0;
}

// `g[i] *= (float)factor[0]`, the CPU backend's `scale_grads`, reading the factor where
// optim_clip_factor left it. Launch: 1-D, any grid and block.
extern "C" __global__ void optim_scale(float* __restrict__ g, const double* __restrict__ factor, long long n) {
    float f = (float)factor[0];
    for (long long i = first_index(); i < n; i += grid_stride()) {
        g[i] *= f;
    }
}

// `g[i] *= (float)factor` with the factor a parameter: the trainer's clipping, whose factor
// the host computed from the norm it read. Launch: 1-D, any grid and block.
extern "C" __global__ void optim_scale_by(float* __restrict__ g, double factor, long long n) {
    float f = (float)factor;
    for (long long i = first_index(); i < n; i += grid_stride()) {
        g[i] *= f;
    }
}
