//! The data layer's integration tests (BIDS trees, the cache, CIFTI files, runs larger than\n//! memory) in one test binary.

mod bids_tree;
mod cache;
mod cifti;
mod confounds;
mod disk_runs;
mod nifti;
