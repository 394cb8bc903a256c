// The shim's launchers of kernels/optim.cu.
#include "shim.h"
#include "../kernels/optim.cu"

SHIM_LAUNCHER(optim_adam_step,
              (float* p, const float* g, float* m, float* v, long long n, float coupled, float decoupled, float b1,
               float b2, float ob1, float ob2, float step, float sbc2, float eps),
              (p, g, m, v, n, coupled, decoupled, b1, b2, ob1, ob2, step, sbc2, eps))
SHIM_LAUNCHER(optim_sumsq_partial, (const float* g, double* partial, long long n, long long chunk), (g, partial, n, chunk))
SHIM_LAUNCHER(optim_sumsq_final, (const double* partial, double* out, int parts), (partial, out, parts))
SHIM_LAUNCHER(optim_clip_factor, (const double* norm, double max_norm, double* factor), (norm, max_norm, factor))
SHIM_LAUNCHER(optim_scale, (float* g, const double* factor, long long n), (g, factor, n))
