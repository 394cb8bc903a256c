#!/usr/bin/env bash
# The Python package: lints its crate, builds it with `pip install ./python` into a fresh
# venv (maturin from PyPI, crates from crates.io) and runs its pytest suite. The build goes to
# target/python, so a second run only relinks what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="$PWD/target/python"
cargo fmt --manifest-path python/Cargo.toml -- --check
# Lints with the main target directory: the dependencies the main lints checked are reused.
CARGO_TARGET_DIR="$PWD/target" cargo clippy --manifest-path python/Cargo.toml --all-targets -- -D warnings
venv="$CARGO_TARGET_DIR/venv"
rm -rf "$venv"
python3 -m venv "$venv"
# pip builds the wheel in place (maturin, release profile without debug info, python/Cargo.toml).
"$venv/bin/pip" install --quiet ./python pytest nibabel nilearn pandas tqdm tensorboard
(cd python/tests && "$venv/bin/python" -m pytest -q)
