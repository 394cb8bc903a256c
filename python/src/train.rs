//! Training from Python: a run configuration (a preset, a TOML file or a dict), the dataset's
//! `[data]` keys over it, then the library's launch ([`Launch::fresh`]) on the backend the
//! configuration names, with the GIL released. An observer reports each step and validation
//! to the Python callback (taking the GIL only for that call) and checks for Ctrl-C: an
//! interrupt, or an exception in the callback, stops the run cleanly after the step (a
//! checkpoint is written, so it can be resumed) and is raised in Python.

use crate::dataset::{with_data, NativeDataset};
use crate::err;
use boldcast::backend::{dispatch_named, Builder, Job};
use boldcast_train::config::RunConfig;
use boldcast_train::launch::Launch;
use boldcast_train::run::StopFlag;
use boldcast_train::{Dist, Observer, StepRecord, TrainReport, ValRecord};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// The configuration `source` names: `kind` is `preset` (a preset's name), `path` (a TOML
/// file, resolved as `bc-cli --config` resolves it) or `json` (a table as JSON text, the
/// same keys as the TOML file).
pub fn config_of(kind: &str, source: &str) -> Result<RunConfig, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    match kind {
        "preset" => boldcast_train::presets::preset(source).map_err(|x| e(&x)),
        "path" => {
            let text = std::fs::read_to_string(source).map_err(|x| format!("{source}: {x}"))?;
            RunConfig::from_toml_str(source, &text).map_err(|x| e(&x))
        }
        "json" => {
            let value: serde_json::Value = serde_json::from_str(source).map_err(|x| e(&x))?;
            let table: toml::Table =
                serde_json::from_value(value).map_err(|x| format!("configuration dict: {x} (None is not a value)"))?;
            let text = toml::to_string(&table).map_err(|x| e(&x))?;
            RunConfig::from_toml_str("the configuration dict", &text).map_err(|x| e(&x))
        }
        other => Err(format!("configuration kind `{other}`: must be preset, path or json")),
    }
}

/// The resolved configuration of `source` (see [`config_of`]) as JSON.
#[pyfunction]
pub fn resolve_config(kind: &str, source: &str) -> PyResult<String> {
    let cfg = config_of(kind, source).map_err(err)?;
    serde_json::to_string(&cfg).map_err(err)
}

/// Reports steps and validations to the Python callback and watches for Ctrl-C.
struct PyObserver {
    callback: Option<Py<PyAny>>,
    total: u64,
    stop: StopFlag,
    error: Option<PyErr>,
}

impl PyObserver {
    /// Calls the callback with `progress` (built under the GIL) after checking for signals;
    /// an error stops the run after this step and is kept for the caller.
    fn report(&mut self, progress: impl FnOnce(Python<'_>) -> PyResult<Bound<'_, PyDict>>) {
        if self.error.is_some() {
            return;
        }
        let outcome = Python::with_gil(|py| -> PyResult<()> {
            py.check_signals()?;
            if let Some(cb) = &self.callback {
                cb.call1(py, (progress(py)?,))?;
            }
            Ok(())
        });
        if let Err(e) = outcome {
            self.error = Some(e);
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

impl Observer for PyObserver {
    fn on_step(&mut self, rec: &StepRecord) {
        let (total, r) = (self.total, *rec);
        self.report(|py| {
            let d = PyDict::new(py);
            d.set_item("kind", "train")?;
            // Steps done, 1 to total (the log's `step` is this minus one).
            d.set_item("step", r.step + 1)?;
            d.set_item("total", total)?;
            d.set_item("loss", r.loss)?;
            d.set_item("lr", r.lr)?;
            d.set_item("grad_norm", r.grad_norm)?;
            Ok(d)
        });
    }

    fn on_validation(&mut self, v: &ValRecord) {
        let (total, v) = (self.total, v.clone());
        self.report(|py| {
            let d = PyDict::new(py);
            d.set_item("kind", "validation")?;
            d.set_item("step", v.step)?;
            d.set_item("total", total)?;
            d.set_item("val_loss", v.val_loss)?;
            d.set_item("val_per_horizon", v.val_per_horizon)?;
            d.set_item("floor", v.floor)?;
            d.set_item("train_loss", v.train_loss)?;
            Ok(d)
        });
    }
}

/// Why training failed: the library's message, or the callback's exception.
enum Failure {
    Lib(String),
    Py(PyErr),
}

impl From<boldcast::core::Error> for Failure {
    fn from(e: boldcast::core::Error) -> Self {
        Failure::Lib(e.to_string())
    }
}

impl From<boldcast_train::TrainError> for Failure {
    fn from(e: boldcast_train::TrainError) -> Self {
        Failure::Lib(e.to_string())
    }
}

/// A launched run with its observer, run on whichever backend is chosen.
struct TrainJob {
    launch: Launch,
    observer: PyObserver,
}

impl Job for TrainJob {
    type Output = TrainReport;
    type Error = Failure;
    fn run<M: boldcast::core::DataParallel<f32>>(mut self, _: &str, build: Builder<M>) -> Result<TrainReport, Failure> {
        let cfg = self.launch.cfg.clone();
        let data = self.launch.load_data()?;
        let model = build(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?;
        let report = self.launch.run(&data, model, &mut [&mut self.observer]);
        match (self.observer.error, report) {
            (Some(e), _) => Err(Failure::Py(e)),
            (None, r) => Ok(r?),
        }
    }
}

/// What to train, beyond the configuration.
#[derive(Clone, Debug, Default)]
struct Settings {
    out: PathBuf,
    max_steps: Option<u64>,
    heldout: Option<Vec<String>>,
    backend: Option<String>,
}

/// The configuration of a run: `cfg` with the dataset's `[data]` keys and the settings.
fn run_config(cfg: RunConfig, dataset: &NativeDataset, s: &Settings) -> Result<RunConfig, String> {
    let mut cfg = with_data(cfg, &dataset.overlay)?;
    if let Some(n) = s.max_steps {
        cfg.train.max_steps = n;
    }
    if let Some(h) = &s.heldout {
        cfg.data.subjects_heldout = h.clone();
    }
    if let Some(b) = &s.backend {
        cfg.train.backend = b.clone();
    }
    cfg.train.out = Some(s.out.clone());
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// Trains the configuration `kind`/`source` ([`config_of`]) on `dataset` into `out` (new or
/// empty) and returns the output directory; `callback` gets each step's and validation's
/// progress as a dict.
#[pyfunction]
#[pyo3(signature = (kind, source, dataset, out, max_steps=None, heldout=None, callback=None, backend=None))]
#[allow(clippy::too_many_arguments)]
pub fn train(
    py: Python<'_>,
    kind: &str,
    source: &str,
    dataset: &NativeDataset,
    out: PathBuf,
    max_steps: Option<u64>,
    heldout: Option<Vec<String>>,
    callback: Option<Py<PyAny>>,
    backend: Option<String>,
) -> PyResult<String> {
    let settings = Settings { out, max_steps, heldout, backend };
    let cfg = config_of(kind, source).and_then(|c| run_config(c, dataset, &settings)).map_err(err)?;
    let stop = StopFlag::default();
    let observer = PyObserver { callback, total: cfg.train.max_steps, stop: stop.clone(), error: None };
    let (backend, precision) = (cfg.train.backend.clone(), cfg.train.precision.clone());
    let out = boldcast_train::launch::default_out(&cfg, "train");
    // The launch holds the ranks' collective, which is not Send: it is made in the closure.
    let result = py.allow_threads(move || {
        let launch = Launch::fresh(cfg, Dist::default())?.stop_when(Some(stop));
        dispatch_named(&backend, &precision, TrainJob { launch, observer })
    });
    match result {
        Ok(_) => Ok(out.to_string_lossy().into_owned()),
        Err(Failure::Lib(m)) => Err(err(m)),
        Err(Failure::Py(e)) => Err(e),
    }
}
