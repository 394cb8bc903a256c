// The shim's launchers of kernels/optim.cu.
#include "shim.h"
#include "../kernels/common.cuh"
#include "../kernels/optim.cu"

SHIM_TABLE(optim,
           SHIM_ENTRY(optim_adam_step),
           SHIM_ENTRY(optim_sumsq_partial),
           SHIM_ENTRY(optim_sumsq_final),
           SHIM_ENTRY(optim_clip_factor),
           SHIM_ENTRY(optim_scale),
           SHIM_ENTRY(optim_scale_by))
