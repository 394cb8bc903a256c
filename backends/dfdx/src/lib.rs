//! The dfdx backend (dfdx 0.13 on cudarc, `Cpu` and `Cuda` devices).
//!
//! Not implemented yet (issue 6): this crate holds no model, and nothing selects it. It exists
//! so the workspace layout is final.
#![deny(missing_docs)]

/// Why the dfdx backend cannot be used in this build.
pub const UNAVAILABLE: &str = "the dfdx backend is not implemented yet (issue 6); use --backend cpu";
