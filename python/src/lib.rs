//! `boldcast._native`: the Rust half of the Python package `boldcast`. The Python half
//! (`python/boldcast/__init__.py`) owns the public names and their documentation; this
//! module loads datasets, trains, opens weights and computes the reports through the library
//! crates, and hands back numpy arrays and JSON text. Long calls release the GIL.
#![deny(missing_docs)]

mod dataset;
mod model;
mod reports;
mod train;

use pyo3::prelude::*;

pyo3::import_exception!(boldcast, BoldcastError);

/// A library error as the Python exception `boldcast.BoldcastError`, with the library's message.
pub(crate) fn err(e: impl std::fmt::Display) -> PyErr {
    BoldcastError::new_err(e.to_string())
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<dataset::NativeDataset>()?;
    m.add_class::<model::NativeModel>()?;
    m.add_function(wrap_pyfunction!(train::train, m)?)?;
    m.add_function(wrap_pyfunction!(reports::evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(reports::fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(reports::floor, m)?)?;
    m.add_function(wrap_pyfunction!(train::resolve_config, m)?)?;
    Ok(())
}
