//! Datasets: a directory the loader reads with the `[data]` options given as keywords, or
//! numpy arrays written into a temporary directory in the loader's own format, so that both
//! go through one loader ([`boldcast_train::data::load_data`]) with every option it has.

use crate::err;
use boldcast_data::config::DataConfig;
use boldcast_data::{write_run, RunFormat};
use boldcast_fixtures::SynthRun;
use boldcast_train::config::RunConfig;
use boldcast_train::data::{load_data, LoadedData};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;
use serde_json::{Map, Value};

/// `[data]` keys set by the caller, over a configuration's own.
pub type Overlay = Map<String, Value>;

/// `cfg` with `overlay`'s keys set in its `[data]` table: an unknown key is an error naming
/// it (the loader's options are `DataConfig`'s fields, whoever adds them).
pub fn with_data(mut cfg: RunConfig, overlay: &Overlay) -> Result<RunConfig, String> {
    let Value::Object(mut table) = serde_json::to_value(&cfg.data).map_err(|e| e.to_string())? else {
        return Err("the [data] table does not serialize to a table".into());
    };
    for (k, v) in overlay {
        table.insert(k.clone(), v.clone());
    }
    cfg.data = serde_json::from_value::<DataConfig>(Value::Object(table)).map_err(|e| format!("data option: {e}"))?;
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// The configuration a bare dataset is loaded with: the `quick` preset's, with `overlay`.
fn bare_config(overlay: &Overlay) -> Result<RunConfig, String> {
    let base = boldcast_train::presets::preset("quick").map_err(|e| e.to_string())?;
    with_data(base, overlay)
}

/// A dataset: its `[data]` keys (with `dir`), what loading it said, and the temporary
/// directory its runs were written to when they came as arrays.
#[pyclass(module = "boldcast._native", frozen)]
pub struct NativeDataset {
    pub(crate) overlay: Overlay,
    pub(crate) label: String,
    ids: Vec<String>,
    subjects: Vec<String>,
    parcel_names: Vec<String>,
    tr: Option<f64>,
    notes: Vec<String>,
    _tmp: Option<tempfile::TempDir>,
}

impl NativeDataset {
    fn load(overlay: Overlay, label: String, tmp: Option<tempfile::TempDir>) -> Result<Self, String> {
        let loaded = load_data(&bare_config(&overlay)?).map_err(|e| e.to_string())?;
        let ds = &loaded.ds;
        Ok(NativeDataset {
            ids: ds.runs.iter().map(|r| r.id.to_string()).collect(),
            subjects: ds.runs.iter().map(|r| r.id.subject.clone()).collect(),
            parcel_names: ds.parcel_names.clone(),
            tr: ds.tr,
            notes: loaded.notes.clone(),
            overlay,
            label,
            _tmp: tmp,
        })
    }

    /// The dataset loaded again, as `cfg` (with this dataset's `[data]` keys) says.
    pub fn reload(&self) -> Result<LoadedData, String> {
        load_data(&bare_config(&self.overlay)?).map_err(|e| e.to_string())
    }
}

/// The label of `subject` without `sub-`: ASCII letters and digits, as BIDS names need.
fn subject_label(subject: &str) -> Result<String, String> {
    let s = subject.strip_prefix("sub-").unwrap_or(subject);
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "subjects: `{subject}` is not a subject label (ASCII letters and digits, optionally after `sub-`)"
        ));
    }
    Ok(s.to_string())
}

/// Writes `runs` (TRs x parcels, as `(n_tr, parcels, values)`) of `subjects` into `dir`:
/// `.npy` (float64, exact) without names, `.tsv` with them.
fn write_runs(
    dir: &std::path::Path,
    runs: Vec<(usize, usize, Vec<f64>)>,
    subjects: &[String],
    names: Option<&[String]>,
) -> Result<(), String> {
    if runs.len() != subjects.len() {
        return Err(format!("subjects: {} labels for {} runs (one label per run)", subjects.len(), runs.len()));
    }
    let mut count = std::collections::BTreeMap::<String, usize>::new();
    for (i, ((n_tr, parcels, data), subject)) in runs.into_iter().zip(subjects).enumerate() {
        let subject = subject_label(subject)?;
        let k = count.entry(subject.clone()).or_default();
        *k += 1;
        let run = SynthRun { subject, run: k.to_string(), n_tr, parcels, data };
        let (format, names) = match names {
            Some(n) => (RunFormat::Tsv, n.to_vec()),
            None => (RunFormat::Npy, boldcast_fixtures::parcel_names(parcels)),
        };
        if names.len() != parcels {
            return Err(format!("runs[{i}]: {parcels} parcels, but {} parcel names", names.len()));
        }
        let path = dir.join(boldcast_data::run_file_name(&run, format));
        write_run(&path, &run, &names, format).map_err(|e| format!("runs[{i}]: {e}"))?;
    }
    Ok(())
}

#[pymethods]
impl NativeDataset {
    /// Loads the directory of `data["dir"]` with the other `[data]` keys of `data_json`.
    #[staticmethod]
    fn open(py: Python<'_>, data_json: &str) -> PyResult<Self> {
        let overlay: Overlay = serde_json::from_str(data_json).map_err(err)?;
        let label = overlay.get("dir").and_then(Value::as_str).unwrap_or("?").to_string();
        py.allow_threads(|| Self::load(overlay, label, None)).map_err(err)
    }

    /// Writes `runs` (2-D float64 arrays, TRs x parcels) of `subjects` to a temporary
    /// directory and loads it with the `[data]` keys of `data_json`.
    #[staticmethod]
    #[pyo3(signature = (runs, subjects, parcel_names, data_json))]
    fn from_arrays(
        py: Python<'_>,
        runs: Vec<PyReadonlyArray2<'_, f64>>,
        subjects: Vec<String>,
        parcel_names: Option<Vec<String>>,
        data_json: &str,
    ) -> PyResult<Self> {
        let mut overlay: Overlay = serde_json::from_str(data_json).map_err(err)?;
        let runs: Vec<(usize, usize, Vec<f64>)> = runs
            .iter()
            .map(|a| {
                let v = a.as_array();
                (v.nrows(), v.ncols(), v.iter().copied().collect())
            })
            .collect();
        let n = runs.len();
        py.allow_threads(|| {
            let tmp = tempfile::Builder::new().prefix("boldcast-arrays-").tempdir().map_err(|e| e.to_string())?;
            write_runs(tmp.path(), runs, &subjects, parcel_names.as_deref())?;
            overlay.insert("dir".into(), Value::String(tmp.path().to_string_lossy().into_owned()));
            Self::load(overlay, format!("{n} arrays (Dataset.from_arrays)"), Some(tmp))
        })
        .map_err(err)
    }

    /// Run identities (`sub-01_run-1`), in the loader's order.
    #[getter]
    fn run_ids(&self) -> Vec<String> {
        self.ids.clone()
    }

    /// Each run's subject label (without `sub-`).
    #[getter]
    fn run_subjects(&self) -> Vec<String> {
        self.subjects.clone()
    }

    /// Parcel names, in column order.
    #[getter]
    fn parcel_names(&self) -> Vec<String> {
        self.parcel_names.clone()
    }

    /// The TR in seconds, when known.
    #[getter]
    fn tr(&self) -> Option<f64> {
        self.tr
    }

    /// The loader's notes (ignored files, tables beside the runs, warnings).
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    /// Where the data came from, in words.
    #[getter]
    fn label(&self) -> String {
        self.label.clone()
    }

    /// The `[data]` keys, as JSON.
    fn data_json(&self) -> String {
        Value::Object(self.overlay.clone()).to_string()
    }

    /// The runs as 2-D float64 arrays (TRs x parcels): standardized per parcel (mean 0,
    /// standard deviation 1, what the model reads) when `standardized`, else in their units.
    fn arrays<'py>(&self, py: Python<'py>, standardized: bool) -> PyResult<Vec<Bound<'py, PyArray2<f64>>>> {
        let loaded = py.allow_threads(|| self.reload()).map_err(err)?;
        let ds = &loaded.ds;
        let mut out = Vec::with_capacity(ds.runs.len());
        for r in &ds.runs {
            let mut x = r.rows(0, r.n_tr).map_err(err)?.into_owned();
            if !standardized {
                for row in x.chunks_exact_mut(ds.parcels.max(1)) {
                    for (v, s) in row.iter_mut().zip(&r.stats) {
                        *v = s.undo(*v);
                    }
                }
            }
            let a = Array2::from_shape_vec((r.n_tr, ds.parcels), x).map_err(err)?;
            out.push(a.into_pyarray(py));
        }
        Ok(out)
    }
}
