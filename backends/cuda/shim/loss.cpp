// The shim's launchers of kernels/loss.cu.
#include "shim.h"
#include "../kernels/loss.cu"

SHIM_LAUNCHER(loss_mse_partial,
              (const float* pred, const float* tokens, const int* hz, double* partial, long long n, long long chunk, int t,
               int tv, int p, int nh, int d),
              (pred, tokens, hz, partial, n, chunk, t, tv, p, nh, d))
SHIM_LAUNCHER(loss_mse_final, (const double* partial, double* out, int parts, double n), (partial, out, parts, n))
SHIM_LAUNCHER(loss_mse_bwd,
              (const float* pred, const float* tokens, const int* hz, float* g, long long total, int t, int tv, int p, int nh,
               int d, float scale),
              (pred, tokens, hz, g, total, t, tv, p, nh, d, scale))
