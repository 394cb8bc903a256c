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
//! evaluations), run in batches of `batch` windows so memory stays that of one batch.
//!
//! A stride `S` (`1 ..= N`) makes that about `S` times cheaper: the windows after the first
//! end `S` tokens apart and each gives its last `S` positions, so a token's output has seen
//! from `N - S + 1` to `N` tokens (still all of them at the run's start). `S = 1` is the exact
//! rule above; `S = N` cuts the run into consecutive windows, each output seeing 1 to `N`
//! tokens, as in training. A last window ending at the run's end takes what the strides
//! left. A window shorter than the models accept (`max(horizons) + 1` tokens) is padded with zero
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
    /// Tokens between the ends of consecutive windows under [`ContextLen::Last`] (1 to `K`;
    /// 1 is exact): each output sees from `K - stride + 1` to `K` tokens.
    pub stride: usize,
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

    /// The tokens between window ends, for the JSON (`None`: the whole run, one window).
    pub fn stride_tokens(&self) -> Option<usize> {
        match self.len {
            ContextLen::Full => None,
            ContextLen::Last(k) => Some(self.stride.clamp(1, k.max(1))),
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
    let s = ctx.stride.clamp(1, k.max(1));
    let mut out = vec![Windows { starts: vec![0], len: k, from: 0 }];
    let later: Vec<usize> = (1..).map(|j| j * s).take_while(|&start| start + k <= n).collect();
    for chunk in later.chunks(ctx.batch.max(1)) {
        out.push(Windows { starts: chunk.to_vec(), len: k, from: k - s });
    }
    // Tokens `done ..` remain (fewer than `s`): one window ending at the run's last token.
    let done = later.last().map_or(k, |start| start + k);
    if done < n {
        out.push(Windows { starts: vec![n - k], len: k, from: k - (n - done) });
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
        let ctx = Context { len: ContextLen::Last(3), stride: 1, batch: 2 };
        let want: Vec<(usize, usize)> = (0..7).map(|t| (t, (t + 1).min(3))).collect();
        assert_eq!(covered(7, &ctx), want);
        // A run shorter than the context: one window, every output from it.
        assert_eq!(covered(2, &ctx), [(0, 1), (1, 2)]);
        let full = Context { len: ContextLen::Full, stride: 1, batch: 2 };
        assert_eq!(covered(4, &full), [(0, 1), (1, 2), (2, 3), (3, 4)]);
        assert_eq!(windows(4, &full).len(), 1);
        assert_eq!(windows(4, &Context { stride: 3, ..full }).len(), 1, "a stride leaves `full` one window");
    }

    #[test]
    fn a_stride_gives_every_token_once_with_k_minus_s_plus_1_to_k_tokens() {
        // K 4, S 2, 11 tokens: windows end at 3 (the first, all four outputs), 5, 7, 9 (their
        // last two), then one ending at 10 gives token 10 with all 4 tokens.
        let ctx = Context { len: ContextLen::Last(4), stride: 2, batch: 2 };
        let seen = [1, 2, 3, 4, 3, 4, 3, 4, 3, 4, 4];
        assert_eq!(covered(11, &ctx), seen.iter().enumerate().map(|(t, &c)| (t, c)).collect::<Vec<_>>());
        assert_eq!(windows(11, &ctx).iter().map(|w| w.starts.len()).sum::<usize>(), 5);
        for n in 1..40 {
            for (k, s) in [(1, 1), (5, 1), (5, 2), (5, 4), (5, 5), (8, 3)] {
                let ctx = Context { len: ContextLen::Last(k), stride: s, batch: 3 };
                let got = covered(n, &ctx);
                assert_eq!(
                    got.iter().map(|c| c.0).collect::<Vec<_>>(),
                    (0..n).collect::<Vec<_>>(),
                    "n {n} K {k} S {s}"
                );
                for &(t, c) in &got {
                    let lo = if t < k { t + 1 } else { k + 1 - s };
                    assert!(lo <= c && c <= (t + 1).min(k), "n {n} K {k} S {s}: token {t} saw {c}");
                }
                let calls = windows(n, &ctx).iter().map(|w| w.starts.len()).sum::<usize>();
                assert!(calls <= 2 + n.saturating_sub(k) / s, "n {n} K {k} S {s}: {calls} windows");
            }
        }
        // A stride over K is K: consecutive windows.
        let over = Context { len: ContextLen::Last(3), stride: 9, batch: 2 };
        assert_eq!(covered(7, &over), [(0, 1), (1, 2), (2, 3), (3, 1), (4, 2), (5, 3), (6, 3)]);
    }
}
