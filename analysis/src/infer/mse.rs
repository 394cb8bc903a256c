//! Mean squared errors of forecasts, per horizon and per parcel: sums and counts in f64
//! ([`MseSums`], added up over runs) and their means ([`Mse`]). A target past the run's end
//! is no target: the counts differ by horizon, so the overall MSE is the mean over every
//! target, not the mean of the per-horizon MSEs.

/// Sums of squared errors and their counts, by horizon and by parcel.
#[derive(Clone, Debug, PartialEq)]
pub struct MseSums {
    sq_h: Vec<f64>,
    n_h: Vec<u64>,
    sq_p: Vec<f64>,
    n_p: Vec<u64>,
}

/// Mean squared errors (`None` where there is no target: JSON `null`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Mse {
    /// Over every target.
    pub mse: Option<f64>,
    /// Per horizon, in the order of `model.horizons`.
    pub per_horizon: Vec<Option<f64>>,
    /// Per parcel, in column order (every horizon).
    pub per_parcel: Vec<Option<f64>>,
    /// Targets counted (forecast values with a target inside the run).
    pub targets: u64,
}

impl MseSums {
    /// Empty sums for `horizons` horizons and `parcels` parcels.
    pub fn new(horizons: usize, parcels: usize) -> MseSums {
        MseSums { sq_h: vec![0.0; horizons], n_h: vec![0; horizons], sq_p: vec![0.0; parcels], n_p: vec![0; parcels] }
    }

    /// Adds the error `err` of horizon `h` (its index) at parcel `p`.
    pub fn add(&mut self, h: usize, p: usize, err: f64) {
        let sq = err * err;
        self.sq_h[h] += sq;
        self.n_h[h] += 1;
        self.sq_p[p] += sq;
        self.n_p[p] += 1;
    }

    /// Adds `other`'s sums (another run).
    pub fn merge(&mut self, other: &MseSums) {
        let add = |a: &mut Vec<f64>, b: &[f64]| a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        let count = |a: &mut Vec<u64>, b: &[u64]| a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        add(&mut self.sq_h, &other.sq_h);
        count(&mut self.n_h, &other.n_h);
        add(&mut self.sq_p, &other.sq_p);
        count(&mut self.n_p, &other.n_p);
    }

    /// The means.
    pub fn mse(&self) -> Mse {
        let mean = |s: f64, n: u64| (n > 0).then(|| s / n as f64);
        let targets: u64 = self.n_h.iter().sum();
        Mse {
            mse: mean(self.sq_h.iter().sum(), targets),
            per_horizon: self.sq_h.iter().zip(&self.n_h).map(|(&s, &n)| mean(s, n)).collect(),
            per_parcel: self.sq_p.iter().zip(&self.n_p).map(|(&s, &n)| mean(s, n)).collect(),
            targets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_over_targets_and_merged_runs() {
        let mut a = MseSums::new(2, 2);
        a.add(0, 0, 1.0);
        a.add(0, 1, 2.0);
        a.add(1, 1, 3.0);
        let m = a.mse();
        assert_eq!(m.mse, Some(14.0 / 3.0));
        assert_eq!(m.per_horizon, [Some(2.5), Some(9.0)]);
        assert_eq!(m.per_parcel, [Some(1.0), Some(6.5)]);
        let mut b = MseSums::new(2, 2);
        b.add(1, 0, 1.0);
        a.merge(&b);
        assert_eq!(a.mse().per_horizon, [Some(2.5), Some(5.0)]);
        assert_eq!(a.mse().targets, 4);
        assert_eq!(MseSums::new(1, 1).mse().mse, None);
    }
}
