//! The Mamba-2 (SSD, one group) temporal mixer (MODEL.md, "Temporal mixer,
//! `temporal = \"mamba2\"`") from dfdx tensor ops, over all `S = B * P` sequences at once in
//! the row layout ([`crate::layout`]): rows `t * S .. (t + 1) * S` are time step `t`.
//!
//! The projection, the causal depthwise convolution ([`crate::ops::conv`]), the time steps,
//! the gated RMSNorm and the output projection work on the row layout directly. The scan is
//! evaluated in chunks of `Q = min(chunk_size, T)` steps (the SSD form, as the CPU backend's
//! `mamba2/ssd.rs`): the sequence is padded with zero steps to whole chunks (the scan is
//! causal, so steps after the end change no earlier output, and their rows are dropped) and
//! reordered to `(S * chunks, heads, Q, ...)` so that every chunk of every sequence and head is
//! one entry of a batched matrix product. With the per-step log-decays `l_k = dt_k A <= 0`:
//!
//! ```text
//! y_i   = sum_{j <= i} exp(l_{j+1} + .. + l_i) dt_j (C_i . B_j) x_j     (within the chunk)
//!       + exp(l_0 + .. + l_i) S_in C_i                                  (the state entering it)
//!       + D x_i
//! S_out = sum_j exp(l_{j+1} + .. + l_{Q-1}) dt_j x_j B_j^T              (the chunk's own state)
//! ```
//!
//! and the entering states follow from the chunks' own states by the same kind of decay matrix
//! over chunks. dfdx has no cumsum: every cumulative sum of log-decays is a product with a
//! constant triangular 0/1 matrix. The decay between steps `j <= i` is the difference of two
//! cumulative sums, which is `<= 0` mathematically but can round slightly above 0, and above
//! the diagonal it is positive and unbounded; it is clamped to `<= 0` (as `v - relu(v)`, which
//! keeps the derivative 1 for every `v <= 0`) before the exponential, so every exponential is
//! at most 1 and the mask that zeroes the upper triangle multiplies finite values only.

use crate::ops::act::{silu, softplus};
use crate::ops::conv::causal_conv;
use crate::ops::linear::{matmul_t, rows_of};
use crate::ops::rows::{take_cols, take_rows};
use crate::ops::tape::dup;
use crate::ops::{Cube, Mat, Vector};
use boldcast_core::Elem;
use dfdx::prelude::*;

/// The epsilon of the gated RMSNorm (`layer_norm_epsilon` of the reference).
pub const RMS_EPS: f64 = 1e-5;

/// A runtime-sized 4-D tensor: `(S * chunks, heads, rows, cols)` blocks of the SSD.
type Quad<E, D, T> = Tensor<(usize, usize, usize, usize), E, D, T>;

/// One layer's Mamba-2 parameters, as matrices and vectors with tape `T`.
pub struct Mamba2Params<E: Dtype, D: Device<E>, T> {
    /// `dt_bias` `(nheads,)`.
    pub dt_bias: Vector<E, D, T>,
    /// `conv1d.weight` as `(Di + 2N, K)`.
    pub conv_w: Mat<E, D, T>,
    /// `conv1d.bias` `(Di + 2N,)`.
    pub conv_b: Vector<E, D, T>,
    /// `in_proj.weight` `(2 Di + 2N + nheads, M)`: output columns `z | xBC | dt`.
    pub in_proj: Mat<E, D, T>,
    /// `A_log` `(nheads,)`.
    pub a_log: Vector<E, D, T>,
    /// `D` `(nheads,)`.
    pub d: Vector<E, D, T>,
    /// `norm.weight` of the gated RMSNorm `(Di,)`.
    pub norm_w: Vector<E, D, T>,
    /// `out_proj.weight` `(M, Di)`.
    pub out_proj: Mat<E, D, T>,
}

/// The sizes of one scan: sequences, steps, heads, head width, state size, chunk length.
#[derive(Copy, Clone, Debug)]
struct Geometry {
    seqs: usize,
    time: usize,
    heads: usize,
    headdim: usize,
    d_state: usize,
    chunk: usize,
}

/// The mixer on `u (T * S, M)` (already layer-normed): returns `(T * S, M)`. The heads and
/// the state size follow from the parameter shapes; `chunk` is the SSD chunk length (any
/// positive value gives the same numbers up to rounding).
pub fn mamba2<E: Dtype + Elem, D: Device<E>, T: Tape<E, D>>(
    u: Mat<E, D, T>,
    p: Mamba2Params<E, D, T>,
    chunk: usize,
    time: usize,
    seqs: usize,
) -> Mat<E, D, T> {
    let ts = time * seqs;
    let di = p.norm_w.shape().0;
    let heads = p.a_log.shape().0;
    let cd = p.conv_w.shape().0;
    let g = Geometry { seqs, time, heads, headdim: di / heads, d_state: (cd - di) / 2, chunk };

    // 1. [z | xBC | dtr] = u W_in^T.
    let (zx, zx2) = dup(matmul_t(u, p.in_proj));
    let (zx2, zx3) = dup(zx2);
    let z = take_cols(zx, 0, di);
    let xbc = take_cols(zx2, di, cd);
    let dtr = take_cols(zx3, di + cd, heads);

    // 2. Causal depthwise conv over x | B | C, then SiLU.
    let xbc = silu(causal_conv(xbc, p.conv_w, p.conv_b, time, seqs));

    // 3. dt = softplus(dtr + dt_bias), A = -exp(A_log).
    let dt = softplus(dtr + rows_of(p.dt_bias, ts));
    let a = p.a_log.exp().negate();

    // 4. The scan (with the D skip).
    let y = ssd(xbc, dt, a, p.d, g);

    // 5. Gated RMSNorm over all Di entries of a step (one group): v = y silu(z),
    // o = v / sqrt(mean(v^2) + eps) * w.
    let (v, v2) = dup(y * silu(z));
    let ms = v2.square().mean::<(usize,), Axis<1>>();
    let r = (ms + E::of(RMS_EPS)).sqrt().recip().broadcast_like::<(usize, usize), Axis<1>>(&(ts, di));
    let o = v * r * rows_of(p.norm_w, ts);

    // 6. out = o W_out^T.
    matmul_t(o, p.out_proj)
}

/// The chunked scan: `xbc (T * S, Di + 2N)` after the SiLU, `dt (T * S, nheads)`, `a` and
/// `dskip` `(nheads,)`; returns `y (T * S, Di)` including `D x`.
fn ssd<E: Dtype + Elem, D: Device<E>, T: Tape<E, D>>(
    xbc: Mat<E, D, T>,
    dt: Mat<E, D, T>,
    a: Vector<E, D, T>,
    dskip: Vector<E, D, T>,
    g: Geometry,
) -> Mat<E, D, T> {
    let Geometry { seqs: s, time, heads: hh, headdim: pd, d_state: n, chunk } = g;
    let di = hh * pd;
    let q = chunk.min(time).max(1);
    let nc = time.div_ceil(q);
    let sc = s * nc;
    let dev = xbc.device().clone();
    let pad = (nc * q - time) * s;

    // The chunk-major blocks: x (SC, Q, H, Pd), B and C (SC, Q, N), dt (SC, Q, H).
    let xbc = to_chunks(pad_rows(xbc, pad), nc, q, s);
    let (xbc, xbc2) = dup(xbc.reshape_like(&(sc * q, di + 2 * n)));
    let (xbc2, xbc3) = dup(xbc2);
    let xq = take_cols(xbc, 0, di).reshape_like(&(sc, q, hh, pd));
    let bm = take_cols(xbc2, di, n).reshape_like(&(sc, q, n));
    let cm = take_cols(xbc3, di + n, n).reshape_like(&(sc, q, n));
    let dtq = to_chunks(pad_rows(dt, pad), nc, q, s);
    // Per-head views (SC, H, Q).
    let dth = dtq.permute::<(usize, usize, usize), Axes3<0, 2, 1>>();
    let (dth, dth2) = dup(dth);
    let (dth2, dth3) = dup(dth2);
    let (xq, xq2) = dup(xq);
    let (xq2, xq3) = dup(xq2);
    let (bm, bm2) = dup(bm);
    let (cm, cm2) = dup(cm);

    // Log-decays l = dt A (SC, H, Q) and their running sums within the chunk,
    // cum_i = l_0 + .. + l_i (<= 0: a sum of non-positive terms), as a product with a
    // triangular 0/1 matrix.
    let l = dth * a.broadcast_like::<(usize, usize, usize), Axes2<0, 2>>(&(sc, hh, q));
    let (l, l2) = dup(l.reshape_like(&(sc * hh, q)));
    let (l2, l3) = dup(l2);
    let cum = l.matmul(tri::<E, D>(&dev, q, q, |k, i| k <= i)).reshape_like(&(sc, hh, q));
    let (cum, cum2) = dup(cum);
    let (cum2, cum3) = dup(cum2);

    // Within the chunk: L[i, j] = exp(min(cum_i - cum_j, 0)) for j <= i, 0 above;
    // y_diag = (L o (C B^T)) (dt x).
    let sh4 = (sc, hh, q, q);
    // (A binary op may not take two handles of one tensor, hence `+ (-cum_j)`.)
    let seg = cum.broadcast_like::<(usize, usize, usize, usize), Axis<3>>(&sh4)
        + cum2.negate().broadcast_like::<(usize, usize, usize, usize), Axis<2>>(&sh4);
    let lmat = clamp_nonpositive(seg).exp()
        * tri::<E, D>(&dev, q, q, |i, j| j <= i).broadcast_like::<(usize, usize, usize, usize), Axes2<0, 1>>(&sh4);
    let cb = cm.matmul(bm.permute::<(usize, usize, usize), Axes3<0, 2, 1>>());
    let mmat = lmat * cb.broadcast_like::<(usize, usize, usize, usize), Axis<1>>(&sh4);
    let dtx = xq.permute::<(usize, usize, usize, usize), Axes4<0, 2, 1, 3>>()
        * dth2.broadcast_like::<(usize, usize, usize, usize), Axis<3>>(&(sc, hh, q, pd));
    let y = mmat.matmul(dtx);

    // D skip.
    let y = y + xq2.permute::<(usize, usize, usize, usize), Axes4<0, 2, 1, 3>>()
        * dskip.broadcast_like::<(usize, usize, usize, usize), Axes3<0, 2, 3>>(&(sc, hh, q, pd));

    // Across chunks (only when there is more than one): each chunk's own final state (with
    // rest_j = l_{j+1} + .. + l_{Q-1}, again a triangular product), the state entering each
    // chunk, and its contribution to the chunk's outputs. The handles used only here carry
    // empty tapes (see `dup`), so with one chunk nothing is lost by not using them.
    let y = if nc > 1 {
        let rest = l2.matmul(tri::<E, D>(&dev, q, q, |k, j| k > j)).reshape_like(&(sc, hh, q));
        let states = chunk_states(xq3, dth3, rest, bm2, g, q);
        let decays = l3.sum::<(usize,), Axis<1>>();
        let entering = entering_states(states, decays, g, nc);
        y + carried_output(entering, cm2, cum3, g, q)
    } else {
        y
    };

    unchunk(y, g, nc, q)
}

/// The chunk-major `y (SC, H, Q, Pd)` back in the row layout `(T * S, Di)`, without the
/// padding of the last chunk.
fn unchunk<E: Dtype + Elem, D: Device<E>, T: Tape<E, D>>(
    y: Quad<E, D, T>,
    g: Geometry,
    nc: usize,
    q: usize,
) -> Mat<E, D, T> {
    let Geometry { seqs: s, time, heads: hh, headdim: pd, .. } = g;
    let y = y
        .reshape_like(&(s, nc, hh, q, pd))
        .permute::<(usize, usize, usize, usize, usize), Axes5<1, 3, 0, 2, 4>>()
        .reshape_like(&(nc * q * s, hh * pd));
    if nc * q > time {
        take_rows(y, 0, time * s)
    } else {
        y
    }
}

/// Each chunk's own final state `sum_j exp(rest_j) dt_j x_j B_j^T`, from `xq (SC, Q, H, Pd)`,
/// `dth` and `rest` `(SC, H, Q)` and `bm (SC, Q, N)`: returns `(SC, Di, N)`, i.e.
/// `(S, chunks, H, Pd, N)` in order.
fn chunk_states<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    xq: Quad<E, D, T>,
    dth: Cube<E, D, T>,
    rest: Cube<E, D, T>,
    bm: Cube<E, D, T>,
    g: Geometry,
    q: usize,
) -> Cube<E, D, T> {
    let (sc, hh, pd) = (bm.shape().0, g.heads, g.headdim);
    // rest_j <= 0 exactly (a sum of non-positive terms): exp(rest) <= 1.
    let w = (dth * rest.exp()).permute::<(usize, usize, usize), Axes3<0, 2, 1>>();
    let xw = xq * w.broadcast_like::<(usize, usize, usize, usize), Axis<3>>(&(sc, q, hh, pd));
    xw.reshape_like(&(sc, q, hh * pd)).permute::<(usize, usize, usize), Axes3<0, 2, 1>>().matmul(bm)
}

/// The state entering every chunk, from the chunks' own states `(SC, Di, N)` and the chunks'
/// total log-decays `decays (SC * H,)` (order `(S, chunks, H)`):
/// `S_in[c] = sum_{c' < c} exp(a_{c'+1} + .. + a_{c-1}) S_own[c']`. Returns
/// `(S, H, chunks, Pd * N)`.
fn entering_states<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    states: Cube<E, D, T>,
    decays: Vector<E, D, T>,
    g: Geometry,
    nc: usize,
) -> Quad<E, D, T> {
    let (s, hh, pn) = (g.seqs, g.heads, g.headdim * g.d_state);
    let dev = states.device().clone();
    // Per (sequence, head) rows over chunks: (S * H, chunks).
    let a = decays
        .reshape_like(&(s, nc, hh))
        .permute::<(usize, usize, usize), Axes3<0, 2, 1>>()
        .reshape_like(&(s * hh, nc));
    let (a, a2) = dup(a);
    // before_c = a_0 + .. + a_{c-1}, upto_c = a_0 + .. + a_c; the decay from the end of chunk
    // c' to the start of chunk c > c' is before_c - upto_c', clamped as within a chunk.
    let before = a.matmul(tri::<E, D>(&dev, nc, nc, |k, c| k < c));
    let upto = a2.matmul(tri::<E, D>(&dev, nc, nc, |k, c| k <= c));
    let sh = (s * hh, nc, nc);
    let seg = before.broadcast_like::<(usize, usize, usize), Axis<2>>(&sh)
        - upto.broadcast_like::<(usize, usize, usize), Axis<1>>(&sh);
    let dmat = clamp_nonpositive(seg).exp()
        * tri::<E, D>(&dev, nc, nc, |c, c2| c2 < c).broadcast_like::<(usize, usize, usize), Axis<0>>(&sh);
    let own = states.reshape_like(&(s, nc, hh, pn)).permute::<(usize, usize, usize, usize), Axes4<0, 2, 1, 3>>();
    dmat.reshape_like(&(s, hh, nc, nc)).matmul(own)
}

/// The outputs due to the state entering each chunk, `exp(cum_i) C_i S_in^T`, from
/// `entering (S, H, chunks, Pd * N)`, `cm (SC, Q, N)` and `cum (SC, H, Q)`: `(SC, H, Q, Pd)`.
fn carried_output<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    entering: Quad<E, D, T>,
    cm: Cube<E, D, T>,
    cum: Cube<E, D, T>,
    g: Geometry,
    q: usize,
) -> Quad<E, D, T> {
    let (s, hh, pd, n) = (g.seqs, g.heads, g.headdim, g.d_state);
    let sc = cm.shape().0;
    let nc = sc / s;
    let sin_t = entering
        .reshape_like(&(s, hh, nc, pd, n))
        .permute::<(usize, usize, usize, usize, usize), Axes5<0, 2, 1, 4, 3>>()
        .reshape_like(&(sc, hh, n, pd));
    let sh = (sc, hh, q, n);
    // cum_i <= 0 exactly: exp(cum) <= 1.
    let cs = cm.broadcast_like::<(usize, usize, usize, usize), Axis<1>>(&sh)
        * cum.exp().broadcast_like::<(usize, usize, usize, usize), Axis<3>>(&sh);
    cs.matmul(sin_t)
}

/// `min(v, 0)` as `v - relu(v)`: the derivative is 1 for every `v <= 0` (dfdx's `relu'(0)`
/// is 0), so clamping changes no gradient where the value was already in range.
fn clamp_nonpositive<S: Shape, E: Dtype, D: Device<E>, T: Tape<E, D>>(v: Tensor<S, E, D, T>) -> Tensor<S, E, D, T> {
    let (v, v2) = dup(v);
    v - v2.relu()
}

/// The constant 0/1 matrix `(rows, cols)` with ones where `keep(row, col)`.
fn tri<E: Dtype, D: Device<E>>(
    dev: &D,
    rows: usize,
    cols: usize,
    keep: impl Fn(usize, usize) -> bool,
) -> Mat<E, D, NoneTape> {
    let data = (0..rows * cols).map(|i| if keep(i / cols, i % cols) { E::ONE } else { E::default() }).collect();
    dev.tensor_from_vec(data, (rows, cols))
}

/// `m (rows, w)` followed by `extra` zero rows.
fn pad_rows<E: Dtype, D: Device<E>, T: Tape<E, D>>(m: Mat<E, D, T>, extra: usize) -> Mat<E, D, T> {
    if extra == 0 {
        return m;
    }
    let w = m.shape().1;
    let zeros: Mat<E, D, NoneTape> = m.device().zeros_like(&(extra, w));
    (m, zeros.retaped::<T>()).concat_along(Axis::<0>)
}

/// Rows `((c * Q + i) * S + s, w)` of `m` reordered to `(s * chunks + c, i, w)`.
fn to_chunks<E: Dtype, D: Device<E>, T: Tape<E, D>>(m: Mat<E, D, T>, nc: usize, q: usize, s: usize) -> Cube<E, D, T> {
    let w = m.shape().1;
    m.reshape_like(&(nc, q, s, w)).permute::<(usize, usize, usize, usize), Axes4<2, 0, 1, 3>>().reshape_like(&(
        s * nc,
        q,
        w,
    ))
}
