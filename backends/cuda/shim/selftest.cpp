// The shim's launchers of its own test kernels (selftest.cu).
#include <chrono>
#include <thread>

#include "shim.h"

static void shim_test_sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

#include "selftest.cu"

SHIM_TABLE(selftest,
           SHIM_ENTRY(selftest_barrier_probe),
           SHIM_ENTRY(selftest_tree_sum),
           SHIM_ENTRY(selftest_race),
           SHIM_ENTRY(selftest_divergent))
