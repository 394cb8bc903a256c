//! The filtered-input check ([`input_spectrum`]): does a dataset look low-pass or band-pass
//! filtered? Preprocessing pipelines often band-pass BOLD series (0.01 to 0.1 Hz); a
//! zero-phase filter (forward and backward, or in the Fourier domain) mixes each sample with
//! later ones, so a forecaster sees part of the future in its past and scores better than it
//! could on data as they arrive.
//!
//! # The measure
//!
//! Per run, the power spectrum averaged over parcels: Welch's average of Hann-windowed
//! periodograms of segments of `L` TRs (the largest power of two up to the run's length and
//! [`MAX_SEGMENT`]), overlapping by about half, each segment's mean removed, over at most
//! [`MAX_PARCELS`] parcels evenly spaced across the columns (a parcel's spectrum is an
//! estimate of the same shape; the cap keeps the check cheap on wide data). The run's
//! **cutoff** is the lowest frequency below which [`POWER_FRACTION`] (99.9 %) of that power
//! lies, as a fraction of the Nyquist frequency, and in Hz when the TR is known. Runs shorter
//! than [`MIN_TRS`] TRs, or whose measured parcels are all constant, are left out.
//!
//! # The rule
//!
//! The data **look filtered** when the median run's cutoff is below [`FILTERED_BELOW`] (0.6)
//! of Nyquist: in the median run less than 0.1 % of the power lies in the top 40 % of the band.
//! Unfiltered BOLD keeps a floor of thermal and aliased physiological noise up to Nyquist. In
//! this measure white noise has 40 % of its power there, an AR(1) of coefficient 0.9 about 3 %
//! and one of 0.99 about 0.6 % (0.5 % at 0.999: a segment sees little of the slowest power),
//! all far above 0.1 %. A filter with its edge at 0.1 Hz empties that band at any TR below
//! 3 s (0.6 of Nyquist is 0.3 / TR Hz), so the common band-passes are caught; a low-pass
//! with its edge above 0.6 of Nyquist is not.

use crate::dataset::Dataset;
use crate::error::DataError;
use serde::{Deserialize, Serialize};

/// The share of a run's power below its cutoff.
pub const POWER_FRACTION: f64 = 0.999;
/// The data look filtered when the median run's cutoff is below this fraction of Nyquist.
pub const FILTERED_BELOW: f64 = 0.6;
/// The longest segment of Welch's average, in TRs.
pub const MAX_SEGMENT: usize = 256;
/// The most parcels measured per run.
pub const MAX_PARCELS: usize = 64;
/// Runs shorter than this many TRs are left out.
pub const MIN_TRS: usize = 16;

/// Why a filtered input matters, and what to do about it.
pub const EXPLANATION: &str = "A zero-phase filter leaks the future into the past, so forecast scores on such data \
                               are optimistic; forecast unfiltered or causally filtered data";

/// The check's answer.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpectrumVerdict {
    /// The median run's cutoff is below [`FILTERED_BELOW`] of Nyquist.
    LooksFiltered,
    /// It is not.
    NotFiltered,
    /// No run could be measured (every run too short or constant).
    #[default]
    NotMeasured,
}

/// One run's measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSpectrum {
    /// The run (its [`crate::RunId`]).
    pub run: String,
    /// The frequency below which [`POWER_FRACTION`] of the power lies, as a fraction of Nyquist.
    pub cutoff_nyquist: f64,
    /// The same in Hz, when the run's TR is known.
    pub cutoff_hz: Option<f64>,
    /// The share of the power above [`FILTERED_BELOW`] of Nyquist.
    pub power_above: f64,
    /// The segment length of Welch's average, in TRs.
    pub segment: usize,
}

/// The filtered-input check of a dataset ([`input_spectrum`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InputSpectrum {
    /// The verdict.
    pub verdict: SpectrumVerdict,
    /// The median over runs of [`RunSpectrum::cutoff_nyquist`].
    pub median_cutoff_nyquist: Option<f64>,
    /// The same in Hz, when the dataset has one TR.
    pub median_cutoff_hz: Option<f64>,
    /// The median over runs of [`RunSpectrum::power_above`].
    pub median_power_above: Option<f64>,
    /// The Nyquist frequency in Hz, when the dataset has one TR.
    pub nyquist_hz: Option<f64>,
    /// The rule of the verdict, in words.
    pub rule: String,
    /// Why a filtered input matters ([`EXPLANATION`]).
    pub explanation: String,
    /// The runs measured, in the dataset's order.
    pub runs: Vec<RunSpectrum>,
    /// Runs left out (too short, or every measured parcel constant).
    pub left_out: Vec<String>,
}

impl InputSpectrum {
    /// Whether the data look filtered.
    pub fn looks_filtered(&self) -> bool {
        self.verdict == SpectrumVerdict::LooksFiltered
    }

    /// The warning paragraph for standard error (`warning: ...`, one line) when the data look
    /// filtered.
    pub fn warning(&self) -> Option<String> {
        let (cut, above) = (self.median_cutoff_nyquist?, self.median_power_above?);
        if !self.looks_filtered() {
            return None;
        }
        let hz = match (self.median_cutoff_hz, self.nyquist_hz) {
            (Some(h), Some(n)) => format!(" ({h:.3} Hz; Nyquist {n:.3} Hz)"),
            _ => String::new(),
        };
        Some(format!(
            "warning: the input looks low-pass or band-pass filtered: in the median of {} run(s), {:.1} % of the \
             power lies below {cut:.3} of Nyquist{hz} and a share of {above:.1e} above {FILTERED_BELOW} of \
             Nyquist. {EXPLANATION}.",
            self.runs.len(),
            POWER_FRACTION * 100.0,
        ))
    }

    /// One line for a report: the median cutoff and the verdict.
    pub fn summary_line(&self) -> String {
        match self.median_cutoff_nyquist {
            None => "input spectrum: not measured (no run long enough)".into(),
            Some(c) => format!(
                "input spectrum: {:.1} % of the power below {c:.3} of Nyquist{} in the median run: {}",
                POWER_FRACTION * 100.0,
                self.median_cutoff_hz.map(|h| format!(" ({h:.3} Hz)")).unwrap_or_default(),
                if self.looks_filtered() { "looks filtered" } else { "not filtered" }
            ),
        }
    }
}

/// The filtered-input check of every run of `ds` (see the module documentation).
pub fn input_spectrum(ds: &Dataset) -> Result<InputSpectrum, DataError> {
    let cols = measured_parcels(ds.parcels);
    let (mut runs, mut left_out) = (Vec::new(), Vec::new());
    for r in &ds.runs {
        let measured = if r.n_tr < MIN_TRS { None } else { run_power(&r.rows(0, r.n_tr)?, ds.parcels, &cols) };
        let Some(power) = measured else {
            left_out.push(r.id.to_string());
            continue;
        };
        let (cutoff_nyquist, power_above) = cutoff(&power);
        let cutoff_hz = r.tr.as_ref().map(|t| cutoff_nyquist * 0.5 / t.seconds);
        let segment = 2 * (power.len() - 1);
        runs.push(RunSpectrum { run: r.id.to_string(), cutoff_nyquist, cutoff_hz, power_above, segment });
    }
    let median_cutoff_nyquist = median(runs.iter().map(|r| r.cutoff_nyquist));
    let verdict = match median_cutoff_nyquist {
        None => SpectrumVerdict::NotMeasured,
        Some(c) if c < FILTERED_BELOW => SpectrumVerdict::LooksFiltered,
        Some(_) => SpectrumVerdict::NotFiltered,
    };
    let nyquist_hz = ds.tr.map(|t| 0.5 / t);
    Ok(InputSpectrum {
        verdict,
        median_cutoff_nyquist,
        median_cutoff_hz: median_cutoff_nyquist.zip(nyquist_hz).map(|(c, n)| c * n),
        median_power_above: median(runs.iter().map(|r| r.power_above)),
        nyquist_hz,
        rule: format!(
            "looks filtered when the median run's frequency below which {} % of its power lies (Welch, Hann, \
             parcel-averaged) is below {FILTERED_BELOW} of Nyquist",
            POWER_FRACTION * 100.0
        ),
        explanation: EXPLANATION.into(),
        runs,
        left_out,
    })
}

/// At most [`MAX_PARCELS`] column indices, evenly spaced over `parcels`.
fn measured_parcels(parcels: usize) -> Vec<usize> {
    let m = parcels.min(MAX_PARCELS);
    (0..m).map(|j| j * parcels / m).collect()
}

/// The one-sided Welch power at bins `0..=L/2` of the run `x[t * parcels + p]`, summed over
/// the columns `cols`; `None` when they hold no power.
fn run_power(x: &[f64], parcels: usize, cols: &[usize]) -> Option<Vec<f64>> {
    let n = x.len() / parcels.max(1);
    let len = 1usize << (n.min(MAX_SEGMENT).ilog2());
    let segments = if n == len { 1 } else { (n - len).div_ceil(len / 2) + 1 };
    let hann: Vec<f64> =
        (0..len).map(|t| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * t as f64 / len as f64).cos()).collect();
    let mut power = vec![0.0; len / 2 + 1];
    let (mut re, mut im) = (vec![0.0; len], vec![0.0; len]);
    for s in 0..segments {
        let start = if segments == 1 { 0 } else { (s * (n - len) + (segments - 1) / 2) / (segments - 1) };
        for &p in cols {
            let seg = (start..start + len).map(|t| x[t * parcels + p]);
            let mean = seg.clone().sum::<f64>() / len as f64;
            for ((r, v), w) in re.iter_mut().zip(seg).zip(&hann) {
                *r = (v - mean) * w;
            }
            im.fill(0.0);
            fft(&mut re, &mut im);
            for (k, pk) in power.iter_mut().enumerate() {
                let one_sided = if k == 0 || 2 * k == len { 1.0 } else { 2.0 };
                *pk += one_sided * (re[k] * re[k] + im[k] * im[k]);
            }
        }
    }
    power[0] = 0.0;
    (power.iter().sum::<f64>() > 0.0).then_some(power)
}

/// The cutoff of a one-sided spectrum at bins `0..=L/2` (the lowest bin frequency, as a
/// fraction of Nyquist, at which the cumulative power reaches [`POWER_FRACTION`]) and the
/// share of the power above [`FILTERED_BELOW`] of Nyquist.
fn cutoff(power: &[f64]) -> (f64, f64) {
    let half = (power.len() - 1) as f64;
    let total: f64 = power.iter().sum();
    let mut cum = 0.0;
    let mut cut = 1.0;
    for (k, p) in power.iter().enumerate() {
        cum += p;
        if cum >= POWER_FRACTION * total {
            cut = k as f64 / half;
            break;
        }
    }
    let above: f64 = power.iter().enumerate().filter(|(k, _)| *k as f64 / half > FILTERED_BELOW).map(|(_, p)| p).sum();
    (cut, above / total)
}

fn median(v: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = v.collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[m] } else { 0.5 * (v[m - 1] + v[m]) })
}

/// The discrete Fourier transform `X_k = sum_t x_t e^(-2 pi i k t / n)` in place, `n` a power
/// of two (iterative radix-2).
pub(crate) fn fft(re: &mut [f64], im: &mut [f64]) {
    let n = re.len();
    debug_assert!(n.is_power_of_two() && im.len() == n);
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            re.swap(i, j);
            im.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let ang = -2.0 * std::f64::consts::PI / len as f64;
        for k in 0..len / 2 {
            let (wi, wr) = (ang * k as f64).sin_cos();
            for start in (0..n).step_by(len) {
                let (a, b) = (start + k, start + k + len / 2);
                let (xr, xi) = (re[b] * wr - im[b] * wi, re[b] * wi + im[b] * wr);
                (re[b], im[b]) = (re[a] - xr, im[a] - xi);
                (re[a], im[a]) = (re[a] + xr, im[a] + xi);
            }
        }
        len <<= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{write_synthetic, Dtype, Generator};
    use crate::write::RunFormat;
    use boldcast_fixtures::{Ar1Spec, IdentitySpec, Layout, SynthRun, Var1Spec};

    fn layout(subjects: usize, trs: usize, parcels: usize) -> Layout {
        Layout { subjects, runs: 2, trs, parcels, seed: 7 }
    }

    fn ar1(rho: f64, trs: usize) -> Vec<SynthRun> {
        Ar1Spec::new(layout(3, trs, 8), rho).generate().unwrap()
    }

    fn check(runs: Vec<SynthRun>) -> InputSpectrum {
        input_spectrum(&Dataset::from_synth_owned(runs, None).unwrap()).unwrap()
    }

    /// Applies `f` to every parcel's series of every run.
    fn per_parcel(mut runs: Vec<SynthRun>, f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<SynthRun> {
        for r in &mut runs {
            for p in 0..r.parcels {
                for (t, v) in f(&r.parcel(p)).into_iter().enumerate() {
                    r.data[t * r.parcels + p] = v;
                }
            }
        }
        runs
    }

    /// Zero-phase low-pass in the Fourier domain: every bin above `edge` of Nyquist set to
    /// zero (the length a power of two).
    fn zero_bins_above(x: &[f64], edge: f64) -> Vec<f64> {
        let n = x.len();
        let (mut re, mut im) = (x.to_vec(), vec![0.0; n]);
        fft(&mut re, &mut im);
        for k in 0..n {
            if 2.0 * k.min(n - k) as f64 / n as f64 > edge {
                (re[k], im[k]) = (0.0, 0.0);
            }
        }
        // The inverse through the conjugate.
        im.iter_mut().for_each(|v| *v = -*v);
        fft(&mut re, &mut im);
        re.iter().map(|v| v / n as f64).collect()
    }

    /// A one-pole low-pass `y_t = a y_(t-1) + (1 - a) x_t`, run forward then backward
    /// (zero phase), twice.
    fn filtfilt(x: &[f64], a: f64) -> Vec<f64> {
        let mut y = x.to_vec();
        for _ in 0..2 {
            for pass in 0..2 {
                let mut prev = y[0];
                let idx: Vec<usize> = if pass == 0 { (0..y.len()).collect() } else { (0..y.len()).rev().collect() };
                for t in idx {
                    prev = a * prev + (1.0 - a) * y[t];
                    y[t] = prev;
                }
            }
        }
        y
    }

    #[test]
    fn the_fft_is_the_dft() {
        let x: Vec<f64> = (0..16).map(|t| ((t * 7 % 5) as f64 - 2.0) * 0.3 + t as f64 * 0.01).collect();
        let (mut re, mut im) = (x.clone(), vec![0.0; 16]);
        fft(&mut re, &mut im);
        for k in 0..16 {
            let w = |t: usize| -2.0 * std::f64::consts::PI * (k * t) as f64 / 16.0;
            let dre: f64 = x.iter().enumerate().map(|(t, v)| v * w(t).cos()).sum();
            let dim: f64 = x.iter().enumerate().map(|(t, v)| v * w(t).sin()).sum();
            assert!((re[k] - dre).abs() < 1e-12 && (im[k] - dim).abs() < 1e-12, "bin {k}");
        }
    }

    #[test]
    fn zero_phase_low_pass_and_band_pass_look_filtered() {
        let white = ar1(0.0, 512);
        let low = check(per_parcel(white.clone(), |x| zero_bins_above(x, 0.2)));
        assert_eq!(low.verdict, SpectrumVerdict::LooksFiltered, "{low:?}");
        let c = low.median_cutoff_nyquist.unwrap();
        assert!((0.18..0.25).contains(&c), "cutoff {c} of Nyquist, the edge at 0.2");
        assert!(low.median_power_above.unwrap() < 1e-6);
        assert!(low.warning().unwrap().contains("zero-phase filter leaks the future into the past"));
        // A band-pass: a fast zero-phase low-pass less a slow one.
        let band = check(per_parcel(white, |x| {
            let (fast, slow) = (filtfilt(x, 0.7), filtfilt(x, 0.97));
            fast.iter().zip(&slow).map(|(f, s)| f - s).collect()
        }));
        assert_eq!(band.verdict, SpectrumVerdict::LooksFiltered, "{band:?}");
        assert!(band.median_cutoff_nyquist.unwrap() < 0.5);
        // Filtering unfiltered AR(1) data the same way fires as well.
        let ar = check(per_parcel(ar1(0.5, 300), |x| filtfilt(x, 0.7)));
        assert!(ar.looks_filtered(), "{ar:?}");
    }

    #[test]
    fn white_noise_and_ar1_are_not_filtered() {
        let white = check(ar1(0.0, 400));
        assert_eq!(white.verdict, SpectrumVerdict::NotFiltered);
        let c = white.median_cutoff_nyquist.unwrap();
        assert!(c > 0.99, "white noise: cutoff {c} of Nyquist");
        assert!((white.median_power_above.unwrap() - 0.4).abs() < 0.05, "{white:?}");
        assert!(white.warning().is_none());
        // The share above 0.6 of Nyquist falls with rho: about 16 % at 0.5, 3 % at 0.9, 0.6 % at
        // 0.99 (the stationary share is 0.25 %; a segment of 256 TRs sees little of the slowest
        // power), far above the 0.1 % of the rule.
        let mut last = 1.0;
        for (rho, lo) in [(0.5, 0.05), (0.9, 0.01), (0.99, 0.0015)] {
            let s = check(ar1(rho, 1200));
            let above = s.median_power_above.unwrap();
            assert_eq!(s.verdict, SpectrumVerdict::NotFiltered, "rho {rho}: {s:?}");
            assert!(above > lo && above < last, "rho {rho}: {above} above 0.6 of Nyquist");
            last = above;
        }
    }

    #[test]
    fn the_project_generators_are_not_filtered() {
        let l = layout(3, 300, 12);
        let var = Var1Spec { layout: l.clone(), self_coef: 0.6, neighbor_coef: 0.3, k: 3 };
        for runs in [var.generate().unwrap(), IdentitySpec::planted(l.clone()).generate().unwrap()] {
            assert_eq!(check(runs).verdict, SpectrumVerdict::NotFiltered);
        }
        // A dataset written as real ones are, and loaded back.
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("synth");
        let g = Generator::Ar1(Ar1Spec::new(l, 0.9));
        write_synthetic(&g, RunFormat::Npy, Dtype::F32, &out, |_, _| {}).unwrap();
        let s = input_spectrum(&Dataset::load(&out).unwrap()).unwrap();
        assert_eq!((s.verdict, s.runs.len()), (SpectrumVerdict::NotFiltered, 6));
        assert_eq!(s.runs[0].segment, 256);
    }

    #[test]
    fn the_tr_gives_hertz_and_short_runs_are_left_out() {
        let mut runs = per_parcel(ar1(0.0, 256), |x| zero_bins_above(x, 0.4));
        runs[0] = SynthRun { n_tr: 10, data: runs[0].data[..10 * 8].to_vec(), ..runs[0].clone() };
        let mut ds = Dataset::from_synth_owned(runs, None).unwrap();
        ds.tr = Some(2.0);
        for r in &mut ds.runs {
            r.tr = Some(crate::Tr { seconds: 2.0, source: "data.tr".into() });
        }
        let s = input_spectrum(&ds).unwrap();
        assert_eq!(s.left_out, ["sub-01_run-1"]);
        assert_eq!(s.runs.len(), 5);
        assert_eq!(s.nyquist_hz, Some(0.25));
        let (c, hz) = (s.median_cutoff_nyquist.unwrap(), s.median_cutoff_hz.unwrap());
        assert!((0.38..0.45).contains(&c) && (hz - c * 0.25).abs() < 1e-12, "{c} {hz}");
        assert_eq!(s.runs[0].cutoff_hz, Some(s.runs[0].cutoff_nyquist * 0.25));
        let w = s.warning().unwrap();
        assert!(w.starts_with("warning: ") && w.contains("Hz") && !w.contains('\n'), "{w}");
        // Nothing long enough: not measured, and no warning.
        let short = check(ar1(0.0, 12));
        assert_eq!((short.verdict, short.runs.len(), short.left_out.len()), (SpectrumVerdict::NotMeasured, 0, 6));
        assert!(short.warning().is_none());
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["verdict"], "looks_filtered");
    }
}
