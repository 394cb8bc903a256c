//! [`DeviceTensor`]: a dfdx device buffer with one of the core's typed shapes, implementing
//! [`boldcast_core::Tensor`] so data can move between the host and this backend's devices
//! with the shape (and its compile-time dims) kept.

use crate::ops::Vector;
use boldcast_core::{Elem, Error, HostTensor, Shape};
use dfdx::prelude::{Device, Dtype, NoneTape};

/// A row-major device buffer of shape `S` on device `D`.
#[derive(Clone, Debug)]
pub struct DeviceTensor<S: Shape, E: Dtype, D: Device<E>> {
    shape: S,
    data: Vector<E, D, NoneTape>,
}

impl<S: Shape, E: Dtype, D: Device<E>> DeviceTensor<S, E, D> {
    /// The flat `(numel,)` dfdx tensor, row-major in the order of the shape's axes.
    pub fn flat(&self) -> &Vector<E, D, NoneTape> {
        &self.data
    }
}

impl<S: Shape, E: Dtype + Elem, D: Device<E>> boldcast_core::Tensor for DeviceTensor<S, E, D> {
    type Elem = E;
    type Shape = S;
    type Device = D;

    fn shape(&self) -> S {
        self.shape
    }

    fn from_host(device: &D, host: &HostTensor<S, E>) -> Result<Self, Error> {
        let n = host.data().len();
        let data = device
            .try_tensor_from_vec(host.data().to_vec(), (n,))
            .map_err(|e| Error::Backend(format!("copying {n} values to the device: {e:?}")))?;
        Ok(Self { shape: host.shape(), data })
    }

    fn to_host(&self) -> Result<HostTensor<S, E>, Error> {
        HostTensor::new(self.shape, self.data.as_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_core::{Const, Tensor, TokenShape, Tokens};

    #[test]
    fn host_round_trip_is_exact() {
        let dev = crate::cpu_device();
        let shape = TokenShape::new(2usize, 3usize, 4usize, Const::<2>);
        let host: Tokens<f32, usize, usize, usize, Const<2>> =
            HostTensor::new(shape, (0..48).map(|i| i as f32 * 0.1 - 1.7).collect()).unwrap();
        let d = DeviceTensor::from_host(&dev, &host).unwrap();
        assert_eq!(d.shape(), shape);
        assert_eq!(d.to_host().unwrap(), host);
        assert_eq!(dfdx::shapes::HasShape::shape(d.flat()).0, 48);
    }
}
