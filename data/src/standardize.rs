//! Run-wise standardization: each parcel of a run to mean 0 and population standard deviation 1,
//! in f64; a constant parcel becomes zeros.

/// Standardizes `x[n, p]` per parcel in place (mean 0, population std 1); returns the parcels
/// whose standard deviation is 0 (set to zeros).
pub fn standardize(data: &mut [f64], n: usize, p: usize) -> Vec<usize> {
    let mut constant = Vec::new();
    for q in 0..p {
        let mean = (0..n).map(|t| data[t * p + q]).sum::<f64>() / n as f64;
        let var = (0..n).map(|t| (data[t * p + q] - mean).powi(2)).sum::<f64>() / n as f64;
        let sd = var.sqrt();
        if sd == 0.0 || !sd.is_finite() {
            constant.push(q);
            for t in 0..n {
                data[t * p + q] = 0.0;
            }
        } else {
            for t in 0..n {
                data[t * p + q] = (data[t * p + q] - mean) / sd;
            }
        }
    }
    constant
}
