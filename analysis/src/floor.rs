//! The loss floor a user asks for (`bc-cli floor`): exact for an AR(1) of coefficient `rho`
//! ([`boldcast_core::floor`]), or the empirical single-lag floor of a dataset with its
//! filtered-input check ([`boldcast_data::spectrum`]), as text and as JSON.
//!
//! ```
//! use boldcast_analysis::floor::{floor_report, FloorRequest, FloorSource};
//! let req = FloorRequest { source: FloorSource::Rho(0.9), horizons: vec![1], d_in: 1, picks: Default::default() };
//! let r = floor_report(&req).unwrap();
//! assert!((r.json["overall"].as_f64().unwrap() - 0.19).abs() < 1e-12);
//! ```

use crate::AnalysisError;
use boldcast_core::floor::{ar1_floor, ar1_floor_per_horizon};
use boldcast_data::{horizon_seconds, horizon_seconds_text, Dataset, Selection};
use serde_json::json;
use std::fmt::Write;
use std::path::PathBuf;

/// Whose floor.
#[derive(Clone, Debug, PartialEq)]
pub enum FloorSource {
    /// The exact floor of an AR(1) with this coefficient.
    Rho(f64),
    /// The empirical single-lag floor of the dataset in this directory.
    Data(PathBuf),
}

/// A floor to compute.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorRequest {
    /// Whose floor.
    pub source: FloorSource,
    /// Forecast horizons, in tokens.
    pub horizons: Vec<usize>,
    /// TRs per token.
    pub d_in: usize,
    /// How the runs of a dataset are picked.
    pub picks: Selection,
}

/// The floor: the JSON document, and the same numbers as text.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorReport {
    /// The JSON document.
    pub json: serde_json::Value,
    /// The text.
    pub text: String,
    /// Notes (ignored files, zero-variance parcels, the filtered-input warning).
    pub notes: Vec<String>,
}

fn horizons_text(h: &[usize]) -> String {
    h.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// Computes the floor `req` asks for.
pub fn floor_report(req: &FloorRequest) -> Result<FloorReport, AnalysisError> {
    match &req.source {
        FloorSource::Rho(rho) => exact(*rho, &req.horizons, req.d_in),
        FloorSource::Data(dir) => empirical(dir, req),
    }
}

fn exact(rho: f64, h: &[usize], d: usize) -> Result<FloorReport, AnalysisError> {
    let per = ar1_floor_per_horizon(rho, h, d)?;
    let overall = ar1_floor(rho, h, d)?;
    let mut text = format!("exact AR(1) floor, rho {rho}, d_in {d}, horizons {}\n", horizons_text(h));
    for (hh, v) in h.iter().zip(&per) {
        writeln!(text, "  horizon {hh}: {v:.6}").unwrap();
    }
    writeln!(text, "  overall: {overall:.6}").unwrap();
    let json = json!({
        "kind": "ar1", "rho": rho, "d_in": d, "horizons": h,
        "per_horizon": per, "overall": overall,
        "formula": "mean over horizons h and token elements j < D of 1 - rho^(2L), L = (h-1) D + j + 1",
    });
    Ok(FloorReport { json, text, notes: Vec::new() })
}

fn empirical(dir: &std::path::Path, req: &FloorRequest) -> Result<FloorReport, AnalysisError> {
    let ds = Dataset::load_with(dir, &req.picks)?;
    empirical_floor_report(&ds, &dir.display().to_string(), &req.horizons, req.d_in)
}

/// The empirical floor report of a dataset already loaded (`data`: where it came from, in
/// words, for the text and the JSON's `data`): what `bc-cli floor --data` gives for a
/// directory, for data loaded another way (the Python package's in-memory runs).
pub fn empirical_floor_report(ds: &Dataset, data: &str, h: &[usize], d: usize) -> Result<FloorReport, AnalysisError> {
    let boldcast_data::EmpiricalFloor { overall, per_horizon, per_parcel } = ds.empirical_floor(h, d)?;
    let spectrum = boldcast_data::spectrum::input_spectrum(ds)?;
    let mut notes = ds.notes();
    notes.extend(spectrum.warning());
    let mut text = format!(
        "empirical single-lag floor of {data} ({} runs, {} parcels), d_in {d}, horizons {}\n",
        ds.runs.len(),
        ds.parcels,
        horizons_text(h)
    );
    for (hh, v) in h.iter().zip(&per_horizon) {
        match ds.tr {
            Some(tr) => writeln!(text, "  horizon {hh} ({}): {v:.6}", horizon_seconds_text(*hh, d, tr)).unwrap(),
            None => writeln!(text, "  horizon {hh}: {v:.6}").unwrap(),
        }
    }
    writeln!(text, "  overall: {overall:.6}").unwrap();
    if let Some(tr) = ds.tr {
        writeln!(text, "TR {tr} s").unwrap();
    }
    writeln!(text, "{}", spectrum.summary_line()).unwrap();
    writeln!(text, "per parcel:").unwrap();
    let w = ds.parcel_names.iter().map(String::len).max().unwrap_or(0);
    for (n, v) in ds.parcel_names.iter().zip(&per_parcel) {
        writeln!(text, "  {n:<w$}  {v:.6}").unwrap();
    }
    let json = json!({
        "kind": "empirical", "data": data, "runs": ds.runs.len(), "parcels": ds.parcels,
        "d_in": d, "horizons": h, "overall": overall, "per_horizon": per_horizon,
        "tr_seconds": ds.tr,
        "horizon_seconds": ds.tr.map(|tr| h.iter().map(|&hh| horizon_seconds(hh, d, tr)).collect::<Vec<_>>()),
        "per_parcel": ds.parcel_names.iter().zip(&per_parcel).map(|(n, v)| json!({"name": n, "floor": v})).collect::<Vec<_>>(),
        "estimator": "1 - acf_p(L)^2, acf the biased sample autocorrelation of each standardized run, averaged over runs; \
                      mean over horizons and token elements (MODEL.md, The loss floor)",
        "input_spectrum": spectrum,
    });
    Ok(FloorReport { json, text, notes })
}
