//! boldcast used as a library, by a crate outside the core: a backend of its own, checked by
//! the conformance suite and trained by `boldcast-train` (README, "Use as a library").
//!
//! The backend is [`Timed`], a profiling wrapper: it delegates every method of
//! [`Model`] and [`DataParallel`] to the model it wraps (here the CPU backend) and measures
//! the wall time and the number of calls of the expensive ones ([`Op`]). It changes no
//! number, so the conformance suite passes on it as on the CPU backend, a run trained with it
//! is bit for bit the run of the bare backend, and its counters say where a run spent its
//! time: the forward passes of validation, the forward and backward passes of training, the
//! optimizer updates.
//!
//! Why a wrapper rather than a backend from scratch: it is the smallest backend that is
//! really one (it implements both traits in full, the defaulted methods too, and passes the
//! suite), and the pattern is the one for any cross-cutting addition to an existing backend
//! (profiling, tracing, fault injection as in `train/tests/red_flags.rs`).
//!
//! [`training`] holds the few lines around [`boldcast_train::Run`] that the example binary
//! (`src/main.rs`) and the tests share: a quick configuration, the data with its subject
//! split, an observer that prints, and the resume point of a run directory.
#![deny(missing_docs)]

pub mod training;

use boldcast_core::error::Result;
use boldcast_core::model::NamedTensor;
use boldcast_core::optim::Moments;
use boldcast_core::{DataParallel, Elem, Embeddings, Forecasts, Model, ModelConfig, Optimizer, Tokens};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The methods [`Timed`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// [`Model::forward`] (validation runs it).
    Forward,
    /// [`Model::embed`].
    Embed,
    /// [`Model::loss`].
    Loss,
    /// [`Model::loss_and_grads`] and [`Model::loss_and_grads_offset`] (one per training step).
    LossAndGrads,
    /// [`Model::apply_optimizer`] (one per training step).
    ApplyOptimizer,
}

impl Op {
    /// Every operation, in the order of [`Timed`]'s table.
    pub const ALL: [Op; 5] = [Op::Forward, Op::Embed, Op::Loss, Op::LossAndGrads, Op::ApplyOptimizer];

    /// The method's name.
    pub fn name(self) -> &'static str {
        match self {
            Op::Forward => "forward",
            Op::Embed => "embed",
            Op::Loss => "loss",
            Op::LossAndGrads => "loss_and_grads",
            Op::ApplyOptimizer => "apply_optimizer",
        }
    }
}

/// The calls of one [`Op`] and the wall time they took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Calls (failed ones included).
    pub calls: u64,
    /// Total wall time.
    pub total: Duration,
}

impl OpStats {
    /// The mean time of a call (`None` before the first).
    pub fn mean(&self) -> Option<Duration> {
        (self.calls > 0).then(|| Duration::from_secs_f64(self.total.as_secs_f64() / self.calls as f64))
    }
}

/// One counter: atomics, so that `&self` methods can count and [`Timed`] stays `Sync` as the
/// model it wraps is.
#[derive(Debug, Default)]
struct Counter {
    calls: AtomicU64,
    nanos: AtomicU64,
}

/// A backend that measures another: every [`Model`] and [`DataParallel`] method goes to the
/// wrapped model unchanged; the calls of each [`Op`] are counted and timed.
///
/// `Run::run` takes its model by value; hand it `&mut timed` (a `&mut M` is a model wherever
/// `M` is) to read the counters and the weights after the run.
#[derive(Debug)]
pub struct Timed<M> {
    inner: M,
    counters: [Counter; Op::ALL.len()],
}

impl<M> Timed<M> {
    /// Wraps `inner`, with every counter at zero.
    pub fn new(inner: M) -> Self {
        Self { inner, counters: Default::default() }
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The wrapped model, unwrapped.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// The calls of `op` so far and their time.
    pub fn stats(&self, op: Op) -> OpStats {
        let c = &self.counters[op as usize];
        let total = Duration::from_nanos(c.nanos.load(Ordering::Relaxed));
        OpStats { calls: c.calls.load(Ordering::Relaxed), total }
    }

    /// Sets every counter back to zero.
    pub fn reset(&self) {
        for c in &self.counters {
            c.calls.store(0, Ordering::Relaxed);
            c.nanos.store(0, Ordering::Relaxed);
        }
    }

    /// The table of every operation called at least once (see [`Table`]).
    pub fn table(&self) -> Table {
        Table(Op::ALL.iter().map(|&op| (op, self.stats(op))).filter(|(_, s)| s.calls > 0).collect())
    }
}

/// Runs `f`, adding one call and its wall time to `counter`.
fn timed<T>(counter: &Counter, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    counter.calls.fetch_add(1, Ordering::Relaxed);
    counter.nanos.fetch_add(nanos, Ordering::Relaxed);
    out
}

/// [`Timed::table`]: one line per operation, `name calls total mean`.
#[derive(Clone, Debug, PartialEq)]
pub struct Table(pub Vec<(Op, OpStats)>);

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:<16} {:>6} {:>12} {:>12}", "op", "calls", "total ms", "mean ms")?;
        for (op, s) in &self.0 {
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let mean = s.mean().map_or(0.0, ms);
            writeln!(f, "{:<16} {:>6} {:>12.3} {:>12.3}", op.name(), s.calls, ms(s.total), mean)?;
        }
        Ok(())
    }
}

/// Every method delegated, the defaulted ones too (a backend holding its own optimizer state
/// must keep doing so through the wrapper); the expensive ones timed.
impl<E: Elem, M: Model<E>> Model<E> for Timed<M> {
    fn config(&self) -> &ModelConfig {
        self.inner.config()
    }
    fn forward(&self, tokens: &Tokens<E>) -> Result<Forecasts<E>> {
        timed(&self.counters[Op::Forward as usize], || self.inner.forward(tokens))
    }
    fn embed(&self, tokens: &Tokens<E>) -> Result<Embeddings<E>> {
        timed(&self.counters[Op::Embed as usize], || self.inner.embed(tokens))
    }
    fn loss(&self, tokens: &Tokens<E>) -> Result<f64> {
        timed(&self.counters[Op::Loss as usize], || self.inner.loss(tokens))
    }
    fn loss_and_grads(&mut self, tokens: &Tokens<E>) -> Result<f64> {
        timed(&self.counters[Op::LossAndGrads as usize], || self.inner.loss_and_grads(tokens))
    }
    fn loss_and_grads_offset(&mut self, tokens: &Tokens<E>, offset: &Forecasts<E>) -> Result<f64> {
        timed(&self.counters[Op::LossAndGrads as usize], || self.inner.loss_and_grads_offset(tokens, offset))
    }
    fn grad_sq_norm(&self) -> f64 {
        self.inner.grad_sq_norm()
    }
    fn scale_grads(&mut self, factor: f64) {
        self.inner.scale_grads(factor)
    }
    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<E>, lr: f64) -> Result<()> {
        timed(&self.counters[Op::ApplyOptimizer as usize], || self.inner.apply_optimizer(opt, lr))
    }
    fn state(&self) -> Vec<NamedTensor<E>> {
        self.inner.state()
    }
    fn grads(&self) -> Vec<NamedTensor<E>> {
        self.inner.grads()
    }
    fn load_state(&mut self, tensors: &[NamedTensor<E>]) -> Result<()> {
        self.inner.load_state(tensors)
    }
    fn optimizer_state(&self) -> Option<(u64, Vec<Moments<E>>)> {
        self.inner.optimizer_state()
    }
    fn restore_optimizer_state(&mut self, t: u64, moments: &[Moments<E>]) -> Result<()> {
        self.inner.restore_optimizer_state(t, moments)
    }
    fn decayed_elements(&self) -> Option<u64> {
        self.inner.decayed_elements()
    }
}

/// Both methods delegated (the wrapped backend's flat copy stays the one used).
impl<E: Elem, M: DataParallel<E>> DataParallel<E> for Timed<M> {
    fn grads_to_flat(&self, flat: &mut Vec<E>) {
        self.inner.grads_to_flat(flat)
    }
    fn grads_from_flat(&mut self, flat: &[E]) -> Result<()> {
        self.inner.grads_from_flat(flat)
    }
}
