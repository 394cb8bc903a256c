//! How much of a run the model sees before each token's output ([`Context`]), and the one
//! evaluation of a whole run under it ([`per_token`]).
//!
//! The model is causal: its output at token `t` depends on tokens `..= t` only. In training it
//! saw windows of `N = window.window / d_in` tokens, so the output at position `i` of a window
//! had seen exactly `i + 1` tokens, never more than `N`. [`ContextLen::Last`]`(N)` reproduces that
//! exactly: the output at token `t` of a run is the last output of the window of tokens
//! `max(0, t + 1 - N) ..= t`. The first window, tokens `0 .. N`, gives every `t < N` at once
//! (position `t` has seen `t + 1` tokens); each later token is the last position of its own
//! window. That is `n_tokens - N + 1` windows of `N` tokens (cost about `n_tokens * N` token
//! evaluations), run in batches of `batch` windows so memory stays that of one batch. A
//! window shorter than the models accept (`max(horizons) + 1` tokens) is padded with zero
//! tokens after its end ([`Outputs::min_tokens`]), which changes no output taken.
//! [`ContextLen::Full`] runs the whole run as one sequence (cost `n_tokens`, but the state of the
//! scan then runs far longer than training ever let it).

use crate::AnalysisError;
use boldcast_core::{TokenShape, Tokens};
use boldcast_data::{Run, WindowSpec};

/// How many tokens each output sees.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextLen {
    /// The whole run up to the token: one sequence.
    Full,
    /// The last `K` tokens up to and including the token (fewer at the run's start).
    Last(usize),
}

/// The context rule and the batch its windows run in.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Context {
    /// How many tokens each output sees.
    pub len: ContextLen,
    /// Windows per model call (at least 1).
    pub batch: usize,
}

impl Context {
    /// The tokens each output sees, for the JSON (`None`: the whole run).
    pub fn tokens(&self) -> Option<usize> {
        match self.len {
            ContextLen::Full => None,
            ContextLen::Last(k) => Some(k),
        }
    }
}

/// One model call's windows: they all start at token `start[b]`, are `len` tokens long, and
/// give the outputs of their positions `from .. len`.
struct Windows {
    starts: Vec<usize>,
    len: usize,
    from: usize,
}

/// The windows of a run of `n` tokens under `ctx`, in batches.
fn windows(n: usize, ctx: &Context) -> Vec<Windows> {
    let k = match ctx.len {
        ContextLen::Full => n,
        ContextLen::Last(k) => k.clamp(1, n.max(1)),
    };
    let mut out = vec![Windows { starts: vec![0], len: k, from: 0 }];
    let later: Vec<usize> = (k..n).map(|t| t + 1 - k).collect();
    for chunk in later.chunks(ctx.batch.max(1)) {
        out.push(Windows { starts: chunk.to_vec(), len: k, from: k - 1 });
    }
    out
}

/// What one model call gives per token, for [`per_token`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Outputs {
    /// TRs per token.
    pub d_in: usize,
    /// Values per token and parcel (`H * d_in` forecasts, `d_model` embeddings).
    pub width: usize,
    /// The fewest tokens a call takes (`max(horizons) + 1`: the models check that a window
    /// has a forecasting target); shorter windows are padded with zero tokens after their
    /// end, which, the model being causal, changes no output taken.
    pub min_tokens: usize,
}

impl Outputs {
    /// The outputs of `model` with `width` values per token and parcel.
    pub fn of(cfg: &boldcast_core::ModelConfig, width: usize) -> Outputs {
        Outputs { d_in: cfg.d_in, width, min_tokens: cfg.horizons.iter().max().map_or(1, |h| h + 1) }
    }
}

/// `tokens` `(B, L, P, D)` followed by zero tokens up to `len`.
fn pad(tokens: Tokens<f32>, len: usize) -> Result<Tokens<f32>, boldcast_core::Error> {
    let s = tokens.shape();
    if s.time >= len {
        return Ok(tokens);
    }
    let (have, want) = (s.time * s.parcels * s.d_in, len * s.parcels * s.d_in);
    let mut data = vec![0f32; s.batch * want];
    for (b, w) in tokens.data().chunks_exact(have.max(1)).enumerate() {
        data[b * want..b * want + have].copy_from_slice(w);
    }
    Tokens::new(TokenShape::new(s.batch, len, s.parcels, s.d_in), data)
}

/// Every token's output of `run` under `ctx`: `eval` maps tokens `(B, L, P, D)` to outputs
/// `(B, L, P, width)` (the forecasts or the embeddings, flattened), and the result is
/// `(n_tokens, P, width)` row-major, `n_tokens = n_tr / d_in` (the TRs past the last whole
/// token are never input). A run shorter than one token is an error naming its file.
pub fn per_token<F>(run: &Run, o: Outputs, ctx: &Context, mut eval: F) -> Result<Vec<f32>, AnalysisError>
where
    F: FnMut(&Tokens<f32>) -> Result<Vec<f32>, boldcast_core::Error>,
{
    let (d_in, width) = (o.d_in, o.width);
    let (n, p) = (run.n_tr / d_in.max(1), run.stats.len());
    if n == 0 {
        return Err(boldcast_data::DataError::TooShort { path: run.path.clone(), n_tr: run.n_tr, window: d_in }.into());
    }
    let row = p * width;
    let mut out = vec![0f32; n * row];
    for w in windows(n, ctx) {
        let spec = WindowSpec { window: w.len * d_in, stride: 1, d_in };
        let starts: Vec<usize> = w.starts.iter().map(|s| s * d_in).collect();
        let len = w.len.max(o.min_tokens);
        let got = eval(&pad(run.tokens(&starts, &spec)?, len)?)?;
        if got.len() != w.starts.len() * len * row {
            return Err(
                boldcast_core::Error::shape("model output values", w.starts.len() * len * row, got.len()).into()
            );
        }
        for (b, &s) in w.starts.iter().enumerate() {
            for i in w.from..w.len {
                let src = (b * len + i) * row;
                out[(s + i) * row..(s + i + 1) * row].copy_from_slice(&got[src..src + row]);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(n: usize, ctx: &Context) -> Vec<(usize, usize)> {
        // (token, tokens seen) of every output taken.
        let mut seen = Vec::new();
        for w in windows(n, ctx) {
            assert!(w.starts.len() <= ctx.batch);
            for s in &w.starts {
                for i in w.from..w.len {
                    seen.push((s + i, i + 1));
                }
            }
        }
        seen.sort();
        seen
    }

    #[test]
    fn padding_appends_zero_tokens() {
        let t = Tokens::new(TokenShape::new(2, 1, 1, 2), vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let p = pad(t, 3).unwrap();
        assert_eq!(p.shape(), TokenShape::new(2, 3, 1, 2));
        assert_eq!(p.data(), [1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn every_token_once_with_the_training_context() {
        let ctx = Context { len: ContextLen::Last(3), batch: 2 };
        let want: Vec<(usize, usize)> = (0..7).map(|t| (t, (t + 1).min(3))).collect();
        assert_eq!(covered(7, &ctx), want);
        // A run shorter than the context: one window, every output from it.
        assert_eq!(covered(2, &ctx), [(0, 1), (1, 2)]);
        let full = Context { len: ContextLen::Full, batch: 2 };
        assert_eq!(covered(4, &full), [(0, 1), (1, 2), (2, 3), (3, 4)]);
        assert_eq!(windows(4, &full).len(), 1);
    }
}
