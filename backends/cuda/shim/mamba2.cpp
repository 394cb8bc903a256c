// The shim's launchers of kernels/mamba2.cu.
#include "shim.h"
#include "../kernels/common.cuh"
#include "../kernels/mamba2.cu"

SHIM_TABLE(mamba2,
           SHIM_ENTRY(mamba2_scan_fwd),
           SHIM_ENTRY(mamba2_scan_bwd),
           SHIM_ENTRY(mamba2_scan_bwd_final),
           SHIM_ENTRY(mamba2_gnorm_fwd),
           SHIM_ENTRY(mamba2_gnorm_bwd_x),
           SHIM_ENTRY(mamba2_gnorm_bwd_w_partial),
           SHIM_ENTRY(mamba2_gnorm_bwd_w_final))
