//! The one error type of the core. Every variant names the offending value, so a command-line
//! tool can print it as it is.

use alloc::string::String;
use alloc::sync::Arc;
use core::fmt;

/// What can go wrong in the core and in the backends that implement its traits.
#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    /// A runtime size did not match: `what` names the axis or tensor.
    Shape {
        /// The axis or tensor, e.g. `"tokens.parcels"`.
        what: String,
        /// The size that was required.
        expected: usize,
        /// The size that was found.
        found: usize,
    },
    /// A configuration value is invalid.
    Config {
        /// The field, e.g. `"model.horizons"`.
        field: String,
        /// The offending value as text.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
    /// A loss or gradient norm was NaN or infinite at a training step.
    NonFinite {
        /// The 0-based step.
        step: u64,
        /// `"loss"` or `"gradient norm"`.
        what: &'static str,
        /// The value seen.
        value: f64,
    },
    /// A named parameter was missing, extra or of the wrong shape when loading weights.
    Param {
        /// The parameter name of MODEL.md.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A backend failure (device, allocation, I/O) described in words.
    Backend(String),
    /// A backend's own typed error (a refused kernel launch, a device that cannot start),
    /// kept whole so that [`core::error::Error::source`] reaches its causes.
    Device(DeviceError),
}

/// A backend's error inside [`Error::Device`]: shared, so that [`Error`] stays `Clone`.
#[derive(Clone, Debug)]
pub struct DeviceError(Arc<dyn core::error::Error + Send + Sync>);

impl DeviceError {
    /// Wraps a backend's error.
    pub fn new(e: impl core::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(e))
    }

    /// The backend's error, to downcast to its own type.
    pub fn get(&self) -> &(dyn core::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

/// Two device errors are equal when they say the same (the wrapped types need not be
/// comparable).
impl PartialEq for DeviceError {
    fn eq(&self, other: &Self) -> bool {
        use alloc::string::ToString;
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Error {
    /// A shape mismatch on `what`.
    pub fn shape(what: impl Into<String>, expected: usize, found: usize) -> Self {
        Error::Shape { what: what.into(), expected, found }
    }

    /// An invalid configuration value.
    pub fn config(field: impl Into<String>, value: impl fmt::Display, reason: impl Into<String>) -> Self {
        use alloc::string::ToString;
        Error::Config { field: field.into(), value: value.to_string(), reason: reason.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Shape { what, expected, found } => {
                write!(f, "shape mismatch in {what}: expected {expected}, found {found}")
            }
            Error::Config { field, value, reason } => {
                write!(f, "invalid {field} = {value}: {reason}")
            }
            Error::NonFinite { step, what, value } => {
                write!(f, "non-finite {what} ({value}) at step {step}")
            }
            Error::Param { name, reason } => write!(f, "parameter `{name}`: {reason}"),
            Error::Backend(msg) => write!(f, "backend error: {msg}"),
            Error::Device(e) => write!(f, "backend error: {e}"),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Device(e) => Some(e.get()),
            _ => None,
        }
    }
}

/// The core's result type.
pub type Result<T, E = Error> = core::result::Result<T, E>;
