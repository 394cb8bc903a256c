// The shim's launchers of kernels/mamba1.cu.
#include "shim.h"
#include "../kernels/mamba1.cu"

SHIM_LAUNCHER(mamba1_conv_fwd,
              (const float* x, const float* w, const float* b, float* c, float* xs, long long rows, int time, int di, int k),
              (x, w, b, c, xs, rows, time, di, k))
SHIM_LAUNCHER(mamba1_conv_bwd_gc, (const float* c, const float* g_xs, float* g_c, long long n), (c, g_xs, g_c, n))
SHIM_LAUNCHER(mamba1_conv_bwd_x, (const float* g_c, const float* w, float* g_x, long long rows, int time, int di, int k),
              (g_c, w, g_x, rows, time, di, k))
SHIM_LAUNCHER(mamba1_conv_bwd_params_partial,
              (const float* x, const float* g_c, float* part, long long rows, int time, int di, int k, int rows_per_chunk),
              (x, g_c, part, rows, time, di, k, rows_per_chunk))
SHIM_LAUNCHER(mamba1_conv_bwd_params_final, (const float* part, float* g_w, float* g_b, int chunks, int di, int k),
              (part, g_w, g_b, chunks, di, k))
SHIM_LAUNCHER(mamba1_scan_fwd,
              (const float* x, const float* dt, const float* a, const float* bc, const float* cc, const float* dsk,
               const float* z, float* out, float* ckpt, int time, int di, int n, int q),
              (x, dt, a, bc, cc, dsk, z, out, ckpt, time, di, n, q))
SHIM_LAUNCHER(mamba1_scan_bwd,
              (const float* x, const float* dt, const float* a, const float* bc, const float* cc, const float* dsk,
               const float* z, const float* g_out, const float* ckpt, float* hs, float* g_x, float* g_dt, float* g_z,
               float* part_bc, float* part_a, float* part_d, int time, int di, int n, int q),
              (x, dt, a, bc, cc, dsk, z, g_out, ckpt, hs, g_x, g_dt, g_z, part_bc, part_a, part_d, time, di, n, q))
SHIM_LAUNCHER(mamba1_scan_bwd_final,
              (const float* part_bc, const float* part_a, const float* part_d, float* g_bc, float* g_cc, float* g_a,
               float* g_d, long long rows, int blocks, int seqs, int di, int n),
              (part_bc, part_a, part_d, g_bc, g_cc, g_a, g_d, rows, blocks, seqs, di, n))
