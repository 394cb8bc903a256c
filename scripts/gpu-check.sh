#!/usr/bin/env bash
# GPU check of both GPU backends, the dfdx one (`--backend dfdx-cuda`) and the native CUDA one
# (crate boldcast-cuda, `--backend cuda`), in two halves because the GPU machines have no Rust
# toolchain:
#
#   scripts/gpu-check.sh build   on a CPU machine with Rust and pip: installs a CUDA 13 toolkit
#                                from PyPI (nvcc, runtime, nvrtc, CCCL, cublas, curand) under
#                                target/cuda-toolkit, builds with `--features cuda` the dfdx
#                                `gpu_check` example (for compute capability CUDA_COMPUTE_CAP,
#                                default 90, the H200), the boldcast-cuda `gpu_check` example
#                                (its kernels are compiled by NVRTC on the device at run time)
#                                and bc-cli, and puts them, stripped, with a copy of the golden
#                                cases in target/gpu-check/dist (`gpu_check`, `gpu_check_cuda`,
#                                `bc-cli`, `golden/`; carry that folder to the GPU), and where
#                                MPI is installed bc-cli with `--features nccl` (`bc-cli-nccl`,
#                                NCCL from PyPI) for the two-GPU scaling.
#   scripts/gpu-check.sh run     on the GPU machine: finds the CUDA libraries (the toolkit above,
#                                else PyTorch's nvidia wheels, else the system) and runs both
#                                checks, each under a time limit: the native one (every golden
#                                case on the device in f32 and bf16, then bf16 and f32 training
#                                steps of `boldcast-demo` at batch 4), then the dfdx one (the
#                                golden cases `tiny`, `tiny-l2-clip`, `tiny-mamba2` and a
#                                training step of `boldcast-demo`), and with two GPUs (and
#                                mpirun) the native backend's two-rank NCCL scaling at
#                                boldcast-demo. Prints one JSON line on stdout,
#                                {"cuda":{..},"dfdx":{..},"scaling":{..},"passed":..,"exit_codes":{..}}
#                                (a check that crashes, times out or prints no JSON has
#                                {"error":..,"stderr_tail":..} in its slot), and exits non-zero
#                                unless both passed; the checks' own logs go to stderr.
#   scripts/gpu-check.sh         both, on a GPU machine that has Rust.
#
# Knobs of the run: GPU_CHECK_TIMEOUT_CUDA (default 300 s) and GPU_CHECK_TIMEOUT_DFDX (240 s)
# limit each check, so that the run stays under 10 minutes; GPU_CHECK_CASES names the golden
# cases of both (default: all for the native check, the three above for dfdx); GPU_CHECK_STEPS
# the timed steps. The dfdx check's batch: GPU_CHECK_BATCH / GPU_CHECK_WINDOW /
# GPU_CHECK_PARCELS (its parcels are halved while a step does not fit in memory); the native
# one's: GPU_CHECK_CUDA_BATCH / _WINDOW / _PARCELS, and GPU_CHECK_BUDGET_S (default: its time
# limit less 60 s, or half of a limit under 120 s) the time it plans its work in. Build output
# goes to stderr.
#
# Why the build needs stand-ins: dfdx's build script runs `nvidia-smi --query-gpu=compute_cap`
# even when CUDA_COMPUTE_CAP is set, so a machine without a GPU gets a stand-in `nvidia-smi`
# that prints the wanted capability; cudarc links `libcuda` (the driver, absent without a GPU),
# so the link uses a stub `libcuda.so` with the soname `libcuda.so.1` and the real driver
# library is loaded at run time, as with the stubs of NVIDIA's own toolkit. Both binaries
# also need libnvrtc.so.13 and libcublas.so.13 (with libcublasLt.so.13) at run time, which
# the toolkit and PyTorch's cu13 wheels both hold.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIST=${GPU_CHECK_DIST:-$ROOT/target/gpu-check/dist}
TOOLKIT=${GPU_CHECK_TOOLKIT:-$ROOT/target/cuda-toolkit}

fail() {
    printf '{"gpu_check":"failed","error":"%s","passed":false}\n' "$1"
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
        "$TOOLKIT/bin/pip" install -q --no-cache-dir nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-nvrtc \
            nvidia-cuda-cccl nvidia-cublas nvidia-curand >&2
        d=$(ls -d "$TOOLKIT"/lib/python3*/site-packages/nvidia/cu13 | head -n1)
    fi
    echo "$d"
}

# NCCL from PyPI into the toolkit's environment, linked as $1/lib64/libnccl.so; fails when
# it cannot be had (or MPI, which starts the ranks, is missing).
nccl_sdk() {
    command -v mpicc >/dev/null 2>&1 || return 1
    local lib
    lib=$(ls "$TOOLKIT"/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.* 2>/dev/null | head -n1 || true)
    if [ -z "$lib" ]; then
        "$TOOLKIT/bin/pip" install -q --no-cache-dir nvidia-nccl-cu13 >&2 || return 1
        lib=$(ls "$TOOLKIT"/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.* 2>/dev/null | head -n1 || true)
    fi
    [ -n "$lib" ] && ln -sf "$lib" "$1/lib64/libnccl.so"
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
    # No debug info: the binaries are stripped anyway, and it saves gigabytes and link time.
    export CARGO_PROFILE_RELEASE_DEBUG=${CARGO_PROFILE_RELEASE_DEBUG:-0}
    # Both examples are named gpu_check (target/release/examples/gpu_check): each is stripped
    # into a staging folder right after its build, which replaces $DIST once all are built.
    local stage=$DIST.new rel=$CARGO_TARGET_DIR/release
    rm -rf "$stage" && mkdir -p "$stage"
    cargo build --release -p boldcast-dfdx --features cuda --example gpu_check >&2
    strip -o "$stage/gpu_check" "$rel/examples/gpu_check"
    cargo build --release -p boldcast-cuda --features cuda --example gpu_check >&2
    strip -o "$stage/gpu_check_cuda" "$rel/examples/gpu_check"
    ! cmp -s "$stage/gpu_check" "$stage/gpu_check_cuda" || fail "the two gpu_check examples came out identical"
    cargo build --release -p bc-cli --features cuda >&2
    strip -o "$stage/bc-cli" "$rel/bc-cli"
    # bc-cli with NCCL (MPI starts the ranks) for run's two-GPU scaling; optional, as it needs
    # MPI here (mpicc, libclang) and NCCL from PyPI. Without it run skips the scaling.
    if nccl_sdk "$sdk" && cargo build --release -p bc-cli --features nccl >&2; then
        strip -o "$stage/bc-cli-nccl" "$rel/bc-cli"
    else
        echo "gpu-check: bc-cli with NCCL not built (needs MPI and NCCL); run will skip the two-GPU scaling" >&2
    fi
    rm -rf "$DIST" && mv "$stage" "$DIST"
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

# LD_LIBRARY_PATH for cudarc's libraries (libnvrtc.so.13, libcublas.so.13, libcublasLt.so.13;
# libcuda.so.1 is the driver's, from the system): this toolkit, then PyTorch's nvidia wheels.
cuda_libs() {
    local dirs=() d
    for d in "$TOOLKIT"/lib/python3*/site-packages/nvidia/cu13/lib "$TOOLKIT"/lib/python3*/site-packages/nvidia/nccl/lib; do
        [ -d "$d" ] && dirs+=("$d")
    done
    while IFS= read -r d; do
        [ -n "$d" ] && dirs+=("$d")
    done < <(python3 - 2>/dev/null <<'PY' || true
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + [p for p in sys.path if p.endswith("-packages")]
# PyTorch may live in another Python than python3's: the usual other places too.
for g in ("/usr/local/lib/python3*/*-packages", "/usr/lib/python3*/*-packages", "/opt/conda/lib/python3*/site-packages",
          "/opt/*/lib/python3*/site-packages", os.path.expanduser("~/.local/lib/python3*/site-packages")):
    roots += sorted(glob.glob(g))
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

# Runs one check under a time limit: its stdout to $2.json, its stderr to $2.log (and to
# ours as it comes), its exit status to $2.rc (127: not there or a library missing).
run_check() {
    local bin=$1 out=$2 limit=$3 missing
    : >"$out.json"
    if [ ! -x "$bin" ]; then
        echo "no $bin: rebuild with scripts/gpu-check.sh build" >"$out.log"
        echo 127 >"$out.rc"
        return
    fi
    missing=$(ldd "$bin" | grep 'not found' || true)
    if [ -n "$missing" ]; then
        echo "libraries not found: $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')" >"$out.log"
        echo 127 >"$out.rc"
        return
    fi
    local rc
    set +e
    timeout -k 10 "$limit" "$bin" 2>&1 >"$out.json" | tee "$out.log" >&2
    rc=${PIPESTATUS[0]}
    set -e
    echo "$rc" >"$out.rc"
}

# The two-GPU scaling of the native backend: `bc-cli bench --backend cuda --precision bf16
# --preset boldcast-demo` on two ranks under mpirun (one GPU each, NCCL), whose JSON line has
# `scaling_efficiency`; or, in $1.json, why it was skipped.
run_scaling() {
    local out=$1 limit=$2 gpus
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    local why=""
    [ "$gpus" -ge 2 ] || why="one GPU ($gpus seen): the scaling needs two"
    [ -n "$why" ] || command -v mpirun >/dev/null 2>&1 || why="no mpirun on this machine"
    [ -n "$why" ] || [ -x "$DIST/bc-cli-nccl" ] || why="no $DIST/bc-cli-nccl (built only where MPI and NCCL were)"
    if [ -n "$why" ]; then
        printf '{"skipped":"%s"}\n' "$why" >"$out.json"
        : >"$out.log"
        echo 0 >"$out.rc"
        return
    fi
    local rc
    set +e
    timeout -k 10 "$limit" mpirun --allow-run-as-root --oversubscribe -np 2 bash -c \
        'CUDA_VISIBLE_DEVICES=${OMPI_COMM_WORLD_LOCAL_RANK:-0} exec "$0" bench --backend cuda --precision bf16 --preset boldcast-demo --steps 3 --warmup 1' \
        "$DIST/bc-cli-nccl" 2>"$out.log" | grep '^{' | tail -n1 >"$out.json"
    rc=${PIPESTATUS[0]}
    set -e
    echo "$rc" >"$out.rc"
}

# The checks' results as one JSON line; exits 0 when both checks passed (the scaling is
# reported, and does not decide it).
merge() {
    python3 - "$1" "$GPU_CHECK_TIMEOUT_CUDA" "$GPU_CHECK_TIMEOUT_DFDX" "$GPU_CHECK_TIMEOUT_SCALING" <<'PY'
import json, sys
out, limits = sys.argv[1], {"cuda": sys.argv[2], "dfdx": sys.argv[3], "scaling": sys.argv[4]}

def slot(name):
    rc = int(open(f"{out}/{name}.rc").read().strip() or 1)
    lines = [l for l in open(f"{out}/{name}.json", errors="replace").read().splitlines() if l.strip()]
    log = open(f"{out}/{name}.log", errors="replace").read().splitlines()
    try:
        v = json.loads(lines[-1]) if lines else None
    except ValueError:
        v = None
    if rc in (124, 137):
        why = f"timed out after {limits[name]} s (GPU_CHECK_TIMEOUT_{name.upper()})"
    elif not isinstance(v, dict):
        why = f"exited with status {rc} and printed no JSON"
    else:
        return rc, v
    e = {"error": why, "stderr_tail": log[-15:]}
    if isinstance(v, dict):
        e["partial"] = v
    return rc, e

(cuda_rc, cuda), (dfdx_rc, dfdx), (sc_rc, scaling) = slot("cuda"), slot("dfdx"), slot("scaling")
passed = cuda_rc == 0 and cuda.get("passed") is True and dfdx_rc == 0 and dfdx.get("gpu_check") == "ok"
codes = {"cuda": cuda_rc, "dfdx": dfdx_rc, "scaling": sc_rc}
print(json.dumps({"cuda": cuda, "dfdx": dfdx, "scaling": scaling, "passed": passed, "exit_codes": codes}))
sys.exit(0 if passed else 1)
PY
}

run() {
    [ -x "$DIST/gpu_check" ] || [ -x "$DIST/gpu_check_cuda" ] ||
        fail "no $DIST/gpu_check*: run scripts/gpu-check.sh build first (on a CPU machine with Rust)"
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        fail "no NVIDIA GPU visible (nvidia-smi -L failed)"
    fi
    command -v python3 >/dev/null 2>&1 || fail "python3 not found (it merges the two checks' JSON)"
    local libs out
    libs=$(cuda_libs)
    export LD_LIBRARY_PATH=${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export GPU_CHECK_GOLDEN=${GPU_CHECK_GOLDEN:-$DIST/golden}
    # Under 10 minutes in all: with two GPUs the scaling takes 150 s of the checks' time.
    local gpus
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    if [ "$gpus" -ge 2 ]; then
        export GPU_CHECK_TIMEOUT_CUDA=${GPU_CHECK_TIMEOUT_CUDA:-240} GPU_CHECK_TIMEOUT_DFDX=${GPU_CHECK_TIMEOUT_DFDX:-180}
    else
        export GPU_CHECK_TIMEOUT_CUDA=${GPU_CHECK_TIMEOUT_CUDA:-300} GPU_CHECK_TIMEOUT_DFDX=${GPU_CHECK_TIMEOUT_DFDX:-240}
    fi
    export GPU_CHECK_TIMEOUT_SCALING=${GPU_CHECK_TIMEOUT_SCALING:-150}
    out=$(mktemp -d)
    echo "gpu-check: LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >&2
    local t=$GPU_CHECK_TIMEOUT_CUDA
    GPU_CHECK_BUDGET_S=${GPU_CHECK_BUDGET_S:-$((t > 120 ? t - 60 : t / 2))} \
        run_check "$DIST/gpu_check_cuda" "$out/cuda" "$GPU_CHECK_TIMEOUT_CUDA"
    run_check "$DIST/gpu_check" "$out/dfdx" "$GPU_CHECK_TIMEOUT_DFDX"
    run_scaling "$out/scaling" "$GPU_CHECK_TIMEOUT_SCALING"
    local rc=0
    merge "$out" || rc=$?
    rm -rf "$out"
    exit "$rc"
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
