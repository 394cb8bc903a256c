// The shim's launchers of kernels/autocast.cu.
#include "shim.h"
#include "../kernels/autocast.cu"

SHIM_LAUNCHER(autocast_round_bf16, (const float* x, float* y, long long n), (x, y, n))
