// The shim's launchers of kernels/layernorm.cu.
#include "shim.h"
#include "../kernels/layernorm.cu"

SHIM_LAUNCHER(layernorm_fwd, (const float* x, const float* w, const float* b, float* y, int m), (x, w, b, y, m))
SHIM_LAUNCHER(layernorm_bwd_x, (const float* x, const float* w, const float* g_y, float* g_x, float* stats, int m),
              (x, w, g_y, g_x, stats, m))
SHIM_LAUNCHER(layernorm_bwd_params_partial,
              (const float* x, const float* g_y, const float* stats, float* part, long long rows, int m, int rows_per_chunk),
              (x, g_y, stats, part, rows, m, rows_per_chunk))
SHIM_LAUNCHER(layernorm_bwd_params_final, (const float* part, float* g_w, float* g_b, int chunks, int m),
              (part, g_w, g_b, chunks, m))
