//! One sequence `u[T, M]` through the Mamba-2 mixer: the input projection, the causal
//! depthwise convolution over `x | B | C`, the time steps, the scan, the gated RMSNorm and the
//! output projection, forward and backward, all in a [`Workspace`] that is allocated once per
//! block of sequences and reused (nothing is allocated per sequence or per step).
//!
//! As in the Mamba-1 mixer, every elementwise pass (convolution and SiLU, time steps, the
//! gated RMSNorm and their backwards) is a kernel compiled for the machine's vector width
//! ([`crate::multiversion`]) calling the inlined f32 functions of [`crate::ops::fastmath`]
//! through [`CpuElem`], and storing the logistic values and the softplus derivative the
//! backward needs, so the backward evaluates no exponential outside the scan. Sums over a row
//! use fixed lane accumulators ([`simd`]), so every level gives the same bits.

use super::scan::{self, Inputs};
use super::ssd;
use super::{Mamba2Dims, Mamba2Params};
use crate::mixer::SeqWorkspace;
use crate::multiversion;
use crate::ops::gemm::{gemm, Mat};
use crate::ops::{linear, simd, CpuElem};

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
    /// `softplus'(dtr + dt_bias)`, `(T, nheads)`: the time steps' derivative, stored by the
    /// forward.
    dsp: Vec<E>,
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
    /// What the workspace was sized for: `(dims, T)`.
    sized: (Mamba2Dims, usize),
}

/// A workspace serves a call of the same sizes and steps, and a backward only with its
/// buffers (a backward's workspace serves a forward too, so a training step allocates once
/// per thread).
impl<E: CpuElem> SeqWorkspace<E> for Workspace<E> {
    /// `(dims, T, backward)`.
    type Size = (Mamba2Dims, usize, bool);
    fn new((dims, time, backward): Self::Size) -> Self {
        Workspace::new(dims, time, backward)
    }
    fn fits(&self, (dims, time, backward): Self::Size) -> bool {
        self.sized == (dims, time) && (self.bw.is_some() || !backward)
    }
    fn input(&mut self) -> &mut [E] {
        &mut self.us
    }
    fn output_grad(&mut self) -> &mut [E] {
        &mut self.g_out
    }
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
    /// One step's `v r` of the gated RMSNorm, `(Di)`.
    vr: Vec<E>,
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
            vr: z(di),
        });
        Self {
            us: z(time * m),
            zx: z(time * w),
            c: z(time * cd),
            sig_c: z(time * cd),
            xbc: z(time * cd),
            dsp: z(time * nheads),
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
            sized: (dims, time),
        }
    }
}

multiversion! {
    /// Causal depthwise convolution with zero history over the `xBC` columns of `zx`
    /// `(T, w)` (from column `di`): `c[t] = b + sum_j w[j] xBC[t - K + 1 + j]` (`wt` tap-major
    /// `(K, Di + 2N)`), then `sig = sigmoid(c)` and `xbc = silu(c) = c sig`.
    fn conv_silu<E: CpuElem>(
        zx: &[E],
        w: usize,
        di: usize,
        k: usize,
        wt: &[E],
        bias: &[E],
        c: &mut [E],
        sig: &mut [E],
        xbc: &mut [E],
    ) {
        let cd = bias.len();
        for t in 0..c.len() / cd {
            let crow = &mut c[t * cd..][..cd];
            crow.copy_from_slice(bias);
            for j in (k - 1).saturating_sub(t)..k {
                let (src, wj) = (&zx[(t + j + 1 - k) * w + di..][..cd], &wt[j * cd..][..cd]);
                for i in 0..cd {
                    crow[i] += wj[i] * src[i];
                }
            }
            let (xrow, srow) = (&mut xbc[t * cd..][..cd], &mut sig[t * cd..][..cd]);
            for i in 0..cd {
                let s = crow[i].sigmoid();
                srow[i] = s;
                xrow[i] = crow[i] * s;
            }
        }
    }
}

multiversion! {
    /// `dt = softplus(dtr + dt_bias)` and its derivative `dsp` `(T, nheads)`, with `dtr` the
    /// columns `off..off + nheads` of `zx` `(T, w)`.
    fn time_steps<E: CpuElem>(zx: &[E], w: usize, off: usize, bias: &[E], dt: &mut [E], dsp: &mut [E]) {
        let nh = bias.len();
        for t in 0..dt.len() / nh {
            let (src, dr, sr) = (&zx[t * w + off..][..nh], &mut dt[t * nh..][..nh], &mut dsp[t * nh..][..nh]);
            for h in 0..nh {
                let (sp, sg) = (src[h] + bias[h]).softplus_and_grad();
                dr[h] = sp;
                sr[h] = sg;
            }
        }
    }
}

multiversion! {
    /// The gated RMSNorm over all Di entries of a step (one group), from the scan output `y`
    /// `(T, Di)` and the `z` columns of `zx` `(T, w)`: `sig_z = sigmoid(z)`,
    /// `v = y silu(z)`, `r = 1 / sqrt(mean(v^2) + eps)` into `rinv`, `o = v r norm_w`.
    fn gate_norm_forward<E: CpuElem>(
        y: &[E],
        zx: &[E],
        w: usize,
        norm_w: &[E],
        sig_z: &mut [E],
        o: &mut [E],
        rinv: &mut [E],
    ) {
        let di = norm_w.len();
        let inv_di = E::of(1.0 / di as f64);
        for t in 0..rinv.len() {
            let (yr, z) = (&y[t * di..][..di], &zx[t * w..][..di]);
            let (orow, sz) = (&mut o[t * di..][..di], &mut sig_z[t * di..][..di]);
            for i in 0..di {
                let s = z[i].sigmoid();
                sz[i] = s;
                orow[i] = yr[i] * (z[i] * s);
            }
            let ss = simd::sum_map(orow, |v| v * v);
            let r = (ss * inv_di + E::of(EPS)).sqrt().recip();
            rinv[t] = r;
            for i in 0..di {
                orow[i] = orow[i] * r * norm_w[i];
            }
        }
    }
}

multiversion! {
    /// Backward of [`gate_norm_forward`] for the output gradient `go` `(T, Di)`, in place:
    /// `g_w += g_o v r` (into the f64 partial `g_norm_w`), `c1 = mean(v r w g_o)`,
    /// `g_v = r (w g_o - v r c1)`, `g_z = g_v y silu'(z)` into the `z` columns of `g_zx`
    /// `(T, w)`, and `g_y = g_v silu(z)` written over `go`. `vr` is a scratch row `(Di)`.
    fn gate_norm_backward<E: CpuElem>(
        y: &[E],
        zx: &[E],
        w: usize,
        norm_w: &[E],
        sig_z: &[E],
        rinv: &[E],
        go: &mut [E],
        g_zx: &mut [E],
        g_norm_w: &mut [f64],
        vr: &mut [E],
    ) {
        let di = norm_w.len();
        let inv_di = E::of(1.0 / di as f64);
        let (vr, g_norm_w) = (&mut vr[..di], &mut g_norm_w[..di]);
        for t in 0..rinv.len() {
            let r = rinv[t];
            let (yr, z, sig) = (&y[t * di..][..di], &zx[t * w..][..di], &sig_z[t * di..][..di]);
            let g = &mut go[t * di..][..di];
            for i in 0..di {
                let v = yr[i] * (z[i] * sig[i]) * r;
                vr[i] = v;
                g_norm_w[i] += (g[i] * v).f64();
            }
            let c1 = simd::sum_zip3(vr, norm_w, g, |v, nw, gv| v * nw * gv) * inv_di;
            let gz = &mut g_zx[t * w..][..di];
            for i in 0..di {
                let s = sig[i];
                let gv = r * (norm_w[i] * g[i] - vr[i] * c1);
                gz[i] = gv * yr[i] * silu_grad_from(z[i], s);
                g[i] = gv * (z[i] * s);
            }
        }
    }
}

multiversion! {
    /// Through the time steps and the SiLU after the convolution: `g_dtr = g_dt softplus'`
    /// into the `dtr` columns `off..` of `g_zx` `(T, w)` (and summed into the f64 `g_bias`),
    /// and `g_xbc *= silu'(c)` in place `(T, Di + 2N)`.
    fn steps_silu_backward<E: CpuElem>(
        g_dt: &[E],
        dsp: &[E],
        w: usize,
        off: usize,
        g_zx: &mut [E],
        g_bias: &mut [f64],
        c: &[E],
        sig_c: &[E],
        g_xbc: &mut [E],
    ) {
        let nh = g_bias.len();
        for t in 0..g_dt.len() / nh {
            let (gd, ds, dst) = (&g_dt[t * nh..][..nh], &dsp[t * nh..][..nh], &mut g_zx[t * w + off..][..nh]);
            for h in 0..nh {
                let g = gd[h] * ds[h];
                dst[h] = g;
                g_bias[h] += g.f64();
            }
        }
        let len = g_xbc.len();
        let (c, sig_c) = (&c[..len], &sig_c[..len]);
        for i in 0..len {
            g_xbc[i] *= silu_grad_from(c[i], sig_c[i]);
        }
    }
}

multiversion! {
    /// Backward of the convolution in [`conv_silu`] for `g_c` `(T, Di + 2N)`: the tap-major
    /// weight gradient `g_wt` `(K, Di + 2N)` and the bias gradient `g_b` `(Di + 2N)` summed
    /// over the steps, and `g_xBC[t - K + 1 + j] += w[j] g_c[t]` into the `xBC` columns of
    /// `g_zx` `(T, w)`.
    fn conv_backward<E: CpuElem>(
        g_c: &[E],
        zx: &[E],
        w: usize,
        di: usize,
        k: usize,
        wt: &[E],
        g_wt: &mut [E],
        g_b: &mut [E],
        g_zx: &mut [E],
    ) {
        let cd = g_b.len();
        for t in 0..g_c.len() / cd {
            let gc = &g_c[t * cd..][..cd];
            for i in 0..cd {
                g_b[i] += gc[i];
            }
            for j in (k - 1).saturating_sub(t)..k {
                let s = t + j + 1 - k;
                let (src, dst) = (&zx[s * w + di..][..cd], &mut g_zx[s * w + di..][..cd]);
                let (wj, gwj) = (&wt[j * cd..][..cd], &mut g_wt[j * cd..][..cd]);
                for i in 0..cd {
                    gwj[i] += gc[i] * src[i];
                    dst[i] += wj[i] * gc[i];
                }
            }
        }
    }
}

/// Everything up to the RMSNorm output `ws.o`: projection, convolution, SiLU, time steps, scan
/// (chunked, which also fills the backward's checkpoints when there are any, or sequential),
/// gate and normalization.
fn forward_core<E: CpuElem>(dims: Mamba2Dims, p: &Mamba2Params<&[E]>, a: &[E], ws: &mut Workspace<E>, chunked: bool) {
    let Mamba2Dims { d_model: m, d_inner: di, d_conv: k, .. } = dims;
    let (w, cd) = (dims.proj_dim(), dims.conv_dim());
    let time = ws.us.len() / m;
    linear::forward(&ws.us, time, m, p.in_proj, None, w, &mut ws.zx);
    // A tap-major copy `(K, Di + 2N)` of the conv weights, so the loops over channels below run
    // over contiguous memory (and vectorize).
    for (ch, taps) in p.conv_w.chunks_exact(k).enumerate() {
        for (j, &wv) in taps.iter().enumerate() {
            ws.conv_wt[j * cd + ch] = wv;
        }
    }
    conv_silu(&ws.zx, w, di, k, &ws.conv_wt, p.conv_b, &mut ws.c, &mut ws.sig_c, &mut ws.xbc);
    time_steps(&ws.zx, w, di + cd, p.dt_bias, &mut ws.dt, &mut ws.dsp);
    let io = Inputs { dims, a, d_skip: p.d, dt: &ws.dt, xbc: &ws.xbc };
    if chunked {
        ssd::forward(&io, &mut ws.ssd, &mut ws.y, ws.bw.as_mut().map(|b| &mut b.ckpt[..]));
    } else {
        scan::sequential(&io, &mut ws.state, &mut ws.y);
    }
    gate_norm_forward(&ws.y, &ws.zx, w, p.norm_w, &mut ws.sig_z, &mut ws.o, &mut ws.rinv);
}

/// One sequence forward: `out` `(T, M)` from `ws.us`, the scan chunked or sequential.
pub(super) fn forward<E: CpuElem>(
    dims: Mamba2Dims,
    p: &Mamba2Params<&[E]>,
    a: &[E],
    ws: &mut Workspace<E>,
    out: &mut [E],
    chunked: bool,
) {
    forward_core(dims, p, a, ws, chunked);
    let time = ws.us.len() / dims.d_model;
    linear::forward(&ws.o, time, dims.d_inner, p.out_proj, None, dims.d_model, out);
}

/// `silu'(x) = s (1 + x (1 - s))` from a stored `s = sigmoid(x)` (the formula of
/// `act::silu_grad`, without recomputing the exponential).
#[inline]
fn silu_grad_from<E: CpuElem>(x: E, s: E) -> E {
    s * (E::one() + x * (E::one() - s))
}

/// One sequence backward: recomputes the forward from `ws.us`, then, from the output gradient
/// `ws.g_out`, writes `g_u` `(T, M)` and accumulates the parameter gradients into `part`
/// (whose `a_log` receives the gradient with respect to A).
pub(super) fn backward<E: CpuElem>(
    dims: Mamba2Dims,
    p: &Mamba2Params<&[E]>,
    a: &[E],
    ws: &mut Workspace<E>,
    g_u: &mut [E],
    part: &mut Mamba2Params<Vec<f64>>,
) {
    forward_core(dims, p, a, ws, true);
    let Mamba2Dims { d_model: m, d_inner: di, d_conv: k, .. } = dims;
    let (w, cd) = (dims.proj_dim(), dims.conv_dim());
    let time = ws.us.len() / m;
    let bw = ws.bw.as_mut().expect("mamba2: backward needs a backward workspace");

    // out = o W_out^T: g_W_out = g_out^T o; g_o = g_out W_out (into `o`, no longer needed).
    bw.g_wout.fill(E::zero());
    linear::backward(&ws.o, time, di, p.out_proj, m, &ws.g_out, &mut bw.g_wout, None, None);
    simd::add_widened(&mut part.out_proj, &bw.g_wout);
    gemm(E::one(), Mat::rm(&ws.g_out, time, m), Mat::rm(p.out_proj, m, di), E::zero(), &mut ws.o, di);

    // Gated RMSNorm: g_w, g_z, and g_y written over g_o.
    bw.g_zx.fill(E::zero());
    gate_norm_backward(
        &ws.y,
        &ws.zx,
        w,
        p.norm_w,
        &ws.sig_z,
        &ws.rinv,
        &mut ws.o,
        &mut bw.g_zx,
        &mut part.norm_w,
        &mut bw.vr,
    );

    // The scan.
    let io = Inputs { dims, a, d_skip: p.d, dt: &ws.dt, xbc: &ws.xbc };
    let grads = scan::Grads { g_xbc: &mut bw.g_xbc, g_dt: &mut bw.g_dt, g_a: &mut part.a_log, g_d: &mut part.d };
    scan::backward(&io, &bw.ckpt, &ws.o, &mut bw.scan, grads);

    // dt = softplus(dtr + dt_bias) with its stored derivative; x | B | C = silu(c), in place.
    steps_silu_backward(
        &bw.g_dt,
        &ws.dsp,
        w,
        di + cd,
        &mut bw.g_zx,
        &mut part.dt_bias,
        &ws.c,
        &ws.sig_c,
        &mut bw.g_xbc,
    );
    // The convolution: g_w[ch, j] += g_c[t] xBC[t-K+1+j], g_b += g_c, g_xBC[t-K+1+j] += w g_c.
    // The weight and bias gradients are summed over this sequence's T steps in `E`, tap-major
    // (contiguous, vectorizable), then added to the f64 partial once.
    bw.g_convt.fill(E::zero());
    let (g_wt, g_b) = bw.g_convt.split_at_mut(k * cd);
    conv_backward(&bw.g_xbc, &ws.zx, w, di, k, &ws.conv_wt, g_wt, g_b, &mut bw.g_zx);
    for (ch, taps) in part.conv_w.chunks_exact_mut(k).enumerate() {
        for (j, gw) in taps.iter_mut().enumerate() {
            *gw += bw.g_convt[j * cd + ch].f64();
        }
    }
    simd::add_widened(&mut part.conv_b, &bw.g_convt[k * cd..]);
    // zx = u W_in^T.
    bw.g_win.fill(E::zero());
    linear::backward(&ws.us, time, m, p.in_proj, w, &bw.g_zx, &mut bw.g_win, None, Some((g_u, false)));
    simd::add_widened(&mut part.in_proj, &bw.g_win);
}
