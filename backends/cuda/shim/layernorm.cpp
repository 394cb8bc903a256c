// The shim's launchers of kernels/layernorm.cu.
#include "shim.h"
#include "../kernels/common.cuh"
#include "../kernels/layernorm.cu"

SHIM_TABLE(layernorm,
           SHIM_ENTRY(layernorm_fwd),
           SHIM_ENTRY(layernorm_bwd_x),
           SHIM_ENTRY(layernorm_bwd_params_partial),
           SHIM_ENTRY(layernorm_bwd_params_final))
