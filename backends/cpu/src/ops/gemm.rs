//! Safe matrix products over row-major slices. Every shape is checked against the slice
//! lengths before the unsafe kernel runs, so a wrong size panics here with the sizes instead
//! of reading out of bounds.

use super::CpuElem;

/// A matrix view: `rows x cols` with strides (in elements) between rows and between columns.
#[derive(Copy, Clone, Debug)]
pub struct Mat<'a, E> {
    /// The backing slice.
    pub data: &'a [E],
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Stride between rows.
    pub rs: usize,
    /// Stride between columns.
    pub cs: usize,
}

impl<'a, E> Mat<'a, E> {
    /// A contiguous row-major `rows x cols` matrix.
    pub fn rm(data: &'a [E], rows: usize, cols: usize) -> Self {
        Self { data, rows, cols, rs: cols, cs: 1 }
    }
    /// The transpose view (no copy).
    pub fn t(self) -> Self {
        Self { data: self.data, rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs }
    }
    fn max_index(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            0
        } else {
            (self.rows - 1) * self.rs + (self.cols - 1) * self.cs + 1
        }
    }
}

/// `c[m x n] = alpha * a[m x k] * b[k x n] + beta * c`, with `c` row-major contiguous with row
/// stride `ldc`. With `beta == 0` the old contents of `c` are ignored (NaNs included).
pub fn gemm<E: CpuElem>(alpha: E, a: Mat<'_, E>, b: Mat<'_, E>, beta: E, c: &mut [E], ldc: usize) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(b.rows, k, "gemm: inner sizes {} and {} differ", a.cols, b.rows);
    assert!(a.max_index() <= a.data.len(), "gemm: a ({m}x{k}) exceeds its {} elements", a.data.len());
    assert!(b.max_index() <= b.data.len(), "gemm: b ({k}x{n}) exceeds its {} elements", b.data.len());
    let need = if m == 0 || n == 0 { 0 } else { (m - 1) * ldc + n };
    assert!(need <= c.len() && ldc >= n, "gemm: c ({m}x{n}, ldc {ldc}) exceeds its {} elements", c.len());
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // matrixmultiply handles k = 0, but be explicit: c = beta c.
        for i in 0..m {
            for x in &mut c[i * ldc..i * ldc + n] {
                *x = if beta == E::zero() { E::zero() } else { beta * *x };
            }
        }
        return;
    }
    // SAFETY: the asserts above bound every index the kernel touches; `c` is a distinct
    // mutable borrow, so it cannot alias `a` or `b`.
    unsafe {
        E::gemm_raw(super::RawGemm {
            m,
            k,
            n,
            alpha,
            a: (a.data.as_ptr(), a.rs as isize, a.cs as isize),
            b: (b.data.as_ptr(), b.rs as isize, b.cs as isize),
            beta,
            c: (c.as_mut_ptr(), ldc as isize, 1),
        })
    }
}

/// Single-precision matrix-product speed in GFLOP/s on the current rayon pool, the figure
/// the model's products are compared with: `C = A B` for square `size x size` matrices through
/// [`gemm`] (so `matrixmultiply`, as every product of this crate), the rows of `C` split into
/// one contiguous block per rayon thread and run in parallel. The best of `reps` timed
/// products after one untimed one.
pub fn peak_gflops(size: usize, reps: usize) -> f64 {
    use rayon::prelude::*;
    let threads = rayon::current_num_threads().max(1);
    let a: Vec<f32> = (0..size * size).map(|i| ((i * 7 + 3) % 17) as f32 * 0.05 - 0.4).collect();
    let b: Vec<f32> = (0..size * size).map(|i| ((i * 5 + 1) % 13) as f32 * 0.07 - 0.4).collect();
    let mut c = vec![0f32; size * size];
    let rows_per = size.div_ceil(threads).max(1);
    let run = |c: &mut [f32]| {
        c.par_chunks_mut(rows_per * size).enumerate().for_each(|(i, cb)| {
            let rows = cb.len() / size;
            let a_rows = &a[i * rows_per * size..][..rows * size];
            gemm(1.0, Mat::rm(a_rows, rows, size), Mat::rm(&b, size, size), 0.0, cb, size);
        });
    };
    run(&mut c);
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let t0 = std::time::Instant::now();
        run(&mut c);
        best = best.min(t0.elapsed().as_secs_f64());
    }
    2.0 * (size as f64).powi(3) / best / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_is_positive() {
        assert!(peak_gflops(64, 1) > 0.0);
    }

    #[test]
    fn matches_naive_product_with_transposes() {
        let a: Vec<f64> = (0..6).map(|x| x as f64).collect(); // 2x3
        let b: Vec<f64> = (0..12).map(|x| (x as f64) * 0.5 - 1.0).collect(); // 4x3, used transposed
        let mut c = vec![1.0; 8];
        gemm(1.0, Mat::rm(&a, 2, 3), Mat::rm(&b, 4, 3).t(), 0.0, &mut c, 4);
        for i in 0..2 {
            for j in 0..4 {
                let want: f64 = (0..3).map(|l| a[i * 3 + l] * b[j * 3 + l]).sum();
                assert_eq!(c[i * 4 + j], want);
            }
        }
    }
}
