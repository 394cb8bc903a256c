#!/usr/bin/env bash
# GPU check of the dfdx backend (needs an NVIDIA GPU, its driver and `nvcc`):
#  1. builds boldcast-dfdx with `--features cuda` (release);
#  2. runs the golden cases `tiny` and `tiny-l2-clip` on the Cuda device;
#  3. times a training step of the `boldcast-demo` model (window 256, 1024 parcels, batch 1
#     by default; GPU_CHECK_BATCH / GPU_CHECK_WINDOW / GPU_CHECK_PARCELS / GPU_CHECK_STEPS
#     override, and the parcels are halved while a step does not fit in memory).
# Prints one JSON line on stdout (build output goes to stderr); exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvcc >/dev/null 2>&1; then
    echo '{"gpu_check":"failed","error":"nvcc not found: install the CUDA toolkit (cudarc compiles kernels with it)"}'
    exit 2
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo '{"gpu_check":"failed","error":"no NVIDIA GPU visible (nvidia-smi -L failed)"}'
    exit 2
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/gpu-check}"
cargo build --release -p boldcast-dfdx --features cuda --example gpu_check >&2
exec "$CARGO_TARGET_DIR/release/examples/gpu_check"
