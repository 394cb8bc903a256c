// The shim's launchers of kernels/knn.cu.
#include "shim.h"
#include "../kernels/common.cuh"
#include "../kernels/knn.cu"

SHIM_TABLE(knn,
           SHIM_ENTRY(knn_attend_fwd),
           SHIM_ENTRY(knn_attend_bwd_q),
           SHIM_ENTRY(knn_attend_bwd_kv))
