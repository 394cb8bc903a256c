//! Compiles the CPU shim (`shim/*.cpp`, each including one kernel file of `kernels/`) into a
//! static library, so the kernels run on the CPU in every build, with or without CUDA.

use std::path::Path;

fn main() {
    let mut build = cc::Build::new();
    build.cpp(true).std("c++20").include("shim").warnings(true).extra_warnings(true);
    // No contraction of `a * b + c` into fused multiply-adds: the CPU backend's reference
    // functions round each operation, and bitwise comparisons need the shim to do the same.
    build.flag("-ffp-contract=off").flag("-pthread").flag("-Wno-unused-parameter");
    for dir in ["shim", "kernels"] {
        println!("cargo:rerun-if-changed={dir}");
        for entry in std::fs::read_dir(dir).expect("shim and kernels directories") {
            let path = entry.expect("directory entry").path();
            println!("cargo:rerun-if-changed={}", path.display());
            if dir == "shim" && path.extension() == Some("cpp".as_ref()) {
                build.file(&path);
            }
        }
    }
    assert!(Path::new("shim/shim.h").exists(), "shim/shim.h is missing");
    build.compile("boldcast_cuda_shim");
    println!("cargo:rustc-link-lib=pthread");
}
