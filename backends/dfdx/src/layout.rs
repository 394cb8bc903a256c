//! Host-side reordering between the core's `(B, T, P, ...)` tensors and this backend's row
//! layout: a 2-D matrix whose row `(t * B + b) * P + p` holds token `(b, t, p)`.
//!
//! Time outermost makes one time step of all `S = B * P` sequences a contiguous block of
//! rows (the scan picks one block per step), and keeps the `P` parcels of one `(t, b)`
//! contiguous (the kNN attention views the rows as `(T * B, P, width)`).

use boldcast_core::{EmbedShape, Embeddings, ForecastShape, Forecasts, Tokens};

/// The sizes of one batch: `B`, `T`, `P`, `D`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RowLayout {
    /// Windows (B).
    pub batch: usize,
    /// Tokens per window (T).
    pub time: usize,
    /// Parcels (P).
    pub parcels: usize,
    /// TRs per token (D).
    pub d_in: usize,
}

impl RowLayout {
    /// The layout of a batch of tokens.
    pub fn of(tokens: &Tokens<impl Copy>) -> Self {
        let s = tokens.shape();
        Self { batch: s.batch, time: s.time, parcels: s.parcels, d_in: s.d_in }
    }

    /// `S = B * P`: independent sequences of the temporal mixer.
    pub fn seqs(&self) -> usize {
        self.batch * self.parcels
    }

    /// `T * B * P`: rows of every activation matrix.
    pub fn rows(&self) -> usize {
        self.time * self.seqs()
    }

    /// The row of token `(b, t, p)`.
    #[inline]
    pub fn row(&self, b: usize, t: usize, p: usize) -> usize {
        (t * self.batch + b) * self.parcels + p
    }

    /// Tokens `(B, T, P, D)` as a row-major `(T * B * P, D)` matrix.
    pub fn tokens_to_rows<E: Copy + Default>(&self, tokens: &Tokens<E>) -> Vec<E> {
        self.permute(tokens.data(), self.d_in)
    }

    /// Forecasts `(B, T, P, H, D)` (a forecast offset) as a row-major `(T * B * P, H * D)`
    /// matrix, the layout of the head's output.
    pub fn forecasts_to_rows<E: Copy + Default>(&self, forecasts: &Forecasts<E>) -> Vec<E> {
        let s = forecasts.shape();
        self.permute(forecasts.data(), s.horizons * s.d_in)
    }

    /// Rows of width `w` in `(B, T, P)` order to the row layout.
    fn permute<E: Copy + Default>(&self, data: &[E], w: usize) -> Vec<E> {
        let mut out = vec![E::default(); self.rows() * w];
        let mut src = 0;
        for b in 0..self.batch {
            for t in 0..self.time {
                for p in 0..self.parcels {
                    let dst = self.row(b, t, p) * w;
                    out[dst..dst + w].copy_from_slice(&data[src..src + w]);
                    src += w;
                }
            }
        }
        out
    }

    /// The targets of MODEL.md as a row-major `(T_valid * B * P, H * D)` matrix in the row
    /// layout: row `(t * B + b) * P + p`, column `i * D + j` holds `tokens[b, t + h_i, p, j]`.
    /// These rows line up with the first `T_valid * B * P` rows of the forecasts.
    pub fn targets_to_rows<E: Copy + Default>(&self, tokens: &Tokens<E>, horizons: &[usize]) -> Vec<E> {
        let (d, h) = (self.d_in, horizons.len());
        let tv = self.time - horizons.iter().copied().max().unwrap_or(0);
        let mut out = vec![E::default(); tv * self.seqs() * h * d];
        for b in 0..self.batch {
            for t in 0..tv {
                for p in 0..self.parcels {
                    let dst = self.row(b, t, p) * h * d;
                    for (i, &hz) in horizons.iter().enumerate() {
                        let src = tokens.index(b, t + hz, p, 0);
                        out[dst + i * d..dst + (i + 1) * d].copy_from_slice(&tokens.data()[src..src + d]);
                    }
                }
            }
        }
        out
    }

    /// A `(T * B * P, H * D)` matrix in the row layout as forecasts `(B, T, P, H, D)`.
    pub fn rows_to_forecasts<E: Copy + Default>(&self, rows: &[E], horizons: usize) -> Forecasts<E> {
        let w = horizons * self.d_in;
        let data = self.unpermute(rows, w);
        let shape = ForecastShape::new(self.batch, self.time, self.parcels, horizons, self.d_in);
        Forecasts::new(shape, data).expect("row layout and forecast shape hold the same number of values")
    }

    /// A `(T * B * P, M)` matrix in the row layout as embeddings `(B, T, P, M)`.
    pub fn rows_to_embeddings<E: Copy + Default>(&self, rows: &[E], d_model: usize) -> Embeddings<E> {
        let data = self.unpermute(rows, d_model);
        let shape = EmbedShape::new(self.batch, self.time, self.parcels, d_model);
        Embeddings::new(shape, data).expect("row layout and embedding shape hold the same number of values")
    }

    /// Rows of width `w` from the row layout back to `(B, T, P)` order.
    fn unpermute<E: Copy + Default>(&self, rows: &[E], w: usize) -> Vec<E> {
        let mut out = vec![E::default(); self.rows() * w];
        let mut dst = 0;
        for b in 0..self.batch {
            for t in 0..self.time {
                for p in 0..self.parcels {
                    let src = self.row(b, t, p) * w;
                    out[dst..dst + w].copy_from_slice(&rows[src..src + w]);
                    dst += w;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_core::TokenShape;

    #[test]
    fn rows_round_trip_through_forecasts() {
        let tokens = Tokens::new(TokenShape::new(2, 3, 4, 1), (0..24).map(|i| i as f64).collect()).unwrap();
        let l = RowLayout::of(&tokens);
        let rows = l.tokens_to_rows(&tokens);
        // Token (b=1, t=2, p=3) is row (2 * 2 + 1) * 4 + 3 = 23.
        assert_eq!(rows[23], tokens.at(1, 2, 3, 0));
        assert_eq!(rows[l.row(0, 1, 2)], tokens.at(0, 1, 2, 0));
        let back = l.rows_to_forecasts(&rows, 1);
        assert_eq!(back.data(), tokens.data());
        // Forecasts of two horizons go there and back too; value (b=1, t=2, p=3, i=1) is
        // column 1 of row 23.
        let f = l.rows_to_forecasts(&(0..48).map(|i| i as f64).collect::<Vec<_>>(), 2);
        let rows = l.forecasts_to_rows(&f);
        assert_eq!(rows[23 * 2 + 1], f.at(1, 2, 3, 1, 0));
        assert_eq!(l.rows_to_forecasts(&rows, 2).data(), f.data());
    }

    #[test]
    fn target_rows_match_the_core() {
        let tokens = Tokens::new(TokenShape::new(2, 5, 3, 2), (0..60).map(|i| i as f64 * 0.5).collect()).unwrap();
        let l = RowLayout::of(&tokens);
        let horizons = [1, 3];
        let rows = l.targets_to_rows(&tokens, &horizons);
        let core: Forecasts<f64> = boldcast_core::forecast::build_forecast_targets(&tokens, &horizons).unwrap();
        let tv = 2;
        for b in 0..2 {
            for t in 0..tv {
                for p in 0..3 {
                    for i in 0..2 {
                        for j in 0..2 {
                            let r = l.row(b, t, p) * 4 + i * 2 + j;
                            assert_eq!(rows[r], core.at(b, t, p, i, j));
                        }
                    }
                }
            }
        }
    }
}
