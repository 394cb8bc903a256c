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

/// Flat device tensors named by their specs.
#[derive(Clone, Debug)]
pub struct ParamTable<E: Dtype, D: Device<E>> {
    specs: Vec<ParamSpec>,
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
        Ok(Self { specs, tensors })
    }

    /// The specs, in order.
    pub fn specs(&self) -> &[ParamSpec] {
        &self.specs
    }

    /// A cursor over the tensors from index `first` on, state-dict order: the layers take
    /// their tensors in that order and never spell a name.
    pub fn cursor(&self, first: usize) -> Cursor<'_, E, D> {
        Cursor { table: self, next: first }
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

/// The next tensor of a [`ParamTable`], as a vector or a matrix with tape `T` (an empty tape:
/// its gradient goes to its id). Taking a tensor of the other rank, or past the end, is a bug
/// in the layer's order and panics naming the tensor.
pub struct Cursor<'a, E: Dtype, D: Device<E>> {
    table: &'a ParamTable<E, D>,
    next: usize,
}

impl<E: Dtype + Elem, D: Device<E>> Cursor<'_, E, D> {
    fn take(&mut self, matrix: bool) -> (&Vector<E, D, NoneTape>, &ParamSpec) {
        let i = self.next;
        let spec = self.table.specs.get(i).expect("a layer took more tensors than the model has");
        assert_eq!(spec.shape.len() > 1, matrix, "{} taken as a {}", spec.name, ["vector", "matrix"][matrix as usize]);
        self.next += 1;
        (&self.table.tensors[i], spec)
    }

    /// The next tensor, 1-D.
    pub fn vector<T: Tape<E, D>>(&mut self) -> Vector<E, D, T> {
        self.take(false).0.retaped::<T>()
    }

    /// The next tensor as a `(rows, numel / rows)` matrix; a 3-D conv weight `(C, 1, K)` is
    /// the matrix `(C, K)`.
    pub fn matrix<T: Tape<E, D>>(&mut self) -> Mat<E, D, T> {
        let (t, spec) = self.take(true);
        let rows = spec.shape[0];
        let cols = spec.numel() / rows.max(1);
        t.retaped::<T>().reshape_like(&(rows, cols))
    }

    /// A `Linear`'s weight and bias.
    pub fn linear<T: Tape<E, D>>(&mut self) -> (Mat<E, D, T>, Vector<E, D, T>) {
        (self.matrix(), self.vector())
    }

    /// A `LayerNorm`'s weight and bias.
    pub fn norm<T: Tape<E, D>>(&mut self) -> (Vector<E, D, T>, Vector<E, D, T>) {
        (self.vector(), self.vector())
    }
}
