//! Safetensors checkpoints, the one parameter format shared by every backend and by PyTorch.
//!
//! Tensors carry the names and PyTorch shapes of MODEL.md ("Parameter names and shapes"), so a
//! state dict written by `safetensors.torch.save_file` loads unchanged and a checkpoint written
//! here loads in PyTorch with `load_state_dict`.
//!
//! - [`save_safetensors`] writes `f32` tensors (or `f64` when the element type is `f64`)
//!   atomically ([`crate::fsutil::replace_with`]): the bytes go to a temporary sibling, which
//!   is fsynced and renamed over `path`, so a reader never sees a half-written file and a crash
//!   leaves the old file in place.
//! - [`load_safetensors`] reads every floating-point tensor, accepting `f32` and `f64` in the
//!   file whatever the element type asked for (values are converted; `f64 -> f32` rounds to
//!   nearest).
//! - [`load_i64`] reads one integer tensor (the golden files' `adjacency`).
//! - [`SafetensorsFile`] keeps a file in memory to pull several tensors out of it by name.
//!
//! Every error names the file, and the tensor when one is involved ([`CheckpointError`]).

use boldcast_core::model::NamedTensor;
use boldcast_core::Elem;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What went wrong reading or writing a safetensors file. Every variant names the file.
#[derive(Debug)]
pub enum CheckpointError {
    /// The file could not be read, written, synced or renamed.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done, e.g. `"reading"`.
        action: &'static str,
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
    /// The tensors do not hash to what was recorded for them: the file was altered or replaced.
    Altered {
        /// The file.
        path: PathBuf,
        /// The hash of its tensors now.
        got: String,
        /// The recorded hash.
        want: String,
        /// Where the hash was recorded, e.g. `"tensors_hash"` or `"state.json"`.
        key: &'static str,
    },
    /// A tensor to save is inconsistent (values do not fill the shape, or a name repeats), or
    /// a loaded integer does not fit the target type.
    Tensor {
        /// The file.
        path: PathBuf,
        /// The tensor.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::Io { path, action, source } => write!(f, "{action} {}: {source}", path.display()),
            CheckpointError::Format { path, reason } => {
                write!(f, "{}: not a valid safetensors file: {reason}", path.display())
            }
            CheckpointError::MissingTensor { path, name, available } => {
                write!(f, "{}: no tensor named `{name}` (the file holds {available} tensors)", path.display())
            }
            CheckpointError::Dtype { path, name, found, expected } => {
                write!(f, "{}: tensor `{name}` has dtype {found}, expected {expected}", path.display())
            }
            CheckpointError::Altered { path, got, want, key } => write!(
                f,
                "{}: its tensors hash to {got}, but {key} recorded {want}: the file was altered or replaced",
                path.display()
            ),
            CheckpointError::Tensor { path, name, reason } => {
                write!(f, "{}: tensor `{name}`: {reason}", path.display())
            }
        }
    }
}

impl std::error::Error for CheckpointError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckpointError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<CheckpointError> for boldcast_core::Error {
    fn from(e: CheckpointError) -> Self {
        boldcast_core::Error::Backend(e.to_string())
    }
}

fn io(path: &Path, action: &'static str) -> impl FnOnce(std::io::Error) -> CheckpointError {
    let path = path.to_path_buf();
    move |source| CheckpointError::Io { path, action, source }
}

/// The safetensors dtype of an element type.
fn dtype_of<E: Elem>() -> Dtype {
    if E::NAME == "f64" {
        Dtype::F64
    } else {
        Dtype::F32
    }
}

/// `file` (a serialized safetensors file) with its JSON header's keys sorted at every level.
/// The metadata reaches `safetensors::serialize` as a `HashMap`, whose order changes from one
/// map to the next: sorted, equal tensors and metadata give equal bytes. The header is padded
/// with spaces to a multiple of 8 bytes, as safetensors writes it.
fn canonical_header(file: Vec<u8>) -> Result<Vec<u8>, safetensors::SafeTensorError> {
    fn sorted(v: serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => {
                let entries: std::collections::BTreeMap<String, serde_json::Value> =
                    m.into_iter().map(|(k, v)| (k, sorted(v))).collect();
                serde_json::Value::Object(entries.into_iter().collect())
            }
            other => other,
        }
    }
    let bad = || safetensors::SafeTensorError::InvalidHeaderStart;
    let n = u64::from_le_bytes(file.get(..8).ok_or_else(bad)?.try_into().map_err(|_| bad())?) as usize;
    let header = file.get(8..8 + n).ok_or_else(bad)?;
    let value: serde_json::Value =
        serde_json::from_slice(header).map_err(safetensors::SafeTensorError::InvalidHeaderDeserialization)?;
    let mut text =
        serde_json::to_string(&sorted(value)).map_err(safetensors::SafeTensorError::InvalidHeaderDeserialization)?;
    while text.len() % 8 != 0 {
        text.push(' ');
    }
    let mut out = Vec::with_capacity(8 + text.len() + file.len() - 8 - n);
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&file[8 + n..]);
    Ok(out)
}

/// Writes `tensors` to `path` as safetensors, atomically.
///
/// Elements are stored as `F32` for `E = f32` and `F64` for `E = f64`, little-endian,
/// row-major, under their MODEL.md names; `metadata` becomes the header's `__metadata__`.
/// The bytes are written through [`crate::fsutil::replace_with`] (a temporary sibling,
/// synced, renamed over `path`, the directory synced): on error `path` is untouched and no
/// temporary file is left.
pub fn save_safetensors<E: Elem>(
    path: impl AsRef<Path>,
    tensors: &[NamedTensor<E>],
    metadata: Option<HashMap<String, String>>,
) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    let buf = serialize(path, tensors, metadata)?;
    crate::fsutil::replace_with(path, |w| w.write_all(&buf)).map_err(io(path, "writing"))
}

/// The metadata key under which [`save_safetensors_hashed`] records the file's
/// [`SafetensorsFile::content_hash`], so a reader can check the tensors without other files.
pub const TENSORS_HASH_KEY: &str = "tensors_hash";

/// [`save_safetensors`] with the content hash of `tensors` in the metadata under
/// [`TENSORS_HASH_KEY`] (any value there is replaced): a flipped bit in the file's tensor data
/// is then seen by [`SafetensorsFile::check_recorded_hash`].
pub fn save_safetensors_hashed<E: Elem>(
    path: impl AsRef<Path>,
    tensors: &[NamedTensor<E>],
    metadata: HashMap<String, String>,
) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    let mut metadata = metadata;
    metadata.remove(TENSORS_HASH_KEY);
    let unhashed =
        SafetensorsFile { path: path.to_path_buf(), bytes: serialize(path, tensors, Some(metadata.clone()))? };
    metadata.insert(TENSORS_HASH_KEY.to_string(), unhashed.content_hash()?);
    save_safetensors(path, tensors, Some(metadata))
}

/// The bytes of a safetensors file of `tensors` and `metadata` (`path` names errors only).
fn serialize<E: Elem>(
    path: &Path,
    tensors: &[NamedTensor<E>],
    metadata: Option<HashMap<String, String>>,
) -> Result<Vec<u8>, CheckpointError> {
    let dtype = dtype_of::<E>();
    let mut bytes: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::with_capacity(tensors.len());
    for t in tensors {
        let want: usize = t.shape.iter().product();
        if t.data.len() != want {
            return Err(CheckpointError::Tensor {
                path: path.to_path_buf(),
                name: t.name.clone(),
                reason: format!("{} values for shape {:?} ({want} needed)", t.data.len(), t.shape),
            });
        }
        if bytes.iter().any(|(n, _, _)| *n == t.name) {
            return Err(CheckpointError::Tensor {
                path: path.to_path_buf(),
                name: t.name.clone(),
                reason: "given more than once".into(),
            });
        }
        let mut b = Vec::with_capacity(t.data.len() * dtype.bitsize() / 8);
        for &x in &t.data {
            match dtype {
                Dtype::F64 => b.extend_from_slice(&x.f64().to_le_bytes()),
                _ => b.extend_from_slice(&(x.f64() as f32).to_le_bytes()),
            }
        }
        bytes.push((t.name.clone(), t.shape.clone(), b));
    }
    let mut views = Vec::with_capacity(bytes.len());
    for (name, shape, b) in &bytes {
        let v = TensorView::new(dtype, shape.clone(), b).map_err(|e| CheckpointError::Tensor {
            path: path.to_path_buf(),
            name: name.clone(),
            reason: e.to_string(),
        })?;
        views.push((name.as_str(), v));
    }
    safetensors::serialize(views, metadata)
        .and_then(canonical_header)
        .map_err(|e| CheckpointError::Format { path: path.to_path_buf(), reason: e.to_string() })
}

/// A safetensors file read into memory, to take tensors out of it by name.
#[derive(Debug, Clone)]
pub struct SafetensorsFile {
    path: PathBuf,
    bytes: Vec<u8>,
}

impl SafetensorsFile {
    /// Reads and validates `path` (header, offsets, sizes).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        let path = path.as_ref().to_path_buf();
        let bytes = fs::read(&path).map_err(io(&path, "reading"))?;
        let f = SafetensorsFile { path, bytes };
        f.parse()?;
        Ok(f)
    }

    fn parse(&self) -> Result<SafeTensors<'_>, CheckpointError> {
        SafeTensors::deserialize(&self.bytes)
            .map_err(|e| CheckpointError::Format { path: self.path.clone(), reason: e.to_string() })
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

    /// The header's `__metadata__` (string to string), if any.
    pub fn metadata(&self) -> Option<HashMap<String, String>> {
        SafeTensors::read_metadata(&self.bytes).ok().and_then(|(_, m)| m.metadata().clone())
    }

    fn view(&self, name: &str) -> Result<TensorView<'_>, CheckpointError> {
        let st = self.parse()?;
        let n = st.len();
        st.tensor(name).map_err(|_| CheckpointError::MissingTensor {
            path: self.path.clone(),
            name: name.to_string(),
            available: n,
        })
    }

    /// Whether the file holds a tensor called `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.parse().map(|st| st.tensor(name).is_ok()).unwrap_or(false)
    }

    /// The shape and dtype name (`"F32"`, `"I64"`, ...) of `name`.
    pub fn info(&self, name: &str) -> Result<(Vec<usize>, String), CheckpointError> {
        let v = self.view(name)?;
        Ok((v.shape().to_vec(), v.dtype().to_string()))
    }

    /// One floating-point tensor, converted to `E`. `F32` and `F64` are accepted; any other
    /// dtype is a [`CheckpointError::Dtype`] naming the tensor.
    pub fn tensor<E: Elem>(&self, name: &str) -> Result<NamedTensor<E>, CheckpointError> {
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
                return Err(CheckpointError::Dtype {
                    path: self.path.clone(),
                    name: name.to_string(),
                    found: other.to_string(),
                    expected: "F32 or F64",
                })
            }
        };
        Ok(NamedTensor { name: name.to_string(), shape: v.shape().to_vec(), data })
    }

    /// One `I64` tensor: its shape and values. Any other dtype is a
    /// [`CheckpointError::Dtype`] naming the tensor.
    pub fn i64(&self, name: &str) -> Result<(Vec<usize>, Vec<i64>), CheckpointError> {
        let v = self.view(name)?;
        if v.dtype() != Dtype::I64 {
            return Err(CheckpointError::Dtype {
                path: self.path.clone(),
                name: name.to_string(),
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
    pub fn all<E: Elem>(&self) -> Result<Vec<NamedTensor<E>>, CheckpointError> {
        self.names().iter().map(|n| self.tensor(n)).collect()
    }

    /// The hash ([`crate::hash::Fnv64`]) of the file's tensors: every tensor in name order,
    /// its name, dtype, shape and data bytes as stored. The metadata is not part of it, so two
    /// files with the same tensors hash alike whatever else their headers say, and a flipped
    /// bit in any tensor's data changes it.
    pub fn content_hash(&self) -> Result<String, CheckpointError> {
        let mut names = self.names();
        names.sort();
        let mut h = crate::hash::Fnv64::default();
        h.count(names.len());
        for n in &names {
            let v = self.view(n)?;
            h.text(n).text(&v.dtype().to_string()).count(v.shape().len());
            for &d in v.shape() {
                h.count(d);
            }
            h.count(v.data().len()).update(v.data());
        }
        Ok(h.hex())
    }

    /// Checks the tensors against the hash the file records under [`TENSORS_HASH_KEY`]:
    /// `Ok(true)` when they match, `Ok(false)` for a file without one (written before it, or
    /// by another program), [`CheckpointError::Altered`] naming both hashes when they differ.
    pub fn check_recorded_hash(&self) -> Result<bool, CheckpointError> {
        let Some(want) = self.metadata().and_then(|m| m.get(TENSORS_HASH_KEY).cloned()) else {
            return Ok(false);
        };
        let got = self.content_hash()?;
        if got != want {
            return Err(CheckpointError::Altered { path: self.path.clone(), got, want, key: TENSORS_HASH_KEY });
        }
        Ok(true)
    }
}

/// Reads every tensor of a safetensors file as `E` (from `F32` or `F64`), in file order.
///
/// Safetensors files order their tensors by dtype and name, not in state-dict order; match by
/// name (as [`boldcast_core::Model::load_state`] does) or reorder with [`in_spec_order`].
pub fn load_safetensors<E: Elem>(path: impl AsRef<Path>) -> Result<Vec<NamedTensor<E>>, CheckpointError> {
    SafetensorsFile::open(path)?.all()
}

/// Reads the `I64` tensor `name` of a safetensors file: its shape and values.
pub fn load_i64(path: impl AsRef<Path>, name: &str) -> Result<(Vec<usize>, Vec<i64>), CheckpointError> {
    SafetensorsFile::open(path)?.i64(name)
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
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh, empty directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);
    impl TempDir {
        fn new(tag: &str) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "boldcast-ckpt-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn sample<E: Elem>() -> Vec<NamedTensor<E>> {
        vec![
            NamedTensor {
                name: "head.weight".into(),
                shape: vec![2, 3],
                data: [0.1, -2.5, 3.0, 1e-7, 4.25, -0.0].iter().map(|&x| E::of(x)).collect(),
            },
            NamedTensor { name: "head.bias".into(), shape: vec![2], data: vec![E::of(1.0 / 3.0), E::of(-7.0)] },
            NamedTensor {
                name: "layers.0.mamba.mamba.conv1d.weight".into(),
                shape: vec![2, 1, 2],
                data: [1.0, 2.0, 3.0, 4.0].iter().map(|&x| E::of(x)).collect(),
            },
        ]
    }

    fn by_name<E: Clone>(ts: &[NamedTensor<E>], name: &str) -> NamedTensor<E> {
        ts.iter().find(|t| t.name == name).unwrap().clone()
    }

    #[test]
    fn f32_round_trip_keeps_values_shapes_and_metadata() {
        let dir = TempDir::new("f32");
        let path = dir.0.join("model.safetensors");
        let meta: HashMap<String, String> = [("step".to_string(), "17".to_string())].into();
        let ts = sample::<f32>();
        save_safetensors(&path, &ts, Some(meta.clone())).unwrap();
        let back = load_safetensors::<f32>(&path).unwrap();
        assert_eq!(back.len(), 3);
        for t in &ts {
            assert_eq!(&by_name(&back, &t.name), t);
        }
        let f = SafetensorsFile::open(&path).unwrap();
        assert_eq!(f.metadata(), Some(meta));
        assert_eq!(f.info("head.weight").unwrap(), (vec![2, 3], "F32".to_string()));
    }

    #[test]
    fn f64_round_trip_is_exact_and_stored_as_f64() {
        let dir = TempDir::new("f64");
        let path = dir.0.join("model.safetensors");
        let ts = sample::<f64>();
        save_safetensors(&path, &ts, None).unwrap();
        let back = load_safetensors::<f64>(&path).unwrap();
        for t in &ts {
            assert_eq!(by_name(&back, &t.name), *t, "bit-exact f64");
        }
        let f = SafetensorsFile::open(&path).unwrap();
        assert_eq!(f.info("head.bias").unwrap().1, "F64");
        assert_eq!(f.metadata(), None);
        // Loading f64 as f32 rounds to nearest.
        let as32 = load_safetensors::<f32>(&path).unwrap();
        assert_eq!(by_name(&as32, "head.bias").data, vec![(1.0f64 / 3.0) as f32, -7.0]);
        // And f32 files load as f64 by widening.
        let p32 = dir.0.join("m32.safetensors");
        save_safetensors(&p32, &sample::<f32>(), None).unwrap();
        let wide = load_safetensors::<f64>(&p32).unwrap();
        assert_eq!(by_name(&wide, "head.bias").data, vec![(1.0f32 / 3.0) as f64, -7.0]);
    }

    #[test]
    fn save_is_atomic_and_replaces_an_existing_file() {
        let dir = TempDir::new("atomic");
        let path = dir.0.join("ckpt.safetensors");
        fs::write(&path, b"an older checkpoint").unwrap();
        save_safetensors(&path, &sample::<f32>(), None).unwrap();
        let names: Vec<_> = fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("ckpt.safetensors")]);
        assert_eq!(load_safetensors::<f32>(&path).unwrap().len(), 3);
        // Saving again over it replaces the contents.
        let one = vec![NamedTensor { name: "x".into(), shape: vec![1], data: vec![5.0f32] }];
        save_safetensors(&path, &one, None).unwrap();
        assert_eq!(load_safetensors::<f32>(&path).unwrap(), one);
        // A failed save (inconsistent tensor) leaves the old file untouched and no .tmp.
        let bad = vec![NamedTensor { name: "y".into(), shape: vec![3], data: vec![1.0f32] }];
        let e = save_safetensors(&path, &bad, None).unwrap_err();
        assert!(e.to_string().contains("`y`") && e.to_string().contains("ckpt.safetensors"), "{e}");
        assert_eq!(load_safetensors::<f32>(&path).unwrap(), one);
        let names: Vec<_> = fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("ckpt.safetensors")], "no temporary file left");
        // A directory that does not exist: the error names the file.
        let e = save_safetensors(dir.0.join("nope/x.safetensors"), &one, None).unwrap_err();
        assert!(e.to_string().contains("nope/x.safetensors"), "{e}");
    }

    #[test]
    fn equal_tensors_and_metadata_give_equal_bytes() {
        let dir = TempDir::new("bytes");
        let meta =
            || -> HashMap<String, String> { (0..8).map(|i| (format!("key{i}"), format!("value {i}"))).collect() };
        let first = dir.0.join("a.safetensors");
        save_safetensors(&first, &sample::<f32>(), Some(meta())).unwrap();
        let want = fs::read(&first).unwrap();
        for i in 0..8 {
            let p = dir.0.join(format!("b{i}.safetensors"));
            save_safetensors(&p, &sample::<f32>(), Some(meta())).unwrap();
            assert_eq!(fs::read(&p).unwrap(), want, "save {i} differs from the first");
        }
        let f = SafetensorsFile::open(&first).unwrap();
        assert_eq!(f.metadata().unwrap(), meta());
        let mut back = f.all::<f32>().unwrap();
        let mut want_tensors = sample::<f32>();
        back.sort_by(|a, b| a.name.cmp(&b.name));
        want_tensors.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(back, want_tensors);
    }

    #[test]
    fn errors_name_the_file_and_the_tensor() {
        let dir = TempDir::new("errors");
        let missing = dir.0.join("missing.safetensors");
        let e = load_safetensors::<f32>(&missing).unwrap_err();
        assert!(matches!(e, CheckpointError::Io { .. }));
        assert!(e.to_string().contains(&missing.display().to_string()), "{e}");

        let path = dir.0.join("m.safetensors");
        save_safetensors(&path, &sample::<f32>(), None).unwrap();
        let f = SafetensorsFile::open(&path).unwrap();
        let e = f.tensor::<f32>("head.wieght").unwrap_err();
        assert!(matches!(e, CheckpointError::MissingTensor { .. }));
        assert!(e.to_string().contains("head.wieght") && e.to_string().contains("m.safetensors"), "{e}");
        let e = load_i64(&path, "head.weight").unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, CheckpointError::Dtype { .. }));
        assert!(text.contains("head.weight") && text.contains("F32") && text.contains("I64"), "{text}");

        let junk = dir.0.join("junk.safetensors");
        fs::write(&junk, b"\x05\x00\x00\x00\x00\x00\x00\x00{oops").unwrap();
        let e = SafetensorsFile::open(&junk).unwrap_err();
        assert!(matches!(e, CheckpointError::Format { .. }) && e.to_string().contains("junk.safetensors"), "{e}");

        let dup = vec![sample::<f32>()[1].clone(), sample::<f32>()[1].clone()];
        let e = save_safetensors(dir.0.join("d.safetensors"), &dup, None).unwrap_err();
        assert!(e.to_string().contains("head.bias") && e.to_string().contains("more than once"), "{e}");
    }

    #[test]
    fn i64_tensors_load_and_float_loading_rejects_them() {
        let dir = TempDir::new("i64");
        let path = dir.0.join("inputs.safetensors");
        let idx: Vec<u8> = [0i64, 1, 2, -3, 4, 5].iter().flat_map(|x| x.to_le_bytes()).collect();
        let fl: Vec<u8> = [1.5f32, 2.5].iter().flat_map(|x| x.to_le_bytes()).collect();
        let views = vec![
            ("adjacency", TensorView::new(Dtype::I64, vec![3, 2], &idx).unwrap()),
            ("tokens", TensorView::new(Dtype::F32, vec![2], &fl).unwrap()),
        ];
        fs::write(&path, safetensors::serialize(views, None).unwrap()).unwrap();
        assert_eq!(load_i64(&path, "adjacency").unwrap(), (vec![3, 2], vec![0, 1, 2, -3, 4, 5]));
        let f = SafetensorsFile::open(&path).unwrap();
        assert_eq!(f.tensor::<f64>("tokens").unwrap().data, vec![1.5, 2.5]);
        let e = load_safetensors::<f32>(&path).unwrap_err();
        assert!(e.to_string().contains("adjacency") && e.to_string().contains("I64"), "{e}");
    }

    #[test]
    fn a_torch_state_dict_loads_unchanged_and_survives_our_round_trip() {
        // Written by `safetensors.torch.save_file` in the golden generator.
        let torch = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/cases/tiny/weights.safetensors");
        assert!(torch.is_file(), "golden weights missing: {}", torch.display());
        let f = SafetensorsFile::open(&torch).unwrap();
        let cfg: serde_json::Value = serde_json::from_str(&f.metadata().unwrap()["config"]).unwrap();
        assert_eq!(cfg["name"], "tiny");
        let ts = load_safetensors::<f32>(&torch).unwrap();
        // 2 + 2 layers x (2 + 9 mamba + 10 knn) + 4 = 48 tensors, with the shapes of MODEL.md.
        assert_eq!(ts.len(), 48);
        let bias = ts.iter().find(|t| t.name == "layers.0.mamba.mamba.conv1d.bias").unwrap();
        assert_eq!(bias.shape, vec![32]);
        // Raw bytes of one tensor equal the loaded values bit for bit.
        let raw = SafeTensors::deserialize(&f.bytes).unwrap();
        let view = raw.tensor("head.weight").unwrap();
        let bits: Vec<u32> =
            view.data().chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let head = ts.iter().find(|t| t.name == "head.weight").unwrap();
        assert_eq!(head.data.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), bits);
        // Re-saved by us and read back: identical, metadata kept.
        let dir = TempDir::new("torch");
        let ours = dir.0.join("w.safetensors");
        save_safetensors(&ours, &ts, f.metadata()).unwrap();
        let back = load_safetensors::<f32>(&ours).unwrap();
        for t in &ts {
            assert_eq!(&by_name(&back, &t.name), t);
        }
        assert_eq!(SafetensorsFile::open(&ours).unwrap().metadata(), f.metadata());
    }

    #[test]
    fn spec_order_reorders_and_checks() {
        let cfg = boldcast_core::ModelConfig::smallest(&[1]).unwrap();
        let specs = cfg.param_specs();
        let mut ts: Vec<NamedTensor<f32>> = specs
            .iter()
            .map(|s| NamedTensor { name: s.name.clone(), shape: s.shape.clone(), data: vec![0.5; s.numel()] })
            .collect();
        ts.reverse();
        let ordered = in_spec_order(&specs, ts.clone()).unwrap();
        assert!(ordered.iter().zip(&specs).all(|(t, s)| t.name == s.name));
        ts.pop();
        assert!(in_spec_order(&specs, ts).is_err());
    }
}
