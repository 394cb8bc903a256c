//! Tick values and their labels, shared by every figure: round values (1, 2 or 5 times a
//! power of ten), each label written with the fewest digits that tell the ticks apart, never
//! the float noise of `0.1 + 0.2` (`0.30000000000000004`), never two equal labels, and `0` for
//! zero (not `0.0e0`).

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

/// An axis of plotters (`inner`: linear or logarithmic) whose grid lines and tick labels
/// are at `ticks` only: no minor grid lines.
pub struct Keyed<R: Ranged<ValueType = f64>> {
    /// The axis' mapping.
    pub inner: R,
    /// Where its ticks are.
    pub ticks: Vec<f64>,
}

impl<R: Ranged<ValueType = f64>> Ranged for Keyed<R> {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;
    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }
    fn axis_pixel_range(&self, limit: (i32, i32)) -> std::ops::Range<i32> {
        self.inner.axis_pixel_range(limit)
    }
}

/// The tick values of an axis and their labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Ticks {
    /// The values, increasing.
    pub values: Vec<f64>,
    /// One label per value.
    pub labels: Vec<String>,
}

impl Ticks {
    /// About `n` (at least 2) round ticks over `[lo, hi]` of a linear axis.
    pub fn linear(lo: f64, hi: f64, n: usize) -> Ticks {
        Ticks::of(linear_values(lo, hi, n))
    }

    /// The ticks of a logarithmic axis over `[lo, hi]` (both positive): 1, 2 and 5 times each
    /// power of ten inside, every mantissa when that gives fewer than three, only the powers
    /// of ten when it gives more than `n`.
    pub fn log(lo: f64, hi: f64, n: usize) -> Ticks {
        let inside = |ms: &[f64]| -> Vec<f64> {
            let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
            let mut v: Vec<f64> = (a..=b)
                .flat_map(|e| ms.iter().map(move |m| round_sig(m * 10f64.powi(e))))
                .filter(|&x| x >= lo * (1.0 - 1e-9) && x <= hi * (1.0 + 1e-9))
                .collect();
            v.dedup();
            v
        };
        let mut v = inside(&[1.0, 2.0, 5.0]);
        if v.len() < 3 {
            v = inside(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        } else if v.len() > n.max(3) {
            v = inside(&[1.0]);
        }
        if v.len() < 2 {
            return Ticks::linear(lo, hi, n);
        }
        Ticks::of(v)
    }

    /// `inner` with these ticks.
    pub fn on<R: Ranged<ValueType = f64>>(&self, inner: R) -> Keyed<R> {
        Keyed { inner, ticks: self.values.clone() }
    }

    /// The ticks `values` with their labels ([`labels`]).
    pub fn of(values: Vec<f64>) -> Ticks {
        let labels = labels(&values);
        Ticks { values, labels }
    }

    /// The label of the tick nearest `v` (plotters' formatters get the tick values back).
    pub fn label(&self, v: f64) -> String {
        let nearest = self.values.iter().enumerate().min_by(|a, b| (a.1 - v).abs().total_cmp(&(b.1 - v).abs()));
        nearest.map_or_else(|| tick_text(v, 3), |(i, _)| self.labels[i].clone())
    }
}

/// `x` rounded to 12 significant digits (so `3 * 0.1` becomes `0.3`).
fn round_sig(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(11 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// About `n` values at a round step (1, 2 or 5 times a power of ten) over `[lo, hi]`.
pub fn linear_values(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(2) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| round_sig(k as f64 * step)).map(|v| if v == 0.0 { 0.0 } else { v }).collect()
}

/// The labels of `values`: the fewest significant digits (up to 6) at which the labels are
/// distinct and each reads back as its value; all in exponent form (`3e-4`) when one value
/// lies below 1e-3 or from 1e5 (one axis, one form).
pub fn labels(values: &[f64]) -> Vec<String> {
    let sci = values.iter().any(|&v| v != 0.0 && v.is_finite() && !(-3..5).contains(&exponent(v)));
    (1..=6)
        .map(|digits| values.iter().map(|&v| text(v, digits, sci)).collect::<Vec<_>>())
        .find(|l| {
            let distinct = l.iter().collect::<std::collections::HashSet<_>>().len() == l.len();
            let exact =
                l.iter().zip(values).all(|(t, v)| t.parse::<f64>().is_ok_and(|p| (p - v).abs() <= 1e-9 * v.abs()));
            distinct && exact
        })
        .unwrap_or_else(|| values.iter().map(|&v| text(v, 6, sci)).collect())
}

/// The power of ten of `v`'s leading digit.
fn exponent(v: f64) -> i32 {
    v.abs().log10().floor() as i32
}

/// One value with `digits` significant digits, trailing zeros dropped: `0.3`, `1.5`, `120`,
/// `2.5e-4`, `0`; in exponent form below 1e-3 or from 1e5.
pub fn tick_text(v: f64, digits: usize) -> String {
    text(v, digits, v != 0.0 && v.is_finite() && !(-3..5).contains(&exponent(v)))
}

/// A measured value with `digits` significant digits, its zeros kept (`1.00`, `0.196`,
/// `2.50e-4`): the labels of bars.
pub fn value_text(v: f64, digits: usize) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    if !(-3..5).contains(&exponent(v)) {
        return format!("{:.*e}", digits.saturating_sub(1), v);
    }
    let decimals = (digits as i32 - 1 - exponent(v)).max(0) as usize;
    format!("{v:.decimals$}")
}

/// [`tick_text`], in exponent form when `sci`.
fn text(v: f64, digits: usize, sci: bool) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if !v.is_finite() {
        return format!("{v}");
    }
    if sci {
        let s = format!("{:.*e}", digits.saturating_sub(1), v);
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        return format!("{}e{e}", trim(m));
    }
    let decimals = (digits as i32 - 1 - exponent(v)).max(0) as usize;
    trim(&format!("{v:.decimals$}"))
}

/// A decimal number without trailing zeros (and without a trailing point).
fn trim(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_round_and_their_labels_short() {
        let t = Ticks::linear(0.0, 1.0, 5);
        assert_eq!(t.labels, ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
        let t = Ticks::linear(0.25, 0.95, 8);
        assert_eq!(t.labels, ["0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"]);
        assert!(t.labels.iter().all(|l| l.len() <= 4), "{:?}", t.labels);
        let t = Ticks::linear(0.0, 3.2e-4, 4);
        assert_eq!(t.labels, ["0", "1e-4", "2e-4", "3e-4"], "a learning rate: never 0.0e0");
        assert_eq!(Ticks::linear(1.3, 1.34, 4).labels, ["1.3", "1.32", "1.34"]);
    }

    #[test]
    fn log_ticks_have_no_float_noise_and_no_duplicate() {
        let t = Ticks::log(0.1, 2.0, 10);
        assert_eq!(t.labels, ["0.1", "0.2", "0.5", "1", "2"]);
        let t = Ticks::log(0.25, 0.7, 10);
        assert_eq!(t.labels, ["0.3", "0.4", "0.5", "0.6", "0.7"], "0.30000000000000004 reads 0.3");
        let t = Ticks::log(1e-4, 10.0, 6);
        assert_eq!(t.labels, ["1e-4", "1e-3", "1e-2", "1e-1", "1e0", "1e1"], "one axis, one form");
        let dup = t.labels.iter().collect::<std::collections::HashSet<_>>().len();
        assert_eq!(dup, t.labels.len());
    }

    #[test]
    fn labels_take_the_digits_that_tell_values_apart() {
        assert_eq!(labels(&[0.1 + 0.2, 0.6000000000000001, 1.0]), ["0.3", "0.6", "1"]);
        assert_eq!(labels(&[0.4207, 0.4210]), ["0.4207", "0.421"]);
        assert_eq!(tick_text(123456.0, 3), "1.23e5");
        assert_eq!([value_text(1.003, 3), value_text(0.19601, 3), value_text(12.26, 3)], ["1.00", "0.196", "12.3"]);
        assert_eq!(labels(&[0.0, 5e-4, 1e-3]), ["0", "5e-4", "1e-3"]);
        assert_eq!(Ticks::of(vec![0.5, 1.0]).label(0.9999999), "1");
    }
}
