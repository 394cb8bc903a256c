//! `bc-cli floor`: the exact AR(1) floor, or the empirical single-lag floor of a dataset.

use crate::args::FloorArgs;
use crate::error::CliError;
use boldcast::core::floor::{ar1_floor, ar1_floor_per_horizon};
use boldcast::data::{horizon_seconds, horizon_seconds_text, Dataset};
use serde_json::json;
use std::fmt::Write;

/// The command's result: the JSON document, and the text shown without `--json`.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorReport {
    /// What `--json` prints.
    pub json: serde_json::Value,
    /// What is printed otherwise.
    pub text: String,
    /// Notes for standard error (ignored files, zero-variance parcels, the filtered-input
    /// warning).
    pub notes: Vec<String>,
}

fn horizons_text(h: &[usize]) -> String {
    h.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// Computes the floor `args` asks for.
pub fn run(args: &FloorArgs) -> Result<FloorReport, CliError> {
    let (h, d) = (&args.horizons, args.d_in);
    if let Some(rho) = args.rho {
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
        return Ok(FloorReport { json, text, notes: Vec::new() });
    }
    let dir = args.data.as_ref().expect("clap requires --rho or --data");
    let ds = Dataset::load_with(dir, &args.picks.selection())?;
    let boldcast::data::EmpiricalFloor { overall, per_horizon, per_parcel } = ds.empirical_floor(h, d)?;
    let spectrum = boldcast::data::spectrum::input_spectrum(&ds)?;
    let mut notes = ds.notes();
    notes.extend(spectrum.warning());
    let mut text = format!(
        "empirical single-lag floor of {} ({} runs, {} parcels), d_in {d}, horizons {}\n",
        dir.display(),
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
        "kind": "empirical", "data": dir.display().to_string(), "runs": ds.runs.len(), "parcels": ds.parcels,
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
