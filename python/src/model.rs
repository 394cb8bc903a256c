//! A trained model opened from its weights (a run directory, a checkpoint directory or a
//! `.safetensors` file), run on numpy arrays on the CPU backend: forecasts and embeddings of
//! one run at a time ([`boldcast_analysis::infer`]), under the default context (the training
//! window, [`boldcast_analysis::infer::context_of`]).

use crate::err;
use boldcast_analysis::eval::Weights;
use boldcast_analysis::infer::{context_of, run_embeddings, run_forecasts, Context};
use boldcast_cpu::CpuModel;
use boldcast_data::{Dataset, Run};
use boldcast_fixtures::SynthRun;
use boldcast_train::config::RunConfig;
use boldcast_train::linear_path::LinearPathModel;
use numpy::ndarray::{Array, IxDyn};
use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArray2};
use pyo3::prelude::*;
use std::path::PathBuf;

/// Opened weights: their file and stored configuration (the model is built per call, so the
/// object holds no model state between calls).
#[pyclass(module = "boldcast._native", frozen)]
pub struct NativeModel {
    pub(crate) weights: PathBuf,
    pub(crate) cfg: RunConfig,
}

/// One run of `array` (TRs x parcels), standardized as the loader does.
fn one_run(n_tr: usize, parcels: usize, data: Vec<f64>) -> Result<Dataset, String> {
    let run = SynthRun { subject: "array".into(), run: "1".into(), n_tr, parcels, data };
    Dataset::from_synth_owned(vec![run], None).map_err(|e| e.to_string())
}

/// What a call on one array gives: the shape and the values.
type Shaped = (Vec<usize>, Vec<f32>);

impl NativeModel {
    /// `f` on `array` as one standardized run, with the model and the default context, the
    /// GIL released; its result as numpy.
    fn on_array<'py>(
        &self,
        py: Python<'py>,
        array: &PyReadonlyArray2<'py, f64>,
        f: impl FnOnce(&LinearPathModel<CpuModel<f32>>, &Run, &Context) -> Result<Shaped, String> + Send,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let (n, p, data) = values(array);
        let (shape, out) = py
            .allow_threads(|| {
                let ds = one_run(n, p, data)?;
                let model = self.model(&ds)?;
                let (ctx, _) = context_of(&self.cfg, None, None);
                f(&model, &ds.runs[0], &ctx)
            })
            .map_err(err)?;
        to_numpy(py, &shape, out)
    }

    /// The model with its weights, for data of `ds`'s parcels (the stored adjacency).
    fn model(&self, ds: &Dataset) -> Result<LinearPathModel<CpuModel<f32>>, String> {
        let weights = Weights::open(&self.weights).map_err(|e| e.to_string())?;
        weights.build_model(&self.cfg, ds, None, CpuModel::<f32>::new).map_err(|e| e.to_string())
    }
}

/// `(n_tr, parcels, values)` of a 2-D array.
fn values(a: &PyReadonlyArray2<'_, f64>) -> (usize, usize, Vec<f64>) {
    let v = a.as_array();
    (v.nrows(), v.ncols(), v.iter().copied().collect())
}

/// An array of `shape` as numpy.
fn to_numpy<'py>(py: Python<'py>, shape: &[usize], data: Vec<f32>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    Ok(Array::from_shape_vec(IxDyn(shape), data).map_err(err)?.into_pyarray(py))
}

#[pymethods]
impl NativeModel {
    /// Opens the weights at `path` and their stored configuration.
    #[staticmethod]
    fn open(path: PathBuf) -> PyResult<Self> {
        let weights = Weights::open(&path).map_err(err)?;
        let cfg = weights.config().map_err(err)?;
        Ok(NativeModel { weights: weights.path().to_path_buf(), cfg })
    }

    /// The weights file.
    #[getter]
    fn weights(&self) -> String {
        self.weights.to_string_lossy().into_owned()
    }

    /// The stored run configuration, as JSON.
    fn config_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.cfg).map_err(err)
    }

    /// Forecasts of every token of `array` (TRs x parcels): float32 `(n_tokens, H, d_in, P)`,
    /// in the array's units unless `standardized`; NaN where the target TR is past the
    /// array's end when `mask_past_end`.
    fn forecast<'py>(
        &self,
        py: Python<'py>,
        array: PyReadonlyArray2<'py, f64>,
        standardized: bool,
        mask_past_end: bool,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        self.on_array(py, &array, |model, run, ctx| {
            let f = run_forecasts(model, run, ctx).map_err(|e| e.to_string())?;
            let values = if standardized { f.std.clone() } else { f.in_units(run) };
            let values = if mask_past_end { f.masked_past_end(values, run.n_tr) } else { values };
            Ok((f.shape().to_vec(), values))
        })
    }

    /// Embeddings of every token of `array` (TRs x parcels): float32 `(n_tokens, P, d_model)`.
    fn embed<'py>(&self, py: Python<'py>, array: PyReadonlyArray2<'py, f64>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        self.on_array(py, &array, |model, run, ctx| {
            let e = run_embeddings(model, run, ctx).map_err(|e| e.to_string())?;
            let s = e.shape();
            Ok((vec![s.time, s.parcels, s.d_model], e.into_data()))
        })
    }
}
