//! The runs a fingerprint compares ([`Segment`]: whole runs, each run's two halves when no
//! subject has two runs, or the first `N` TRs of each run, [`first_trs`]) and the classical functional-connectivity fingerprint of one
//! ([`fc_features`], Finn et al. 2015).
//!
//! # Functional connectivity
//!
//! The FC matrix of a segment is the Pearson correlation of every pair of parcels over its
//! TRs, `r_pq = sum_t x_tp x_tq / sqrt(sum_t x_tp^2 sum_t x_tq^2)` on the parcels centred over
//! the segment; the features are its upper triangle `p < q`, row by row (`P (P - 1) / 2`
//! edges). A constant parcel correlates with nothing (its edges are 0; the dataset warns of
//! it). Two subjects' fingerprints are compared by the Pearson correlation of their edge
//! vectors ([`super::Similarity::Pearson`]), as Finn et al. do.
//!
//! The edges are Fisher z-transformed by default ([`FcEdges::FisherZ`], `z = atanh r`, `|r|`
//! capped at `1 - 1e-12`): the transform makes an edge's sampling variance about `1 / (n - 3)`
//! whatever its `r`, so the strong edges, whose `r` is compressed near ±1, weigh as the weak
//! ones do in the similarity. Finn et al. correlate the `r` values themselves
//! ([`FcEdges::Pearson`]); on the planted dataset both identify every subject.

use super::Sample;
use crate::AnalysisError;
use boldcast_data::Dataset;
use serde::Serialize;

/// The fewest TRs of a half: a correlation over fewer says nothing.
pub const MIN_HALF_TRS: usize = 3;

/// The values of one edge of the FC fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FcEdges {
    /// The Pearson correlation `r` (Finn et al. 2015).
    Pearson,
    /// `atanh r` (the default; see the module documentation).
    FisherZ,
}

/// A stretch of one run: the whole run, or one of its halves.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// The subject label (without `sub-`).
    pub subject: String,
    /// `sub-01_run-1`, or `sub-01_run-1 (first half)` / `(second half)`.
    pub label: String,
    /// TRs.
    pub n_tr: usize,
    /// Parcels.
    pub parcels: usize,
    /// `x[t, p]` at `data[t * parcels + p]`, standardized per parcel over the segment.
    pub data: Vec<f64>,
}

/// Whether `runs` (indices into `ds.runs`) need halves: no subject has two of them, so no
/// whole run could be a query.
pub fn needs_halves(ds: &Dataset, runs: &[usize]) -> bool {
    let mut subjects: Vec<&str> = runs.iter().map(|&i| ds.runs[i].id.subject.as_str()).collect();
    let n = subjects.len();
    subjects.sort_unstable();
    subjects.dedup();
    subjects.len() == n
}

/// The runs `runs`, whole, in that order.
pub fn whole_runs(ds: &Dataset, runs: &[usize]) -> Result<Vec<Segment>, AnalysisError> {
    runs.iter()
        .map(|&i| {
            let r = &ds.runs[i];
            let data = r.rows(0, r.n_tr)?.into_owned();
            Ok(Segment {
                subject: r.id.subject.clone(),
                label: r.id.to_string(),
                n_tr: r.n_tr,
                parcels: ds.parcels,
                data,
            })
        })
        .collect()
}

/// Each of `runs` as its two halves, first then second: TRs `0..n/2` and `n - n/2..n` (an
/// odd run drops its middle TR, so the halves are equally long), each standardized again per
/// parcel over its own TRs (as a run is). Errors when a half would have fewer than
/// [`MIN_HALF_TRS`] TRs.
pub fn halves(ds: &Dataset, runs: &[usize]) -> Result<Vec<Segment>, AnalysisError> {
    let mut out = Vec::with_capacity(2 * runs.len());
    for &i in runs {
        let r = &ds.runs[i];
        let h = r.n_tr / 2;
        if h < MIN_HALF_TRS {
            let reason = format!("{}: {} TRs cannot be split into halves of {MIN_HALF_TRS} or more", r.id, r.n_tr);
            return Err(AnalysisError::Fingerprint { reason });
        }
        for (t0, name) in [(0, "first"), (r.n_tr - h, "second")] {
            let mut data = r.rows(t0, t0 + h)?.into_owned();
            // The values are a standardized run's, all finite: this cannot fail.
            let _ = boldcast_data::standardize(&mut data, h, ds.parcels);
            let label = format!("{} ({name} half)", r.id);
            out.push(Segment { subject: r.id.subject.clone(), label, n_tr: h, parcels: ds.parcels, data });
        }
    }
    Ok(out)
}

/// The first `n` TRs of each of `runs`, each standardized again per parcel over its own TRs
/// (as a run is): one short segment per run, so a segment is identified from the other runs'
/// segments only. Errors when `n` is below [`MIN_HALF_TRS`] or above the shortest run's TRs,
/// naming that run.
pub fn first_trs(ds: &Dataset, runs: &[usize], n: usize) -> Result<Vec<Segment>, AnalysisError> {
    if n < MIN_HALF_TRS {
        let reason = format!("--segment {n}: a correlation needs {MIN_HALF_TRS} or more TRs");
        return Err(AnalysisError::Fingerprint { reason });
    }
    if let Some(r) = runs.iter().map(|&i| &ds.runs[i]).min_by_key(|r| r.n_tr).filter(|r| r.n_tr < n) {
        let reason = format!("--segment {n}: longer than the shortest run, {} ({} TRs)", r.id, r.n_tr);
        return Err(AnalysisError::Fingerprint { reason });
    }
    runs.iter()
        .map(|&i| {
            let r = &ds.runs[i];
            let mut data = r.rows(0, n)?.into_owned();
            // The values are a standardized run's, all finite: this cannot fail.
            let _ = boldcast_data::standardize(&mut data, n, ds.parcels);
            let label = format!("{} (first {n} TRs)", r.id);
            Ok(Segment { subject: r.id.subject.clone(), label, n_tr: n, parcels: ds.parcels, data })
        })
        .collect()
}

/// `atanh r`, `|r|` capped at `1 - 1e-12` so that `r = ±1` (a parcel with itself, or a copy)
/// stays finite.
pub fn fisher_z(r: f64) -> f64 {
    r.clamp(-1.0 + 1e-12, 1.0 - 1e-12).atanh()
}

/// The FC fingerprint of `seg`: the upper triangle of its parcel-by-parcel correlation
/// matrix, as `edges` (see the module documentation).
pub fn fc_features(seg: &Segment, edges: FcEdges) -> Vec<f64> {
    let (n, p) = (seg.n_tr, seg.parcels);
    let mut cols: Vec<Vec<f64>> = (0..p).map(|q| (0..n).map(|t| seg.data[t * p + q]).collect()).collect();
    for c in cols.iter_mut() {
        let m = c.iter().sum::<f64>() / n as f64;
        c.iter_mut().for_each(|v| *v -= m);
    }
    let norms: Vec<f64> = cols.iter().map(|c| c.iter().map(|v| v * v).sum::<f64>().sqrt()).collect();
    let mut out = Vec::with_capacity(p * p.saturating_sub(1) / 2);
    for a in 0..p {
        for b in a + 1..p {
            let dot: f64 = cols[a].iter().zip(&cols[b]).map(|(x, y)| x * y).sum();
            let r = if norms[a] > 0.0 && norms[b] > 0.0 { dot / (norms[a] * norms[b]) } else { 0.0 };
            out.push(match edges {
                FcEdges::Pearson => r,
                FcEdges::FisherZ => fisher_z(r),
            });
        }
    }
    out
}

/// The FC fingerprint of every segment, as samples for [`super::identify()`].
pub fn fc_samples(segments: &[Segment], edges: FcEdges) -> Vec<Sample> {
    segments
        .iter()
        .map(|s| Sample { subject: s.subject.clone(), label: s.label.clone(), features: fc_features(s, edges) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_fixtures::SynthRun;

    fn run(subject: &str, run: &str, n_tr: usize, f: impl Fn(usize, usize) -> f64) -> SynthRun {
        let data = (0..n_tr * 3).map(|i| f(i / 3, i % 3)).collect();
        SynthRun { subject: subject.into(), run: run.into(), n_tr, parcels: 3, data }
    }

    #[test]
    fn fc_of_known_series() {
        // Parcel 1 = parcel 0, parcel 2 = -parcel 0 + a small orthogonal part.
        let x = [1.0, -1.0, 2.0, -2.0];
        let o = [1.0, 1.0, -1.0, -1.0];
        let data = (0..4).flat_map(|t| [x[t], x[t], -x[t] + 0.5 * o[t]]).collect();
        let seg = Segment { subject: "01".into(), label: "s".into(), n_tr: 4, parcels: 3, data };
        let r = fc_features(&seg, FcEdges::Pearson);
        // x . o = 0, |x|^2 = 10, |o|^2 = 4: r(0, 2) = -10 / sqrt(10 (10 + 0.25 * 4)) = -sqrt(10/11).
        let want = [1.0, -(10.0f64 / 11.0).sqrt(), -(10.0f64 / 11.0).sqrt()];
        assert!(r.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-15), "{r:?}");
        let z = fc_features(&seg, FcEdges::FisherZ);
        assert!((z[1] - want[1].atanh()).abs() < 1e-12 && z[0] > 14.0 && z[0].is_finite(), "{z:?}");
    }

    #[test]
    fn halves_split_each_run_and_restandardize() {
        let runs = [
            run("01", "1", 9, |t, p| (t * (p + 1)) as f64 + (t % 2) as f64),
            run("02", "1", 9, |t, p| ((t + p) % 4) as f64),
        ];
        let ds = Dataset::from_synth(&runs, None).unwrap();
        assert!(needs_halves(&ds, &[0, 1]));
        let h = halves(&ds, &[0, 1]).unwrap();
        let labels: Vec<&str> = h.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "sub-01_run-1 (first half)",
                "sub-01_run-1 (second half)",
                "sub-02_run-1 (first half)",
                "sub-02_run-1 (second half)"
            ]
        );
        assert_eq!((h[0].n_tr, h[1].n_tr, h[1].subject.as_str()), (4, 4, "01"));
        // The second half is TRs 5..9 (the middle TR 4 is dropped), standardized again.
        let mean: f64 = (0..4).map(|t| h[1].data[t * 3]).sum::<f64>() / 4.0;
        let var: f64 = (0..4).map(|t| h[1].data[t * 3].powi(2)).sum::<f64>() / 4.0;
        assert!(mean.abs() < 1e-12 && (var - 1.0).abs() < 1e-12);
        let all = ds.runs[0].to_vec().unwrap();
        let raw: Vec<f64> = (5..9).map(|t| all[t * 3]).collect();
        let rm = raw.iter().sum::<f64>() / 4.0;
        let rs = (raw.iter().map(|v| (v - rm).powi(2)).sum::<f64>() / 4.0).sqrt();
        assert!((h[1].data[0] - (raw[0] - rm) / rs).abs() < 1e-12);
        let short = Dataset::from_synth(&[run("01", "1", 5, |t, p| (t * p) as f64 + t as f64)], None).unwrap();
        let e = halves(&short, &[0]).unwrap_err().to_string();
        assert_eq!(e, "fingerprint: sub-01_run-1: 5 TRs cannot be split into halves of 3 or more");
    }

    #[test]
    fn first_trs_cut_each_run_and_refuse_what_does_not_fit() {
        let runs = [
            run("01", "1", 9, |t, p| (t * (p + 1)) as f64 + (t % 2) as f64),
            run("01", "2", 7, |t, p| ((t + p) % 4) as f64),
        ];
        let ds = Dataset::from_synth(&runs, None).unwrap();
        let s = first_trs(&ds, &[0, 1], 5).unwrap();
        assert_eq!((s[1].label.as_str(), s[1].n_tr, s[1].data.len()), ("sub-01_run-2 (first 5 TRs)", 5, 15));
        let raw: Vec<f64> = ds.runs[0].to_vec().unwrap()[..15].to_vec();
        let col: Vec<f64> = (0..5).map(|t| raw[t * 3 + 1]).collect();
        let m = col.iter().sum::<f64>() / 5.0;
        let sd = (col.iter().map(|v| (v - m).powi(2)).sum::<f64>() / 5.0).sqrt();
        assert!((s[0].data[3 + 1] - (col[1] - m) / sd).abs() < 1e-12, "standardized over its own TRs");
        let e = |n| first_trs(&ds, &[0, 1], n).unwrap_err().to_string();
        assert_eq!(e(8), "fingerprint: --segment 8: longer than the shortest run, sub-01_run-2 (7 TRs)");
        assert_eq!(e(2), "fingerprint: --segment 2: a correlation needs 3 or more TRs");
        let whole = first_trs(&ds, &[0, 1], 7).unwrap().remove(1).data;
        assert!(whole.iter().zip(ds.runs[1].to_vec().unwrap()).all(|(a, b)| (a - b).abs() < 1e-12), "a whole run");
    }

    #[test]
    fn two_runs_of_one_subject_need_no_halves() {
        let runs = [run("01", "1", 4, |t, p| (t + p) as f64), run("01", "2", 4, |t, p| (t * p) as f64 + t as f64)];
        let ds = Dataset::from_synth(&runs, None).unwrap();
        assert!(!needs_halves(&ds, &[0, 1]));
        assert!(needs_halves(&ds, &[1]));
        let w = whole_runs(&ds, &[1, 0]).unwrap();
        assert_eq!((w[0].label.as_str(), w[0].n_tr, w[0].data.len()), ("sub-01_run-2", 4, 12));
    }
}
