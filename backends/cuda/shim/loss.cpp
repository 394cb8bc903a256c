// The shim's launchers of kernels/loss.cu.
#include "shim.h"
#include "../kernels/common.cuh"
#include "../kernels/loss.cu"

SHIM_TABLE(loss,
           SHIM_ENTRY(loss_mse_partial),
           SHIM_ENTRY(loss_mse_final),
           SHIM_ENTRY(loss_mse_bwd))
