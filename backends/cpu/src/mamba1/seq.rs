//! One sequence `u[T, M]` through the Mamba-1 mixer: the projections, the causal depthwise
//! convolution, the time steps and the gate around the scan, forward and backward, all in a
//! [`Workspace`] that is allocated once per block of sequences and reused.
//!
//! The projections are matrix products over the sequence's contiguous `(T, width)` rows; every
//! elementwise pass (convolution, SiLU, softplus, gate) is a small kernel compiled for the
//! machine's vector width ([`crate::multiversion`]) that stores the logistic values the
//! backward needs (`sigmoid(c)`, `sigmoid(pre)`, `sigmoid(z)`), so the backward evaluates no
//! exponential of its own outside the scan.

use super::scan::{self, Back, Inputs};
use super::{Mamba1Dims, Mamba1Params, Prepared, SeqKept};
use crate::mixer::SeqWorkspace;
use crate::multiversion;
use crate::ops::gemm::{gemm, Mat};
use crate::ops::simd::{add_widened, prefetch_l2, LANES};
use crate::ops::{linear, CpuElem};

/// Every buffer one sequence needs, sized for `T` steps. Row-major `(T, width)` unless noted.
pub(super) struct Workspace<E> {
    /// The gathered input `u`, `(T, M)`.
    pub us: Vec<E>,
    /// `[x | z] = u W_in^T`, `(T, 2 Di)`.
    xz: Vec<E>,
    /// The convolution's output before the SiLU, `(T, Di)`.
    c: Vec<E>,
    /// `sigmoid(c)`, `(T, Di)`.
    sig_c: Vec<E>,
    /// `x = silu(c)`, `(T, Di)`.
    xs: Vec<E>,
    /// `[dr | B | C] = x W_x^T`, `(T, R + 2N)`.
    dbc: Vec<E>,
    /// `dt = softplus(dr W_dt^T + dt_b)`, `(T, Di)`.
    dt: Vec<E>,
    /// `softplus'` of the same argument, `(T, Di)`.
    sig_pre: Vec<E>,
    /// `dt * x`, `(T, Di)`.
    dx: Vec<E>,
    /// `sigmoid(z)`, `(T, Di)`.
    sig_z: Vec<E>,
    /// The gate `silu(z)`, `(T, Di)`.
    gate: Vec<E>,
    /// The scan output before the gate (backward only), `(T, Di)`.
    y: Vec<E>,
    /// `y * silu(z)`, `(T, Di)`.
    gated: Vec<E>,
    /// The scan's state while walking forward, `(N, Di)`.
    h: Vec<E>,
    /// One step's `B` and `C` broadcast over the lanes for the forward scan, `(N, 2, LANES)`.
    bc: Vec<E>,
    /// The backward's buffers; `None` in a forward-only workspace.
    bw: Option<Backward<E>>,
    /// The gathered output gradient, `(T, M)` (empty in a forward-only workspace).
    pub g_out: Vec<E>,
    /// What the workspace was sized for: `(dims, T)`.
    sized: (Mamba1Dims, usize),
}

/// A workspace serves a call of the same sizes and steps, and a backward only with its
/// buffers for the same chunk length `q` (a backward's workspace serves a forward too).
impl<E: CpuElem> SeqWorkspace<E> for Workspace<E> {
    /// `(dims, T, q)`: `q` the backward's chunk length, `None` for a forward.
    type Size = (Mamba1Dims, usize, Option<usize>);
    fn new((dims, time, q): Self::Size) -> Self {
        Workspace::new(dims, time, q)
    }
    fn fits(&self, (dims, time, q): Self::Size) -> bool {
        self.sized == (dims, time)
            && match (q, &self.bw) {
                (None, _) => true,
                (Some(q), Some(bw)) => bw.q == q,
                (Some(_), None) => false,
            }
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
    /// Chunk length of the checkpointed scan.
    q: usize,
    /// The gradient of the gated product, then (in place, chunk by chunk) of the scan output,
    /// `(T, Di)`.
    g_gated: Vec<E>,
    /// Gradients of `x` (first half) and `z` (second half) from in_proj, `(T, 2 Di)`.
    g_xz: Vec<E>,
    /// Gradient of `x = silu(c)`, then (in place) of `c`, `(T, Di)`.
    g_xs: Vec<E>,
    /// Gradient of `dt`, then (in place) of the softplus argument, `(T, Di)`.
    g_dt: Vec<E>,
    /// Gradient of `[dr | B | C]`, `(T, R + 2N)`.
    g_dbc: Vec<E>,
    /// The state before the first step of each chunk, `(ceil(T / Q), N, Di)`.
    ckpt: Vec<E>,
    /// The states of the chunk and channel group being walked back, `(Q, N, GROUP)`.
    hs: Vec<E>,
    /// Their decays `exp(dt A)`, `(Q, N, GROUP)`.
    decs: Vec<E>,
    /// The scan's carry, `(N, Di)`.
    carry: Vec<E>,
    /// The chunk's `B` and `C` gradient lane accumulators, `(Q, 2, N, LANES)`
    /// ([`scan::Back::dots`]).
    dots: Vec<E>,
    /// Their tails, `(Q, 2, N)`.
    tails: Vec<E>,
    /// The scan's per-step scratch rows, `(Di)` each.
    gxs_row: Vec<E>,
    gdt_row: Vec<E>,
    /// Gradient with respect to `A`, transposed `(N, Di)`, summed over at most [`FLUSH`] steps
    /// before it is added to the block's f64 partial.
    g_a: Vec<E>,
    /// Gradient of `D`, `(Di)`, likewise.
    g_d: Vec<E>,
    /// The block's f64 partial of the A gradient during one sequence's backward, transposed to
    /// `(N, Di)` like `g_a`, so each flush adds contiguous rows.
    a_log_t: Vec<f64>,
    /// The convolution weights' gradient, transposed `(K, Di)`.
    g_conv_t: Vec<E>,
    /// This sequence's gradient partial in `E`; added to the block's f64 partial per sequence.
    grads: Mamba1Params<Vec<E>>,
}

/// The scan's `A` and `D` gradients are summed in `E` over the steps of one block of this many
/// (counted from `t = 0`, so the grouping does not depend on the chunk length) and then added
/// to the f64 partial: short sums in f32, long ones in f64 (BACKWARD.md, "Memory").
const FLUSH: usize = 32;

impl<E: CpuElem> Workspace<E> {
    /// A workspace for sequences of `time` steps; with `Some(q)`, also the backward's buffers
    /// for a scan checkpointed every `q` steps.
    pub fn new(dims: Mamba1Dims, time: usize, q: Option<usize>) -> Self {
        let Mamba1Dims { d_model: m, d_inner: di, d_state: n, d_conv: k, .. } = dims;
        let z = |len: usize| vec![E::zero(); len];
        let w = dims.w_dbc();
        let s = di * n;
        let bw = q.map(|q| Backward {
            q,
            g_gated: z(time * di),
            g_xz: z(time * 2 * di),
            g_xs: z(time * di),
            g_dt: z(time * di),
            g_dbc: z(time * w),
            ckpt: z(time.div_ceil(q) * s),
            hs: z(q.min(time) * n * scan::GROUP.min(di)),
            decs: z(q.min(time) * n * scan::GROUP.min(di)),
            carry: z(s),
            dots: z(q.min(time) * 2 * n * LANES),
            tails: z(q.min(time) * 2 * n),
            gxs_row: z(di),
            gdt_row: z(di),
            g_a: z(s),
            g_d: z(di),
            a_log_t: vec![0.0; s],
            g_conv_t: z(k * di),
            grads: Mamba1Params::zeros(dims),
        });
        Self {
            us: z(time * m),
            xz: z(time * 2 * di),
            c: z(time * di),
            sig_c: z(time * di),
            xs: z(time * di),
            dbc: z(time * w),
            dt: z(time * di),
            sig_pre: z(time * di),
            dx: z(time * di),
            sig_z: z(time * di),
            gate: z(time * di),
            y: if bw.is_some() { z(time * di) } else { Vec::new() },
            gated: z(time * di),
            h: z(s),
            bc: z(2 * n * LANES),
            g_out: if bw.is_some() { z(time * m) } else { Vec::new() },
            sized: (dims, time),
            bw,
        }
    }

    /// Number of steps the workspace was sized for.
    fn time(&self, dims: Mamba1Dims) -> usize {
        self.us.len() / dims.d_model
    }

    /// The scan's inputs (valid after [`project`]).
    fn inputs<'a>(&'a self, dims: Mamba1Dims, pr: &'a Prepared<E>, p: &'a Mamba1Params<&'a [E]>) -> Inputs<'a, E> {
        Inputs {
            di: dims.d_inner,
            n: dims.d_state,
            r: dims.dt_rank,
            w: dims.w_dbc(),
            at: &pr.at,
            d_skip: p.d,
            dt: &self.dt,
            xs: &self.xs,
            dx: &self.dx,
            dbc: &self.dbc,
        }
    }
}

multiversion! {
    /// Causal depthwise convolution with zero history over the `x` half of `xz` `(T, 2 Di)`:
    /// `c[t] = b + sum_j w_j * x[t - (K-1) + j]`, taps in order, taps before the start skipped
    /// (they multiply zeros). `wt` is the weight transposed, `(K, Di)`.
    fn conv_forward<E: CpuElem>(xz: &[E], di: usize, k: usize, wt: &[E], bias: &[E], c: &mut [E]) {
        for t in 0..c.len() / di {
            let cr = &mut c[t * di..][..di];
            cr.copy_from_slice(&bias[..di]);
            for j in (k - 1).saturating_sub(t)..k {
                let (src, wj) = (&xz[(t + j + 1 - k) * 2 * di..][..di], &wt[j * di..][..di]);
                for d in 0..di {
                    cr[d] += wj[d] * src[d];
                }
            }
        }
    }
}

multiversion! {
    /// Backward of [`conv_forward`] (BACKWARD.md, "Small pieces") for `gc` `(T, Di)`:
    /// `g_wt[j] += sum_t gc[t] x[t - (K-1) + j]`, `g_b += sum_t gc[t]`, and the `x` half of
    /// `g_xz` overwritten with `g_x[s] = sum_j w_j gc[s + K - 1 - j]` (steps past the end
    /// dropped).
    fn conv_backward<E: CpuElem>(
        xz: &[E],
        gc: &[E],
        di: usize,
        k: usize,
        wt: &[E],
        g_wt: &mut [E],
        g_b: &mut [E],
        g_xz: &mut [E],
    ) {
        let t_len = gc.len() / di;
        let g_b = &mut g_b[..di];
        for t in 0..t_len {
            let gr = &gc[t * di..][..di];
            for d in 0..di {
                g_b[d] += gr[d];
            }
            for j in (k - 1).saturating_sub(t)..k {
                let (xr, gw) = (&xz[(t + j + 1 - k) * 2 * di..][..di], &mut g_wt[j * di..][..di]);
                for d in 0..di {
                    gw[d] += gr[d] * xr[d];
                }
            }
        }
        for s in 0..t_len {
            let gx = &mut g_xz[s * 2 * di..][..di];
            gx.fill(E::zero());
            for j in (s + k).saturating_sub(t_len)..k {
                let (gr, wj) = (&gc[(s + k - 1 - j) * di..][..di], &wt[j * di..][..di]);
                for d in 0..di {
                    gx[d] += wj[d] * gr[d];
                }
            }
        }
    }
}

multiversion! {
    /// `sig = sigmoid(c)`, `xs = c * sig` (SiLU), elementwise.
    fn silu_forward<E: CpuElem>(c: &[E], sig: &mut [E], xs: &mut [E]) {
        let len = c.len();
        let (sig, xs) = (&mut sig[..len], &mut xs[..len]);
        for i in 0..len {
            let s = c[i].sigmoid();
            sig[i] = s;
            xs[i] = c[i] * s;
        }
    }
}

multiversion! {
    /// The time step's pre-activation gradient: `g *= softplus'(pre)` (`sig`, as stored), in
    /// place over `(T, Di)`, and its bias gradient `g_b[d] += sum_t g[t, d]` (rows in order).
    /// A kernel of its own so that both run at the machine's vector width.
    fn pre_backward<E: CpuElem>(g: &mut [E], sig: &[E], g_b: &mut [E]) {
        let di = g_b.len();
        for (row, srow) in g.chunks_exact_mut(di).zip(sig.chunks_exact(di)) {
            for ((gd, &s), gb) in row.iter_mut().zip(srow).zip(g_b.iter_mut()) {
                *gd *= s;
                *gb += *gd;
            }
        }
    }
}

multiversion! {
    /// `g *= silu'(c) = s (1 + c (1 - s))` with `s = sigmoid(c)` as stored.
    fn silu_backward<E: CpuElem>(g: &mut [E], c: &[E], sig: &[E]) {
        let len = g.len();
        let (c, sig) = (&c[..len], &sig[..len]);
        for i in 0..len {
            let s = sig[i];
            g[i] *= s * (E::one() + c[i] * (E::one() - s));
        }
    }
}

multiversion! {
    /// Turns `dt` `(T, Di)` from `dr W_dt^T` into `softplus(dr W_dt^T + b)` in place, storing
    /// its derivative in `sig` and `dt * x` in `dx`.
    fn time_steps<E: CpuElem>(dt: &mut [E], bias: &[E], xs: &[E], sig: &mut [E], dx: &mut [E]) {
        let di = bias.len();
        for t in 0..dt.len() / di {
            let (row, x) = (&mut dt[t * di..][..di], &xs[t * di..][..di]);
            let (sr, dr) = (&mut sig[t * di..][..di], &mut dx[t * di..][..di]);
            for d in 0..di {
                let (sp, sg) = (row[d] + bias[d]).softplus_and_grad();
                row[d] = sp;
                sr[d] = sg;
                dr[d] = sp * x[d];
            }
        }
    }
}

multiversion! {
    /// The gate from the `z` half of `xz` `(T, 2 Di)`: `sig = sigmoid(z)`, `gate = z * sig`.
    fn gate_forward<E: CpuElem>(xz: &[E], di: usize, sig: &mut [E], gate: &mut [E]) {
        for t in 0..gate.len() / di {
            let z = &xz[t * 2 * di + di..][..di];
            let (sr, gr) = (&mut sig[t * di..][..di], &mut gate[t * di..][..di]);
            for d in 0..di {
                let s = z[d].sigmoid();
                sr[d] = s;
                gr[d] = z[d] * s;
            }
        }
    }
}

multiversion! {
    /// Rows `t0..t1`, channels `c0..c1`, of the gate's backward: `gated = y gate` (kept for
    /// out_proj's weight gradient), `g_z = g y silu'(z)` into the `z` half of `g_xz`, and
    /// `g *= gate` in place (the gated product's gradient becomes the scan output's).
    fn gate_backward<E: CpuElem>(
        t0: usize,
        t1: usize,
        di: usize,
        c0: usize,
        c1: usize,
        xz: &[E],
        y: &[E],
        sig: &[E],
        gate: &[E],
        gated: &mut [E],
        g: &mut [E],
        g_xz: &mut [E],
    ) {
        for t in t0..t1 {
            let (z, gz) = (&xz[t * 2 * di + di..][c0..c1], &mut g_xz[t * 2 * di + di..][c0..c1]);
            let (yr, sr, gr) = (&y[t * di..][c0..c1], &sig[t * di..][c0..c1], &gate[t * di..][c0..c1]);
            let (out, gg) = (&mut gated[t * di..][c0..c1], &mut g[t * di..][c0..c1]);
            for d in 0..c1 - c0 {
                let s = sr[d];
                out[d] = yr[d] * gr[d];
                gz[d] = gg[d] * yr[d] * (s * (E::one() + z[d] * (E::one() - s)));
                gg[d] *= gr[d];
            }
        }
    }
}

/// Steps 1 to 4 of MODEL.md for the sequence in `ws.us`, and the gate `silu(z)`. With `kept`
/// (the in_proj and x_proj outputs a training forward left, `(T, 2 Di)` then `(T, R + 2N)`),
/// those two products are copied from it instead of computed: the same values.
fn project<E: CpuElem>(
    dims: Mamba1Dims,
    p: &Mamba1Params<&[E]>,
    pr: &Prepared<E>,
    ws: &mut Workspace<E>,
    kept: Option<&[E]>,
) {
    let Mamba1Dims { d_model: m, d_inner: di, dt_rank: r, d_conv: k, .. } = dims;
    let (t_len, w) = (ws.time(dims), dims.w_dbc());
    let n_xz = t_len * 2 * di;
    match kept {
        Some(kp) => ws.xz.copy_from_slice(&kp[..n_xz]),
        None => linear::forward(&ws.us, t_len, m, p.in_proj, None, 2 * di, &mut ws.xz),
    }
    conv_forward(&ws.xz, di, k, &pr.conv_t, p.conv_b, &mut ws.c);
    silu_forward(&ws.c, &mut ws.sig_c, &mut ws.xs);
    match kept {
        Some(kp) => ws.dbc.copy_from_slice(&kp[n_xz..]),
        None => linear::forward(&ws.xs, t_len, di, p.x_proj, None, w, &mut ws.dbc),
    }
    // dt_proj reads the first R columns of each `dbc` row in place (row stride R + 2N).
    let dr = Mat { data: &ws.dbc, rows: t_len, cols: r, rs: w, cs: 1 };
    gemm(E::one(), dr, Mat::rm(p.dt_proj_w, di, r).t(), E::zero(), &mut ws.dt, di);
    time_steps(&mut ws.dt, p.dt_proj_b, &ws.xs, &mut ws.sig_pre, &mut ws.dx);
    gate_forward(&ws.xz, di, &mut ws.sig_z, &mut ws.gate);
}

/// The mixer's output for the sequence in `ws.us`, written to `out` `(T, M)`. Unless
/// `kept.states` is empty, the scan's state before every `kept.q`-th step is left there,
/// `(ceil(T / q), N, Di)`, for [`backward`]; unless `kept.proj` is empty, the in_proj and
/// x_proj outputs are left there, `(T, 2 Di)` then `(T, R + 2N)`.
pub(super) fn forward<E: CpuElem>(
    dims: Mamba1Dims,
    p: &Mamba1Params<&[E]>,
    pr: &Prepared<E>,
    ws: &mut Workspace<E>,
    out: &mut [E],
    kept: SeqKept<&mut [E]>,
) {
    project(dims, p, pr, ws, None);
    if !kept.proj.is_empty() {
        let (xz, dbc) = kept.proj.split_at_mut(ws.xz.len());
        xz.copy_from_slice(&ws.xz);
        dbc.copy_from_slice(&ws.dbc);
    }
    let mut gated = std::mem::take(&mut ws.gated);
    let (mut h, mut bc) = (std::mem::take(&mut ws.h), std::mem::take(&mut ws.bc));
    let io = ws.inputs(dims, pr, p);
    scan::forward_gated(&io, &ws.gate, &mut h, &mut bc, &mut gated, kept.q, kept.states);
    let t_len = ws.time(dims);
    linear::forward(&gated, t_len, dims.d_inner, p.out_proj, None, dims.d_model, out);
    (ws.gated, ws.h, ws.bc) = (gated, h, bc);
}

/// The backward of [`forward`] for the sequence in `ws.us` with output gradient `ws.g_out`:
/// writes the input gradient to `g_u` `(T, M)` and adds the parameter gradients to the block
/// partial `part` (whose `a_log` collects the gradient with respect to A).
///
/// Order: the projections are recomputed (in_proj and x_proj copied from `given` when the
/// forward left them); `g_gated = g_out W_out` needs no scan; a pass over the states leaves
/// every Q-th one (unless the forward left them: `given`, which must be [`forward`]'s `kept`
/// for the same sequence and chunk length); then each chunk, from the last, recomputes its states and
/// scan output, applies the gate's backward to its rows, and is walked back. out_proj's weight
/// gradient, which needs every gated row, follows.
pub(super) fn backward<E: CpuElem>(
    dims: Mamba1Dims,
    p: &Mamba1Params<&[E]>,
    pr: &Prepared<E>,
    ws: &mut Workspace<E>,
    g_u: &mut [E],
    part: &mut Mamba1Params<Vec<f64>>,
    given: Option<SeqKept<&[E]>>,
) {
    let Mamba1Dims { d_model: m, d_inner: di, d_state: n, dt_rank: r, d_conv: k } = dims;
    let (t_len, w) = (ws.time(dims), dims.w_dbc());
    let proj = given.as_ref().map(|g| g.proj).filter(|pj| !pj.is_empty());
    project(dims, p, pr, ws, proj);
    let mut bw = ws.bw.take().expect("mamba1: backward needs a backward workspace");
    let (mut y, mut gated, mut h) =
        (std::mem::take(&mut ws.y), std::mem::take(&mut ws.gated), std::mem::take(&mut ws.h));
    for t in bw.grads.view_mut().into_tensors() {
        t.fill(E::zero());
    }
    bw.g_conv_t.fill(E::zero());

    // out = gated W_out^T: the input gradient first (it does not need the scan).
    gemm(E::one(), Mat::rm(&ws.g_out, t_len, m), Mat::rm(p.out_proj, m, di), E::zero(), &mut bw.g_gated, di);

    {
        let io = ws.inputs(dims, pr, p);
        let mut own = std::mem::take(&mut bw.ckpt);
        let ckpt = match given.as_ref().map(|g| g.states) {
            Some(c) => {
                assert_eq!(c.len(), t_len.div_ceil(bw.q) * di * n, "mamba1: checkpoints of another shape");
                c
            }
            None => {
                if bw.q >= t_len {
                    // One chunk: its only checkpoint is the zero state, no pass needed.
                    own[..di * n].fill(E::zero());
                } else {
                    scan::checkpoints(&io, bw.q, &mut h, &mut own);
                }
                &own
            }
        };
        scan_backward(&io, ws, &mut bw, ckpt, &mut y, &mut gated, part);
        bw.ckpt = own;
    }
    let g = &mut bw.grads;
    gemm(E::one(), Mat::rm(&ws.g_out, t_len, m).t(), Mat::rm(&gated, t_len, di), E::one(), &mut g.out_proj, di);

    // dt = softplus(pre), pre = dr W_dt^T + dt_b; g_dt becomes g_pre in place.
    pre_backward(&mut bw.g_dt, &ws.sig_pre, &mut g.dt_proj_b);
    let dr = Mat { data: &ws.dbc, rows: t_len, cols: r, rs: w, cs: 1 };
    gemm(E::one(), Mat::rm(&bw.g_dt, t_len, di).t(), dr, E::one(), &mut g.dt_proj_w, r);
    // g_dr lands in the first R columns of each g_dbc row (the scan filled the B and C columns).
    gemm(E::one(), Mat::rm(&bw.g_dt, t_len, di), Mat::rm(p.dt_proj_w, di, r), E::zero(), &mut bw.g_dbc, w);

    // [dr | B | C] = x W_x^T; the scan's direct g_x is accumulated onto.
    linear::backward(&ws.xs, t_len, di, p.x_proj, w, &bw.g_dbc, &mut g.x_proj, None, Some((&mut bw.g_xs, true)));

    // x = silu(c): g_xs becomes g_c in place; then the convolution.
    silu_backward(&mut bw.g_xs, &ws.c, &ws.sig_c);
    conv_backward(&ws.xz, &bw.g_xs, di, k, &pr.conv_t, &mut bw.g_conv_t, &mut g.conv_b, &mut bw.g_xz);
    for d in 0..di {
        for j in 0..k {
            g.conv_w[d * k + j] = bw.g_conv_t[j * di + d];
        }
    }

    // [x | z] = u W_in^T.
    linear::backward(&ws.us, t_len, m, p.in_proj, 2 * di, &bw.g_xz, &mut g.in_proj, None, Some((g_u, false)));

    // Add this sequence's partial to the block's f64 partial. A_log and D are already there.
    for ((name, acc), (_, v)) in part.view_mut().named().into_iter().zip(g.view().named()) {
        if name == "A_log" || name == "D" {
            continue;
        }
        add_widened(acc, v);
    }
    (ws.y, ws.gated, ws.h) = (y, gated, h);
    ws.bw = Some(bw);
}

/// The scan's part of [`backward`], from the states `ckpt` before each chunk: each chunk, from
/// the last, recomputes its states and scan output `y`, applies the gate's backward to its
/// rows (leaving `gated` for out_proj's weight gradient), and is walked back; the `A` and `D`
/// gradients go to `part`, the others to `bw`.
fn scan_backward<E: CpuElem>(
    io: &Inputs<'_, E>,
    ws: &Workspace<E>,
    bw: &mut Backward<E>,
    ckpt: &[E],
    y: &mut [E],
    gated: &mut [E],
    part: &mut Mamba1Params<Vec<f64>>,
) {
    let (di, n, q, t_len) = (io.di, io.n, bw.q, io.time());
    bw.carry.fill(E::zero());
    bw.g_a.fill(E::zero());
    bw.g_d.fill(E::zero());
    // The block's A gradient, transposed to the scan's `(N, Di)` for the flushes and back
    // at the end: the same additions in the same order, into contiguous rows.
    for d in 0..di {
        for j in 0..n {
            bw.a_log_t[j * di + d] = part.a_log[d * n + j];
        }
    }
    let s = di * n;
    for c in (0..t_len.div_ceil(q)).rev() {
        let (t0, t1) = (c * q, (c * q + q).min(t_len));
        let h0 = &ckpt[c * s..(c + 1) * s];
        // The next chunk's state, cold in a large buffer: on its way while this one runs.
        if c > 0 {
            prefetch_l2(&ckpt[(c - 1) * s..c * s]);
        }
        bw.dots.fill(E::zero());
        bw.tails.fill(E::zero());
        // One group of channels at a time through the whole chunk, so its states and
        // decays stay in the L1 cache (`scan::GROUP`).
        for (c0, c1) in scan::groups(di) {
            let grp = scan::Group { t0, c0, c1, h0 };
            scan::chunk_forward(io, &grp, t1, &mut bw.hs, &mut bw.decs, y);
            gate_backward(t0, t1, di, c0, c1, &ws.xz, y, &ws.sig_z, &ws.gate, gated, &mut bw.g_gated, &mut bw.g_xz);
            walk_back(io, &grp, t1, bw, &mut part.d);
        }
        scan::finish_dots(io, t0, t1, &bw.dots, &bw.tails, &mut bw.g_dbc);
    }
    for d in 0..di {
        for j in 0..n {
            part.a_log[d * n + j] = bw.a_log_t[j * di + d];
        }
    }
}

/// Walks the group `grp` back from step `t1 - 1` to its chunk's first step, in pieces that end
/// on multiples of [`FLUSH`], where the `A` and `D` gradients summed in `E` so far go to the
/// f64 partials (`bw.a_log_t`, `part_d`).
fn walk_back<E: CpuElem>(
    io: &Inputs<'_, E>,
    grp: &scan::Group<'_, E>,
    t1: usize,
    bw: &mut Backward<E>,
    part_d: &mut [f64],
) {
    let (di, n, t0, c0, c1) = (io.di, io.n, grp.t0, grp.c0, grp.c1);
    let mut hi = t1;
    while hi > t0 {
        let lo = t0.max((hi - 1) / FLUSH * FLUSH);
        let mut back = Back {
            carry: &mut bw.carry,
            gxs_row: &mut bw.gxs_row,
            gdt_row: &mut bw.gdt_row,
            g_xs: &mut bw.g_xs,
            g_dt: &mut bw.g_dt,
            g_a: &mut bw.g_a,
            g_d: &mut bw.g_d,
            dots: &mut bw.dots,
            tails: &mut bw.tails,
        };
        scan::back_steps(io, grp, lo..hi, &bw.hs, &bw.decs, &bw.g_gated, &mut back);
        if lo % FLUSH == 0 {
            // Per element the same additions at the same steps as a flush of all
            // channels at once.
            for j in 0..n {
                let row = j * di + c0..j * di + c1;
                add_widened(&mut bw.a_log_t[row.clone()], &bw.g_a[row.clone()]);
                bw.g_a[row].fill(E::zero());
            }
            add_widened(&mut part_d[c0..c1], &bw.g_d[c0..c1]);
            bw.g_d[c0..c1].fill(E::zero());
        }
        hi = lo;
    }
}
