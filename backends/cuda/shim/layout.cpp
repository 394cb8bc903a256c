// The shim's launchers of kernels/layout.cu.
#include "shim.h"
#include "../kernels/common.cuh"
#include "../kernels/layout.cu"

SHIM_TABLE(layout, SHIM_ENTRY(layout_swap_axes), SHIM_ENTRY(layout_copy_cols), SHIM_ENTRY(layout_fill))
