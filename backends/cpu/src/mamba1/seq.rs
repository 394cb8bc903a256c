//! One sequence `u[T, M]` through the Mamba-1 mixer: the projections, the causal depthwise
//! convolution, the time steps and the gate around the scan, forward and backward, all in a
//! [`Workspace`] that is allocated once per block of sequences and reused.

use super::scan;
use super::{Mamba1Dims, Mamba1Params};
use crate::ops::act::{silu, silu_grad, softplus, softplus_grad};
use crate::ops::gemm::{gemm, Mat};
use crate::ops::{linear, CpuElem};

/// Every buffer one sequence needs, sized for `T` steps. Row-major `(T, width)` unless noted.
pub(super) struct Workspace<E> {
    /// The gathered input `u`, `(T, M)`.
    pub us: Vec<E>,
    /// `[x | z] = u W_in^T`, `(T, 2 Di)`.
    xz: Vec<E>,
    /// The convolution's output before the SiLU, `(T, Di)` (kept for `silu'` in the backward).
    c: Vec<E>,
    /// `x = silu(c)`, `(T, Di)`.
    xs: Vec<E>,
    /// `[dr | B | C] = x W_x^T`, `(T, R + 2N)`.
    dbc: Vec<E>,
    /// `dr W_dt^T + dt_b`, the softplus argument, `(T, Di)`.
    pre: Vec<E>,
    /// `dt = softplus(pre)`, `(T, Di)`.
    dt: Vec<E>,
    /// The scan output `y` before the gate, `(T, Di)`.
    y: Vec<E>,
    /// `y * silu(z)`, `(T, Di)`; in the backward it becomes `g_y` of the scan in place.
    gated: Vec<E>,
    /// The scan's state while walking forward, `(Di, N)`.
    h: Vec<E>,
    /// One step's decays `exp(dt A)` in the forward scan, `(Di, N)`.
    dec: Vec<E>,
    /// The backward's buffers; `None` in a forward-only workspace.
    bw: Option<Backward<E>>,
    /// The gathered output gradient, `(T, M)` (empty in a forward-only workspace).
    pub g_out: Vec<E>,
}

/// The buffers only the backward needs.
struct Backward<E> {
    /// Chunk length of the checkpointed scan.
    q: usize,
    /// The gradient of the gated product, then (in place) of the scan output, `(T, Di)`.
    g_gated: Vec<E>,
    /// Gradients of `x` (first half) and `z` (second half) from in_proj, `(T, 2 Di)`.
    g_xz: Vec<E>,
    /// Gradient of `x = silu(c)`, then (in place) of `c`, `(T, Di)`.
    g_xs: Vec<E>,
    /// Gradient of `dt`, then (in place) of the softplus argument, `(T, Di)`.
    g_dt: Vec<E>,
    /// Gradient of `[dr | B | C]`, `(T, R + 2N)`.
    g_dbc: Vec<E>,
    /// The scan's own buffers (checkpoints, one chunk's states and decays, the carry).
    scan: scan::Buffers<E>,
    /// This sequence's gradient partial in `E`; added to the block's f64 partial per sequence.
    grads: Mamba1Params<E>,
}

impl<E: CpuElem> Workspace<E> {
    /// A workspace for sequences of `time` steps; with `Some(q)`, also the backward's buffers
    /// for a scan checkpointed every `q` steps.
    pub fn new(dims: Mamba1Dims, time: usize, q: Option<usize>) -> Self {
        let Mamba1Dims { d_model: m, d_inner: di, .. } = dims;
        let z = |len: usize| vec![E::zero(); len];
        let w = dims.w_dbc();
        let bw = q.map(|q| Backward {
            q,
            g_gated: z(time * di),
            g_xz: z(time * 2 * di),
            g_xs: z(time * di),
            g_dt: z(time * di),
            g_dbc: z(time * w),
            scan: scan::Buffers::new(dims, time, q),
            grads: Mamba1Params::zeros(dims),
        });
        Self {
            us: z(time * m),
            xz: z(time * 2 * di),
            c: z(time * di),
            xs: z(time * di),
            dbc: z(time * w),
            pre: z(time * di),
            dt: z(time * di),
            y: z(time * di),
            gated: z(time * di),
            h: z(di * dims.d_state),
            dec: z(di * dims.d_state),
            g_out: if bw.is_some() { z(time * m) } else { Vec::new() },
            bw,
        }
    }

    /// Number of steps the workspace was sized for.
    fn time(&self, dims: Mamba1Dims) -> usize {
        self.us.len() / dims.d_model
    }
}

/// Steps 1 to 4 of MODEL.md for the sequence in `ws.us`: `[x | z]`, the convolution and its
/// SiLU, `[dr | B | C]`, and the time steps `dt`.
fn project<E: CpuElem>(dims: Mamba1Dims, p: &Mamba1Params<E>, ws: &mut Workspace<E>) {
    let Mamba1Dims { d_model: m, d_inner: di, dt_rank: r, d_conv: k, .. } = dims;
    let (t_len, w) = (ws.time(dims), dims.w_dbc());
    linear::forward(&ws.us, t_len, m, &p.in_proj, None, 2 * di, &mut ws.xz);
    // Causal depthwise convolution with zero history: tap j of step t reads x at t - (K-1) + j,
    // and taps that would read before the start are skipped (they multiply zeros).
    for t in 0..t_len {
        let c_row = &mut ws.c[t * di..(t + 1) * di];
        c_row.copy_from_slice(&p.conv_b);
        for j in (k - 1).saturating_sub(t)..k {
            let src = &ws.xz[(t + j + 1 - k) * 2 * di..][..di];
            for ((cv, &xv), w_d) in c_row.iter_mut().zip(src).zip(p.conv_w.chunks_exact(k)) {
                *cv += w_d[j] * xv;
            }
        }
    }
    for (x, &c) in ws.xs.iter_mut().zip(&ws.c) {
        *x = silu(c);
    }
    linear::forward(&ws.xs, t_len, di, &p.x_proj, None, w, &mut ws.dbc);
    // dt_proj reads the first R columns of each `dbc` row in place (row stride R + 2N).
    let dr = Mat { data: &ws.dbc, rows: t_len, cols: r, rs: w, cs: 1 };
    gemm(E::one(), dr, Mat::rm(&p.dt_proj_w, di, r).t(), E::zero(), &mut ws.pre, di);
    for row in ws.pre.chunks_exact_mut(di) {
        for (v, &b) in row.iter_mut().zip(&p.dt_proj_b) {
            *v += b;
        }
    }
    for (d, &v) in ws.dt.iter_mut().zip(&ws.pre) {
        *d = softplus(v);
    }
}

/// `gated = y * silu(z)`.
fn gate<E: CpuElem>(dims: Mamba1Dims, ws: &mut Workspace<E>) {
    let di = dims.d_inner;
    for ((g_row, y_row), xz_row) in
        ws.gated.chunks_exact_mut(di).zip(ws.y.chunks_exact(di)).zip(ws.xz.chunks_exact(2 * di))
    {
        for ((g, &y), &z) in g_row.iter_mut().zip(y_row).zip(&xz_row[di..]) {
            *g = y * silu(z);
        }
    }
}

/// The mixer's output for the sequence in `ws.us`, written to `out` `(T, M)`. `a` is
/// `-exp(A_log)`.
pub(super) fn forward<E: CpuElem>(
    dims: Mamba1Dims,
    p: &Mamba1Params<E>,
    a: &[E],
    ws: &mut Workspace<E>,
    out: &mut [E],
) {
    project(dims, p, ws);
    let io = scan::Inputs { dims, a, d_skip: &p.d, dt: &ws.dt, xs: &ws.xs, dbc: &ws.dbc };
    scan::forward(&io, &mut ws.h, &mut ws.dec, &mut ws.y, None);
    gate(dims, ws);
    let t_len = ws.time(dims);
    linear::forward(&ws.gated, t_len, dims.d_inner, &p.out_proj, None, dims.d_model, out);
}

/// The backward of [`forward`] for the sequence in `ws.us` with output gradient `ws.g_out`:
/// writes the input gradient to `g_u` `(T, M)` and adds the parameter gradients to the block
/// partial `part` (whose `a_log` collects the gradient with respect to A).
pub(super) fn backward<E: CpuElem>(
    dims: Mamba1Dims,
    p: &Mamba1Params<E>,
    a: &[E],
    ws: &mut Workspace<E>,
    g_u: &mut [E],
    part: &mut Mamba1Params<f64>,
) {
    let Mamba1Dims { d_model: m, d_inner: di, dt_rank: r, d_conv: k, .. } = dims;
    let (t_len, w) = (ws.time(dims), dims.w_dbc());
    // Recompute the forward; the scan keeps every Q-th state for the chunked backward.
    project(dims, p, ws);
    let mut bw = ws.bw.take().expect("mamba1: backward needs a backward workspace");
    {
        let io = scan::Inputs { dims, a, d_skip: &p.d, dt: &ws.dt, xs: &ws.xs, dbc: &ws.dbc };
        scan::forward(&io, &mut ws.h, &mut ws.dec, &mut ws.y, Some((&mut bw.scan.ckpt, bw.q)));
    }
    gate(dims, ws);
    let g = &mut bw.grads;
    for (_, t) in g.tensors_mut() {
        t.fill(E::zero());
    }

    // out = gated W_out^T.
    linear::backward(
        &ws.gated,
        t_len,
        di,
        &p.out_proj,
        m,
        &ws.g_out,
        &mut g.out_proj,
        None,
        Some((&mut bw.g_gated, false)),
    );

    // gated = y * silu(z): g_z = g_gated * y * silu'(z), and g_gated becomes g_y in place.
    for t in 0..t_len {
        let (xz_row, gxz_row) = (&ws.xz[t * 2 * di..][..2 * di], &mut bw.g_xz[t * 2 * di..][..2 * di]);
        let (y_row, gg_row) = (&ws.y[t * di..][..di], &mut bw.g_gated[t * di..][..di]);
        for d in 0..di {
            let z = xz_row[di + d];
            gxz_row[di + d] = gg_row[d] * y_row[d] * silu_grad(z);
            gg_row[d] *= silu(z);
        }
    }

    // The scan: g_x (its direct part), g_dt, g_B and g_C, and A and D straight into `part`.
    {
        let io = scan::Inputs { dims, a, d_skip: &p.d, dt: &ws.dt, xs: &ws.xs, dbc: &ws.dbc };
        let out = scan::Grads {
            g_xs: &mut bw.g_xs,
            g_dt: &mut bw.g_dt,
            g_dbc: &mut bw.g_dbc,
            g_a: &mut part.a_log,
            g_d: &mut part.d,
        };
        scan::backward(&io, &bw.g_gated, bw.q, &mut bw.scan, out);
    }

    // dt = softplus(pre), pre = dr W_dt^T + dt_b; g_dt becomes g_pre in place.
    for (gd, &v) in bw.g_dt.iter_mut().zip(&ws.pre) {
        *gd *= softplus_grad(v);
    }
    let dr = Mat { data: &ws.dbc, rows: t_len, cols: r, rs: w, cs: 1 };
    gemm(E::one(), Mat::rm(&bw.g_dt, t_len, di).t(), dr, E::one(), &mut g.dt_proj_w, r);
    for row in bw.g_dt.chunks_exact(di) {
        for (gb, &v) in g.dt_proj_b.iter_mut().zip(row) {
            *gb += v;
        }
    }
    // g_dr lands in the first R columns of each g_dbc row (the scan filled the B and C columns).
    gemm(E::one(), Mat::rm(&bw.g_dt, t_len, di), Mat::rm(&p.dt_proj_w, di, r), E::zero(), &mut bw.g_dbc, w);

    // [dr | B | C] = x W_x^T; the scan's direct g_x is accumulated onto.
    linear::backward(&ws.xs, t_len, di, &p.x_proj, w, &bw.g_dbc, &mut g.x_proj, None, Some((&mut bw.g_xs, true)));

    // x = silu(c): g_xs becomes g_c in place.
    for (gx, &c) in bw.g_xs.iter_mut().zip(&ws.c) {
        *gx *= silu_grad(c);
    }

    // The convolution (BACKWARD.md, "Small pieces"): step t's tap j read x at s = t - (K-1) + j.
    for t in 0..t_len {
        let gc_row = &bw.g_xs[t * di..][..di];
        for (gb, &gc) in g.conv_b.iter_mut().zip(gc_row) {
            *gb += gc;
        }
        for j in (k - 1).saturating_sub(t)..k {
            let x_row = &ws.xz[(t + j + 1 - k) * 2 * di..][..di];
            for ((gw_d, &gc), &xv) in g.conv_w.chunks_exact_mut(k).zip(gc_row).zip(x_row) {
                gw_d[j] += gc * xv;
            }
        }
    }
    for s in 0..t_len {
        let gx_row = &mut bw.g_xz[s * 2 * di..][..di];
        gx_row.fill(E::zero());
        // Step t = s + K - 1 - j used x at s through tap j; steps past the end do not exist.
        for j in (s + k).saturating_sub(t_len)..k {
            let gc_row = &bw.g_xs[(s + k - 1 - j) * di..][..di];
            for ((gx, &gc), w_d) in gx_row.iter_mut().zip(gc_row).zip(p.conv_w.chunks_exact(k)) {
                *gx += w_d[j] * gc;
            }
        }
    }

    // [x | z] = u W_in^T.
    linear::backward(&ws.us, t_len, m, &p.in_proj, 2 * di, &bw.g_xz, &mut g.in_proj, None, Some((g_u, false)));

    // Add this sequence's partial to the block's f64 partial. A_log and D are already there.
    for ((name, acc), (_, v)) in part.tensors_mut().into_iter().zip(g.tensors()) {
        if name == "A_log" || name == "D" {
            continue;
        }
        for (x, &y) in acc.iter_mut().zip(v) {
            *x += y.f64();
        }
    }
    ws.bw = Some(bw);
}
