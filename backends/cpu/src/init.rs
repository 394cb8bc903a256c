//! Seeded initialization: the core's [`boldcast_core::init`], under the path the CUDA backend
//! calls.

pub use boldcast_core::init::{fill, initialize, rule_for, Rule};
