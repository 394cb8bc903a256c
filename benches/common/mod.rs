//! What the benches of every backend share (`benches/cpu.rs`, `benches/dfdx_cpu.rs`), so that
//! they time the same pieces on the same inputs: the allocator `bc-cli` runs with, the
//! deterministic values, the layer sizes, and the `quick` preset's training step setup.

use boldcast::core::{Adam, Adjacency, ModelConfig, TokenShape, Tokens};
use boldcast_train::config::RunConfig;

/// As `bc-cli`: buffers on cache-line boundaries (`boldcast::cpu::alloc::CacheAligned`).
#[global_allocator]
static ALLOC: boldcast::cpu::alloc::CacheAligned = boldcast::cpu::alloc::CacheAligned;

/// Deterministic values in `[-scale, scale)` (an LCG: enough for timing).
pub fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2862933555777941757).wrapping_add(3037000493);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// The `cpu-demo` preset's model: the layer size of the pieces' benches.
pub fn demo_config() -> ModelConfig {
    boldcast_train::presets::preset("cpu-demo").expect("the cpu-demo preset parses").model_config()
}

/// One training step's inputs at the `quick` preset: its model configuration and ring
/// adjacency (for the backend's model), its optimizer, and one batch of AR(1) tokens.
pub struct QuickStep {
    /// The whole run configuration (schedule, clipping).
    pub run: RunConfig,
    /// Its model configuration.
    pub model: ModelConfig,
    /// The ring adjacency when the model has the attention.
    pub adjacency: Option<Adjacency>,
    /// One batch of the preset's shape.
    pub tokens: Tokens<f32>,
}

impl QuickStep {
    /// The `quick` preset's step.
    pub fn new() -> Self {
        let run = boldcast_train::presets::preset("quick").expect("the quick preset parses");
        let model = run.model_config();
        let (batch, parcels) = (run.train.batch_size, run.data.synthetic.parcels);
        let time = run.window.window / model.d_in;
        let adjacency =
            (model.k_neighbors > 0).then(|| Adjacency::ring(parcels, model.k_neighbors).expect("a valid ring"));
        let tokens = boldcast::fixtures::ar1_tokens(TokenShape::new(batch, time, parcels, model.d_in), 0.9, 0);
        Self { run, model, adjacency, tokens }
    }

    /// The preset's optimizer.
    pub fn optimizer(&self) -> Adam<f32> {
        Adam::new(self.run.optim_config()).expect("a valid optimizer")
    }
}
