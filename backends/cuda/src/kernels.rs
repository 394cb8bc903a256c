//! The kernel sources, embedded in the crate: each `kernels/*.cu` file, after the helpers of
//! `kernels/common.cuh`, with the names of the `extern "C" __global__` functions it defines.
//! The device path (`device`) and the NVRTC check (`tests/cuda/nvrtc.rs`) compile every file listed
//! here, one program each; the shim includes the same header before each file.

/// One kernel file: a single NVRTC program.
#[derive(Clone, Copy, Debug)]
pub struct KernelFile {
    /// The file name under `kernels/`, also the NVRTC program name.
    pub name: &'static str,
    /// The CUDA C source: `kernels/common.cuh`, then the file (its lines numbered as in the
    /// file, for NVRTC's messages).
    pub source: &'static str,
    /// The `extern "C" __global__` functions it defines, in file order.
    pub kernels: &'static [&'static str],
}

/// NVRTC's options besides the architecture, the same for the run-time compile of the
/// device path (`device`) and CI's compile check (`tests/cuda/nvrtc.rs`): no contraction into
/// fused multiply-adds, as the shim's `-ffp-contract=off`, so that the device rounds each
/// operation as the shim and the CPU backend do.
pub const NVRTC_OPTIONS: &[&str] = &["--fmad=false"];

/// NVRTC's options for compute capability `major.minor`: the architecture, then
/// [`NVRTC_OPTIONS`].
pub fn nvrtc_options(major: i32, minor: i32) -> Vec<String> {
    let mut v = vec![format!("--gpu-architecture=compute_{major}{minor}")];
    v.extend(NVRTC_OPTIONS.iter().map(|o| o.to_string()));
    v
}

/// A kernel file's program: the shared header, then the file, whose lines NVRTC numbers from 1.
macro_rules! with_common {
    ($file:literal) => {
        concat!(
            include_str!("../kernels/common.cuh"),
            "#line 1 \"",
            $file,
            "\"\n",
            include_str!(concat!("../kernels/", $file))
        )
    };
}

/// Every kernel file of the crate.
pub const FILES: &[KernelFile] = &[
    KernelFile {
        name: "act.cu",
        source: with_common!("act.cu"),
        kernels: &[
            "act_softplus_fwd",
            "act_softplus_bwd",
            "act_silu_fwd",
            "act_silu_bwd",
            "act_gate_fwd",
            "act_gate_bwd",
            "act_add",
            "act_decay_fwd",
            "act_decay_bwd",
        ],
    },
    KernelFile {
        name: "layout.cu",
        source: with_common!("layout.cu"),
        kernels: &["layout_swap_axes", "layout_copy_cols", "layout_fill"],
    },
    KernelFile {
        name: "autocast.cu",
        source: with_common!("autocast.cu"),
        kernels: &["autocast_round_bf16", "autocast_pack_bf16", "autocast_unpack_bf16"],
    },
    KernelFile {
        name: "layernorm.cu",
        source: with_common!("layernorm.cu"),
        kernels: &["layernorm_fwd", "layernorm_bwd_x", "layernorm_bwd_params_partial", "layernorm_bwd_params_final"],
    },
    KernelFile {
        name: "optim.cu",
        source: with_common!("optim.cu"),
        kernels: &[
            "optim_adam_step",
            "optim_sumsq_partial",
            "optim_sumsq_final",
            "optim_clip_factor",
            "optim_scale",
            "optim_scale_by",
        ],
    },
    KernelFile {
        name: "mamba1.cu",
        source: with_common!("mamba1.cu"),
        kernels: &[
            "mamba1_conv_fwd",
            "mamba1_conv_bwd_gc",
            "mamba1_conv_bwd_x",
            "mamba1_conv_bwd_params_partial",
            "mamba1_conv_bwd_params_final",
            "mamba1_scan_fwd",
            "mamba1_scan_bwd",
            "mamba1_scan_bwd_final",
        ],
    },
    KernelFile {
        name: "knn.cu",
        source: with_common!("knn.cu"),
        kernels: &["knn_attend_fwd", "knn_attend_bwd_q", "knn_attend_bwd_kv"],
    },
    KernelFile {
        name: "loss.cu",
        source: with_common!("loss.cu"),
        kernels: &["loss_mse_partial", "loss_mse_final", "loss_mse_bwd"],
    },
    KernelFile {
        name: "mamba2.cu",
        source: with_common!("mamba2.cu"),
        kernels: &[
            "mamba2_scan_fwd",
            "mamba2_scan_bwd",
            "mamba2_scan_bwd_final",
            "mamba2_gnorm_fwd",
            "mamba2_gnorm_bwd_x",
            "mamba2_gnorm_bwd_w_partial",
            "mamba2_gnorm_bwd_w_final",
        ],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The list and the sources agree: every listed kernel is defined in its file, in order,
    /// and the file defines no kernel the list leaves out.
    #[test]
    fn every_kernel_is_listed() {
        for file in FILES {
            let defined: Vec<&str> = file
                .source
                .split("extern \"C\" __global__ void ")
                .skip(1)
                .map(|rest| rest.split('(').next().unwrap_or("").trim())
                .collect();
            assert_eq!(defined, file.kernels, "{}", file.name);
        }
        let on_disk = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension() == Some("cu".as_ref()))
            .count();
        assert_eq!(on_disk, FILES.len(), "a file of kernels/ is not in kernels::FILES");
    }
}
