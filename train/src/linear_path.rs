//! The linear path (`model.linear_path`): a direct linear forecaster, fitted in closed form on
//! the training subjects before training, whose forecasts are added to the network's. The
//! Mamba stack then learns only the correction, so a model that cannot beat the linear fit
//! can at least match it: with the head zeroed at the start ([`LinearPathModel::zero_head`]),
//! step 0 forecasts exactly what the fit does, and validation keeps only what improves on it.
//!
//! The fit is the eval baselines' own ([`boldcast_baselines::fit_baselines`]): per-parcel AR(p) or
//! ridge VAR(p), orders and penalty chosen by cross-validation over the training subjects,
//! every lead fitted directly, a lower order at the tokens whose window holds fewer TRs
//! ([`LinearFit::forecasts`]). It is frozen: the network learns with the path's forecasts as
//! a fixed offset ([`Model::loss_and_grads_offset`]), because the cross-validated ridge
//! solution is already the linear map that generalizes best across subjects, and stochastic
//! updates of it on the training windows would only fit those windows closer.
//!
//! [`LinearPathModel`] wraps any backend's model. With the path off it forwards every call
//! unchanged, so code that builds models wraps them unconditionally. The fitted coefficients
//! travel with the parameters ([`Model::state`]) as `linear_path.ar.{q}` or
//! `linear_path.var.{q}` (the order-`q` fit, `(features, leads x parcels)`, f32), so every
//! checkpoint and `best.safetensors` carries the path its forecasts need.
//!
//! ```
//! use boldcast_core::{LinearPath, Model, ModelConfig};
//! use boldcast_cpu::CpuModel;
//! use boldcast_train::linear_path::LinearPathModel;
//!
//! let cfg = ModelConfig::builder().d_model(8).n_layers(1).k_neighbors(0).build().unwrap();
//! // Off: the wrapper is the model.
//! let m = LinearPathModel::unfitted(CpuModel::<f32>::new(cfg.clone(), None, 0).unwrap(), LinearPath::Off);
//! assert_eq!(m.state(), CpuModel::<f32>::new(cfg, None, 0).unwrap().state());
//! ```

use crate::error::TrainError;
use boldcast_baselines::fit_baselines;
use boldcast_baselines::linear::{Coupling, LinearFit};
use boldcast_baselines::var::VarChoice;
use boldcast_baselines::BaselineError;
use boldcast_core::collective::DataParallel;
use boldcast_core::forecast::{build_forecast_targets, forecasting_loss};
use boldcast_core::model::NamedTensor;
use boldcast_core::optim::Moments;
use boldcast_core::{Error, ForecastShape, Forecasts, LinearPath, Model, ModelConfig, Optimizer, TokenShape, Tokens};
use boldcast_data::{Dataset, WindowSpec};
use nalgebra::DMatrix;
use serde::Serialize;

/// The prefix of the path's tensors in a state dictionary.
pub const PREFIX: &str = "linear_path.";

/// What the fit chose, for the run's summary and the user.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinearPathChoice {
    /// `ar` or `var`.
    pub kind: &'static str,
    /// The order, in TRs.
    pub p: usize,
    /// The relative ridge penalty (VAR only).
    pub lambda: Option<f64>,
    /// The cross-validated MSE of the chosen fit (None without cross-validation).
    pub cv_mse: Option<f64>,
    /// The other candidate's cross-validated MSE, when `auto` compared two.
    pub other_cv_mse: Option<f64>,
}

/// A model with the linear path's forecasts added to its own (see the module doc).
pub struct LinearPathModel<M> {
    inner: M,
    kind: LinearPath,
    fit: Option<LinearFit>,
}

impl<M> LinearPathModel<M> {
    /// `inner` with the path `kind` and no coefficients yet: [`Model::load_state`] brings them
    /// (loading weights); until then a path that is on refuses to forecast.
    pub fn unfitted(inner: M, kind: LinearPath) -> Self {
        LinearPathModel { inner, kind, fit: None }
    }

    /// `inner` with the fitted path `fit`, its coefficients rounded to the f32 the state
    /// stores them in, so that a run resumed from its checkpoint forecasts with the very same
    /// path as the run that wrote it.
    pub fn with_fit(inner: M, kind: LinearPath, mut fit: LinearFit) -> Self {
        for c in &mut fit.coefs {
            c.iter_mut().for_each(|v| *v = *v as f32 as f64);
        }
        LinearPathModel { inner, kind, fit: Some(fit) }
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The fitted path, if any.
    pub fn fit(&self) -> Option<&LinearFit> {
        self.fit.as_ref()
    }
}

/// Fits the path `kind` on `train_runs` of `ds` for the horizons of `cfg` and the windows of
/// `spec` (whose length bounds the order, as in `eval`).
pub fn fit_path(
    kind: LinearPath,
    ds: &Dataset,
    train_runs: &[usize],
    cfg: &ModelConfig,
    spec: &WindowSpec,
) -> Result<(LinearFit, LinearPathChoice), TrainError> {
    let b = fit_baselines(ds, train_runs, &cfg.horizons, spec)?;
    let ar_cv = b.ar_choice.cv_mse.get(b.ar_choice.p.wrapping_sub(1)).copied();
    let ar = LinearPathChoice { kind: "ar", p: b.ar_choice.p, lambda: None, cv_mse: ar_cv, other_cv_mse: None };
    let var = match (&b.var_p.fit, &b.var_p.choice) {
        (Some(f), VarChoice::Fitted { p, lambda, cv, .. }) => {
            let cv_mse = cv.iter().find(|c| c.p == *p && c.lambda == *lambda).map(|c| c.mse);
            Some((
                f.clone(),
                LinearPathChoice { kind: "var", p: *p, lambda: Some(*lambda), cv_mse, other_cv_mse: None },
            ))
        }
        _ => None,
    };
    let skipped = || match &b.var_p.choice {
        VarChoice::Skipped { reason } => reason.clone(),
        VarChoice::Fitted { .. } => "no fit".into(),
    };
    match kind {
        LinearPath::Off => {
            Err(BaselineError::Fit { name: "linear_path".into(), reason: "the path is off".into() }.into())
        }
        LinearPath::Ar => Ok((b.ar_p, ar)),
        LinearPath::Var => var.ok_or_else(|| {
            let reason = format!("the VAR(p) fit was skipped: {}", skipped());
            BaselineError::Fit { name: "linear_path = \"var\"".into(), reason }.into()
        }),
        LinearPath::Auto => Ok(match var {
            // The lower cross-validated MSE wins; without cross-validation, the richer VAR.
            Some((vf, vc)) if !matches!((vc.cv_mse, ar_cv), (Some(v), Some(a)) if a < v) => {
                (vf, LinearPathChoice { other_cv_mse: ar_cv, ..vc })
            }
            Some((_, vc)) => (b.ar_p, LinearPathChoice { other_cv_mse: vc.cv_mse, ..ar }),
            None => (b.ar_p, ar),
        }),
    }
}

impl<M: Model<f32>> LinearPathModel<M> {
    /// Sets the network's head (`head.weight`, `head.bias`) to zero, so that the model's
    /// forecasts are the path's alone (a fresh run's step 0).
    pub fn zero_head(&mut self) -> Result<(), Error> {
        let mut state = self.inner.state();
        for t in state.iter_mut().filter(|t| t.name == "head.weight" || t.name == "head.bias") {
            t.data.iter_mut().for_each(|v| *v = 0.0);
        }
        self.inner.load_state(&state)
    }

    /// The path's forecasts of `tokens` (`None` with the path off).
    pub fn offset(&self, tokens: &Tokens<f32>) -> Result<Option<Forecasts<f32>>, Error> {
        if !self.kind.is_on() {
            return Ok(None);
        }
        let fit = self.fit.as_ref().ok_or_else(|| {
            Error::Backend("model.linear_path is on but the weights carry no linear_path tensors".into())
        })?;
        let s = tokens.shape();
        if s.parcels != fit.parcels {
            return Err(Error::shape("tokens.parcels (the linear path's)", fit.parcels, s.parcels));
        }
        let t64 = Tokens::new(TokenShape::new(s.batch, s.time, s.parcels, s.d_in), widen(tokens.data()))?;
        let f = fit.forecasts(&t64, &self.inner.config().horizons);
        let shape = ForecastShape::new(s.batch, s.time, s.parcels, self.inner.config().n_horizons(), s.d_in);
        Forecasts::new(shape, f.data().iter().map(|&v| v as f32).collect()).map(Some)
    }
}

fn widen(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// The tensors of `fit`, named as the module doc says.
fn fit_tensors(fit: &LinearFit) -> Vec<NamedTensor<f32>> {
    let kind = match fit.coupling {
        Coupling::PerParcel => "ar",
        Coupling::Full => "var",
    };
    let tensor = |(i, c): (usize, &DMatrix<f64>)| NamedTensor {
        name: format!("{PREFIX}{kind}.{}", i + 1),
        shape: vec![c.nrows(), c.ncols()],
        // nalgebra stores columns first; state dictionaries are row-major.
        data: (0..c.nrows()).flat_map(|r| (0..c.ncols()).map(move |k| c[(r, k)] as f32)).collect(),
    };
    fit.coefs.iter().enumerate().map(tensor).collect()
}

/// The fit the path's tensors describe, checked: one coupling, orders `1..=n` each present
/// once, `leads x P` columns (which give P), `q` (AR) or `q P` (VAR) rows.
fn fit_of(tensors: &[&NamedTensor<f32>], n_leads: usize) -> Result<LinearFit, Error> {
    let bad = |name: &str, reason: String| Error::Param { name: name.into(), reason };
    let cols = tensors.first().and_then(|t| t.shape.get(1)).copied().unwrap_or(0);
    let parcels = cols / n_leads.max(1);
    let mut coupling = None;
    let mut coefs: Vec<Option<DMatrix<f64>>> = vec![None; tensors.len()];
    for t in tensors {
        let rest = &t.name[PREFIX.len()..];
        let (c, q) = match rest.split_once('.') {
            Some(("ar", q)) => (Coupling::PerParcel, q),
            Some(("var", q)) => (Coupling::Full, q),
            _ => return Err(bad(&t.name, "not a linear path tensor (linear_path.ar.Q or linear_path.var.Q)".into())),
        };
        let q: usize = q.parse().map_err(|_| bad(&t.name, "the order is not a number".into()))?;
        if *coupling.get_or_insert(c) != c {
            return Err(bad(&t.name, "the path mixes AR and VAR tensors".into()));
        }
        let rows = if c == Coupling::Full { q * parcels } else { q };
        let ok = q >= 1 && q <= tensors.len() && t.shape.len() == 2 && t.shape[0] == rows;
        if !ok || parcels == 0 || t.shape[1] != parcels * n_leads || t.data.len() != rows * t.shape[1] {
            return Err(bad(&t.name, format!("shape {:?} does not fit order {q} over {parcels} parcels", t.shape)));
        }
        if coefs[q - 1]
            .replace(DMatrix::from_row_iterator(rows, t.shape[1], t.data.iter().map(|&v| v as f64)))
            .is_some()
        {
            return Err(bad(&t.name, "given twice".into()));
        }
    }
    let coefs: Vec<DMatrix<f64>> = coefs.into_iter().flatten().collect();
    Ok(LinearFit { coupling: coupling.unwrap_or(Coupling::Full), parcels, coefs })
}

/// Every method forwarded to the wrapped model, the forecasts plus the path's.
impl<M: Model<f32>> Model<f32> for LinearPathModel<M> {
    fn config(&self) -> &ModelConfig {
        self.inner.config()
    }
    fn forward(&self, tokens: &Tokens<f32>) -> Result<Forecasts<f32>, Error> {
        let mut f = self.inner.forward(tokens)?;
        if let Some(off) = self.offset(tokens)? {
            f.data_mut().iter_mut().zip(off.data()).for_each(|(v, o)| *v += o);
        }
        Ok(f)
    }
    fn embed(&self, tokens: &Tokens<f32>) -> Result<boldcast_core::Embeddings<f32>, Error> {
        self.inner.embed(tokens)
    }
    fn loss(&self, tokens: &Tokens<f32>) -> Result<f64, Error> {
        if !self.kind.is_on() {
            return self.inner.loss(tokens);
        }
        forecasting_loss(&self.forward(tokens)?, &build_forecast_targets(tokens, &self.config().horizons)?)
    }
    fn loss_and_grads(&mut self, tokens: &Tokens<f32>) -> Result<f64, Error> {
        match self.offset(tokens)? {
            Some(off) => self.inner.loss_and_grads_offset(tokens, &off),
            None => self.inner.loss_and_grads(tokens),
        }
    }
    fn loss_and_grads_offset(&mut self, tokens: &Tokens<f32>, offset: &Forecasts<f32>) -> Result<f64, Error> {
        let mut off = offset.clone();
        if let Some(own) = self.offset(tokens)? {
            off.data_mut().iter_mut().zip(own.data()).for_each(|(v, o)| *v += o);
        }
        self.inner.loss_and_grads_offset(tokens, &off)
    }
    fn grad_sq_norm(&self) -> f64 {
        self.inner.grad_sq_norm()
    }
    fn scale_grads(&mut self, factor: f64) {
        self.inner.scale_grads(factor)
    }
    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<f32>, lr: f64) -> Result<(), Error> {
        self.inner.apply_optimizer(opt, lr)
    }
    fn state(&self) -> Vec<NamedTensor<f32>> {
        let mut s = self.inner.state();
        s.extend(self.fit.iter().flat_map(fit_tensors));
        s
    }
    fn grads(&self) -> Vec<NamedTensor<f32>> {
        self.inner.grads()
    }
    fn load_state(&mut self, tensors: &[NamedTensor<f32>]) -> Result<(), Error> {
        let (path, rest): (Vec<&NamedTensor<f32>>, Vec<&NamedTensor<f32>>) =
            tensors.iter().partition(|t| t.name.starts_with(PREFIX));
        let fit = match (self.kind.is_on(), path.is_empty()) {
            (false, false) => {
                let reason = "a linear path tensor, but model.linear_path is off".into();
                return Err(Error::Param { name: path[0].name.clone(), reason });
            }
            (true, true) if self.fit.is_none() => {
                let reason = "model.linear_path is on but the weights carry no linear_path tensors".into();
                return Err(Error::Param { name: PREFIX.into(), reason });
            }
            (true, false) => Some(fit_of(&path, self.config().n_horizons() * self.config().d_in)?),
            _ => None,
        };
        let rest: Vec<NamedTensor<f32>> = rest.into_iter().cloned().collect();
        self.inner.load_state(&rest)?;
        if fit.is_some() {
            self.fit = fit;
        }
        Ok(())
    }
    fn optimizer_state(&self) -> Option<(u64, Vec<Moments<f32>>)> {
        self.inner.optimizer_state()
    }
    fn restore_optimizer_state(&mut self, t: u64, moments: &[Moments<f32>]) -> Result<(), Error> {
        self.inner.restore_optimizer_state(t, moments)
    }
    fn decayed_elements(&self) -> Option<u64> {
        self.inner.decayed_elements()
    }
}

/// [`DataParallel`] through the wrapped model: the path has no gradients.
impl<M: DataParallel<f32>> DataParallel<f32> for LinearPathModel<M> {
    fn grads_to_flat(&self, flat: &mut Vec<f32>) {
        self.inner.grads_to_flat(flat)
    }
    fn grads_from_flat(&mut self, flat: &[f32]) -> Result<(), Error> {
        self.inner.grads_from_flat(flat)
    }
    fn all_reduce_grads(
        &mut self,
        c: &dyn boldcast_core::collective::Collective,
        scratch: &mut Vec<f32>,
    ) -> Result<(), Error> {
        self.inner.all_reduce_grads(c, scratch)
    }
}
