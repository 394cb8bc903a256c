//! Windows and tokens (MODEL.md, "Data to tokens"): [`WindowSpec`] (window, stride, token
//! width), [`WindowRef`] (a run and a start TR), the windows of a dataset's runs and their
//! tokens `(B, T, P, D)`.

use crate::dataset::{Dataset, Run};
use crate::error::DataError;
use boldcast_core::{Elem, TokenShape, Tokens};

/// Window length, stride and token width.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WindowSpec {
    /// TRs per window.
    pub window: usize,
    /// TRs between window starts.
    pub stride: usize,
    /// TRs per token (D).
    pub d_in: usize,
}

impl WindowSpec {
    /// Checks the sizes: all at least 1 and `window % d_in == 0`.
    pub fn validate(&self) -> Result<(), DataError> {
        if self.window == 0 {
            return Err(DataError::config("window.window", 0, "must be at least 1"));
        }
        if self.stride == 0 {
            return Err(DataError::config("window.stride", 0, "must be at least 1"));
        }
        if self.d_in == 0 {
            return Err(DataError::config("model.d_in", 0, "must be at least 1"));
        }
        if !self.window.is_multiple_of(self.d_in) {
            return Err(DataError::config(
                "window.window",
                self.window,
                format!("must be a multiple of d_in = {} (tokens are d_in TRs)", self.d_in),
            ));
        }
        Ok(())
    }
    /// Tokens per window, `window / d_in`.
    pub fn tokens(&self) -> usize {
        self.window / self.d_in
    }
}

/// How far ahead horizon `h` (in tokens of `d_in` TRs) forecasts, in seconds at TR `tr`: the
/// first and last of its lags, `((h - 1) D + 1) tr` and `h D tr` (MODEL.md: the targets of
/// horizon `h` lie `L = (h-1) D + j + 1` TRs past the last TR seen, `j < D`).
///
/// Rounded to the nanosecond, so that 5 TRs of 0.72 s read 3.6 s, not 3.5999999999999996.
pub fn horizon_seconds(h: usize, d_in: usize, tr: f64) -> [f64; 2] {
    let ns = |lag: usize| (lag as f64 * tr * 1e9).round() / 1e9;
    [ns(h.saturating_sub(1) * d_in + 1), ns(h * d_in)]
}

/// `horizon_seconds` as text: `0.8 s`, or `0.8-1.6 s` for a token of several TRs.
pub fn horizon_seconds_text(h: usize, d_in: usize, tr: f64) -> String {
    seconds_span_text(horizon_seconds(h, d_in, tr))
}

/// A horizon's `[first, last]` lag in seconds as text: `0.8 s`, or `0.8-1.6 s`.
pub fn seconds_span_text([a, b]: [f64; 2]) -> String {
    if a == b {
        format!("{} s", seconds_text(a))
    } else {
        format!("{}-{} s", seconds_text(a), seconds_text(b))
    }
}

/// A number of seconds as text without a unit: as written (`0.72`, `3600`) between 1e-3 and
/// 1e6, else in exponent form (`1e308`, `1e-300`), never hundreds of digits.
pub fn seconds_text(s: f64) -> String {
    if s == 0.0 || (1e-3..1e6).contains(&s.abs()) || !s.is_finite() {
        format!("{s}")
    } else {
        format!("{s:e}")
    }
}

/// One window: a run and the TR it starts at.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WindowRef {
    /// Index into [`Dataset::runs`].
    pub run: usize,
    /// First TR.
    pub start: usize,
}

impl Dataset {
    /// n_tr`. A run shorter than one window is an error naming its file.
    pub fn windows(&self, spec: &WindowSpec) -> Result<Vec<WindowRef>, DataError> {
        self.windows_of(spec, &(0..self.runs.len()).collect::<Vec<_>>())
    }

    /// The windows of the runs `runs` (indices into [`Dataset::runs`]).
    pub fn windows_of(&self, spec: &WindowSpec, runs: &[usize]) -> Result<Vec<WindowRef>, DataError> {
        spec.validate()?;
        let mut out = Vec::new();
        for &r in runs {
            let run = &self.runs[r];
            if run.n_tr < spec.window {
                return Err(DataError::TooShort { path: run.path.clone(), n_tr: run.n_tr, window: spec.window });
            }
            let mut start = 0;
            while start + spec.window <= run.n_tr {
                out.push(WindowRef { run: r, start });
                start += spec.stride;
            }
        }
        Ok(out)
    }

    /// Tokens `(B, T, P, D)` of the given windows: `tokens[b, t, p, j] = x[start + t D + j, p]`.
    pub fn tokens<E: Elem>(&self, windows: &[WindowRef], spec: &WindowSpec) -> Result<Tokens<E>, DataError> {
        spec.validate()?;
        let mut out = Tokens::<E>::zeros(TokenShape::new(windows.len(), spec.tokens(), self.parcels, spec.d_in));
        for (b, w) in windows.iter().enumerate() {
            let run = self.runs.get(w.run).ok_or_else(|| DataError::config("window.run", w.run, "no such run"))?;
            fill_window(run, w.start, spec, &mut out, b)?;
        }
        Ok(out)
    }
}

impl Run {
    /// Tokens `(B, T, P, D)` of windows of this one run starting at the TRs `starts`, by the
    /// formula of [`Dataset::tokens`] (`P` is the run's parcels, one [`Run::stats`] each): the
    /// windows of a run that is not part of a [`Dataset`]'s windows (every context window of a
    /// forecast, for instance).
    pub fn tokens<E: Elem>(&self, starts: &[usize], spec: &WindowSpec) -> Result<Tokens<E>, DataError> {
        spec.validate()?;
        let mut out = Tokens::<E>::zeros(TokenShape::new(starts.len(), spec.tokens(), self.stats.len(), spec.d_in));
        for (b, &start) in starts.iter().enumerate() {
            fill_window(self, start, spec, &mut out, b)?;
        }
        Ok(out)
    }
}

/// Fills window `b` of `out` with the tokens of `run` from TR `start`, read through
/// [`Run::rows`]; a window past the run's end is [`DataError::TooShort`].
fn fill_window<E: Elem>(
    run: &Run,
    start: usize,
    spec: &WindowSpec,
    out: &mut Tokens<E>,
    b: usize,
) -> Result<(), DataError> {
    if start + spec.window > run.n_tr {
        return Err(DataError::TooShort { path: run.path.clone(), n_tr: run.n_tr, window: start + spec.window });
    }
    let (d, p) = (spec.d_in, out.shape().parcels);
    // One read of the window's rows (from disk, for a run kept there).
    let rows = run.rows(start, start + spec.window)?;
    for t in 0..spec.tokens() {
        for q in 0..p {
            for j in 0..d {
                let i = out.index(b, t, q, j);
                out.data_mut()[i] = E::of(rows[(t * d + j) * p + q]);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn windows_and_tokens_follow_model_md() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sub-01_run-1.tsv", &tsv_run(11, 2));
        let ds = Dataset::load(d.path()).unwrap();
        let spec = WindowSpec { window: 4, stride: 3, d_in: 2 };
        let w = ds.windows(&spec).unwrap();
        assert_eq!(w.iter().map(|w| w.start).collect::<Vec<_>>(), vec![0, 3, 6]);
        let tok = ds.tokens::<f64>(&w, &spec).unwrap();
        assert_eq!(tok.shape(), TokenShape::new(3, 2, 2, 2));
        let x = &ds.runs[0].to_vec().unwrap();
        // tokens[b=1, t=1, p=1, j=0] = x[3 + 2 + 0, 1]
        assert_eq!(tok.at(1, 1, 1, 0), x[5 * 2 + 1]);
        assert_eq!(tok.at(2, 0, 0, 1), x[7 * 2]);
        // One run's windows by their starts: the same tokens.
        let starts: Vec<usize> = w.iter().map(|w| w.start).collect();
        assert_eq!(ds.runs[0].tokens::<f64>(&starts, &spec).unwrap(), tok);
        let e = ds.runs[0].tokens::<f64>(&[8], &spec).unwrap_err();
        assert!(e.to_string().contains("11 TRs, shorter than one window of 12"), "{e}");
        let e = ds.windows(&WindowSpec { window: 5, stride: 1, d_in: 2 }).unwrap_err();
        assert!(e.to_string().contains("window.window = 5") && e.to_string().contains("multiple of d_in = 2"), "{e}");
        let e = ds.windows(&WindowSpec { window: 12, stride: 1, d_in: 1 }).unwrap_err();
        assert!(e.to_string().contains("sub-01_run-1.tsv: 11 TRs, shorter than one window of 12"), "{e}");
    }
}
