//! The checked launchers of `kernels/loss.cu`. The kernels index `tokens` by the horizons,
//! so the shape and every horizon are checked here first.

use super::{check_lens, check_linear, check_tree, refuse, run, Result};
use crate::exec::args;
use crate::launch::{Dim3, Launch};

/// The loss's sizes: `pred` `(b, t, p, horizons.len(), d)`, `tokens` `(b, t, p, d)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossShape<'a> {
    /// Batch, B.
    pub b: usize,
    /// Time steps, T.
    pub t: usize,
    /// Parcels, P.
    pub p: usize,
    /// Token width, D.
    pub d: usize,
    /// The horizons, each at least 1.
    pub horizons: &'a [i32],
}

impl LossShape<'_> {
    /// `T_valid = T - max(horizons)`.
    pub fn t_valid(&self) -> usize {
        self.t.saturating_sub(self.horizons.iter().copied().max().unwrap_or(0).max(0) as usize)
    }
    /// The valid elements `n = B T_valid P H D`.
    pub fn valid(&self) -> usize {
        self.b * self.t_valid() * self.p * self.horizons.len() * self.d
    }
    /// The elements of `pred`.
    pub fn total(&self) -> usize {
        self.b * self.t * self.p * self.horizons.len() * self.d
    }
}

/// Sizes within `int`, horizons in `1..T`, and the buffers' lengths.
fn check_shape(kernel: &'static str, s: LossShape, pred: usize, tokens: usize) -> Result<()> {
    let fits = |v: usize| (1..=i32::MAX as usize).contains(&v);
    if ![s.b, s.t, s.p, s.d, s.horizons.len()].into_iter().all(fits) {
        return refuse(kernel, format!("{s:?}: every size in 1..2^31"));
    }
    if s.horizons.iter().any(|&h| h < 1 || h as usize >= s.t) {
        return refuse(kernel, format!("horizons {:?}: each in 1..T = {}", s.horizons, s.t));
    }
    check_lens(kernel, &[("pred", pred, s.total()), ("tokens", tokens, s.b * s.t * s.p * s.d)])
}

fn ints(s: LossShape) -> (i32, i32, i32, i32, i32) {
    (s.t as i32, s.t_valid() as i32, s.p as i32, s.horizons.len() as i32, s.d as i32)
}

/// Per-chunk sums of squared differences into `partial`; the grid must be
/// `ceil(n / chunk)` blocks for the `n` valid elements.
pub fn loss_mse_partial(
    l: Launch,
    s: LossShape,
    pred: &[f32],
    tokens: &[f32],
    chunk: usize,
    partial: &mut [f64],
) -> Result<()> {
    let k = "loss_mse_partial";
    check_tree(k, l)?;
    check_shape(k, s, pred.len(), tokens.len())?;
    let want = Dim3::x(s.valid().div_ceil(chunk.max(1)) as u32);
    if chunk == 0 || l.grid != want || want.x as usize != s.valid().div_ceil(chunk) {
        return refuse(
            k,
            format!("grid {:?} for {} elements in chunks of {chunk}: expected {want:?}", l.grid, s.valid()),
        );
    }
    let lens = [("partial", partial.len(), want.x as usize)];
    let (t, tv, p, nh, d) = ints(s);
    let (n, chunk) = (s.valid() as i64, chunk as i64);
    run(k, l, &lens, &mut args![pred, tokens, s.horizons, partial, n, chunk, t, tv, p, nh, d])
}

/// `out = sum(partial) / n`, in one block.
pub fn loss_mse_final(l: Launch, partial: &[f64], n: f64, out: &mut [f64]) -> Result<()> {
    let k = "loss_mse_final";
    check_tree(k, l)?;
    if l.grid != Dim3::x(1) || partial.len() > i32::MAX as usize {
        return refuse(k, format!("grid {:?} over {} partials: one block, under 2^31", l.grid, partial.len()));
    }
    run(k, l, &[("out", out.len(), 1)], &mut args![partial, out, partial.len() as i32, n])
}

/// `g = scale (pred - target)` for `t < T_valid`, else 0, over all of `pred`.
pub fn loss_mse_bwd(l: Launch, s: LossShape, pred: &[f32], tokens: &[f32], scale: f32, g: &mut [f32]) -> Result<()> {
    let k = "loss_mse_bwd";
    check_linear(k, l)?;
    check_shape(k, s, pred.len(), tokens.len())?;
    let (t, tv, p, nh, d) = ints(s);
    let n = pred.len();
    run(k, l, &[("g", g.len(), n)], &mut args![pred, tokens, s.horizons, g, n as i64, t, tv, p, nh, d, scale])
}
