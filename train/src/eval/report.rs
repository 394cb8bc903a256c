//! What an evaluation reports: [`Row`] (an MSE per horizon and their mean) and
//! [`EvalReport`], whose JSON is `bc-cli eval --json`'s output (fields in this order).

use serde::Serialize;
use std::path::PathBuf;

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// `model`, `zero`, `last_token`, `window_mean`, `ar1`, `floor_empirical`, `floor_exact`.
    pub name: String,
    /// MSE per horizon.
    pub per_horizon: Vec<f64>,
    /// Their mean (the loss).
    pub mean: f64,
}

impl Row {
    /// The row `name` of the values `per` per horizon, with their mean.
    pub fn new(name: &str, per: Vec<f64>) -> Row {
        let mean = per.iter().sum::<f64>() / per.len().max(1) as f64;
        Row { name: name.into(), per_horizon: per, mean }
    }
}

/// What an evaluation reports (`bc-cli eval --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalReport {
    /// The weights file.
    pub weights: PathBuf,
    /// Where the data came from.
    pub data: String,
    /// The horizons, in tokens.
    pub horizons: Vec<usize>,
    /// Held-out subjects.
    pub heldout_subjects: Vec<String>,
    /// Held-out windows evaluated.
    pub windows: usize,
    /// The model and the baselines.
    pub rows: Vec<Row>,
    /// The floors (empirical; exact for the synthetic fixture).
    pub floors: Vec<Row>,
    /// The fitted AR(1) coefficient per parcel.
    pub ar1_phi: Vec<f64>,
    /// What the user should be warned of (data other than the training data, when allowed).
    pub warnings: Vec<String>,
}

impl EvalReport {
    /// The row called `name` (model, baselines or floors).
    pub fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().chain(&self.floors).find(|r| r.name == name)
    }
}
