#!/usr/bin/env bash
# NVRTC for the kernel compile check (backends/cuda/tests/cuda/nvrtc.rs): installs the PyPI wheel
# nvidia-cuda-nvrtc-cu12 (about 90 MB; no GPU, driver or toolkit needed) into target/nvrtc
# unless it is there already, and prints the path of libnvrtc.so.* for BOLDCAST_NVRTC:
#
#   export BOLDCAST_NVRTC="$(scripts/nvrtc.sh)"
#
# Only the library's path goes to stdout; pip's messages go to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned, so that CI compiles with the same NVRTC from run to run.
WHEEL="nvidia-cuda-nvrtc-cu12==12.9.86"
DEST="$PWD/target/nvrtc"

find_lib() {
    [ -d "$DEST" ] || return 0
    find "$DEST" -name 'libnvrtc.so.*' -not -name '*builtins*' | sort | head -n 1
}

lib="$(find_lib)"
if [ -z "$lib" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$DEST" "$WHEEL" >&2
    lib="$(find_lib)"
fi
if [ -z "$lib" ]; then
    echo "scripts/nvrtc.sh: $WHEEL installed into $DEST but no libnvrtc.so.* is there" >&2
    exit 1
fi
echo "$lib"
