//! [`WithOffset`]: a model whose forecasts are another model's plus a fixed forecast offset,
//! trained through the backend's [`Model::loss_and_grads_offset`]. The golden checker runs a
//! case that carries an `offset` through it, so that every check (forecast, loss, gradients,
//! the training steps of the core's [`Trainer`](boldcast_core::Trainer)) sees
//! `forward(tokens) + offset`, as the reference computed it.

use boldcast_core::error::Result;
use boldcast_core::forecast::{build_forecast_targets, forecasting_loss};
use boldcast_core::model::NamedTensor;
use boldcast_core::optim::Moments;
use boldcast_core::{check_offset, Elem, Embeddings, Forecasts, Model, ModelConfig, Optimizer, Tokens};

/// `model` with the fixed forecast `offset` `(B, T, P, H, D)` added to its forecasts: the
/// loss is MODEL.md's of `forward(tokens) + offset`, the gradients are the backend's
/// [`Model::loss_and_grads_offset`]. The embedding, the parameters and the optimizer are the
/// model's own. A batch of another shape than the offset's is an [`boldcast_core::Error`]
/// naming the axis.
pub struct WithOffset<'a, E, M> {
    model: M,
    offset: &'a Forecasts<E>,
}

impl<'a, E: Elem, M: Model<E>> WithOffset<'a, E, M> {
    /// `model` (owned or `&mut`) with `offset`.
    pub fn new(model: M, offset: &'a Forecasts<E>) -> Self {
        WithOffset { model, offset }
    }

    /// The wrapped model.
    pub fn into_inner(self) -> M {
        self.model
    }
}

impl<E: Elem, M: Model<E>> Model<E> for WithOffset<'_, E, M> {
    fn config(&self) -> &ModelConfig {
        self.model.config()
    }
    /// The model's forecasts plus the offset, added in `E` as the backends add it.
    fn forward(&self, tokens: &Tokens<E>) -> Result<Forecasts<E>> {
        check_offset(self.config(), tokens, self.offset)?;
        let mut f = self.model.forward(tokens)?;
        for (v, &o) in f.data_mut().iter_mut().zip(self.offset.data()) {
            *v += o;
        }
        Ok(f)
    }
    fn embed(&self, tokens: &Tokens<E>) -> Result<Embeddings<E>> {
        self.model.embed(tokens)
    }
    /// The core's host loss of [`WithOffset::forward`] (a backend has no evaluation loss with
    /// an offset).
    fn loss(&self, tokens: &Tokens<E>) -> Result<f64> {
        forecasting_loss(&self.forward(tokens)?, &build_forecast_targets(tokens, &self.config().horizons)?)
    }
    fn loss_and_grads(&mut self, tokens: &Tokens<E>) -> Result<f64> {
        self.model.loss_and_grads_offset(tokens, self.offset)
    }
    /// The two offsets summed.
    fn loss_and_grads_offset(&mut self, tokens: &Tokens<E>, offset: &Forecasts<E>) -> Result<f64> {
        check_offset(self.config(), tokens, self.offset)?;
        check_offset(self.config(), tokens, offset)?;
        let mut sum = offset.clone();
        for (v, &o) in sum.data_mut().iter_mut().zip(self.offset.data()) {
            *v += o;
        }
        self.model.loss_and_grads_offset(tokens, &sum)
    }
    fn grad_sq_norm(&self) -> f64 {
        self.model.grad_sq_norm()
    }
    fn scale_grads(&mut self, factor: f64) {
        self.model.scale_grads(factor)
    }
    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<E>, lr: f64) -> Result<()> {
        self.model.apply_optimizer(opt, lr)
    }
    fn state(&self) -> Vec<NamedTensor<E>> {
        self.model.state()
    }
    fn grads(&self) -> Vec<NamedTensor<E>> {
        self.model.grads()
    }
    fn load_state(&mut self, tensors: &[NamedTensor<E>]) -> Result<()> {
        self.model.load_state(tensors)
    }
    fn optimizer_state(&self) -> Option<(u64, Vec<Moments<E>>)> {
        self.model.optimizer_state()
    }
    fn restore_optimizer_state(&mut self, t: u64, moments: &[Moments<E>]) -> Result<()> {
        self.model.restore_optimizer_state(t, moments)
    }
    fn decayed_elements(&self) -> Option<u64> {
        self.model.decayed_elements()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_core::{ForecastShape, TokenShape};
    use boldcast_cpu::CpuModel;

    fn setup() -> (CpuModel<f64>, Tokens<f64>, Forecasts<f64>) {
        let cfg = ModelConfig::builder().d_model(8).n_layers(1).d_state(2).k_neighbors(0).horizons(&[1, 2]).build();
        let m = CpuModel::<f64>::new(cfg.unwrap(), None, 3).unwrap();
        let tokens = boldcast_fixtures::ar1_tokens(TokenShape::new(2, 7, 3, 1), 0.8, 4);
        let shape = ForecastShape::new(2, 7, 3, 2, 1);
        let offset = Forecasts::new(shape, (0..84).map(|i| ((i as f64) * 0.37).sin() * 0.5).collect()).unwrap();
        (m, tokens, offset)
    }

    #[test]
    fn forecasts_loss_and_gradients_are_those_of_the_model_plus_the_offset() {
        let (mut m, tokens, offset) = setup();
        let plain = m.forward(&tokens).unwrap();
        let want_loss = m.loss_and_grads_offset(&tokens, &offset).unwrap();
        let want_grads = m.grads();
        let mut w = WithOffset::new(&mut m, &offset);
        let f = w.forward(&tokens).unwrap();
        for ((a, p), o) in f.data().iter().zip(plain.data()).zip(offset.data()) {
            assert_eq!(*a, p + o);
        }
        assert!((w.loss(&tokens).unwrap() - want_loss).abs() < 1e-12 * want_loss);
        assert_eq!(w.loss_and_grads(&tokens).unwrap(), want_loss);
        assert_eq!(w.grads(), want_grads);
        // The plain loss differs: the offset is really in it.
        assert!((w.into_inner().loss(&tokens).unwrap() - want_loss).abs() > 1e-3);
    }

    #[test]
    fn a_batch_of_another_shape_than_the_offset_is_refused_by_axis() {
        let (m, _, offset) = setup();
        let other = boldcast_fixtures::ar1_tokens(TokenShape::new(2, 8, 3, 1), 0.8, 4);
        let e = WithOffset::new(m, &offset).forward(&other).unwrap_err().to_string();
        assert!(e.contains("offset.time"), "{e}");
    }
}
