//! bf16 autocast ([`boldcast_cuda::autocast`]) on its own: the rounding kernel
//! `autocast_round_bf16` against an independent Rust round-to-nearest-even (ties to even,
//! subnormals, values at and past bf16's largest finite value, infinities, NaN, and random
//! bit patterns), [`gemm`] under a bf16 scope against the f32 product of pre-rounded operands
//! and against the f32 product itself, and the scope guard (nesting, the closure form on a
//! panic, other threads).

use crate::common;

use boldcast_cuda::autocast::{self, Precision};
use boldcast_cuda::gemm::{gemm, Op, Shape};
use boldcast_cuda::launch::{Dim3, Launch};
use boldcast_cuda::shim;
use common::{uniform, U32};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The reference: of the two bf16 values around `x` (its truncation toward zero and the next
/// bf16 away from zero), the nearer in f64, the one with an even last bit on a tie. The bf16
/// past the largest finite one counts as 2^128 (the value an unbounded exponent would give),
/// so the round-up to it is infinity exactly when IEEE 754 overflows. NaN: a NaN of the sign.
fn reference_bf16(x: f32) -> f32 {
    if x.is_nan() {
        return f32::NAN.copysign(x);
    }
    if x.is_infinite() {
        return x;
    }
    let down_bits = x.to_bits() & 0xffff_0000;
    let up_bits = down_bits + 0x1_0000;
    let value = |bits: u32| -> f64 {
        if bits & 0x7fff_ffff == 0x7f80_0000 {
            2f64.powi(128).copysign(f64::from(x))
        } else {
            f64::from(f32::from_bits(bits))
        }
    };
    let (xd, down, up) = (f64::from(x), value(down_bits), value(up_bits));
    let (dd, du) = ((xd - down).abs(), (up - xd).abs());
    let pick_up = du < dd || (du == dd && (down_bits >> 16) & 1 == 1);
    f32::from_bits(if pick_up { up_bits } else { down_bits })
}

fn round(x: &[f32]) -> Vec<f32> {
    let mut y = vec![f32::NAN; x.len()];
    autocast::round_bf16(x, &mut y).unwrap();
    y
}

/// Same bits, or both NaN of the same sign.
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan() && a.is_sign_negative() == b.is_sign_negative())
}

/// The special points, each with the value it must round to.
fn specials() -> Vec<(f32, f32)> {
    let b = f32::from_bits;
    let bf16_max = b(0x7f7f_0000);
    vec![
        (0.0, 0.0),
        (-0.0, -0.0),
        (1.0, 1.0),
        (1.0 + 2f32.powi(-8), 1.0),                                  // tie, 1.0 is even: down
        (1.0 + 3.0 * 2f32.powi(-8), 1.0 + 2f32.powi(-6)),            // tie, 1 + 2^-7 is odd: up
        (1.0 + 2f32.powi(-8) + 2f32.powi(-23), 1.0 + 2f32.powi(-7)), // just past the tie: up
        (-(1.0 + 2f32.powi(-8)), -1.0),
        (b(0x0000_0001), 0.0),            // the smallest subnormal: down to zero
        (b(0x0000_8000), 0.0),            // tie between 0 and the smallest bf16 subnormal: even
        (b(0x0001_8000), b(0x0002_0000)), // tie between two subnormals, odd below: up
        (b(0x0000_8001), b(0x0001_0000)), // past the tie: up to the smallest bf16 subnormal
        (b(0x007f_ffff), b(0x0080_0000)), // the largest f32 subnormal rounds up to a normal
        (f32::MIN_POSITIVE, f32::MIN_POSITIVE),
        (bf16_max, bf16_max),
        (b(0x7f7f_7fff), bf16_max),      // below half an ulp past the maximum: stays finite
        (b(0x7f7f_8000), f32::INFINITY), // the tie past the maximum (odd): overflows
        (f32::MAX, f32::INFINITY),
        (-f32::MAX, f32::NEG_INFINITY),
        (f32::INFINITY, f32::INFINITY),
        (f32::NEG_INFINITY, f32::NEG_INFINITY),
    ]
}

#[test]
fn the_rounding_kernel_is_round_to_nearest_even() {
    let (x, want): (Vec<f32>, Vec<f32>) = specials().into_iter().unzip();
    let got = round(&x);
    for ((xi, g), w) in x.iter().zip(&got).zip(&want) {
        assert_eq!(g.to_bits(), w.to_bits(), "bf16({xi:e} = {:#010x}): got {g:e}, want {w:e}", xi.to_bits());
        assert!(same(*g, reference_bf16(*xi)), "the reference disagrees at {:#010x}", xi.to_bits());
    }
    // NaNs, quiet and signalling (payload in the low half only, which truncation would lose).
    let nans = [0x7fc0_0000u32, 0x7f80_0001, 0xff80_0001, 0xffc0_1234, 0x7fff_ffff];
    let got = round(&nans.map(f32::from_bits));
    for (bits, g) in nans.iter().zip(&got) {
        assert!(g.is_nan(), "{bits:#010x} -> {g}");
        assert_eq!(g.is_sign_negative(), bits >> 31 == 1, "{bits:#010x}: the sign is kept");
        assert_eq!(g.to_bits() & 0xffff, 0, "{bits:#010x}: a bf16 pattern");
    }
}

#[test]
fn random_bit_patterns_match_the_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    // Every exponent, sign and mantissa, NaN and infinity included; 10007 is not a multiple
    // of the block, and a capped grid of 3 blocks of 64 must cover it all.
    let x: Vec<f32> = (0..10_007).map(|_| f32::from_bits(rng.random())).collect();
    let mut got = vec![f32::NAN; x.len()];
    shim::autocast_round_bf16(Launch { grid: Dim3::x(3), block: Dim3::x(64) }, &x, &mut got).unwrap();
    for (xi, g) in x.iter().zip(&got) {
        assert!(same(*g, reference_bf16(*xi)), "bf16({:#010x}): got {:#010x}", xi.to_bits(), g.to_bits());
        assert_eq!(g.to_bits() & 0xffff, 0);
    }
    // Rounding is idempotent: a bf16 value is its own rounding.
    assert!(round(&got).iter().zip(&got).all(|(a, b)| same(*a, *b)));
}

#[test]
fn packed_bits_are_the_top_half_of_the_rounded_value() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let x: Vec<f32> = (0..5_003).map(|_| f32::from_bits(rng.random())).collect();
    let mut packed = vec![0u16; x.len()];
    shim::autocast_pack_bf16(Launch { grid: Dim3::x(2), block: Dim3::x(96) }, &x, &mut packed).unwrap();
    let rounded = round(&x);
    for ((xi, p), r) in x.iter().zip(&packed).zip(&rounded) {
        assert_eq!(u32::from(*p) << 16, r.to_bits(), "bf16 bits of {:#010x}", xi.to_bits());
    }
    assert_eq!(autocast::pack_bf16(&[1.0; 3], &mut [0; 2]).unwrap_err().kernel, "autocast_pack_bf16");
}

#[test]
fn mismatched_buffers_are_refused() {
    let err = autocast::round_bf16(&[1.0; 4], &mut [0.0; 3]).unwrap_err();
    assert_eq!(err.kernel, "autocast_round_bf16");
    assert!(err.why.contains("y has 3 elements, expected 4"), "{err}");
    let l = Launch { grid: Dim3::xy(1, 2), block: Dim3::x(32) };
    assert!(shim::autocast_round_bf16(l, &[1.0; 4], &mut [0.0; 4]).unwrap_err().why.contains("1-D"));
    let _bf16 = autocast::scope(Precision::Bf16);
    let err = gemm(Shape { m: 2, n: 2, k: 2 }, &[1.0; 4], Op::N, &[1.0; 3], Op::N, 0.0, &mut [0.0; 4]).unwrap_err();
    assert!(err.why.contains("B has 3 elements, expected 4"), "{err}");
}

/// `C = op(A) op(B) + 0.5 C` in f64 from the given operands, and `sum_p |a||b|` per entry.
fn exact(s: Shape, a: &[f32], ta: Op, b: &[f32], tb: Op, c0: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let at = |i: usize, p: usize| f64::from(if ta == Op::N { a[i * s.k + p] } else { a[p * s.m + i] });
    let bt = |p: usize, j: usize| f64::from(if tb == Op::N { b[p * s.n + j] } else { b[j * s.k + p] });
    let mut out = (vec![0.0; s.m * s.n], vec![0.0; s.m * s.n]);
    for (ij, &c) in c0.iter().enumerate() {
        let (i, j) = (ij / s.n, ij % s.n);
        out.0[ij] = (0..s.k).map(|p| at(i, p) * bt(p, j)).sum::<f64>() + 0.5 * f64::from(c);
        out.1[ij] = (0..s.k).map(|p| (at(i, p) * bt(p, j)).abs()).sum::<f64>() + 0.5 * f64::from(c).abs();
    }
    out
}

fn product(p: Precision, s: Shape, a: &[f32], ta: Op, b: &[f32], tb: Op, c0: &[f32]) -> Vec<f32> {
    let mut c = c0.to_vec();
    autocast::with(p, || gemm(s, a, ta, b, tb, 0.5, &mut c)).unwrap();
    c
}

#[test]
fn gemm_in_bf16_is_the_f32_product_of_rounded_operands() {
    let s = Shape { m: 7, n: 9, k: 33 };
    let (a, b) = (uniform(1, s.m * s.k, -2.0, 2.0), uniform(2, s.k * s.n, -2.0, 2.0));
    let c0 = uniform(3, s.m * s.n, -1.0, 1.0);
    assert!(a.iter().any(|v| reference_bf16(*v) != *v), "the inputs are not bf16 already");
    let (a16, b16) = (round(&a), round(&b));
    // f32 accumulation over k terms: each entry within k u32 sum |a||b| of the exact value.
    let f32_bound = |mag: f64| 2.0 * s.k as f64 * U32 * mag;
    for (ta, tb) in [(Op::N, Op::N), (Op::T, Op::N), (Op::N, Op::T), (Op::T, Op::T)] {
        let bf = product(Precision::Bf16, s, &a, ta, &b, tb, &c0);
        let of_rounded = product(Precision::F32, s, &a16, ta, &b16, tb, &c0);
        let full = product(Precision::F32, s, &a, ta, &b, tb, &c0);
        let (want16, mag16) = exact(s, &a16, ta, &b16, tb, &c0);
        let (want, mag) = exact(s, &a, ta, &b, tb, &c0);
        let mut worst_gap = 0.0f64;
        for i in 0..bf.len() {
            let (g, r, f) = (f64::from(bf[i]), f64::from(of_rounded[i]), f64::from(full[i]));
            assert!((g - r).abs() <= f32_bound(mag16[i]), "{ta:?}{tb:?}[{i}]: {g} vs pre-rounded {r}");
            assert!((g - want16[i]).abs() <= f32_bound(mag16[i]), "{ta:?}{tb:?}[{i}]: {g} vs {}", want16[i]);
            assert!((f - want[i]).abs() <= f32_bound(mag[i]), "the f32 product is f32-accurate");
            // bf16 operands: each product off by at most (1 + 2^-9)^2 - 1 relative (two roundings
            // of at most 2^-9 each), plus the f32 accumulation.
            let bf16_rel = 2f64.powi(-8) + 2f64.powi(-18);
            assert!((g - want[i]).abs() <= (bf16_rel + f32_bound(1.0)) * mag[i], "[{i}]: {g} vs {}", want[i]);
            worst_gap = worst_gap.max((g - f).abs() / mag[i]);
        }
        // Not a no-op: the bf16 product is far from the f32 one (by bf16's, not f32's, rounding).
        assert!(worst_gap > 1e3 * U32, "{ta:?}{tb:?}: bf16 and f32 products differ by {worst_gap:e} only");
    }
}

#[test]
fn gemm_in_bf16_keeps_nan_and_representable_operands() {
    let s = Shape { m: 2, n: 2, k: 3 };
    // Operands that are bf16 already: the bf16 product is the f32 one, bit for bit.
    let a = [1.0, -0.5, 0.25, 3.0, 1.5, -2.0];
    let b = [0.75, 2.0, -1.0, 0.125, 4.0, -3.5];
    let c0 = [0.0; 4];
    let (bf, full) =
        (product(Precision::Bf16, s, &a, Op::N, &b, Op::N, &c0), product(Precision::F32, s, &a, Op::N, &b, Op::N, &c0));
    assert_eq!(bf, full);
    assert_eq!(bf, [2.25, 1.0625, -7.25, 13.1875]);
    // A NaN operand stays NaN through the rounding: its row of C is NaN, the other finite.
    let mut a_nan = a;
    a_nan[1] = f32::NAN;
    let c = product(Precision::Bf16, s, &a_nan, Op::N, &b, Op::N, &c0);
    assert!(c[0].is_nan() && c[1].is_nan(), "{c:?}");
    assert_eq!(&c[2..], &full[2..]);
}

#[test]
fn scopes_nest_and_restore_the_previous_mode() {
    assert_eq!(autocast::current(), Precision::F32, "the default");
    {
        let _outer = autocast::scope(Precision::Bf16);
        assert_eq!(autocast::current(), Precision::Bf16);
        {
            let _inner = autocast::scope(Precision::F32);
            assert_eq!(autocast::current(), Precision::F32);
            let _innermost = autocast::scope(Precision::Bf16);
            assert_eq!(autocast::current(), Precision::Bf16);
        }
        assert_eq!(autocast::current(), Precision::Bf16, "the inner scopes restored the outer one");
        // Another thread has its own mode.
        assert_eq!(std::thread::spawn(autocast::current).join().unwrap(), Precision::F32);
        assert_eq!(autocast::with(Precision::F32, autocast::current), Precision::F32);
        assert_eq!(autocast::current(), Precision::Bf16);
    }
    assert_eq!(autocast::current(), Precision::F32);
    // The closure form restores the mode when its closure panics.
    let caught = std::panic::catch_unwind(|| autocast::with(Precision::Bf16, || panic!("inside")));
    assert!(caught.is_err());
    assert_eq!(autocast::current(), Precision::F32);
}
