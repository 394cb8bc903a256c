//! The backend-generic training step (MODEL.md, "one step") and the [`Logger`] it reports to.

use crate::collective::{all_reduce_grads, Collective, DataParallel, Reduce};
use crate::elem::Elem;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::optim::{clip_factor, Optimizer};
use crate::schedule::Schedule;
use crate::tensor::Tokens;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::marker::PhantomData;
use serde::{Deserialize, Serialize};

/// What one training step reports.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// 0-based step.
    pub step: u64,
    /// Loss before the update.
    pub loss: f64,
    /// Learning rate the update used.
    pub lr: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
}

/// Receives one record per step. A logger that writes files should flush per record so that
/// a killed run keeps its log.
pub trait Logger {
    /// Records one step; an error stops training.
    fn log_step(&mut self, rec: &StepRecord) -> Result<()>;
}

/// A logger that keeps nothing.
impl Logger for () {
    fn log_step(&mut self, _: &StepRecord) -> Result<()> {
        Ok(())
    }
}

/// A logger that keeps every record in memory.
impl Logger for alloc::vec::Vec<StepRecord> {
    fn log_step(&mut self, rec: &StepRecord) -> Result<()> {
        self.push(*rec);
        Ok(())
    }
}

/// How [`Trainer::step`] averages the gradients: [`all_reduce_grads`] for the model's type,
/// fixed by [`Trainer::with_collective`] (where the [`DataParallel`] bound is known).
type ReduceGrads<E, M> = fn(&mut M, &dyn Collective, &mut Vec<E>) -> Result<()>;

/// Drives a [`Model`] with an [`Optimizer`] and a [`Schedule`]: forward, loss, stop on a
/// non-finite loss naming the step, backward, global-norm clipping, update with `lr(step)`,
/// `step += 1`, one [`StepRecord`] to the [`Logger`].
///
/// With a [`Collective`] of more than one rank ([`Trainer::with_collective`], for a model that
/// implements [`DataParallel`]), each rank passes its shard of the global batch to
/// [`Trainer::step`]; after the backward the loss and the gradients are averaged over the
/// ranks (see [`crate::collective`]), so the norm, the clipping, the update and the record are
/// those of the global batch, identical on every rank.
pub struct Trainer<E, M, O, S, L> {
    /// The model.
    pub model: M,
    /// The optimizer.
    pub optimizer: O,
    /// The schedule.
    pub schedule: S,
    /// The logger.
    pub logger: L,
    /// Global-norm clipping threshold; `None` disables clipping.
    pub max_norm: Option<f64>,
    step: u64,
    collective: Option<(Arc<dyn Collective>, ReduceGrads<E, M>)>,
    scratch: Vec<E>,
    _e: PhantomData<E>,
}

impl<E: Elem, M: Model<E>, O: Optimizer<E>, S: Schedule, L: Logger> Trainer<E, M, O, S, L> {
    /// A trainer at step 0.
    pub fn new(model: M, optimizer: O, schedule: S, logger: L, max_norm: Option<f64>) -> Self {
        Self {
            model,
            optimizer,
            schedule,
            logger,
            max_norm,
            step: 0,
            collective: None,
            scratch: Vec::new(),
            _e: PhantomData,
        }
    }

    /// Trains data-parallel over the ranks of `c`: every step averages the loss and the
    /// gradients over them. A collective of one rank changes nothing.
    pub fn with_collective(mut self, c: Arc<dyn Collective>) -> Self
    where
        E: Reduce,
        M: DataParallel<E>,
    {
        self.collective = Some((c, all_reduce_grads::<E, M>));
        self
    }

    /// The next step to run (0-based).
    pub fn step_index(&self) -> u64 {
        self.step
    }

    /// Sets the next step, when resuming from a checkpoint.
    pub fn set_step_index(&mut self, step: u64) {
        self.step = step;
    }

    /// One training step on `batch`. On a non-finite loss or gradient norm nothing is updated
    /// and the error names the step.
    pub fn step(&mut self, batch: &Tokens<E>) -> Result<StepRecord> {
        let step = self.step;
        let mut loss = self.model.loss_and_grads(batch)?;
        if let Some((c, reduce_grads)) = self.collective.as_ref().filter(|(c, _)| c.size() > 1) {
            // Every rank sees the same mean loss, so all of them stop together on a bad one.
            let mut l = [loss];
            c.all_reduce_sum_f64(&mut l)?;
            loss = l[0] / c.size() as f64;
            if loss.is_finite() {
                reduce_grads(&mut self.model, c.as_ref(), &mut self.scratch)?;
            }
        }
        if !loss.is_finite() {
            return Err(Error::NonFinite { step, what: "loss", value: loss });
        }
        let grad_norm = num_traits::Float::sqrt(self.model.grad_sq_norm());
        if !grad_norm.is_finite() {
            return Err(Error::NonFinite { step, what: "gradient norm", value: grad_norm });
        }
        if let Some(max_norm) = self.max_norm {
            let f = clip_factor(grad_norm, max_norm);
            if f < 1.0 {
                self.model.scale_grads(f);
            }
        }
        let lr = self.schedule.lr(step);
        self.model.apply_optimizer(&mut self.optimizer, lr)?;
        self.step += 1;
        let rec = StepRecord { step, loss, lr, grad_norm };
        self.logger.log_step(&rec)?;
        Ok(rec)
    }
}
