// The shim's launchers of kernels/mamba1.cu.
#include "shim.h"
#include "../kernels/common.cuh"
#include "../kernels/mamba1.cu"

SHIM_TABLE(mamba1,
           SHIM_ENTRY(mamba1_conv_fwd),
           SHIM_ENTRY(mamba1_conv_bwd_gc),
           SHIM_ENTRY(mamba1_conv_bwd_x),
           SHIM_ENTRY(mamba1_conv_bwd_params_partial),
           SHIM_ENTRY(mamba1_conv_bwd_params_final),
           SHIM_ENTRY(mamba1_scan_fwd),
           SHIM_ENTRY(mamba1_scan_bwd),
           SHIM_ENTRY(mamba1_scan_bwd_final))
