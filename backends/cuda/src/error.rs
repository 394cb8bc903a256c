//! The crate's error: what a model call of this backend can fail with, each cause kept whole
//! (a refused launch, a device that cannot start) and boxed into the core's
//! [`boldcast_core::Error::Device`] through `From`, so that `?` carries it to the trait's
//! callers and [`std::error::Error::source`] reaches it.

use crate::shim::LaunchError;

/// Why a call of the CUDA backend failed.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// A kernel launch was refused before it ran, or failed on the device.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The device could not be opened (`--backend cuda`).
    #[cfg(feature = "cuda")]
    #[error("--backend cuda: {0}")]
    Device(#[source] crate::device::DeviceError),
    /// The optimizer's step does not follow the steps of the model's moments.
    #[error(
        "optimizer step {step} does not follow the {held} steps of the model's moments; restore them with \
         `restore_optimizer_state` when resuming"
    )]
    StepOutOfOrder {
        /// The step asked for.
        step: u64,
        /// The steps the moments hold.
        held: u64,
    },
    /// An optimizer other than the core's Adam.
    #[error(
        "the CUDA backend keeps its optimizer state itself and runs only the core's Adam (AdamW or \
         coupled-L2 Adam); it cannot run the optimizer `{0}`"
    )]
    Optimizer(String),
}

impl From<CudaError> for boldcast_core::Error {
    fn from(e: CudaError) -> Self {
        boldcast_core::Error::Device(boldcast_core::error::DeviceError::new(e))
    }
}

impl From<LaunchError> for boldcast_core::Error {
    fn from(e: LaunchError) -> Self {
        CudaError::from(e).into()
    }
}

#[cfg(feature = "cuda")]
impl From<crate::device::DeviceError> for CudaError {
    fn from(e: crate::device::DeviceError) -> Self {
        CudaError::Device(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_refused_launch_keeps_its_message_and_its_source() {
        let e: boldcast_core::Error = LaunchError { kernel: "act_silu_fwd", why: "y has 3 elements".into() }.into();
        assert_eq!(e.to_string(), "backend error: kernel act_silu_fwd: y has 3 elements");
        let source = e.source().expect("the launch error is the source");
        let cuda = source.downcast_ref::<CudaError>().expect("a CudaError");
        assert!(matches!(cuda, CudaError::Launch(l) if l.kernel == "act_silu_fwd"));
    }

    #[test]
    fn the_optimizer_messages_name_the_values() {
        let e: boldcast_core::Error = CudaError::StepOutOfOrder { step: 5, held: 2 }.into();
        assert!(e.to_string().starts_with("backend error: optimizer step 5 does not follow the 2 steps"), "{e}");
        let e: boldcast_core::Error = CudaError::Optimizer("sgd".into()).into();
        assert!(e.to_string().ends_with("it cannot run the optimizer `sgd`"), "{e}");
    }
}
