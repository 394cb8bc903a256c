//! Unit tests of the Mamba-2 mixer's internals; the finite-difference checks live in
//! `tests/mamba2_fd.rs`.
