#!/usr/bin/env bash
# GPU check of the dfdx backend, in two halves because the GPU machines have no Rust toolchain:
#
#   scripts/gpu-check.sh build   on a CPU machine with Rust and pip: installs a CUDA 13 toolkit
#                                from PyPI (nvcc, runtime, nvrtc, CCCL, cublas, curand) under
#                                target/cuda-toolkit, builds the `gpu_check` example and bc-cli
#                                with `--features cuda` for compute capability CUDA_COMPUTE_CAP
#                                (default 90, the H200), and puts them with a copy of the golden
#                                cases in target/gpu-check/dist (carry that folder to the GPU).
#   scripts/gpu-check.sh run     on the GPU machine: finds the CUDA libraries (the toolkit above,
#                                else PyTorch's nvidia wheels, else the system), runs the golden
#                                cases `tiny`, `tiny-l2-clip` and `tiny-mamba2` on the Cuda
#                                device and times a training step of the `boldcast-demo` model;
#                                prints one JSON line on stdout and exits non-zero on failure.
#   scripts/gpu-check.sh         both, on a GPU machine that has Rust.
#
# Knobs of the run: GPU_CHECK_BATCH / GPU_CHECK_WINDOW / GPU_CHECK_PARCELS / GPU_CHECK_STEPS size
# the timed batch (the parcels are halved while a step does not fit in memory), GPU_CHECK_CASES
# names the golden cases. Build output goes to stderr.
#
# Why the build needs stand-ins: dfdx's build script runs `nvidia-smi --query-gpu=compute_cap`
# even when CUDA_COMPUTE_CAP is set, so a machine without a GPU gets a stand-in `nvidia-smi`
# that prints the wanted capability; cudarc links `libcuda` (the driver, absent without a GPU),
# so the link uses a stub `libcuda.so` with the soname `libcuda.so.1` and the real driver
# library is loaded at run time, as with the stubs of NVIDIA's own toolkit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIST=${GPU_CHECK_DIST:-$ROOT/target/gpu-check/dist}
TOOLKIT=${GPU_CHECK_TOOLKIT:-$ROOT/target/cuda-toolkit}

fail() {
    printf '{"gpu_check":"failed","error":"%s"}\n' "$1"
    exit 2
}

# The cu13 folder of the PyPI toolkit (bin/nvcc, include/cuda.h, lib/*.so.*), installing it
# into a virtual environment under target/ when it is not there yet.
toolkit_dir() {
    local d
    d=$(ls -d "$TOOLKIT"/lib/python3*/site-packages/nvidia/cu13 2>/dev/null | head -n1 || true)
    if [ -z "$d" ] || [ ! -x "$d/bin/nvcc" ] || [ ! -e "$d/include/nv/target" ]; then
        echo "gpu-check: installing the CUDA 13 toolkit from PyPI into $TOOLKIT" >&2
        python3 -m venv "$TOOLKIT" >&2
        "$TOOLKIT/bin/pip" install -q nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-nvrtc \
            nvidia-cuda-cccl nvidia-cublas nvidia-curand >&2
        d=$(ls -d "$TOOLKIT"/lib/python3*/site-packages/nvidia/cu13 | head -n1)
    fi
    echo "$d"
}

build() {
    command -v cargo >/dev/null 2>&1 || fail "cargo not found: build on a machine with Rust, then carry $DIST"
    local cu sdk
    cu=$(toolkit_dir)
    # A CUDA_ROOT in the layout cudarc's and dfdx's build scripts search: include/, bin/, and
    # lib64/ with the unversioned names the linker wants, plus the driver stub.
    sdk=$ROOT/target/gpu-check/cuda-root
    rm -rf "$sdk" && mkdir -p "$sdk/lib64" "$sdk/fake-bin"
    ln -s "$cu/include" "$sdk/include"
    ln -s "$cu/bin" "$sdk/bin"
    for lib in nvrtc cublas cublasLt curand cudart; do
        local f
        f=$(ls "$cu"/lib/lib$lib.so.* | grep -v builtins | head -n1)
        ln -s "$f" "$sdk/lib64/lib$lib.so"
    done
    # The driver stub: every cu* function of cudarc's driver bindings, returning
    # CUDA_ERROR_STUB_LIBRARY (34) should the stub ever be loaded instead of the driver.
    local sys
    sys=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.9.*/src/driver/sys.rs | head -n1)
    # cuGetErrorName/String answer, so that an error from the stub is printed, not a panic.
    {
        echo 'int cuGetErrorName(int e, const char **s) { *s = "CUDA_ERROR_STUB_LIBRARY"; return 0; }'
        echo 'int cuGetErrorString(int e, const char **s) { *s = "the stub libcuda.so was loaded, not the driver"; return 0; }'
        grep -o 'pub fn cu[A-Za-z0-9_]*' "$sys" | sed 's/^pub fn //' | grep -v '^cuGetError' | sort -u |
            awk '{print "int " $1 "(void) { return 34; }"}'
    } >"$sdk/cuda_stub.c"
    cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$sdk/lib64/libcuda.so" "$sdk/cuda_stub.c"
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        printf '#!/bin/sh\necho compute_cap\necho %s\n' "$(echo "${CUDA_COMPUTE_CAP:-90}" | sed 's/\(.\)$/.\1/')" \
            >"$sdk/fake-bin/nvidia-smi"
        chmod +x "$sdk/fake-bin/nvidia-smi"
    fi
    export CUDA_ROOT=$sdk CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
    export PATH=$sdk/fake-bin:$cu/bin:$PATH
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/gpu-check/build}
    cargo build --release -p boldcast-dfdx --features cuda --example gpu_check >&2
    cargo build --release -p bc-cli --features cuda >&2
    rm -rf "$DIST" && mkdir -p "$DIST"
    # Stripped: the folder must stay small enough to carry (the release profile keeps debug info).
    strip -o "$DIST/gpu_check" "$CARGO_TARGET_DIR/release/examples/gpu_check"
    strip -o "$DIST/bc-cli" "$CARGO_TARGET_DIR/release/bc-cli"
    # The repository's golden cases, and those of ../shared/golden when it is present (one
    # named like a repository case but with other bytes is copied as shared-<name>).
    cp -r "$ROOT/golden/cases" "$DIST/golden"
    chmod -R u+w "$DIST/golden"
    if [ -d "$ROOT/../shared/golden" ]; then
        for c in "$ROOT/../shared/golden"/*/; do
            [ -f "$c/config.json" ] || continue
            n=$(basename "$c")
            if [ ! -e "$DIST/golden/$n" ]; then
                cp -r "$c" "$DIST/golden/$n"
            elif ! diff -rq "$c" "$DIST/golden/$n" >/dev/null; then
                cp -r "$c" "$DIST/golden/shared-$n"
            fi
        done
        chmod -R u+w "$DIST/golden"
        echo "gpu-check: golden cases from golden/cases and ../shared/golden: $(ls "$DIST/golden" | tr '\n' ' ')" >&2
    fi
    echo "gpu-check: built $DIST (compute capability $CUDA_COMPUTE_CAP); carry it to the GPU machine and run" \
        "scripts/gpu-check.sh run" >&2
}

# LD_LIBRARY_PATH for cudarc's libraries: this toolkit, then PyTorch's nvidia wheels.
cuda_libs() {
    local dirs=() d
    for d in "$TOOLKIT"/lib/python3*/site-packages/nvidia/cu13/lib; do
        [ -d "$d" ] && dirs+=("$d")
    done
    while IFS= read -r d; do
        [ -n "$d" ] && dirs+=("$d")
    done < <(python3 - 2>/dev/null <<'PY' || true
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
seen = set()
for r in roots:
    for lib in sorted(glob.glob(os.path.join(r, "nvidia", "**", "lib"), recursive=True)):
        if lib not in seen and glob.glob(os.path.join(lib, "lib*.so*")):
            seen.add(lib)
            print(lib)
PY
    )
    local IFS=:
    echo "${dirs[*]}"
}

run() {
    [ -x "$DIST/gpu_check" ] || fail "no $DIST/gpu_check: run scripts/gpu-check.sh build first (on a CPU machine with Rust)"
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        fail "no NVIDIA GPU visible (nvidia-smi -L failed)"
    fi
    local libs
    libs=$(cuda_libs)
    export LD_LIBRARY_PATH=${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    local missing
    missing=$(ldd "$DIST/gpu_check" | grep 'not found' || true)
    [ -z "$missing" ] || fail "libraries not found: $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')"
    export GPU_CHECK_GOLDEN=${GPU_CHECK_GOLDEN:-$DIST/golden}
    exec "$DIST/gpu_check"
}

case "${1:-all}" in
    build) build ;;
    run) run ;;
    all)
        build
        run
        ;;
    *)
        echo "usage: scripts/gpu-check.sh [build|run]" >&2
        exit 2
        ;;
esac
