//! The layout kernels (`kernels/layout.cu`) against host loops written from their
//! definitions: exact copies (the bits of the input), and refusals of buffers that do not
//! hold the shapes.

use boldcast_cuda::ops::layout::{broadcast_rows, copy_cols, swap_axes};
use boldcast_cuda::shim::Cols;

/// Distinct values, so that a wrong source index cannot go unseen.
fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.5 - 7.0).collect()
}

#[test]
fn swap_axes_moves_every_element_to_its_transposed_place() {
    for (a, n1, n2, c) in [(1, 1, 1, 1), (2, 3, 5, 1), (3, 7, 4, 6), (1, 300, 3, 2)] {
        let x = iota(a * n1 * n2 * c);
        let mut y = vec![f32::NAN; x.len()];
        swap_axes(&x, a, n1, n2, c, &mut y).unwrap();
        for ai in 0..a {
            for i in 0..n1 {
                for j in 0..n2 {
                    for e in 0..c {
                        let (src, dst) = (((ai * n1 + i) * n2 + j) * c + e, ((ai * n2 + j) * n1 + i) * c + e);
                        assert_eq!(y[dst].to_bits(), x[src].to_bits(), "({a},{n1},{n2},{c}) at {dst}");
                    }
                }
            }
        }
        // Twice is the identity.
        let mut back = vec![0.0; x.len()];
        swap_axes(&y, a, n2, n1, c, &mut back).unwrap();
        assert_eq!(back, x);
    }
}

#[test]
fn bands_split_and_join_and_a_row_broadcasts() {
    let (rows, di, n) = (37, 5, 3);
    let cd = di + 2 * n;
    let xs = iota(rows * cd);
    let (mut x, mut b, mut c) = (vec![0.0; rows * di], vec![0.0; rows * n], vec![0.0; rows * n]);
    let band = |col| Cols { width: cd, col };
    copy_cols(&xs, band(0), &mut x, Cols { width: di, col: 0 }, di).unwrap();
    copy_cols(&xs, band(di), &mut b, Cols { width: n, col: 0 }, n).unwrap();
    copy_cols(&xs, band(di + n), &mut c, Cols { width: n, col: 0 }, n).unwrap();
    for r in 0..rows {
        assert_eq!(&x[r * di..(r + 1) * di], &xs[r * cd..r * cd + di]);
        assert_eq!(&b[r * n..(r + 1) * n], &xs[r * cd + di..r * cd + di + n]);
        assert_eq!(&c[r * n..(r + 1) * n], &xs[r * cd + di + n..(r + 1) * cd]);
    }
    let mut joined = vec![f32::NAN; xs.len()];
    copy_cols(&x, Cols { width: di, col: 0 }, &mut joined, band(0), di).unwrap();
    copy_cols(&b, Cols { width: n, col: 0 }, &mut joined, band(di), n).unwrap();
    copy_cols(&c, Cols { width: n, col: 0 }, &mut joined, band(di + n), n).unwrap();
    assert_eq!(joined, xs);

    let bias = [1.5f32, -2.0, 0.25];
    let mut y = vec![9.0f32; 4 * 3];
    broadcast_rows(&bias, &mut y).unwrap();
    assert_eq!(y, [bias, bias, bias, bias].concat());
}

#[test]
fn buffers_that_do_not_hold_the_shape_are_refused_and_left_alone() {
    let x = iota(24);
    let mut y = vec![0.0f32; 24];
    let e = swap_axes(&x, 2, 3, 5, 1, &mut y).unwrap_err();
    assert!(e.why.contains("(2, 3, 5, 1)"), "{e}");
    assert!(swap_axes(&x, 2, 3, 4, 1, &mut y[..23]).is_err());
    // A band past the end of the source's rows.
    let e = copy_cols(&x, Cols { width: 6, col: 4 }, &mut y[..12], Cols { width: 3, col: 0 }, 3).unwrap_err();
    assert!(e.why.contains("band of 3"), "{e}");
    assert!(broadcast_rows(&[1.0; 5], &mut y).is_err());
    assert!(y.iter().all(|&v| v == 0.0));
}
