//! Using a traced tensor more than once.
//!
//! A dfdx tensor that carries an [`OwnedTape`](dfdx::tensor::OwnedTape) cannot be cloned.
//! [`dup`] hands out a second handle with the same id and an empty tape: operations on it
//! add their gradient contributions to the same id, and since the tape runs backward ops in
//! reverse creation order across merged tapes, the tensor's own backward op (kept on the
//! first handle) runs after all of them. Both handles must end up in the loss's tape, which
//! holds as long as each is used in the computation. [`absorb`] merges a tape that was split
//! off (to reuse a tensor many times) back into a later result.

use dfdx::shapes::Shape;
use dfdx::tensor::{PutTape, SplitTape, Storage, Tape, Tensor};

/// Two handles on one tensor, see [`dup`].
pub type Twin<S, E, D, T> = (Tensor<S, E, D, T>, Tensor<S, E, D, T>);

/// Two handles on `x`: the original (with its tape) and a copy with an empty tape.
pub fn dup<S: Shape, E: Clone, D: Storage<E>, T: Tape<E, D>>(x: Tensor<S, E, D, T>) -> Twin<S, E, D, T> {
    let y = x.retaped::<T>();
    (x, y)
}

/// `x` with `tape` merged into its own tape.
pub fn absorb<S: Shape, E: Clone, D: Storage<E>, T: Tape<E, D>>(x: Tensor<S, E, D, T>, tape: T) -> Tensor<S, E, D, T> {
    let (x, own) = x.split_tape();
    x.put_tape(own.merge(tape))
}
