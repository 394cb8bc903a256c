//! `boldcast-data`: datasets of BOLD runs, from the files on disk to the tokens a model reads
//! (MODEL.md, "Data to tokens"). One module per job:
//!
//! - `names`: BIDS names ([`BidsName`], [`RunId`], [`parse_run_name`]); `discover`: where the
//!   runs of a directory or tree are; [`select`](mod@select): which are loaded, and their TR;
//! - `read`: the readers of one run file (`.npy`, `.tsv`/`.csv`, CIFTI-2 in [`cifti`], 4-D
//!   NIfTI averaged over an atlas image),
//!   `parcels`: `parcels.tsv`; `store`: runs in memory or kept on disk ([`DiskRun`]);
//! - [`write`](mod@write): the writers beside the readers ([`write_run`], [`write_parcels`]);
//! - `standardize`: [`standardize()`], run-wise standardization per parcel, by the one formula
//!   [`ParcelStats::apply`] (and [`ParcelStats::undo`] back to the run's units);
//! - `dataset`: [`Dataset::load`], [`Dataset::from_synth`], series and the empirical floor;
//! - `window`: [`WindowSpec`], [`WindowRef`], windows and tokens;
//! - `adjacency`: the k-nearest-neighbour table from centroids or correlation;
//! - [`spectrum`]: the filtered-input check ([`spectrum::input_spectrum`]: does a dataset look
//!   low-pass or band-pass filtered?);
//! - [`split`](mod@split): the one subject split ([`split()`], [`Split`], [`parse_subject_list`]);
//! - [`config`]: the `[data]` and `[window]` sections of a run's TOML file;
//! - [`missing`]: what a missing cell does (`--missing error|drop-parcel`);
//! - [`confounds`]: confound regression with detrending (`--confounds`), as nilearn's
//!   `signal.clean`;
//! - [`synth`](mod@synth): a synthetic dataset written as real ones are, with its exact floor;
//! - `error`: [`DataError`], [`SplitError`].
//!
//! Files are written, hashed and sized against the machine's memory through
//! [`boldcast_storage`].
//!
//! # The directory
//!
//! A flat directory, or the root of a BIDS derivatives tree whose runs lie under
//! `sub-*/[ses-*/]func/` (`discover`), one file per run, named with BIDS entities:
//! `sub-<label>[_ses-<label>][_<key>-<value>...][_<suffix>].<ext>` (a name without `run-` is
//! run 1; `names`), where labels are ASCII letters and digits (the run index digits only:
//! `run-01` and `run-1` are one run) and `<ext>` is one of
//!
//! - `.npy`: a 2-D float32 or float64 array `(n_tr, P)` (C or Fortran order; little-endian C
//!   order stays on disk and is read window by window, `store`);
//! - `.tsv` / `.csv`: a header row of parcel names (as XCP-D writes its time series), then one
//!   row per TR, cells separated by a tab (`.tsv`) or a comma (`.csv`). Quotes around header
//!   names are stripped; quoted cells are not otherwise supported. Trailing empty lines are
//!   ignored;
//! - `.ptseries.nii` (CIFTI-2 parcel series), or `.dtseries.nii` averaged over the labels of
//!   [`Selection::parcellation`] ([`cifti`]);
//! - `_bold.nii` / `_bold.nii.gz` (4-D NIfTI-1 or NIfTI-2) averaged over the labels of
//!   [`Selection::atlas_image`] on the same grid, as nilearn's `NiftiLabelsMasker` does.
//!
//! The derivative entities (`space`, `seg`/`atlas`, `den`, `desc`, `stat`, ...) say which
//! version of a run a file is; [`Selection`] picks one when a tree holds several, and its TR.
//! The tables beside the series (coverage, motion, ...) are left out and listed
//! ([`Dataset::tables`]).
//!
//! The acquisition entities (e.g. `task-rest`) are part of the run's identity. Files with a data
//! extension whose names do not match the pattern (an extension in
//! another case, `.NPY`, included: run files end in lowercase) are **ignored and listed** in
//! [`Dataset::ignored`] (the command line prints them as a note, [`Dataset::notes`]); entries
//! named like runs or `parcels.tsv` that are not readable files (a dangling symbolic link, one
//! that cannot be followed, a directory) are **skipped and listed** in [`Dataset::skipped`],
//! with why (a note too); files with other extensions are skipped silently, and so is
//! `parcels.tsv`, which is read on its own:
//! `name x y z` per parcel (a header row `name x y z`, then one row per parcel in the order of
//! the runs' columns). With it, the adjacency is the k nearest parcels by Euclidean distance;
//! without it, the k most correlated parcels on the training runs (both self first, ties
//! broken by the lower index).
//!
//! Every run must have the same parcels: the same count, and for `.tsv`/`.csv` the same names
//! in the same order (the first run read, in file-name order, sets them). Every bad input is a
//! [`DataError`] naming the file and, for a cell, its line (1-based, the header is line 1) or
//! row (0-based, `.npy`) and column (1-based, with the parcel name).
//!
//! # Standardization, windows, tokens
//!
//! Each run is standardized per parcel in f64 (mean 0, population standard deviation 1), the
//! parcel first scaled by a power of two so that values near 1e300 or 1e-300 standardize as
//! ordinary ones do (and ordinary ones to the same bits as the plain two-pass formula); a
//! parcel whose values are all equal has zero standard deviation, becomes zeros and
//! [`Dataset::warnings`] says so once per parcel; a non-finite value is an error naming the
//! file (or generated run), the row and the parcel. Windows of `window` TRs start at `0, stride, 2 stride, ...` while they fit; a window
//! becomes tokens `tokens[t, p, j] = x[start + t D + j, p]`.
#![deny(missing_docs)]

mod adjacency;
mod cache;
pub mod config;
pub mod confounds;
mod dataset;
mod discover;
mod error;
pub mod groups;
pub mod missing;
pub mod motion;
mod names;
mod parcels;
mod read;
pub mod select;
pub mod spectrum;
pub mod split;
mod standardize;
mod store;
pub mod synth;
mod window;
pub mod write;

#[cfg(test)]
mod testutil;

pub use dataset::{Dataset, EmpiricalFloor, FileStamp, Run, Tr};
pub use error::{DataError, SplitError};
pub use names::{parse_bids_name, parse_run_name, parse_sidecar_name, BidsName, RunId};
pub use read::cifti;
pub use select::Selection;
pub use split::{parse_subject_list, shuffle_indices, split, Split, SubjectList};
pub use standardize::{constant_parcels, parcel_stats, parcel_stats_rows, standardize, NonFinite, ParcelStats};
pub use store::{DiskElem, DiskRun};
pub use window::{horizon_seconds, horizon_seconds_text, seconds_span_text, seconds_text, WindowRef, WindowSpec};
pub use write::{run_file_name, write_parcels, write_run, RunFormat};
