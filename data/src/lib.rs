//! `boldcast-data`: datasets of BOLD runs, from the files on disk to the tokens a model reads
//! (MODEL.md, "Data to tokens"). See [`Dataset`] for the directory format.
#![deny(missing_docs)]

mod dataset;

pub use dataset::*;
