//! The checks of a scan against its f64 reference, shared by the Mamba-1 and Mamba-2 scan
//! tests: the forward's outputs and checkpoints and the backward's gradients within their
//! rounding bounds (each test file's header says how the bounds count), the reference's own
//! gradients against central differences, and the backward's bits across chunk lengths and
//! runs.

use super::{check, check_central, f64s, uniform, U32 as U};

/// A scan under test: `SEQS` sequences of `TIME` steps of `DI` channels.
pub trait ScanTest {
    /// Sequences.
    const SEQS: usize;
    /// Steps per sequence.
    const TIME: usize;
    /// Channels.
    const DI: usize;
    /// The inputs, in the order of the reference's and the kernel's gradients.
    const NAMES: &'static [&'static str];
    /// The name of the scan's output in a failure.
    const OUT: &'static str;
    /// The f64 reference.
    type Ref: Clone;
    /// Seeded f32 inputs for `n` states.
    fn inputs(seed: u64, n: usize) -> Vec<Vec<f32>>;
    /// The reference of the inputs `v`.
    fn reference(v: &[Vec<f32>], n: usize) -> Self::Ref;
    /// The reference's inputs, in [`ScanTest::NAMES`] order.
    fn inputs_mut(r: &mut Self::Ref) -> &mut [Vec<f64>];
    /// The reference's outputs and the state after every step `(seqs, time, di, n)`; with
    /// `abs`, every term by its absolute value.
    fn forward(r: &Self::Ref, abs: bool) -> (Vec<f64>, Vec<f64>);
    /// The reference's gradients for the output gradient `g` over the states `hs`.
    fn backward(r: &Self::Ref, g: &[f64], hs: &[f64], abs: bool) -> Vec<Vec<f64>>;
    /// The per-decay relative error factor `max |dt A| + 3`.
    fn decay_factor(r: &Self::Ref) -> f64;
    /// The kernels' outputs and checkpoints, chunks of `q` steps.
    fn run_forward(v: &[Vec<f32>], n: usize, q: usize) -> (Vec<f32>, Vec<f32>);
    /// The kernels' gradients, in [`ScanTest::NAMES`] order.
    fn run_backward(v: &[Vec<f32>], n: usize, q: usize, g: &[f32]) -> Vec<Vec<f32>>;
}

/// The roundings a scan's bounds count besides the decays (`F` per decay): an output at step
/// t `c = F (t + 1) + N + out`, a checkpoint before step t `c = F t + ckpt`, every gradient
/// `c = F (2T + 2) + adds(N)`; the backward checked with chunks of `q` steps.
pub struct Bounds {
    /// An output's roundings besides its decays and N.
    pub out: f64,
    /// A checkpoint's roundings besides its decays.
    pub ckpt: f64,
    /// The additions a gradient term passes through, for N states.
    pub adds: fn(usize) -> usize,
    /// The backward's chunk length.
    pub q: usize,
}

/// The forward's outputs and checkpoints (exactly zero before step 0) against the reference,
/// for N = 4 and 16, chunks of 4; times 1.1 for second-order terms.
pub fn check_forward<S: ScanTest>(b: &Bounds) {
    let (time, di, q) = (S::TIME, S::DI, 4);
    for (k, n) in [4usize, 16].into_iter().enumerate() {
        let v = S::inputs(100 * k as u64, n);
        let (out, ckpt) = S::run_forward(&v, n, q);
        let p = S::reference(&v, n);
        let ((want, hs), (mag, hmag)) = (S::forward(&p, false), S::forward(&p, true));
        let f = S::decay_factor(&p);
        let bound: Vec<f64> =
            (0..want.len()).map(|i| 1.1 * U * (f * ((i / di) % time + 1) as f64 + n as f64 + b.out) * mag[i]).collect();
        check(&format!("{}, N {n}", S::OUT), &out, &want, &bound);
        let chunks = time.div_ceil(q);
        let (mut cw, mut cb) = (vec![0.0; ckpt.len()], vec![0.0; ckpt.len()]);
        for s in 0..S::SEQS {
            for c in 1..chunks {
                for j in 0..n {
                    for d in 0..di {
                        let at = ((s * chunks + c) * n + j) * di + d;
                        let src = ((s * time + c * q - 1) * di + d) * n + j;
                        cw[at] = hs[src];
                        cb[at] = 1.1 * U * (f * (c * q) as f64 + b.ckpt) * hmag[src];
                    }
                }
            }
        }
        check(&format!("checkpoints, N {n}"), &ckpt, &cw, &cb);
    }
}

/// An output gradient for the inputs of `seed`.
fn out_grad<S: ScanTest>(seed: u64) -> Vec<f32> {
    uniform(seed, S::SEQS * S::TIME * S::DI, -1.0, 1.0)
}

/// Every gradient against the reference, for N = 4 and 16: one bound for all, so loose for
/// some.
pub fn check_backward<S: ScanTest>(b: &Bounds) {
    for (k, n) in [4usize, 16].into_iter().enumerate() {
        let v = S::inputs(100 * k as u64 + 7, n);
        let g = out_grad::<S>(99 + k as u64);
        let got = S::run_backward(&v, n, b.q, &g);
        let p = S::reference(&v, n);
        let (g64, (_, hs), (_, hmag)) = (f64s(&g), S::forward(&p, false), S::forward(&p, true));
        let (want, mag) = (S::backward(&p, &g64, &hs, false), S::backward(&p, &g64, &hmag, true));
        let c = S::decay_factor(&p) * (2 * S::TIME + 2) as f64 + (b.adds)(n) as f64;
        for (k, got) in got.iter().enumerate() {
            let bound: Vec<f64> = mag[k].iter().map(|m| 1.1 * U * c * m).collect();
            check(&format!("g_{}, N {n}", S::NAMES[k]), got, &want[k], &bound);
        }
    }
}

/// The reference's analytic gradients against central differences of its loss `<g, out>`,
/// on three coordinates of each input ([`check_central`]), N = 4.
pub fn check_reference<S: ScanTest>() {
    let n = 4;
    let v = S::inputs(5, n);
    let g = f64s(&out_grad::<S>(6));
    let mut p = S::reference(&v, n);
    let an = S::backward(&p, &g, &S::forward(&p, false).1, false);
    let inputs = S::inputs_mut(&mut p).to_vec();
    check_central(S::NAMES, &inputs, &an, |v| {
        let mut q = p.clone();
        S::inputs_mut(&mut q).clone_from_slice(v);
        S::forward(&q, false).0.iter().zip(&g).map(|(o, g)| o * g).sum()
    });
}

/// The recomputation from checkpoints gives the forward's states bit for bit, so the backward
/// is the same bits for chunk lengths 4, 5 and the whole sequence; and the same bits from run
/// to run (fixed-order sums, no atomics). N = 16.
pub fn check_bitwise<S: ScanTest>() {
    let n = 16;
    let v = S::inputs(11, n);
    let g = out_grad::<S>(12);
    let bits = |q: usize| -> Vec<u32> { S::run_backward(&v, n, q, &g).concat().iter().map(|x| x.to_bits()).collect() };
    let first = bits(4);
    assert_eq!(first, bits(4), "two runs differ");
    assert_eq!(first, bits(5), "Q = 4 and Q = 5 differ");
    assert_eq!(first, bits(S::TIME), "Q = 4 and one chunk differ");
    assert_eq!(S::run_forward(&v, n, 4).0, S::run_forward(&v, n, 5).0, "the forward depends on Q");
}

/// The four scan tests of a test file for its [`ScanTest`] `$scan` and [`Bounds`] `$bounds`.
#[macro_export]
macro_rules! scan_tests {
    ($scan:ty, $bounds:expr) => {
        #[test]
        fn scan_forward_matches_the_reference() {
            $crate::common::scan::check_forward::<$scan>(&$bounds);
        }

        #[test]
        fn scan_backward_matches_the_reference() {
            $crate::common::scan::check_backward::<$scan>(&$bounds);
        }

        #[test]
        fn reference_gradients_match_finite_differences() {
            $crate::common::scan::check_reference::<$scan>();
        }

        #[test]
        fn backward_is_bitwise_the_same_for_any_chunk_length_and_run() {
            $crate::common::scan::check_bitwise::<$scan>();
        }
    };
}
