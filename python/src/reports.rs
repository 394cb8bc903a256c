//! The reports of `bc-cli eval`, `fingerprint` and `floor --data`, as the same JSON text
//! their `--json` prints, computed on a Python dataset.

use crate::dataset::{with_data, NativeDataset};
use crate::err;
use crate::model::NativeModel;
use boldcast::storage::made_by;
use boldcast_analysis::eval::{evaluate_weights, EvalData, Weights};
use boldcast_analysis::fingerprint::model::fingerprint_model;
use boldcast_analysis::infer::{Pool, Predictor};
use boldcast_cpu::CpuModel;
use boldcast_train::data::load_data;
use pyo3::prelude::*;

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The weights of `model`, opened, allowing other data when asked.
fn weights(model: &NativeModel, allow_other_data: bool) -> Result<Weights, String> {
    let w = Weights::open(&model.weights).map_err(text)?;
    Ok(if allow_other_data { w.allow_other_data() } else { w })
}

/// `bc-cli eval --json` of `model` on `dataset`'s held-out subjects (the run's split).
#[pyfunction]
#[pyo3(signature = (model, dataset, allow_other_data=false))]
pub fn evaluate(
    py: Python<'_>,
    model: &NativeModel,
    dataset: &NativeDataset,
    allow_other_data: bool,
) -> PyResult<String> {
    py.allow_threads(|| {
        let w = weights(model, allow_other_data)?;
        let cfg = with_data(model.cfg.clone(), &dataset.overlay)?;
        let data = EvalData::new(load_data(&cfg).map_err(text)?, &cfg).map_err(text)?;
        let report = evaluate_weights(&w, &cfg, &data, CpuModel::<f32>::new).map_err(text)?;
        serde_json::to_string(&made_by::stamp(&report)).map_err(text)
    })
    .map_err(err)
}

/// `bc-cli fingerprint --json` of `model` on every run of `dataset`, features pooled by
/// `pool` (`corr` or `mean`), segments of `segment` TRs when given.
#[pyfunction]
#[pyo3(signature = (model, dataset, pool="corr", segment=None, allow_other_data=false))]
pub fn fingerprint(
    py: Python<'_>,
    model: &NativeModel,
    dataset: &NativeDataset,
    pool: &str,
    segment: Option<usize>,
    allow_other_data: bool,
) -> PyResult<String> {
    let pool = match pool {
        "corr" => Pool::Corr,
        "mean" => Pool::Mean,
        other => return Err(err(format!("pool `{other}`: must be corr or mean"))),
    };
    py.allow_threads(|| {
        let w = Weights::open(&model.weights).map_err(text)?;
        let cfg = with_data(model.cfg.clone(), &dataset.overlay)?;
        let p = Predictor::open_weights(&w, cfg, allow_other_data, CpuModel::<f32>::new).map_err(text)?;
        let runs = p.select(None, "subjects").map_err(text)?;
        let (ctx, _) = p.context(None, None);
        let kin = p.relatives(None, &runs).map_err(text)?;
        let how = (&ctx, pool).into();
        let report = fingerprint_model(&p.model, &p.loaded.ds, &runs, how, segment, &kin).map_err(text)?;
        serde_json::to_string(&made_by::stamp(&report)).map_err(text)
    })
    .map_err(err)
}

/// `bc-cli floor --data --json` of `dataset` for `horizons` (tokens) of `d_in` TRs.
#[pyfunction]
#[pyo3(signature = (dataset, horizons, d_in))]
pub fn floor(py: Python<'_>, dataset: &NativeDataset, horizons: Vec<usize>, d_in: usize) -> PyResult<String> {
    py.allow_threads(|| {
        let loaded = dataset.reload()?;
        let r = boldcast_analysis::floor::empirical_floor_report(&loaded.ds, &dataset.label, &horizons, d_in)
            .map_err(text)?;
        serde_json::to_string(&made_by::stamp(&r.json)).map_err(text)
    })
    .map_err(err)
}
