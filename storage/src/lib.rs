//! How boldcast keeps things on disk, and whether they fit in memory: writes that never leave
//! half a file ([`fsutil`]), safetensors files of named tensors with PyTorch's names and a
//! recorded content hash ([`tensorfile`]), the one content hash ([`hash`]) and the machine's
//! memory checked against an estimate ([`memory`]). It knows nothing of BOLD data or
//! training; the data, train and analysis crates write through it.
//!
//! ```
//! use boldcast_storage::fsutil::write_atomic;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("note.txt");
//! write_atomic(&path, b"kept whole\n").unwrap();
//! assert_eq!(std::fs::read_to_string(&path).unwrap(), "kept whole\n");
//! ```
#![deny(missing_docs)]

mod error;
pub mod fsutil;
pub mod hash;
pub mod made_by;
pub mod memory;
pub mod tensorfile;
pub mod tfevents;

pub use error::{io_err, StorageError};
