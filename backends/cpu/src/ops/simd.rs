//! Run-time choice of the vector instruction set for the hot elementwise kernels.
//!
//! The crate is built for the baseline x86-64 target (SSE2), which would leave 4-lane vectors
//! on machines with 8 or 16 lanes. [`multiversion!`](crate::multiversion) compiles a kernel
//! three times (AVX-512, AVX2 + FMA, baseline) and calls the best one the CPU supports,
//! detected once per process.
//!
//! The choice never changes a result: Rust does not contract `a * b + c` into a fused
//! multiply-add, the kernels fuse only where the source says so
//! ([`CpuElem::fma`](crate::ops::CpuElem::fma), which is correctly rounded at every level: a
//! hardware FMA, or the C library's `fmaf` in the baseline build), and every kernel fixes its
//! own order of additions (lane accumulators written out in the source), so the three builds
//! compute the same operations in the same order and give the same bits.
//!
//! `BOLDCAST_SIMD=baseline|avx2|avx512` overrides the detection (to compare the builds; a
//! level the CPU lacks falls back to the best one it has).

use std::sync::OnceLock;

/// The instruction sets a kernel can be compiled for, best last.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// The target's baseline (SSE2 on x86-64, or any other architecture).
    Baseline,
    /// AVX2 with FMA (8 f32 lanes).
    Avx2,
    /// AVX-512 F and VL (16 f32 lanes).
    Avx512,
}

fn detect() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            return Level::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            return Level::Avx2;
        }
    }
    Level::Baseline
}

/// The level the kernels run at: the best the CPU supports, or lower when `BOLDCAST_SIMD`
/// asks for it. Detected on first use, then fixed for the process.
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let best = detect();
        let asked = match std::env::var("BOLDCAST_SIMD").as_deref() {
            Ok("baseline") => Level::Baseline,
            Ok("avx2") => Level::Avx2,
            _ => Level::Avx512,
        };
        best.min(asked)
    })
}

/// Defines `fn $name<E: CpuElem>(args)` that runs its body compiled for the best available
/// [`Level`]. The body is an `#[inline(always)]` inner function, instantiated inside one
/// `#[target_feature]` wrapper per level, so everything it inlines is compiled for that level.
/// Arguments are plain identifiers with their types; there is no return value (kernels write
/// into `&mut` slices).
#[macro_export]
#[doc(hidden)]
macro_rules! multiversion {
    ($(#[$m:meta])* $vis:vis fn $name:ident<$E:ident: CpuElem>($($a:ident: $t:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        // A kernel takes its slices as separate arguments, which LLVM knows not to alias;
        // gathered in a struct they would lose that, and the loops their vectorization.
        #[allow(clippy::too_many_arguments)]
        $vis fn $name<$E: $crate::ops::CpuElem>($($a: $t),*) {
            #[inline(always)]
            fn imp<$E: $crate::ops::CpuElem>($($a: $t),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                use $crate::ops::simd::{level, Level};
                #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
                unsafe fn v512<$E: $crate::ops::CpuElem>($($a: $t),*) { imp::<$E>($($a),*) }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn v256<$E: $crate::ops::CpuElem>($($a: $t),*) { imp::<$E>($($a),*) }
                match level() {
                    // SAFETY: `level` returns a level only when the CPU supports its features.
                    Level::Avx512 => return unsafe { v512::<$E>($($a),*) },
                    // SAFETY: as above.
                    Level::Avx2 => return unsafe { v256::<$E>($($a),*) },
                    Level::Baseline => {}
                }
            }
            imp::<$E>($($a),*)
        }
    };
}

/// Asks the CPU to bring `s` into its L2 cache ahead of use (one prefetch per 64-byte line;
/// a hint, no effect on results; nothing on other architectures). For data the hardware
/// prefetcher does not see coming: the Mamba-1 backward reads each chunk's checkpointed
/// state (8 KiB at `cpu-demo`, in a buffer of tens of MiB) once, in descending order.
#[inline]
pub fn prefetch_l2<E>(s: &[E]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        let (p, bytes) = (s.as_ptr().cast::<i8>(), std::mem::size_of_val(s));
        for off in (0..bytes).step_by(64) {
            // SAFETY: a prefetch never faults, and `off` stays inside the slice.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(p.add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = s;
}

/// Lanes of the reductions' accumulators: 16 f32 fill one AVX-512 register (two AVX2 ones).
pub const LANES: usize = 16;

/// Combines the lane accumulators pairwise (a fixed tree: halves, then quarters, ...) and adds
/// the tail: `h8[k] = acc[k] + acc[k + 8]`, `h4[k] = h8[k] + h8[k + 4]`, then
/// `((h4[0] + h4[2]) + (h4[1] + h4[3])) + tail`. [`fold_tree`] writes it out; `f32` on x86-64
/// takes [`fold_tree_f32`], the same additions in the same order as 4-lane vector operations
/// ([`CpuElem::fold16`](crate::ops::CpuElem::fold16)), so the result has the same bits.
///
/// The accumulators pass through [`std::hint::black_box`] first, for speed only: when LLVM's
/// SLP vectorizer sees the accumulating loop and this tree together, it builds both out of
/// 2-lane vectors, where the loop alone becomes one 16-lane (AVX-512) or two 8-lane (AVX2)
/// fused multiply-adds per chunk. The barrier keeps the two apart; the additions and their
/// order are the same either way.
#[inline(always)]
pub fn fold_lanes<E: crate::ops::CpuElem>(acc: [E; LANES], tail: E) -> E {
    const { assert!(LANES == 16, "the tree below is written for 16 lanes") };
    let acc = std::hint::black_box(acc);
    E::fold16(&acc, tail)
}

/// The tree of [`fold_lanes`] in scalar operations.
#[inline(always)]
pub fn fold_tree<E: crate::ops::CpuElem>(acc: &[E; LANES], tail: E) -> E {
    let mut h8 = [E::zero(); 8];
    for k in 0..8 {
        h8[k] = acc[k] + acc[k + 8];
    }
    let mut h4 = [E::zero(); 4];
    for k in 0..4 {
        h4[k] = h8[k] + h8[k + 4];
    }
    (h4[0] + h4[2]) + (h4[1] + h4[3]) + tail
}

/// The tree of [`fold_lanes`] for `f32` in SSE operations (every x86-64 CPU has them): two
/// 4-lane sums give `h8` in two halves, one more gives `h4`, then the high pair is added to the
/// low pair and the two lanes to each other. Nine instructions, where the compiler's version
/// of [`fold_tree`] after the barrier took about twenty, moving the accumulators two lanes at a
/// time; the folds are a large part of the short reductions (LayerNorm rows of 64, the
/// attention's dot products, the scan's `B` and `C` gradients).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn fold_tree_f32(acc: &[f32; LANES], tail: f32) -> f32 {
    use std::arch::x86_64::{
        _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_loadu_ps, _mm_movehl_ps, _mm_set_ss, _mm_shuffle_ps,
    };
    // SAFETY: the four unaligned loads read acc[0..4], [4..8], [8..12] and [12..16], inside
    // the array; SSE is part of the x86-64 baseline.
    unsafe {
        let p = acc.as_ptr();
        let h8_lo = _mm_add_ps(_mm_loadu_ps(p), _mm_loadu_ps(p.add(8)));
        let h8_hi = _mm_add_ps(_mm_loadu_ps(p.add(4)), _mm_loadu_ps(p.add(12)));
        let h4 = _mm_add_ps(h8_lo, h8_hi);
        // Lanes 0 and 1: h4[0] + h4[2] and h4[1] + h4[3].
        let pq = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
        let sum = _mm_add_ss(pq, _mm_shuffle_ps::<0b01>(pq, pq));
        _mm_cvtss_f32(_mm_add_ss(sum, _mm_set_ss(tail)))
    }
}

multiversion! {
    /// `acc[i] += v[i]` in f64, over the shorter length: a sequence's gradient partial added
    /// to its block's f64 partial. A kernel of its own so that the widening additions run at
    /// the machine's vector width (tens of thousands per sequence).
    pub fn add_widened<E: CpuElem>(acc: &mut [f64], v: &[E]) {
        for (a, &x) in acc.iter_mut().zip(v) {
            *a += x.f64();
        }
    }
}

/// `sum_i f(a[i], b[i])` over the shorter length, with [`LANES`] independent partial sums
/// combined pairwise: a fixed order (deterministic, the same for every vector width) that the
/// compiler can vectorize, which it may not do with one running sum (floating-point addition
/// does not reassociate).
#[inline(always)]
pub fn sum_zip<E: crate::ops::CpuElem>(a: &[E], b: &[E], f: impl Fn(E, E) -> E) -> E {
    let n = a.len().min(b.len());
    let (ca, cb) = (a[..n].chunks_exact(LANES), b[..n].chunks_exact(LANES));
    let mut tail = E::zero();
    for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += f(x, y);
    }
    let mut acc = [E::zero(); LANES];
    for (x, y) in ca.zip(cb) {
        for k in 0..LANES {
            acc[k] += f(x[k], y[k]);
        }
    }
    fold_lanes(acc, tail)
}

/// `sum_i f(a[i], b[i], c[i])` over the shortest length, as [`sum_zip`].
#[inline(always)]
pub fn sum_zip3<E: crate::ops::CpuElem>(a: &[E], b: &[E], c: &[E], f: impl Fn(E, E, E) -> E) -> E {
    let n = a.len().min(b.len()).min(c.len());
    let (ca, cb, cc) = (a[..n].chunks_exact(LANES), b[..n].chunks_exact(LANES), c[..n].chunks_exact(LANES));
    let mut tail = E::zero();
    for ((&x, &y), &z) in ca.remainder().iter().zip(cb.remainder()).zip(cc.remainder()) {
        tail += f(x, y, z);
    }
    let mut acc = [E::zero(); LANES];
    for ((x, y), z) in ca.zip(cb).zip(cc) {
        for k in 0..LANES {
            acc[k] += f(x[k], y[k], z[k]);
        }
    }
    fold_lanes(acc, tail)
}

/// `sum_i f(a[i])`, as [`sum_zip`].
#[inline(always)]
pub fn sum_map<E: crate::ops::CpuElem>(a: &[E], f: impl Fn(E) -> E) -> E {
    let ca = a.chunks_exact(LANES);
    let mut tail = E::zero();
    for &x in ca.remainder() {
        tail += f(x);
    }
    let mut acc = [E::zero(); LANES];
    for x in ca {
        for k in 0..LANES {
            acc[k] += f(x[k]);
        }
    }
    fold_lanes(acc, tail)
}

/// `sum_j a[j] b[j]` over the shorter length, with lane accumulators as [`sum_zip`] and each
/// product fused into its sum ([`CpuElem::fma`](crate::ops::CpuElem::fma)).
#[inline(always)]
pub fn dot<E: crate::ops::CpuElem>(a: &[E], b: &[E]) -> E {
    let n = a.len().min(b.len());
    let (ca, cb) = (a[..n].chunks_exact(LANES), b[..n].chunks_exact(LANES));
    let mut tail = E::zero();
    for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
        tail = x.fma(y, tail);
    }
    let mut acc = [E::zero(); LANES];
    for (x, y) in ca.zip(cb) {
        for k in 0..LANES {
            acc[k] = x[k].fma(y[k], acc[k]);
        }
    }
    fold_lanes(acc, tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector tree gives the scalar tree's bits, for sums that round at every level,
    /// cancel, overflow and carry NaNs.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn f32_fold_is_the_scalar_tree() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..20_000 {
            let mut acc = [0f32; LANES];
            for v in acc.iter_mut() {
                let r = next();
                let mag = ((r >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
                *v = mag * [1.0, 1e-3, 1e7, 3e38][(r & 3) as usize];
            }
            if case % 97 == 0 {
                acc[(next() % 16) as usize] = f32::NAN;
            }
            let tail = (next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            let (want, got) = (fold_tree(&acc, tail), fold_tree_f32(&acc, tail));
            assert!(
                want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                "{acc:?} + {tail}: {want} vs {got}"
            );
        }
        let acc: [f32; LANES] = std::array::from_fn(|k| (k + 1) as f32);
        assert_eq!(fold_lanes(acc, 0.5), 136.5);
    }
}
