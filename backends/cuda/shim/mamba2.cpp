// The shim's launchers of kernels/mamba2.cu.
#include "shim.h"
#include "../kernels/mamba2.cu"

SHIM_LAUNCHER(mamba2_scan_fwd,
              (const float* x, const float* dt, const float* a, const float* bc, const float* cc, const float* dsk,
               float* y, float* ckpt, int time, int di, int n, int nh, int pd, int q),
              (x, dt, a, bc, cc, dsk, y, ckpt, time, di, n, nh, pd, q))
SHIM_LAUNCHER(mamba2_scan_bwd,
              (const float* x, const float* dt, const float* a, const float* bc, const float* cc, const float* dsk,
               const float* g_y, const float* ckpt, float* hs, float* g_x, float* gdt_term, float* part_bc,
               float* part_a, float* part_d, int time, int di, int n, int nh, int pd, int q),
              (x, dt, a, bc, cc, dsk, g_y, ckpt, hs, g_x, gdt_term, part_bc, part_a, part_d, time, di, n, nh, pd, q))
SHIM_LAUNCHER(mamba2_scan_bwd_final,
              (const float* part_bc, const float* gdt_term, const float* part_a, const float* part_d, float* g_bc,
               float* g_cc, float* g_dt, float* g_a, float* g_d, long long rows, int blocks, int seqs, int n, int nh,
               int pd),
              (part_bc, gdt_term, part_a, part_d, g_bc, g_cc, g_dt, g_a, g_d, rows, blocks, seqs, n, nh, pd))
SHIM_LAUNCHER(mamba2_gnorm_fwd, (const float* y, const float* z, const float* w, float* o, float* rinv, int m),
              (y, z, w, o, rinv, m))
SHIM_LAUNCHER(mamba2_gnorm_bwd_x,
              (const float* y, const float* z, const float* w, const float* g_o, float* g_y, float* g_z, float* rinv,
               int m),
              (y, z, w, g_o, g_y, g_z, rinv, m))
SHIM_LAUNCHER(mamba2_gnorm_bwd_w_partial,
              (const float* y, const float* z, const float* g_o, const float* rinv, float* part, long long rows, int m,
               int rows_per_chunk),
              (y, z, g_o, rinv, part, rows, m, rows_per_chunk))
SHIM_LAUNCHER(mamba2_gnorm_bwd_w_final, (const float* part, float* g_w, int chunks, int m), (part, g_w, chunks, m))
