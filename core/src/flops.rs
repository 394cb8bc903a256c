//! The FLOPs model of a training step: [`ModelConfig::flops_per_step`], arithmetic on the
//! model configuration only (what `bc-cli bench` and `boldcast_train::bench` divide by the step
//! time; the formula is also in BENCHMARKS.md).

use crate::config::{ModelConfig, Temporal};

impl ModelConfig {
    /// Model FLOPs of one training step on `B * T * P` tokens, counted per token from MODEL.md
    /// (a multiply and an add are two FLOPs; a transcendental function counts as one):
    ///
    /// ```text
    /// embed            2 D M
    /// per layer
    ///   LayerNorm      8 M                                   (twice with attention)
    ///   Mamba-1        2 M (2 Di) + 2 K Di + 2 Di (R + 2N) + 2 R Di          in, conv, x, dt proj
    ///                  + 7 Di N + 2 Di                       scan (exp(dt A), a h + (dt x) B, C h) + D x
    ///                  + 4 Di + 2 Di M                       SiLU, softplus, gate; out_proj
    ///   Mamba-2        2 M (2 Di + 2N + nh) + 2 K (Di + 2N)  in_proj, conv
    ///                  + 7 Di N + 2 Di + 6 Di + 2 Di M       scan, D x, gate and RMSNorm, out_proj
    ///   kNN attention  4 (2 M M) + 4 k M + 3 k              q, k, v, out; scores and weighted sum; softmax
    /// final LayerNorm  8 M
    /// head             2 M H D
    /// ```
    ///
    /// The forward total `F` is tripled for the step (the backward of a product costs two
    /// products; the scan's backward is counted as twice its forward too), as in the usual
    /// model-FLOPs accounting: work the backend repeats to save memory (the recomputed scan and
    /// activations) is not counted, so GFLOP/s computed from it are useful work per second.
    pub fn flops_per_step(&self, batch: usize, time: usize, parcels: usize) -> f64 {
        let (d, m) = (self.d_in as f64, self.d_model as f64);
        let h = self.n_horizons() as f64;
        let kn = self.k_neighbors as f64;
        let attention = if self.k_neighbors > 0 { 8.0 * m + 8.0 * m * m + 4.0 * kn * m + 3.0 * kn } else { 0.0 };
        let layer = 8.0 * m + self.mixer_flops_per_token() + attention;
        let forward = 2.0 * d * m + self.n_layers as f64 * layer + 8.0 * m + 2.0 * m * h * d;
        3.0 * forward * (batch * time * parcels) as f64
    }

    /// The temporal mixer's forward FLOPs per token (the `Mamba-1` or `Mamba-2` line above).
    fn mixer_flops_per_token(&self) -> f64 {
        let (m, n, k) = (self.d_model as f64, self.d_state as f64, self.d_conv as f64);
        let (di, r) = (self.d_inner() as f64, self.dt_rank() as f64);
        match self.temporal {
            Temporal::Mamba => {
                2.0 * m * 2.0 * di
                    + 2.0 * k * di
                    + 2.0 * di * (r + 2.0 * n)
                    + 2.0 * r * di
                    + 7.0 * di * n
                    + 2.0 * di
                    + 4.0 * di
                    + 2.0 * di * m
            }
            Temporal::Mamba2 => {
                let nh = self.nheads() as f64;
                2.0 * m * (2.0 * di + 2.0 * n + nh)
                    + 2.0 * k * (di + 2.0 * n)
                    + 7.0 * di * n
                    + 2.0 * di
                    + 6.0 * di
                    + 2.0 * di * m
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flop_model_of_the_demo_shape() {
        // cpu-demo: M 64, Di 128, N 16, R 4, K 4, k 8, 2 layers, H 2, D 1.
        let cfg = ModelConfig::builder().d_model(64).n_layers(2).headdim(32).build().unwrap();
        assert_eq!((cfg.d_inner(), cfg.dt_rank(), cfg.d_state, cfg.d_conv, cfg.k_neighbors), (128, 4, 16, 4, 8));
        assert_eq!((cfg.n_horizons(), cfg.d_in, cfg.temporal), (2, 1, Temporal::Mamba));
        let per_token = cfg.flops_per_step(1, 1, 1) / 3.0;
        let (m, di, n, r, k, kn) = (64.0, 128.0, 16.0, 4.0, 4.0, 8.0);
        let mixer = 2.0 * m * 2.0 * di
            + 2.0 * k * di
            + 2.0 * di * (r + 2.0 * n)
            + 2.0 * r * di
            + 7.0 * di * n
            + 6.0 * di
            + 2.0 * di * m;
        let attn = 8.0 * m + 8.0 * m * m + 4.0 * kn * m + 3.0 * kn;
        let want = 2.0 * m + 2.0 * (8.0 * m + mixer + attn) + 8.0 * m + 2.0 * m * 2.0;
        assert!((per_token - want).abs() < 1e-9 * want, "{per_token} vs {want}");
        assert_eq!(cfg.flops_per_step(4, 256, 64), 3.0 * want * 65536.0);
    }
}
