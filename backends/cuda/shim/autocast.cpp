// The shim's launchers of kernels/autocast.cu.
#include "shim.h"
#include "../kernels/common.cuh"
#include "../kernels/autocast.cu"

SHIM_TABLE(autocast, SHIM_ENTRY(autocast_round_bf16), SHIM_ENTRY(autocast_pack_bf16),
           SHIM_ENTRY(autocast_unpack_bf16))
