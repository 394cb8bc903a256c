//! A fitted direct linear forecaster ([`LinearFit`]: per-parcel AR or VAR coefficients for
//! every order up to its own and every lead) and its forecasts of tokens, which see only the
//! window: at token `t` the window holds `(t + 1) D` TRs, so the forecast there uses the fit
//! of order `min(p, (t + 1) D)` (the highest that fits; the lower orders are fitted on the
//! same samples, from the leading block of the same moments).
//!
//! The leads of a forecast `(h, j)` are `L = (h - 1) D + j + 1` TRs after the last TR seen
//! (`boldcast_core::floor::lag`), in the order of [`leads`]: horizon-major, then element.
//!
//! The highest order a fit may consider ([`order_bound`]) is the least of the fit's own
//! ceiling, the window (no forecast sees more TRs than the window holds, so a longer order is
//! never used) and what the shortest training run allows: every order is fitted on the
//! samples with `p_max` TRs of history, so `p_max` must leave that run at least half the
//! samples order 1 would have (`n - p_max - L + 1 >= (n - L) / 2` for a run of `n` TRs and
//! the farthest lead `L`). Short runs get a low bound instead of no fit.

use boldcast_core::floor::lag;
use boldcast_core::{ForecastShape, Forecasts, Tokens};
use boldcast_data::Dataset;
use nalgebra::DMatrix;
use serde::Serialize;
use std::ops::Range;

/// The leads, in TRs, of every `(horizon, element)`: index `i D + j`.
pub fn leads(horizons: &[usize], d_in: usize) -> Vec<usize> {
    horizons.iter().flat_map(|&h| (0..d_in).map(move |j| lag(h, j, d_in))).collect()
}

/// The order the window allows at token `t`: `min(order, (t + 1) D)`.
pub fn order_at(t: usize, d_in: usize, order: usize) -> usize {
    order.min((t + 1) * d_in)
}

/// What sets the highest order a fit considers.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderLimit {
    /// The fit's own ceiling (a cost bound).
    Ceiling,
    /// The window's length in TRs.
    Window,
    /// Half the samples of the shortest training run.
    ShortestRun,
}

impl OrderLimit {
    /// What the limit is, in words, for a bound of `p_max` TRs.
    pub fn words(&self, p_max: usize) -> String {
        match self {
            OrderLimit::Ceiling => format!("{p_max} TRs, the most this fit tries"),
            OrderLimit::Window => format!("{p_max} TRs, the window's length: no forecast sees more"),
            OrderLimit::ShortestRun => format!("{p_max} TRs, the most the shortest training run allows"),
        }
    }
}

/// The highest order a fit of `leads` on `train_runs` of `ds` may consider, at most `ceiling`,
/// for windows of `window` TRs, and what sets it (see the module documentation).
pub fn order_bound(
    ds: &Dataset,
    train_runs: &[usize],
    window: usize,
    leads: &[usize],
    ceiling: usize,
) -> (usize, OrderLimit) {
    let lead = leads.iter().copied().max().unwrap_or(1);
    let shortest = train_runs.iter().map(|&r| ds.runs[r].n_tr).min().unwrap_or(0);
    let by_run = shortest.saturating_sub(lead) / 2 + 1;
    let limits = [(ceiling, OrderLimit::Ceiling), (window, OrderLimit::Window), (by_run, OrderLimit::ShortestRun)];
    let (p, limit) = limits.into_iter().min_by_key(|&(p, _)| p).unwrap_or((1, OrderLimit::Ceiling));
    (p.max(1), limit)
}

/// How the parcels enter a forecast.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Coupling {
    /// Each parcel from its own past (AR).
    PerParcel,
    /// Each parcel from every parcel's past (VAR).
    Full,
}

/// Direct forecasting coefficients for every order `1..=order` and every lead.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearFit {
    /// AR or VAR.
    pub coupling: Coupling,
    /// Parcels.
    pub parcels: usize,
    /// `coefs[q - 1]`, the order-`q` fit: rows are the lag features (`k P + p'` for a VAR,
    /// `k` per parcel for an AR: `x(n - k)`), columns the targets `l P + p` (lead `l` of
    /// [`leads`], parcel `p`).
    pub coefs: Vec<DMatrix<f64>>,
}

impl LinearFit {
    /// The highest order.
    pub fn order(&self) -> usize {
        self.coefs.len()
    }

    /// The forecasts `(B, T, P, H, D)` of `tokens` (see the module documentation).
    pub fn forecasts(&self, tokens: &Tokens<f64>, horizons: &[usize]) -> Forecasts<f64> {
        let s = tokens.shape();
        let mut out = Forecasts::<f64>::zeros(ForecastShape::new(s.batch, s.time, s.parcels, horizons.len(), s.d_in));
        let mut t0 = 0;
        while t0 < s.time {
            let q = order_at(t0, s.d_in, self.order());
            // Below the full order each token has an order of its own; from there on, all share it.
            let t1 = if q < self.order() { t0 + 1 } else { s.time };
            self.predict_block(tokens, q, t0..t1, &mut out);
            t0 = t1;
        }
        out
    }

    /// The forecasts of the tokens `ts` of every window with the order-`q` fit.
    fn predict_block(&self, tokens: &Tokens<f64>, q: usize, ts: Range<usize>, out: &mut Forecasts<f64>) {
        let s = tokens.shape();
        let (np, nd) = (s.parcels, s.d_in);
        let rows: Vec<(usize, usize)> = (0..s.batch).flat_map(|b| ts.clone().map(move |t| (b, t))).collect();
        let mut z = DMatrix::zeros(rows.len(), q * np);
        for (r, &(b, t)) in rows.iter().enumerate() {
            let n = t * nd + nd - 1;
            for k in 0..q {
                let u = n - k;
                for p in 0..np {
                    z[(r, k * np + p)] = tokens.at(b, u / nd, p, u % nd);
                }
            }
        }
        let w = &self.coefs[q - 1];
        let pred = match self.coupling {
            Coupling::Full => &z * w,
            Coupling::PerParcel => DMatrix::from_fn(rows.len(), w.ncols(), |r, c| {
                (0..q).map(|k| z[(r, k * np + c % np)] * w[(k, c)]).sum()
            }),
        };
        let nh = w.ncols() / (np * nd);
        for (r, &(b, t)) in rows.iter().enumerate() {
            for i in 0..nh {
                for j in 0..nd {
                    for p in 0..np {
                        let k = out.index(b, t, p, i, j);
                        out.data_mut()[k] = pred[(r, (i * nd + j) * np + p)];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_core::TokenShape;

    #[test]
    fn leads_and_orders_follow_the_window() {
        assert_eq!(leads(&[1, 5], 1), [1, 5]);
        assert_eq!(leads(&[1, 3], 2), [1, 2, 5, 6]);
        // D = 2, order 3: token 0 sees 2 TRs, token 1 and later 4.
        assert_eq!((order_at(0, 2, 3), order_at(1, 2, 3), order_at(5, 2, 3)), (2, 3, 3));
    }

    #[test]
    fn the_bound_is_the_least_of_the_ceiling_the_window_and_the_shortest_run() {
        use boldcast_fixtures::{Ar1Spec, Layout};
        let ds = |trs| {
            let fx = Ar1Spec::new(Layout { subjects: 2, runs: 1, trs, parcels: 1, seed: 1 }, 0.5);
            Dataset::from_synth(&fx.generate().unwrap(), None).unwrap()
        };
        // 191 TRs, farthest lead 5: 186 samples at order 1; order 94 leaves 93, half.
        let d = ds(191);
        assert_eq!(order_bound(&d, &[0, 1], 128, &[1, 5], 128), (94, OrderLimit::ShortestRun));
        assert_eq!(191 - 94 - 5 + 1, 186 / 2);
        assert_eq!(order_bound(&d, &[0, 1], 32, &[1, 5], 128), (32, OrderLimit::Window));
        assert_eq!(order_bound(&d, &[0], 128, &[1, 5], 8), (8, OrderLimit::Ceiling));
        // A run of 10 TRs allows order 3 (3 samples of 6 at order 1); one too short for the
        // farthest lead, order 1.
        assert_eq!(order_bound(&ds(10), &[0, 1], 128, &[1, 5], 128), (3, OrderLimit::ShortestRun));
        assert_eq!(order_bound(&ds(4), &[0, 1], 128, &[1, 5], 128), (1, OrderLimit::ShortestRun));
        assert_eq!(OrderLimit::Window.words(32), "32 TRs, the window's length: no forecast sees more");
    }

    #[test]
    fn forecasts_by_hand_with_a_truncated_order() {
        // One window, 2 parcels, D = 2, 2 tokens: TRs x(u, p) = 10 u + p.
        let data: Vec<f64> =
            (0..2).flat_map(|t| (0..2).flat_map(move |p| (0..2).map(move |j| (10 * (2 * t + j) + p) as f64))).collect();
        let tok = Tokens::<f64>::new(TokenShape::new(1, 2, 2, 2), data).unwrap();
        assert_eq!(tok.at(0, 1, 1, 0), 21.0);
        // Horizon 1 only: leads 1, 2. Per-parcel AR of order 3; coefficient of x(n - k) for
        // target (lead l, parcel p) = 100 (q) + 10 k + l + 0.1 p... kept small to read.
        let coef = |q: usize| DMatrix::from_fn(q, 4, |k, c| (q * 100 + k * 10 + c / 2) as f64 + 0.5 * (c % 2) as f64);
        let ar = LinearFit { coupling: Coupling::PerParcel, parcels: 2, coefs: (1..=3).map(coef).collect() };
        let f = ar.forecasts(&tok, &[1]);
        // Token 0 (n = 1, order 2), parcel 1, lead 2 (j = 1): c = 1 * 2 + 1 = 3.
        let want = (200.0 + 1.0 + 0.5) * 11.0 + (210.0 + 1.0 + 0.5) * 1.0;
        assert_eq!(f.at(0, 0, 1, 0, 1), want);
        // Token 1 (n = 3, order 3), parcel 0, lead 1: c = 0.
        let want = 300.0 * 30.0 + 310.0 * 20.0 + 320.0 * 10.0;
        assert_eq!(f.at(0, 1, 0, 0, 0), want);
        // A VAR of order 1: target parcel p from both parcels of x(n).
        let var = LinearFit {
            coupling: Coupling::Full,
            parcels: 2,
            coefs: vec![DMatrix::from_row_slice(2, 4, &[1.0, 2.0, 3.0, 4.0, 0.5, 0.25, 0.0, 1.0])],
        };
        let f = var.forecasts(&tok, &[1]);
        // Token 1: x(3) = (30, 31); target (lead 2, parcel 1) is column 3: 4 * 30 + 1 * 31.
        assert_eq!(f.at(0, 1, 1, 0, 1), 151.0);
        assert_eq!(f.at(0, 0, 0, 0, 0), 10.0 + 0.5 * 11.0);
    }
}
