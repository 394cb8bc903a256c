//! Reading the golden files' safetensors: float tensors (`F32`/`F64`, converted to any
//! [`Elem`]) and the `I64` adjacency, by name, with errors that name the file and the tensor.
//!
//! Only reading: the golden files are written by the PyTorch generator, never by Rust. The
//! training checkpoints (writing, atomic replacement, optimizer state) live with the training
//! code; this module exists so that the test kit needs nothing of it.

use boldcast_core::model::NamedTensor;
use boldcast_core::Elem;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong reading a safetensors file. Every variant names the file.
#[derive(Debug)]
pub enum StError {
    /// The file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid safetensors (bad header, offsets or sizes).
    Format {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// A tensor asked for is not in the file.
    MissingTensor {
        /// The file.
        path: PathBuf,
        /// The tensor.
        name: String,
        /// How many tensors the file holds, for the message.
        available: usize,
    },
    /// A tensor has a dtype this reader does not convert.
    Dtype {
        /// The file.
        path: PathBuf,
        /// The tensor.
        name: String,
        /// The dtype in the file, as safetensors spells it (`"BF16"`, `"I64"`, ...).
        found: String,
        /// What was accepted, e.g. `"F32 or F64"`.
        expected: &'static str,
    },
}

impl fmt::Display for StError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StError::Io { path, source } => write!(f, "reading {}: {source}", path.display()),
            StError::Format { path, reason } => write!(f, "{}: not a valid safetensors file: {reason}", path.display()),
            StError::MissingTensor { path, name, available } => {
                write!(f, "{}: no tensor named `{name}` (the file holds {available} tensors)", path.display())
            }
            StError::Dtype { path, name, found, expected } => {
                write!(f, "{}: tensor `{name}` has dtype {found}, expected {expected}", path.display())
            }
        }
    }
}

impl std::error::Error for StError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A safetensors file read into memory, to take tensors out of it by name.
#[derive(Debug, Clone)]
pub struct StFile {
    path: PathBuf,
    bytes: Vec<u8>,
}

impl StFile {
    /// Reads and validates `path` (header, offsets, sizes).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StError> {
        let path = path.as_ref().to_path_buf();
        let bytes = std::fs::read(&path).map_err(|source| StError::Io { path: path.clone(), source })?;
        let f = StFile { path, bytes };
        f.parse()?;
        Ok(f)
    }

    fn parse(&self) -> Result<SafeTensors<'_>, StError> {
        SafeTensors::deserialize(&self.bytes)
            .map_err(|e| StError::Format { path: self.path.clone(), reason: e.to_string() })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tensor names in the order of their data in the file.
    pub fn names(&self) -> Vec<String> {
        match SafeTensors::read_metadata(&self.bytes) {
            Ok((_, m)) => m.offset_keys(),
            Err(_) => Vec::new(),
        }
    }

    fn view(&self, name: &str) -> Result<TensorView<'_>, StError> {
        let st = self.parse()?;
        let available = st.len();
        st.tensor(name).map_err(|_| StError::MissingTensor { path: self.path.clone(), name: name.into(), available })
    }

    /// One floating-point tensor, converted to `E`. `F32` and `F64` are accepted; any other
    /// dtype is a [`StError::Dtype`] naming the tensor.
    pub fn tensor<E: Elem>(&self, name: &str) -> Result<NamedTensor<E>, StError> {
        let v = self.view(name)?;
        let data: Vec<E> = match v.dtype() {
            Dtype::F32 => {
                v.data().chunks_exact(4).map(|c| E::of(f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)).collect()
            }
            Dtype::F64 => v
                .data()
                .chunks_exact(8)
                .map(|c| E::of(f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])))
                .collect(),
            other => {
                return Err(StError::Dtype {
                    path: self.path.clone(),
                    name: name.into(),
                    found: other.to_string(),
                    expected: "F32 or F64",
                })
            }
        };
        Ok(NamedTensor { name: name.into(), shape: v.shape().to_vec(), data })
    }

    /// One `I64` tensor: its shape and values. Any other dtype is a [`StError::Dtype`].
    pub fn i64(&self, name: &str) -> Result<(Vec<usize>, Vec<i64>), StError> {
        let v = self.view(name)?;
        if v.dtype() != Dtype::I64 {
            return Err(StError::Dtype {
                path: self.path.clone(),
                name: name.into(),
                found: v.dtype().to_string(),
                expected: "I64",
            });
        }
        let data = v
            .data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        Ok((v.shape().to_vec(), data))
    }

    /// Every tensor, converted to `E`, in file order; a non-float tensor is an error naming it.
    pub fn all<E: Elem>(&self) -> Result<Vec<NamedTensor<E>>, StError> {
        self.names().iter().map(|n| self.tensor(n)).collect()
    }
}

/// Reorders tensors into the order of `specs` (state-dict order), checking names and shapes
/// with [`boldcast_core::model::check_state`] first.
pub fn in_spec_order<E>(
    specs: &[boldcast_core::ParamSpec],
    mut tensors: Vec<NamedTensor<E>>,
) -> boldcast_core::error::Result<Vec<NamedTensor<E>>> {
    boldcast_core::model::check_state(specs, &tensors)?;
    let mut out = Vec::with_capacity(specs.len());
    for s in specs {
        let i = tensors.iter().position(|t| t.name == s.name).expect("checked by check_state");
        out.push(tensors.swap_remove(i));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
        let views: Vec<(String, TensorView<'_>)> =
            tensors.iter().map(|(n, d, s, b)| (n.to_string(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
        safetensors::serialize_to_file(views, None, path).unwrap();
    }

    #[test]
    fn reads_floats_as_any_elem_and_i64_and_names_file_and_tensor_in_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.safetensors");
        let f32s: Vec<u8> = [1.5f32, -2.25].iter().flat_map(|x| x.to_le_bytes()).collect();
        let f64s: Vec<u8> = [0.1f64].iter().flat_map(|x| x.to_le_bytes()).collect();
        let i64s: Vec<u8> = [0i64, 2, 1, 0].iter().flat_map(|x| x.to_le_bytes()).collect();
        write(
            &path,
            &[
                ("a", Dtype::F32, vec![2], f32s),
                ("b", Dtype::F64, vec![1, 1], f64s),
                ("adj", Dtype::I64, vec![2, 2], i64s),
            ],
        );
        let f = StFile::open(&path).unwrap();
        assert_eq!(f.tensor::<f64>("a").unwrap().data, vec![1.5, -2.25]);
        assert_eq!(f.tensor::<f32>("b").unwrap().data, vec![0.1f32]);
        assert_eq!(f.tensor::<f64>("b").unwrap().shape, vec![1, 1]);
        assert_eq!(f.i64("adj").unwrap(), (vec![2, 2], vec![0, 2, 1, 0]));
        let e = f.tensor::<f32>("adj").unwrap_err().to_string();
        assert!(e.contains("x.safetensors") && e.contains("`adj`") && e.contains("I64"), "{e}");
        let e = f.i64("a").unwrap_err().to_string();
        assert!(e.contains("`a`") && e.contains("F32"), "{e}");
        let e = f.tensor::<f32>("nope").unwrap_err().to_string();
        assert!(e.contains("`nope`") && e.contains("3 tensors"), "{e}");
        assert!(f.all::<f32>().is_err(), "the I64 tensor is not a float");
        std::fs::write(&path, b"not safetensors").unwrap();
        assert!(StFile::open(&path).unwrap_err().to_string().contains("not a valid safetensors file"));
        assert!(StFile::open(dir.path().join("absent")).unwrap_err().to_string().contains("absent"));
    }
}
