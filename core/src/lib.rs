//! `boldcast-core`: everything about a BOLDcast forecaster that does not depend on where the
//! numbers live.
//!
//! The crate is `#![no_std]` with `alloc`; the `std` feature (on by default) only switches the
//! dependencies to their `std` builds. It owns:
//!
//! - [`shape`]: compile-time or runtime axis sizes for tokens `(B, T, P, D)`, forecasts
//!   `(B, T, P, H, D)` and embeddings `(B, T, P, M)`;
//! - [`tensor`]: host tensors with those shapes, in which data crosses the [`Model`] boundary;
//! - [`adjacency`]: the validated `(P, k)` neighbour table of the spatial attention;
//! - [`config`]: the model configuration and the parameter names and shapes of MODEL.md;
//! - [`init`]: the seeded initialization every backend uses, so a seed fixes one model;
//! - [`model`]: the [`Model`] trait every backend implements;
//! - [`params`]: the flat parameter store, the parameter groups layers read it through, and
//!   names built from a prefix;
//! - [`forecast`]: targets, the forecasting loss and per-horizon losses as pure functions;
//! - [`floor`]: the AR(1) loss floor and the empirical single-lag floor;
//! - [`memory`]: sizes in checked arithmetic ([`memory::Size`]), the parameter count in
//!   closed form and the bytes of the parameters and of one training step's activations;
//! - [`flops`]: the FLOPs model of a training step ([`ModelConfig::flops_per_step`]);
//! - [`optim`]: AdamW, Adam with coupled L2, the weight-decay groups, global-norm clipping;
//! - [`schedule`]: constant and warm-up + cosine learning rates;
//! - [`trainer`]: the backend-generic training step and the [`Logger`] trait;
//! - [`collective`]: data-parallel training: the [`Collective`] of the ranks of a run, the
//!   single-process one, sharding of the global batch and the averaging of gradients;
//! - [`accept`]: the acceptance rules of the training-loop decisions.
//!
//! It must never depend on a backend (dfdx, CUDA, threads, files): backends depend on it.
#![no_std]
#![deny(missing_docs)]

extern crate alloc;

pub mod accept;
pub mod adjacency;
pub mod collective;
pub mod config;
pub mod elem;
pub mod error;
pub mod floor;
pub mod flops;
pub mod forecast;
pub mod init;
pub mod memory;
pub mod model;
pub mod optim;
pub mod params;
pub mod schedule;
pub mod shape;
pub mod tensor;
pub mod trainer;

pub use adjacency::Adjacency;
pub use collective::{Collective, DataParallel, Reduce, SingleProcess};
pub use config::{
    mixer_prefix, LinearPath, ModelConfig, ModelConfigBuilder, ParamSpec, Temporal, KNN_PARAMS, MAMBA1_PARAMS,
    MAMBA2_PARAMS,
};
pub use elem::Elem;
pub use error::Error;
pub use model::{check_offset, Model};
pub use optim::{Adam, OptimConfig, Optimizer, OptimizerKind, ParamMut};
pub use schedule::{Schedule, ScheduleConfig, ScheduleKind};
pub use shape::{Const, Dim, EmbedShape, ForecastShape, Shape, TokenShape};
pub use tensor::{Embeddings, Forecasts, HostTensor, Tokens};
pub use trainer::{Logger, StepRecord, Trainer};
