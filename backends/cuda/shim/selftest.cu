// Kernels that test the shim itself (never compiled by NVRTC: they call the shim's delay).

// Thread `slow` sleeps, then every thread writes `s[t] = base + t`; after the barrier each
// thread reads its neighbour's slot. Without a real barrier the threads that do not sleep
// would read the neighbour's slot before the slow thread (or a previous block) wrote it.
// Launch: any 1-D grid, block (B) with B <= 1024; out is (grid, B).
extern "C" __global__ void selftest_barrier_probe(float* out, unsigned slow) {
    __shared__ float s[1024];
    unsigned t = threadIdx.x;
    if (t == slow) {
        shim_test_sleep_ms(30);
    }
    s[t] = (float)(blockIdx.x * 10000 + t);
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x];
}

// A shared-memory tree sum of `x[b B + t]` per block b into `out[b]`, the slowest thread
// the last one (thread B - 1 sleeps), so a missing wait at any level loses its contribution.
// Launch: any 1-D grid, block (B) a power of two <= 1024.
extern "C" __global__ void selftest_tree_sum(const float* x, float* out) {
    __shared__ float s[1024];
    unsigned t = threadIdx.x;
    if (t == blockDim.x - 1) {
        shim_test_sleep_ms(10);
    }
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (t < h) {
            s[t] += s[t + h];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[blockIdx.x] = s[0];
    }
}

// A deliberate race: every thread writes its slot, then reads its neighbour's without a
// barrier. On a GPU the value read is undefined; the shim runs a phase's threads in increasing
// index in even blocks and decreasing in odd ones, so the value depends on the block and a
// result that depends on such a race cannot pass a comparison by luck.
// Launch: any 1-D grid, block (B) with B <= 1024; out is (grid, B).
extern "C" __global__ void selftest_race(float* out) {
    __shared__ float s[1024];
    unsigned t = threadIdx.x;
    s[t] = (float)(blockIdx.x * 10000 + t + 1);
    out[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x];
}

// Thread 0 skips the barrier the others wait at: undefined on a GPU, an abort in the shim.
extern "C" __global__ void selftest_divergent(float* out) {
    if (threadIdx.x != 0) {
        __syncthreads();
    }
    out[threadIdx.x] = 1.0f;
}
