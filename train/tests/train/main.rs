//! The training library's integration tests in one test binary: one link instead of one per\n//! file.

mod filtered_input;
mod launch;
mod linear_path;
mod presets;
mod red_flags;
