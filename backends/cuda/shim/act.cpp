// The shim's launchers of kernels/act.cu.
#include "shim.h"
#include "../kernels/common.cuh"
#include "../kernels/act.cu"

SHIM_TABLE(act,
           SHIM_ENTRY(act_softplus_fwd),
           SHIM_ENTRY(act_softplus_bwd),
           SHIM_ENTRY(act_silu_fwd),
           SHIM_ENTRY(act_silu_bwd),
           SHIM_ENTRY(act_gate_fwd),
           SHIM_ENTRY(act_gate_bwd),
           SHIM_ENTRY(act_add),
           SHIM_ENTRY(act_decay_fwd),
           SHIM_ENTRY(act_decay_bwd))
