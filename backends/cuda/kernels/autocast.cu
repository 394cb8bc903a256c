// bf16 autocast (src/autocast.rs): the rounding of a matrix product's f32 operands to bf16,
// the values cuBLAS GemmEx with CUDA_R_16BF inputs and CUBLAS_COMPUTE_32F multiplies. The
// result stays in an f32 buffer (the shim computes in f32), holding bf16 values exactly.
//
// Rounding: to nearest, ties to even, on the bit pattern (bf16 is the top 16 bits of an f32),
// so subnormals round like normals (no flush to zero), values at or above bf16's largest
// finite value plus half its last unit go to infinity, infinities stay, and a NaN stays a
// NaN of the same sign (its top payload bits kept, the quiet bit set, so rounding can never
// turn it into an infinity). No cuda_bf16.h: NVRTC here runs without the toolkit headers.
//
// Launch shape: 1-D, any grid and block (a grid-stride loop, as kernels/act.cu). No shared
// memory, no barriers.

// `x` rounded to the nearest bf16 (ties to even), as an f32.
__device__ __forceinline__ float round_bf16_f(float x) {
    unsigned u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return __uint_as_float((u | 0x00400000u) & 0xffff0000u);
    }
    unsigned lsb = (u >> 16) & 1u;
    return __uint_as_float((u + 0x7fffu + lsb) & 0xffff0000u);
}

// `y[i] = bf16(x[i])`, held in f32. Launch: 1-D, any shape (see the top of the file).
extern "C" __global__ void autocast_round_bf16(const float* __restrict__ x, float* __restrict__ y, long long n) {
    grid_loop(n, [&](long long i) {
        y[i] = round_bf16_f(x[i]);
    });
}

// `y[i]` = the bf16 bits of `x[i]` (the same rounding): the operands cuBLAS GemmEx reads as
// CUDA_R_16BF on a device. Launch: 1-D, any shape.
extern "C" __global__ void autocast_pack_bf16(const float* __restrict__ x, unsigned short* __restrict__ y,
                                              long long n) {
    grid_loop(n, [&](long long i) {
        y[i] = (unsigned short)(__float_as_uint(round_bf16_f(x[i])) >> 16);
    });
}

// `y[i]` = the f32 value of the bf16 bits `x[i]` (exact): a kept bf16 activation read back
// for the backward's recomputation. Launch: 1-D, any shape.
extern "C" __global__ void autocast_unpack_bf16(const unsigned short* __restrict__ x, float* __restrict__ y,
                                                long long n) {
    grid_loop(n, [&](long long i) {
        y[i] = __uint_as_float(((unsigned)x[i]) << 16);
    });
}
