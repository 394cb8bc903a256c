// The shim's launchers of kernels/act.cu.
#include "shim.h"
#include "../kernels/act.cu"

SHIM_LAUNCHER(act_softplus_fwd, (const float* v, float* y, long long n), (v, y, n))
SHIM_LAUNCHER(act_softplus_bwd, (const float* v, const float* g_y, float* g_v, long long n), (v, g_y, g_v, n))
SHIM_LAUNCHER(act_silu_fwd, (const float* x, float* y, long long n), (x, y, n))
SHIM_LAUNCHER(act_silu_bwd, (const float* x, const float* g_y, float* g_x, long long n), (x, g_y, g_x, n))
SHIM_LAUNCHER(act_gate_fwd, (const float* y, const float* z, float* out, long long n), (y, z, out, n))
SHIM_LAUNCHER(act_gate_bwd, (const float* y, const float* z, const float* g, float* g_y, float* g_z, long long n),
              (y, z, g, g_y, g_z, n))
