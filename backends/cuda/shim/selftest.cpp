// The shim's launchers of its own test kernels (selftest.cu).
#include <chrono>
#include <thread>

#include "shim.h"

static void shim_test_sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

#include "selftest.cu"

SHIM_LAUNCHER(selftest_barrier_probe, (float* out, unsigned slow), (out, slow))
SHIM_LAUNCHER(selftest_tree_sum, (const float* x, float* out), (x, out))
SHIM_LAUNCHER(selftest_divergent, (float* out), (out))
