//! The parameters on the device: one flat tensor per [`ParamSpec`], in state-dict order, and
//! their host copies.
//!
//! Flat `(numel,)` tensors are reshaped where they are used (`reshape_like` of a contiguous
//! tensor keeps its id, so the gradient lands in the flat tensor's buffer). Gradients and
//! Adam moments use the same flat layout, so the optimizer is one elementwise pass per
//! tensor whatever the parameter's shape.

use crate::ops::{Mat, Vector};
use boldcast_core::model::NamedTensor;
use boldcast_core::{Elem, Error, ParamSpec};
use dfdx::prelude::*;
use std::collections::HashMap;

/// Flat device tensors named by their specs.
#[derive(Clone, Debug)]
pub struct ParamTable<E: Dtype, D: Device<E>> {
    specs: Vec<ParamSpec>,
    by_name: HashMap<String, usize>,
    /// The tensors, `(numel,)` each, in spec order.
    pub tensors: Vec<Vector<E, D, NoneTape>>,
}

impl<E: Dtype + Elem, D: Device<E>> ParamTable<E, D> {
    /// Uploads host tensors that [`boldcast_core::model::check_state`] accepted for `specs`.
    pub fn upload(dev: &D, specs: Vec<ParamSpec>, host: &[NamedTensor<E>]) -> Result<Self, Error> {
        boldcast_core::model::check_state(&specs, host)?;
        let tensors = specs
            .iter()
            .map(|s| {
                let t = host.iter().find(|t| t.name == s.name).expect("check_state found every spec");
                dev.tensor_from_vec(t.data.clone(), (s.numel(),))
            })
            .collect();
        let by_name = specs.iter().enumerate().map(|(i, s)| (s.name.clone(), i)).collect();
        Ok(Self { specs, by_name, tensors })
    }

    /// The specs, in order.
    pub fn specs(&self) -> &[ParamSpec] {
        &self.specs
    }

    /// The index of a parameter by name.
    pub fn index(&self, name: &str) -> usize {
        *self.by_name.get(name).unwrap_or_else(|| panic!("no parameter `{name}` in this model (a bug in the backend)"))
    }

    /// A parameter as a vector with tape `T` (an empty tape: its gradient goes to its id).
    pub fn vector<T: Tape<E, D>>(&self, name: &str) -> Vector<E, D, T> {
        self.tensors[self.index(name)].retaped::<T>()
    }

    /// A parameter as a `(rows, numel / rows)` matrix with tape `T`; a 3-D conv weight
    /// `(C, 1, K)` is the matrix `(C, K)`.
    pub fn matrix<T: Tape<E, D>>(&self, name: &str) -> Mat<E, D, T> {
        let i = self.index(name);
        let rows = self.specs[i].shape[0];
        let cols = self.specs[i].numel() / rows.max(1);
        self.tensors[i].retaped::<T>().reshape_like(&(rows, cols))
    }

    /// Host copies of flat device tensors, named and shaped by the specs.
    pub fn to_host(&self, tensors: &[Vector<E, D, NoneTape>]) -> Vec<NamedTensor<E>> {
        self.specs
            .iter()
            .zip(tensors)
            .map(|(s, t)| NamedTensor { name: s.name.clone(), shape: s.shape.clone(), data: t.as_vec() })
            .collect()
    }
}
