// Layout changes of the model's activations, so that no host loop touches a device buffer:
// the swap of two axes between the trunk's per-parcel sequences `(B, P, T, c)` and the
// attention's per-time-step groups `(B, T, P, c)`, and a copy of a band of columns between
// row-major matrices (the split of Mamba-2's `xBC` into x, B and C and the join of their
// gradients; with a source width of 0, the broadcast of one row, a bias, to every row), and
// a fill with one value.
//
// Launch shape of every kernel here: 1-D, any grid and block (grid-stride loops over the output
// elements). Pure copies: the results are the inputs' bits. No shared memory, no barriers.

__device__ __forceinline__ long long layout_first() { return first_index(); }
__device__ __forceinline__ long long layout_stride() { return grid_stride(); }

// `y[a, j, i, e] = x[a, i, j, e]` for `x` of shape `(na, n1, n2, c)`: output element `o` of
// `(na, n2, n1, c)` reads its source. Launch: 1-D, any shape.
extern "C" __global__ void layout_swap_axes(const float* __restrict__ x, float* __restrict__ y, long long na, int n1,
                                            int n2, int c) {
    long long total = na * n1 * n2 * c;
    for (long long o = layout_first(); o < total; o += layout_stride()) {
        long long e = o % c;
        long long rest = o / c;
        long long i = rest % n1;
        rest /= n1;
        long long j = rest % n2;
        long long a = rest / n2;
        y[o] = x[((a * n1 + i) * n2 + j) * c + e];
    }
}

// `y[r, y_col + e] = x[r, x_col + e]` for `r < rows`, `e < width`, rows of `x_width` and
// `y_width` elements (`x_width = 0`: every row of `y` gets the one row `x[x_col ..]`).
// Launch: 1-D, any shape.
extern "C" __global__ void layout_copy_cols(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                            int x_width, int x_col, int y_width, int y_col, int width) {
    long long total = rows * width;
    for (long long o = layout_first(); o < total; o += layout_stride()) {
        long long r = o / width;
        long long e = o % width;
        y[r * y_width + y_col + e] = x[r * x_width + x_col + e];
    }
}

// `y[i] = v`: a buffer set to one value on the device (a column of ones for a bias product).
// Launch: 1-D, any shape.
extern "C" __global__ void layout_fill(float* __restrict__ y, float v, long long n) {
    grid_loop(n, [&](long long i) {
        y[i] = v;
    });
}
