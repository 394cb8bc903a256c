//! [`Dist`]: the ranks of a run, shared by the trainer, validation and the writers. The caller
//! builds the [`Collective`] (a launcher's MPI ranks, threads, or [`SingleProcess`]); only
//! rank 0 ([`Dist::is_root`]) writes files and reports to observers.

use crate::error::TrainError;
use boldcast_core::collective::{check_agreement, fingerprint};
use boldcast_core::{Collective, Model, SingleProcess};
use std::sync::Arc;

/// The ranks of this run.
#[derive(Clone)]
pub struct Dist(pub Arc<dyn Collective>);

impl Default for Dist {
    fn default() -> Self {
        Dist(Arc::new(SingleProcess))
    }
}

impl std::fmt::Debug for Dist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dist({}, rank {} of {})", self.0.name(), self.rank(), self.size())
    }
}

impl Dist {
    /// This rank.
    pub fn rank(&self) -> usize {
        self.0.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.0.size()
    }

    /// Rank 0: the one that writes and reports.
    pub fn is_root(&self) -> bool {
        self.0.rank() == 0
    }

    /// The collective.
    pub fn collective(&self) -> &dyn Collective {
        &*self.0
    }

    /// Checks that every rank holds the same parameters (`what` names the moment, e.g. "the
    /// parameters at the start"): a different build, seed or checkpoint on one rank is an
    /// error here rather than a silently diverging run.
    pub fn check_same_params<M: Model<f32>>(&self, model: &M, what: &str) -> Result<(), TrainError> {
        if self.size() <= 1 {
            return Ok(());
        }
        let fp = fingerprint(model.state().into_iter().flat_map(|t| t.data));
        Ok(check_agreement(self.collective(), what, fp)?)
    }
}
