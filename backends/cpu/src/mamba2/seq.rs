//! One sequence `u[T, M]` through the Mamba-2 mixer: the input projection, the causal
//! depthwise convolution over `x | B | C`, the time steps, the scan, the gated RMSNorm and the
//! output projection, forward and backward, all in a [`Workspace`] that is allocated once per
//! block of sequences and reused (nothing is allocated per sequence or per step).

use super::scan::{self, Inputs};
use super::ssd;
use super::{Mamba2Dims, Mamba2Params};
use crate::ops::act::{sigmoid, softplus, softplus_grad};
use crate::ops::gemm::{gemm, Mat};
use crate::ops::{linear, CpuElem};

/// The epsilon of the gated RMSNorm (`layer_norm_epsilon` of the reference).
const EPS: f64 = 1e-5;

/// Every buffer one sequence needs, sized for `T` steps. Row-major `(T, width)` unless noted.
pub(super) struct Workspace<E> {
    /// The gathered input `u`, `(T, M)`.
    pub us: Vec<E>,
    /// `z | xBC | dtr = u W_in^T`, `(T, 2 Di + 2N + nheads)`.
    zx: Vec<E>,
    /// The convolution's output before the SiLU, `(T, Di + 2N)` (kept for `silu'`).
    c: Vec<E>,
    /// `sigmoid(c)`, `(T, Di + 2N)`: kept so the backward's `silu'(c)` costs no exponential.
    sig_c: Vec<E>,
    /// `x | B | C = silu(c)`, `(T, Di + 2N)`.
    xbc: Vec<E>,
    /// `dtr + dt_bias`, the softplus argument, `(T, nheads)`.
    pre: Vec<E>,
    /// `dt = softplus(pre)`, `(T, nheads)`.
    dt: Vec<E>,
    /// The scan output `y` before the gate, `(T, Di)`.
    y: Vec<E>,
    /// `sigmoid(z)` of the gate, `(T, Di)`, kept for the backward likewise.
    sig_z: Vec<E>,
    /// The conv weights tap-major, `(K, Di + 2N)`.
    conv_wt: Vec<E>,
    /// The RMSNorm output `o`, `(T, Di)`; in the backward it becomes `g_o`, then `g_y`.
    o: Vec<E>,
    /// `1 / sqrt(mean(v^2) + eps)` per step, `(T)`.
    rinv: Vec<E>,
    /// The sequential scan's state of one head, `(Pd, N)`.
    state: Vec<E>,
    /// The chunked scan's scratch.
    ssd: ssd::Scratch<E>,
    /// The gathered output gradient, `(T, M)` (empty in a forward-only workspace).
    pub g_out: Vec<E>,
    /// The backward's buffers; `None` in a forward-only workspace.
    bw: Option<Backward<E>>,
}

/// The buffers only the backward needs.
struct Backward<E> {
    /// The state entering each chunk, `(ceil(T / Q), nheads, Pd, N)`.
    ckpt: Vec<E>,
    /// The scan backward's chunk states and carry.
    scan: scan::Buffers<E>,
    /// Gradient of `z | xBC | dtr`, `(T, 2 Di + 2N + nheads)`.
    g_zx: Vec<E>,
    /// Gradient of `x | B | C` after the SiLU, then (in place) of the convolution output `c`.
    g_xbc: Vec<E>,
    /// Gradient of `dt`, `(T, nheads)`.
    g_dt: Vec<E>,
    /// One sequence's conv weight gradient, tap-major `(K, Di + 2N)`, then its bias gradient
    /// `(Di + 2N)`.
    g_convt: Vec<E>,
    /// One sequence's `out_proj` gradient `(M, Di)`, added to the f64 partial afterwards.
    g_wout: Vec<E>,
    /// One sequence's `in_proj` gradient `(2 Di + 2N + nheads, M)`, likewise.
    g_win: Vec<E>,
}

impl<E: CpuElem> Workspace<E> {
    /// Buffers for sequences of `time` steps; with `backward`, also the backward's.
    pub fn new(dims: Mamba2Dims, time: usize, backward: bool) -> Self {
        let Mamba2Dims { d_model: m, d_inner: di, d_state: n, nheads, headdim: pd, chunk_size: q, .. } = dims;
        let (w, cd) = (dims.proj_dim(), dims.conv_dim());
        let z = |len: usize| vec![E::zero(); len];
        let bw = backward.then(|| Backward {
            ckpt: z(time.div_ceil(q) * di * n),
            scan: scan::Buffers::new(dims, time),
            g_zx: z(time * w),
            g_xbc: z(time * cd),
            g_dt: z(time * nheads),
            g_convt: z((dims.d_conv + 1) * cd),
            g_wout: z(m * di),
            g_win: z(w * m),
        });
        Self {
            us: z(time * m),
            zx: z(time * w),
            c: z(time * cd),
            sig_c: z(time * cd),
            xbc: z(time * cd),
            pre: z(time * nheads),
            dt: z(time * nheads),
            y: z(time * di),
            sig_z: z(time * di),
            conv_wt: z(dims.d_conv * cd),
            o: z(time * di),
            rinv: z(time),
            state: z(pd * n),
            ssd: ssd::Scratch::new(dims, time),
            g_out: if backward { z(time * m) } else { Vec::new() },
            bw,
        }
    }
}

/// Everything up to the RMSNorm output `ws.o`: projection, convolution, SiLU, time steps, scan
/// (chunked, which also fills the backward's checkpoints when there are any, or sequential),
/// gate and normalization.
fn forward_core<E: CpuElem>(dims: Mamba2Dims, p: &Mamba2Params<E>, a: &[E], ws: &mut Workspace<E>, chunked: bool) {
    let Mamba2Dims { d_model: m, d_inner: di, nheads, d_conv: k, .. } = dims;
    let (w, cd) = (dims.proj_dim(), dims.conv_dim());
    let time = ws.us.len() / m;
    linear::forward(&ws.us, time, m, &p.in_proj, None, w, &mut ws.zx);
    // A tap-major copy `(K, Di + 2N)` of the conv weights, so the loops over channels below run
    // over contiguous memory (and vectorize).
    for (ch, taps) in p.conv_w.chunks_exact(k).enumerate() {
        for (j, &wv) in taps.iter().enumerate() {
            ws.conv_wt[j * cd + ch] = wv;
        }
    }
    // Causal depthwise convolution with zero history: c[t] = b + sum_j w[j] xBC[t - K + 1 + j].
    for t in 0..time {
        let crow = &mut ws.c[t * cd..(t + 1) * cd];
        crow.copy_from_slice(&p.conv_b);
        for j in (k - 1).saturating_sub(t)..k {
            let src = &ws.zx[(t + j + 1 - k) * w + di..][..cd];
            for ((cv, &xv), &wv) in crow.iter_mut().zip(src).zip(&ws.conv_wt[j * cd..(j + 1) * cd]) {
                *cv += wv * xv;
            }
        }
        let (xrow, srow) = (&mut ws.xbc[t * cd..(t + 1) * cd], &mut ws.sig_c[t * cd..(t + 1) * cd]);
        for ((xo, so), &cv) in xrow.iter_mut().zip(srow.iter_mut()).zip(crow.iter()) {
            // silu(c) = c sigmoid(c), as `act::silu`.
            *so = sigmoid(cv);
            *xo = cv * *so;
        }
        for h in 0..nheads {
            let pre = ws.zx[t * w + di + cd + h] + p.dt_bias[h];
            ws.pre[t * nheads + h] = pre;
            ws.dt[t * nheads + h] = softplus(pre);
        }
    }
    let io = Inputs { dims, a, d_skip: &p.d, dt: &ws.dt, xbc: &ws.xbc };
    if chunked {
        ssd::forward(&io, &mut ws.ssd, &mut ws.y, ws.bw.as_mut().map(|b| &mut b.ckpt[..]));
    } else {
        scan::sequential(&io, &mut ws.state, &mut ws.y);
    }
    // Gated RMSNorm over all Di entries of a step (one group): v = y silu(z), o = v r w.
    let inv_di = E::of(1.0 / di as f64);
    for t in 0..time {
        let (y, z) = (&ws.y[t * di..(t + 1) * di], &ws.zx[t * w..t * w + di]);
        let o = &mut ws.o[t * di..(t + 1) * di];
        let sz = &mut ws.sig_z[t * di..(t + 1) * di];
        let mut ss = E::zero();
        for i in 0..di {
            sz[i] = sigmoid(z[i]);
            let v = y[i] * (z[i] * sz[i]);
            o[i] = v;
            ss += v * v;
        }
        let r = (ss * inv_di + E::of(EPS)).sqrt().recip();
        ws.rinv[t] = r;
        for (ov, &nw) in o.iter_mut().zip(&p.norm_w) {
            *ov = *ov * r * nw;
        }
    }
}

/// One sequence forward: `out` `(T, M)` from `ws.us`, the scan chunked or sequential.
pub(super) fn forward<E: CpuElem>(
    dims: Mamba2Dims,
    p: &Mamba2Params<E>,
    a: &[E],
    ws: &mut Workspace<E>,
    out: &mut [E],
    chunked: bool,
) {
    forward_core(dims, p, a, ws, chunked);
    let time = ws.us.len() / dims.d_model;
    linear::forward(&ws.o, time, dims.d_inner, &p.out_proj, None, dims.d_model, out);
}

/// `silu'(x) = s (1 + x (1 - s))` from a stored `s = sigmoid(x)` (the formula of
/// `act::silu_grad`, without recomputing the exponential).
#[inline]
fn silu_grad_from<E: CpuElem>(x: E, s: E) -> E {
    s * (E::one() + x * (E::one() - s))
}

/// Adds an `E` gradient into the block's f64 partial.
fn add_f64<E: CpuElem>(acc: &mut [f64], g: &[E]) {
    for (a, &v) in acc.iter_mut().zip(g) {
        *a += v.f64();
    }
}

/// One sequence backward: recomputes the forward from `ws.us`, then, from the output gradient
/// `ws.g_out`, writes `g_u` `(T, M)` and accumulates the parameter gradients into `part`
/// (whose `a_log` receives the gradient with respect to A).
pub(super) fn backward<E: CpuElem>(
    dims: Mamba2Dims,
    p: &Mamba2Params<E>,
    a: &[E],
    ws: &mut Workspace<E>,
    g_u: &mut [E],
    part: &mut Mamba2Params<f64>,
) {
    forward_core(dims, p, a, ws, true);
    let Mamba2Dims { d_model: m, d_inner: di, nheads, d_conv: k, .. } = dims;
    let (w, cd) = (dims.proj_dim(), dims.conv_dim());
    let time = ws.us.len() / m;
    let bw = ws.bw.as_mut().expect("mamba2: backward needs a backward workspace");

    // out = o W_out^T: g_W_out = g_out^T o; g_o = g_out W_out (into `o`, no longer needed).
    bw.g_wout.fill(E::zero());
    linear::backward(&ws.o, time, di, &p.out_proj, m, &ws.g_out, &mut bw.g_wout, None, None);
    add_f64(&mut part.out_proj, &bw.g_wout);
    gemm(E::one(), Mat::rm(&ws.g_out, time, m), Mat::rm(&p.out_proj, m, di), E::zero(), &mut ws.o, di);

    // Gated RMSNorm: g_w += g_o v r, c1 = mean(v r w g_o), g_v = r (w g_o - v r c1),
    // g_z = g_v y silu'(z), g_y = g_v silu(z) (written over g_o).
    let inv_di = E::of(1.0 / di as f64);
    bw.g_zx.fill(E::zero());
    for t in 0..time {
        let r = ws.rinv[t];
        let (y, z) = (&ws.y[t * di..(t + 1) * di], &ws.zx[t * w..t * w + di]);
        let go = &mut ws.o[t * di..(t + 1) * di];
        let sig = &ws.sig_z[t * di..(t + 1) * di];
        let mut c1 = E::zero();
        for i in 0..di {
            let vr = y[i] * (z[i] * sig[i]) * r;
            part.norm_w[i] += (go[i] * vr).f64();
            c1 += vr * p.norm_w[i] * go[i];
        }
        c1 *= inv_di;
        let gz = &mut bw.g_zx[t * w..t * w + di];
        for i in 0..di {
            let (s, sz) = (sig[i], z[i] * sig[i]);
            let vr = y[i] * sz * r;
            let gv = r * (p.norm_w[i] * go[i] - vr * c1);
            gz[i] = gv * y[i] * silu_grad_from(z[i], s);
            go[i] = gv * sz;
        }
    }

    // The scan.
    let io = Inputs { dims, a, d_skip: &p.d, dt: &ws.dt, xbc: &ws.xbc };
    let grads = scan::Grads { g_xbc: &mut bw.g_xbc, g_dt: &mut bw.g_dt, g_a: &mut part.a_log, g_d: &mut part.d };
    scan::backward(&io, &bw.ckpt, &ws.o, &mut bw.scan, grads);

    for t in 0..time {
        // dt = softplus(dtr + dt_bias).
        for h in 0..nheads {
            let g = bw.g_dt[t * nheads + h] * softplus_grad(ws.pre[t * nheads + h]);
            bw.g_zx[t * w + di + cd + h] = g;
            part.dt_bias[h] += g.f64();
        }
        // Through the SiLU after the convolution, in place.
        let (crow, srow) = (&ws.c[t * cd..(t + 1) * cd], &ws.sig_c[t * cd..(t + 1) * cd]);
        for ((g, &cv), &s) in bw.g_xbc[t * cd..(t + 1) * cd].iter_mut().zip(crow).zip(srow) {
            *g *= silu_grad_from(cv, s);
        }
    }
    // The convolution: g_w[ch, j] += g_c[t] xBC[t-K+1+j], g_b += g_c, g_xBC[t-K+1+j] += w g_c.
    // The weight and bias gradients are summed over this sequence's T steps in `E`, tap-major
    // (contiguous, vectorizable), then added to the f64 partial once.
    bw.g_convt.fill(E::zero());
    for t in 0..time {
        let gc = &bw.g_xbc[t * cd..(t + 1) * cd];
        for (gb, &g) in bw.g_convt[k * cd..].iter_mut().zip(gc) {
            *gb += g;
        }
        for j in (k - 1).saturating_sub(t)..k {
            let s = t + j + 1 - k;
            let src = &ws.zx[s * w + di..][..cd];
            let dst = &mut bw.g_zx[s * w + di..][..cd];
            let (wt, gwt) = (&ws.conv_wt[j * cd..(j + 1) * cd], &mut bw.g_convt[j * cd..(j + 1) * cd]);
            for (((gw, d), (&xv, &wv)), &g) in gwt.iter_mut().zip(dst.iter_mut()).zip(src.iter().zip(wt)).zip(gc) {
                *gw += g * xv;
                *d += wv * g;
            }
        }
    }
    for (ch, taps) in part.conv_w.chunks_exact_mut(k).enumerate() {
        for (j, gw) in taps.iter_mut().enumerate() {
            *gw += bw.g_convt[j * cd + ch].f64();
        }
    }
    add_f64(&mut part.conv_b, &bw.g_convt[k * cd..]);
    // zx = u W_in^T.
    bw.g_win.fill(E::zero());
    linear::backward(&ws.us, time, m, &p.in_proj, w, &bw.g_zx, &mut bw.g_win, None, Some((g_u, false)));
    add_f64(&mut part.in_proj, &bw.g_win);
}
