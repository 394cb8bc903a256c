// The shim's launchers of kernels/knn.cu.
#include "shim.h"
#include "../kernels/knn.cu"

SHIM_LAUNCHER(knn_attend_fwd, (const float* qkv, const int* adj, float* w, float* att, int parcels, int m, int k, float sc),
              (qkv, adj, w, att, parcels, m, k, sc))
SHIM_LAUNCHER(knn_attend_bwd_q,
              (const float* qkv, const int* adj, const float* w, const float* g_att, float* gs, float* g_qkv, int parcels,
               int m, int k, float sc),
              (qkv, adj, w, g_att, gs, g_qkv, parcels, m, k, sc))
SHIM_LAUNCHER(knn_attend_bwd_kv,
              (const float* qkv, const int* rev_start, const int* rev, const float* w, const float* g_att, const float* gs,
               float* g_qkv, long long rows, int parcels, int m, int k),
              (qkv, rev_start, rev, w, g_att, gs, g_qkv, rows, parcels, m, k))
