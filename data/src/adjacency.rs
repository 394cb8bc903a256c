//! The adjacency of a dataset: the k nearest parcels by centroid distance (`parcels.tsv`), else
//! the k most correlated parcels on the training runs; self first, ties to the lower index.

use crate::dataset::Dataset;
use crate::error::DataError;
use boldcast_core::Adjacency;

impl Dataset {
    /// `train` (Pearson correlation of the standardized series, pooled over those runs). Ties
    /// go to the lower index.
    pub fn adjacency(&self, k: usize, train: &[usize]) -> Result<Option<Adjacency>, DataError> {
        if k == 0 {
            return Ok(None);
        }
        let p = self.parcels;
        if k > p {
            return Err(DataError::config("model.k_neighbors", k, format!("exceeds the {p} parcels of the data")));
        }
        // score[a][b]: larger is nearer.
        let score: Vec<Vec<f64>> = match &self.centroids {
            Some(c) => (0..p)
                .map(|a| (0..p).map(|b| -(0..3).map(|i| (c[a][i] - c[b][i]).powi(2)).sum::<f64>()).collect())
                .collect(),
            None => {
                if train.is_empty() {
                    return Err(DataError::config("train runs", "[]", "need at least one run for the correlation"));
                }
                let mut s = vec![vec![0.0; p]; p];
                for &r in train {
                    let run = &self.runs[r];
                    let x = run.rows(0, run.n_tr)?;
                    for t in 0..run.n_tr {
                        let row = &x[t * p..(t + 1) * p];
                        for a in 0..p {
                            for b in a..p {
                                s[a][b] += row[a] * row[b];
                            }
                        }
                    }
                }
                // Standardized series: the correlation is sum(x_a x_b) / sqrt(sum x_a^2 sum x_b^2).
                let diag: Vec<f64> = (0..p).map(|a| s[a][a]).collect();
                let mut c = vec![vec![0.0; p]; p];
                for a in 0..p {
                    for b in a..p {
                        let den = (diag[a] * diag[b]).sqrt();
                        let v = if den > 0.0 { s[a][b] / den } else { 0.0 };
                        c[a][b] = v;
                        c[b][a] = v;
                    }
                }
                c
            }
        };
        let mut idx = Vec::with_capacity(p * k);
        for (a, row) in score.iter().enumerate() {
            let mut others: Vec<usize> = (0..p).filter(|&b| b != a).collect();
            others.sort_by(|&x, &y| row[y].partial_cmp(&row[x]).unwrap_or(std::cmp::Ordering::Equal).then(x.cmp(&y)));
            idx.push(a);
            idx.extend_from_slice(&others[..k - 1]);
        }
        Adjacency::new(p, k, idx).map(Some).map_err(|e| DataError::config("adjacency", "", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::*;
    use crate::Dataset;
    use boldcast_fixtures::SynthRun;

    #[test]
    fn adjacency_from_centroids_and_correlation() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sub-01_run-1.tsv", &tsv_run(30, 4));
        write(d.path(), "parcels.tsv", "name\tx\ty\tz\nP0\t0\t0\t0\nP1\t10\t0\t0\nP2\t1\t0\t0\nP3\t2\t0\t0\n");
        let ds = Dataset::load(d.path()).unwrap();
        let a = ds.adjacency(3, &[0]).unwrap().unwrap();
        assert_eq!(a.row(0), &[0, 2, 3]);
        assert_eq!(a.row(1), &[1, 3, 2]);
        // P2 is at distance 1 from both P0 and P3: the tie goes to the lower index.
        assert_eq!(a.row(2), &[2, 0, 3]);
        assert!(ds.adjacency(0, &[0]).unwrap().is_none());
        assert!(ds.adjacency(5, &[0]).unwrap_err().to_string().contains("model.k_neighbors = 5"));

        // Correlation: parcels 0 and 2 identical, 1 = -0, 3 independent-ish.
        let runs = vec![SynthRun {
            subject: "01".into(),
            run: "1".into(),
            n_tr: 8,
            parcels: 4,
            data: vec![
                1., -1., 1., 0., //
                2., -2., 2., 1., //
                0., 0., 0.1, 0., //
                -1., 1., -1., 1., //
                3., -3., 3., 0., //
                1., -1., 1., 1., //
                0., 0., 0., 0., //
                -2., 2., -2., 1.,
            ],
        }];
        let ds = Dataset::from_synth(&runs, None).unwrap();
        let a = ds.adjacency(2, &[0]).unwrap().unwrap();
        assert_eq!(a.row(0), &[0, 2]);
        assert_eq!(a.row(2), &[2, 0]);
        // Parcel 1 is perfectly anti-correlated with 0: top-k is by signed correlation.
        assert_ne!(a.row(1)[1], 0);
    }
}
