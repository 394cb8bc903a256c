//! One parameter store: every tensor of a model in one flat buffer, laid out by
//! [`ModelConfig::param_specs`](crate::ModelConfig::param_specs), and the views a backend's
//! layers read it through.
//!
//! The flat layout is the one [`crate::DataParallel`] exchanges (state-dict order, each tensor
//! row-major), so a backend that keeps its parameters and gradients in a [`ParamStore`] hands
//! the collective its gradients without a copy. A layer sees its tensors as a parameter group
//! ([`param_group!`](crate::param_group)) of slices, taken from the store in state-dict order.
//! Names are built once, from a [`Prefix`].
//!
//! ```
//! use boldcast_core::params::ParamStore;
//! use boldcast_core::ModelConfig;
//!
//! let cfg = ModelConfig::builder().d_model(8).n_layers(1).build().unwrap();
//! let mut store = ParamStore::<f32>::zeros(cfg.param_specs());
//! store.initialize(7).unwrap();
//! assert_eq!(store.flat().len(), cfg.n_params());
//! let head = store.get("head.bias").unwrap();
//! assert_eq!(head.len(), cfg.n_horizons() * cfg.d_in);
//! ```

use crate::model::{check_state, NamedTensor};
use crate::{Elem, Error, ParamSpec};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Display;

/// A dotted name prefix, extended one segment at a time (as candle's `VarBuilder::pp`), so a
/// layer's tensor names are spelled once: `Prefix::root().pp("layers").pp(0).name("D")` is
/// `layers.0.D`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prefix(String);

impl Prefix {
    /// The empty prefix.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// This prefix followed by `segment`.
    pub fn pp(&self, segment: impl Display) -> Self {
        Self(self.name(segment))
    }

    /// The full name of `leaf` under this prefix.
    pub fn name(&self, leaf: impl Display) -> String {
        if self.0.is_empty() {
            format!("{leaf}")
        } else {
            format!("{}.{leaf}", self.0)
        }
    }

    /// The prefix as text, with no trailing dot.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Every parameter tensor (or every gradient) of a model in one buffer, each tensor at the
/// offset its [`ParamSpec`] gives. The buffer is a `Vec` unless a backend keeps it in memory of
/// its own (`D`, any storage that lends its elements as a slice: a device buffer).
#[derive(Clone, Debug, PartialEq)]
pub struct ParamStore<E, D = Vec<E>> {
    specs: Vec<ParamSpec>,
    /// `offsets[i]..offsets[i + 1]` is tensor `i`; one more entry than `specs`.
    offsets: Vec<usize>,
    data: D,
    _e: core::marker::PhantomData<E>,
}

/// The offsets of `specs`' tensors in one buffer, and its length.
fn offsets_of(specs: &[ParamSpec]) -> Vec<usize> {
    let mut offsets = Vec::with_capacity(specs.len() + 1);
    offsets.push(0);
    for s in specs {
        offsets.push(offsets[offsets.len() - 1] + s.numel());
    }
    offsets
}

impl<E: Elem> ParamStore<E> {
    /// A store for `specs` with every entry zero.
    pub fn zeros(specs: Vec<ParamSpec>) -> Self {
        let offsets = offsets_of(&specs);
        let len = offsets[specs.len()];
        Self { specs, offsets, data: alloc::vec![E::of(0.0); len], _e: core::marker::PhantomData }
    }
}

impl<E: Elem, D: AsRef<[E]> + AsMut<[E]>> ParamStore<E, D> {
    /// The number of entries a store of `specs` holds: the length its buffer must have.
    pub fn len_of(specs: &[ParamSpec]) -> usize {
        specs.iter().map(ParamSpec::numel).sum()
    }

    /// A store for `specs` over `data`, which must hold [`ParamStore::len_of`] entries (else an
    /// [`Error::Shape`]); its values are kept.
    pub fn over(specs: Vec<ParamSpec>, data: D) -> Result<Self, Error> {
        let offsets = offsets_of(&specs);
        let len = offsets[specs.len()];
        if data.as_ref().len() != len {
            return Err(Error::shape("parameter store (entries)", len, data.as_ref().len()));
        }
        Ok(Self { specs, offsets, data, _e: core::marker::PhantomData })
    }

    /// Draws every tensor from `seed` ([`crate::init::initialize`]): one seed, one model, on
    /// every backend.
    pub fn initialize(&mut self, seed: u64) -> Result<(), Error> {
        let specs = core::mem::take(&mut self.specs);
        let result = crate::init::initialize(&specs, self.tensors_mut().collect(), seed);
        self.specs = specs;
        result
    }

    /// The names and shapes, state-dict order.
    pub fn specs(&self) -> &[ParamSpec] {
        &self.specs
    }

    /// Every entry, state-dict order: the layout of [`crate::DataParallel`].
    pub fn flat(&self) -> &[E] {
        self.data.as_ref()
    }

    /// Every entry, mutable.
    pub fn flat_mut(&mut self) -> &mut [E] {
        self.data.as_mut()
    }

    /// The tensor named `name`, if the store has one.
    pub fn get(&self, name: &str) -> Option<&[E]> {
        let i = self.specs.iter().position(|s| s.name == name)?;
        Some(&self.flat()[self.offsets[i]..self.offsets[i + 1]])
    }

    /// The tensors in state-dict order.
    pub fn tensors(&self) -> impl Iterator<Item = &[E]> + '_ {
        let data = self.data.as_ref();
        self.offsets.windows(2).map(move |w| &data[w[0]..w[1]])
    }

    /// The tensors in state-dict order, mutable.
    pub fn tensors_mut(&mut self) -> impl Iterator<Item = &mut [E]> + '_ {
        let mut rest = self.data.as_mut();
        self.offsets.windows(2).map(move |w| {
            let (head, tail) = core::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            rest = tail;
            head
        })
    }

    /// Every entry set to zero (a gradient accumulator before a step).
    pub fn zero(&mut self) {
        self.data.as_mut().fill(E::of(0.0));
    }

    /// Copies of the tensors with their names and shapes ([`crate::Model::state`]).
    pub fn named(&self) -> Vec<NamedTensor<E>> {
        self.specs
            .iter()
            .zip(self.tensors())
            .map(|(s, t)| NamedTensor { name: s.name.clone(), shape: s.shape.clone(), data: t.to_vec() })
            .collect()
    }

    /// Every tensor from `tensors`, by name ([`crate::Model::load_state`]): a missing, extra,
    /// repeated or misshapen tensor is an [`Error::Param`] and changes nothing.
    pub fn load(&mut self, tensors: &[NamedTensor<E>]) -> Result<(), Error> {
        check_state(&self.specs, tensors)?;
        for (i, s) in self.specs.iter().enumerate() {
            let src = tensors.iter().find(|t| t.name == s.name).expect("check_state found every name");
            self.data.as_mut()[self.offsets[i]..self.offsets[i + 1]].copy_from_slice(&src.data);
        }
        Ok(())
    }

    /// Overwrites every entry from `flat`, laid out as [`ParamStore::flat`]; a wrong length is
    /// an [`Error::Shape`] naming `what` and changes nothing.
    pub fn copy_from_flat(&mut self, what: &str, flat: &[E]) -> Result<(), Error> {
        let data = self.data.as_mut();
        if flat.len() != data.len() {
            return Err(Error::shape(what, data.len(), flat.len()));
        }
        data.copy_from_slice(flat);
        Ok(())
    }
}

/// Declares a parameter group: a struct with one field of storage `S` per tensor, listed in
/// state-dict order, so that the same struct holds owned tensors (`Vec<E>`), a view of a
/// [`ParamStore`] (`&[E]`) or gradients to write (`&mut [E]`).
///
/// It gets `take` (the next tensors of a state-dict-ordered iterator, in field order),
/// `view`, `view_mut` and `into_tensors` (the fields in that order); with `names LIST` (one
/// of the core's name lists, such as [`crate::MAMBA1_PARAMS`]), also `named`, each tensor with
/// its name.
#[macro_export]
macro_rules! param_group {
    ($(#[$meta:meta])* $vis:vis struct $name:ident names $names:path { $($(#[$fmeta:meta])* $field:ident),+ $(,)? }) => {
        $crate::param_group! { $(#[$meta])* $vis struct $name { $($(#[$fmeta])* $field),+ } }

        impl<S> $name<S> {
            /// `(name after the group's prefix, tensor)` per field, the names from the core's
            /// list, state-dict order.
            pub fn named(self) -> [(&'static str, S); $crate::__count!($($field)+)] {
                let mut names = $names.into_iter();
                self.into_tensors().map(|t| (names.next().expect("one name per tensor"), t))
            }
        }
    };
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($(#[$fmeta:meta])* $field:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        $vis struct $name<S> {
            $($(#[$fmeta])* pub $field: S,)+
        }

        impl<S> $name<S> {
            /// The next tensors of `tensors`, one per field in declaration order (state-dict
            /// order). Panics when `tensors` runs out: a layout that disagrees with the specs.
            pub fn take(tensors: &mut impl Iterator<Item = S>) -> Self {
                Self {
                    $($field: tensors.next().expect(concat!(stringify!($name), ": no tensor left for `", stringify!($field), "`")),)+
                }
            }

            /// The fields in state-dict order.
            pub fn into_tensors(self) -> [S; $crate::__count!($($field)+)] {
                [$(self.$field),+]
            }

            /// Borrowed slices of every field.
            pub fn view<E>(&self) -> $name<&[E]>
            where
                S: AsRef<[E]>,
            {
                $name { $($field: self.$field.as_ref(),)+ }
            }

            /// Mutably borrowed slices of every field.
            pub fn view_mut<E>(&mut self) -> $name<&mut [E]>
            where
                S: AsMut<[E]>,
            {
                $name { $($field: self.$field.as_mut(),)+ }
            }
        }
    };
}

param_group! {
    /// A weight and its bias: a `Linear`'s or a `LayerNorm`'s two tensors.
    pub struct WeightBias {
        /// `weight`.
        w,
        /// `bias`.
        b,
    }
}

param_group! {
    /// A layer's spatial attention (`layers.{i}.knn.*`), PyTorch layouts, in state-dict order
    /// ([`crate::KNN_PARAMS`]): `Linear` weights `(out, in) = (M, M)`.
    pub struct KnnParams names crate::KNN_PARAMS {
        /// `norm.weight` (M).
        norm_w,
        /// `norm.bias` (M).
        norm_b,
        /// `q.weight` (M, M).
        q_w,
        /// `q.bias` (M).
        q_b,
        /// `kproj.weight` (M, M).
        k_w,
        /// `kproj.bias` (M).
        k_b,
        /// `v.weight` (M, M).
        v_w,
        /// `v.bias` (M).
        v_b,
        /// `out.weight` (M, M).
        out_w,
        /// `out.bias` (M).
        out_b,
    }
}

impl<E: Elem> KnnParams<Vec<E>> {
    /// All zeros for width `m` (a gradient to accumulate into).
    pub fn zeros(m: usize) -> Self {
        let v = || alloc::vec![E::of(0.0); m];
        let w = || alloc::vec![E::of(0.0); m * m];
        let (norm_w, norm_b) = (v(), v());
        Self { norm_w, norm_b, q_w: w(), q_b: v(), k_w: w(), k_b: v(), v_w: w(), v_b: v(), out_w: w(), out_b: v() }
    }
}

impl<S> KnnParams<S> {
    /// The q, k and v projections stacked into one `(3M, M)` weight and `(3M)` bias, so that
    /// one product gives every row's `[q | k | v]`.
    pub fn stacked<E: Copy>(&self) -> (Vec<E>, Vec<E>)
    where
        S: AsRef<[E]>,
    {
        let [q_w, k_w, v_w, q_b, k_b, v_b] = [&self.q_w, &self.k_w, &self.v_w, &self.q_b, &self.k_b, &self.v_b];
        ([q_w.as_ref(), k_w.as_ref(), v_w.as_ref()].concat(), [q_b.as_ref(), k_b.as_ref(), v_b.as_ref()].concat())
    }
}

/// A whole model's tensors as groups, `L` a backend's layer: `embed_proj`, the layers,
/// `final_norm` and `head`, in state-dict order.
#[derive(Debug)]
pub struct ModelParams<S, L> {
    /// `embed_proj.{weight,bias}`.
    pub embed: WeightBias<S>,
    /// `layers.{i}.*`.
    pub layers: Vec<L>,
    /// `final_norm.{weight,bias}`.
    pub final_norm: WeightBias<S>,
    /// `head.{weight,bias}`.
    pub head: WeightBias<S>,
}

impl<S, L> ModelParams<S, L> {
    /// The groups of `tensors`, given in state-dict order: `n_layers` layers, each taken by
    /// `layer` from the tensors that follow.
    pub fn take<I: Iterator<Item = S>>(n_layers: usize, mut tensors: I, mut layer: impl FnMut(&mut I) -> L) -> Self {
        let it = &mut tensors;
        let embed = WeightBias::take(it);
        let layers = (0..n_layers).map(|_| layer(it)).collect();
        let (final_norm, head) = (WeightBias::take(it), WeightBias::take(it));
        Self { embed, layers, final_norm, head }
    }
}

/// The number of identifiers given, as a constant expression ([`param_group!`](crate::param_group)).
#[doc(hidden)]
#[macro_export]
macro_rules! __count {
    () => { 0 };
    ($first:ident $($rest:ident)*) => { 1 + $crate::__count!($($rest)*) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelConfig;
    use alloc::vec;

    param_group! {
        /// Two tensors, for the macro's test.
        struct Pair { first, second }
    }

    const NORM: [&str; 2] = ["weight", "bias"];

    param_group! {
        /// Two named tensors.
        struct Norm names NORM { w, b }
    }

    #[test]
    fn named_groups_pair_tensors_with_the_list() {
        let n = Norm::take(&mut [vec![1.0f32], vec![0.0]].into_iter());
        assert_eq!(n.view().named(), [("weight", &[1.0][..]), ("bias", &[0.0][..])]);
        let mut n = n;
        n.view_mut().named()[1].1[0] = 2.0;
        assert_eq!(n.b, [2.0]);
    }

    #[test]
    fn prefixes_join_with_dots() {
        let layer = Prefix::root().pp("layers").pp(3);
        assert_eq!(layer.name("knn.q.weight"), "layers.3.knn.q.weight");
        assert_eq!(Prefix::root().name("head.bias"), "head.bias");
        assert_eq!(layer.as_str(), "layers.3");
    }

    #[test]
    fn tensors_sit_at_their_spec_offsets() {
        let cfg = ModelConfig::builder().d_model(8).n_layers(2).build().unwrap();
        let mut store = ParamStore::<f64>::zeros(cfg.param_specs());
        store.initialize(5).unwrap();
        let named = store.named();
        assert_eq!(named.len(), cfg.param_specs().len());
        let flat: Vec<f64> = named.iter().flat_map(|t| t.data.iter().copied()).collect();
        assert_eq!(flat, store.flat());
        for (t, s) in named.iter().zip(store.tensors()) {
            assert_eq!(t.data, s);
            assert_eq!(store.get(&t.name).unwrap(), s);
        }
        // The seeded draw is the one every backend makes.
        let mut outs: Vec<Vec<f64>> = cfg.param_specs().iter().map(|s| vec![0.0; s.numel()]).collect();
        crate::init::initialize(&cfg.param_specs(), outs.iter_mut().map(|v| v.as_mut_slice()).collect(), 5).unwrap();
        assert_eq!(outs.concat(), store.flat());
    }

    #[test]
    fn load_and_flat_copies_check_before_writing() {
        let cfg = ModelConfig::builder().d_model(8).n_layers(1).build().unwrap();
        let mut a = ParamStore::<f32>::zeros(cfg.param_specs());
        a.initialize(1).unwrap();
        let mut b = ParamStore::<f32>::zeros(cfg.param_specs());
        b.load(&a.named()).unwrap();
        assert_eq!(a, b);
        let mut short = a.named();
        short.pop();
        let before = b.clone();
        assert!(matches!(b.load(&short), Err(Error::Param { .. })));
        assert!(matches!(b.copy_from_flat("gradients (flat)", &[1.0; 3]), Err(Error::Shape { .. })));
        assert_eq!(b, before);
        let ones = vec![1.0; b.flat().len()];
        b.copy_from_flat("gradients (flat)", &ones).unwrap();
        assert!(b.tensors().all(|t| t.iter().all(|&v| v == 1.0)));
        b.zero();
        assert!(b.flat().iter().all(|&v| v == 0.0));
    }

    #[test]
    fn groups_take_views_in_order() {
        let mut store = ParamStore::<f32>::zeros(vec![
            ParamSpec { name: "a".into(), shape: vec![2] },
            ParamSpec { name: "b".into(), shape: vec![3] },
        ]);
        {
            let g = Pair::take(&mut store.tensors_mut());
            g.first.fill(1.0);
            g.second.fill(2.0);
        }
        assert_eq!(store.flat(), [1.0, 1.0, 2.0, 2.0, 2.0]);
        let mut owned = Pair { first: vec![1.0f32], second: vec![2.0, 3.0] };
        owned.view_mut().second[1] = 4.0;
        assert_eq!(owned.view().into_tensors(), [&[1.0][..], &[2.0, 4.0]]);
        let g = Pair::take(&mut store.tensors());
        assert_eq!(g.second.len(), 3);
    }

    #[test]
    #[should_panic(expected = "no tensor left for `second`")]
    fn a_short_layout_names_the_field() {
        let one = [vec![1.0f32]];
        let _ = Pair::take(&mut one.iter().cloned());
    }
}
