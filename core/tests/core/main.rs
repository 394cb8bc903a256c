//! The core's integration tests (properties, the trainer, Monte Carlo checks of the floor)\n//! in one test binary.

mod monte_carlo;
mod properties;
mod trainer;
