//! The NIfTI-2 container of a CIFTI-2 file: the 540-byte header in either byte order, the
//! datatype and its scaling (`scl_slope`, `scl_inter`), and the header extensions between the
//! header and `vox_offset`. Nothing here knows CIFTI: [`super`] reads the XML of extension 32.

/// Bytes of a NIfTI-2 header.
pub const HEADER_BYTES: usize = 540;
/// `sizeof_hdr` of a NIfTI-1 header, which CIFTI-2 does not use.
const NIFTI1_BYTES: i32 = 348;
/// The magic of a single-file NIfTI-2 (`.nii`): `n+2\0` then `\r\n\032\n`.
const MAGIC: &[u8; 8] = b"n+2\0\r\n\x1a\n";

/// The stored type of the data values (NIfTI `datatype`), of those this reader reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Datatype {
    /// `NIFTI_TYPE_UINT8` (2).
    U8,
    /// `NIFTI_TYPE_INT16` (4).
    I16,
    /// `NIFTI_TYPE_FLOAT32` (16).
    F32,
    /// `NIFTI_TYPE_FLOAT64` (64).
    F64,
}

impl Datatype {
    /// Bytes of one value.
    pub fn size(self) -> usize {
        match self {
            Datatype::U8 => 1,
            Datatype::I16 => 2,
            Datatype::F32 => 4,
            Datatype::F64 => 8,
        }
    }

    /// The datatype of NIfTI code `code`, or why it is not read.
    fn from_code(code: i16) -> Result<Self, String> {
        Ok(match code {
            2 => Datatype::U8,
            4 => Datatype::I16,
            16 => Datatype::F32,
            64 => Datatype::F64,
            _ => {
                return Err(format!(
                    "datatype {code} ({}) is not read: only uint8 (2), int16 (4), float32 (16) and float64 (64) are",
                    datatype_name(code)
                ))
            }
        })
    }
}

/// The NIfTI name of a datatype code, for messages.
fn datatype_name(code: i16) -> &'static str {
    match code {
        0 => "unknown",
        1 => "binary",
        8 => "int32",
        32 => "complex64",
        128 => "rgb24",
        256 => "int8",
        512 => "uint16",
        768 => "uint32",
        1024 => "int64",
        1280 => "uint64",
        1536 => "float128",
        1792 => "complex128",
        2048 => "complex256",
        2304 => "rgba32",
        _ => "not a NIfTI datatype",
    }
}

/// The fields of a NIfTI-2 header that a CIFTI-2 reader uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Nifti2Header {
    /// Whether the file is big-endian (header, extensions and data alike).
    pub big_endian: bool,
    /// The stored type of the values.
    pub datatype: Datatype,
    /// `dim[0..8]`: `dim[0]` dimensions follow.
    pub dim: [i64; 8],
    /// Where the data starts, in bytes from the start of the file.
    pub vox_offset: u64,
    /// `scl_slope` as stored.
    pub scl_slope: f64,
    /// `scl_inter` as stored.
    pub scl_inter: f64,
    /// `intent_code` (3000 to 3012 for CIFTI-2).
    pub intent_code: i32,
    /// `intent_name`, up to its first NUL (lossy UTF-8).
    pub intent_name: String,
}

/// How stored values become values: `x * slope + inter` in f64, as nibabel applies them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scaling {
    /// The factor (skipped when 1).
    pub slope: f64,
    /// The offset (skipped when 0).
    pub inter: f64,
}

impl Scaling {
    /// `x` scaled. nibabel multiplies only when the slope is not 1 and adds only when the
    /// intercept is not 0; skipping is not the same as `x * 1 + 0` for `x = -0.0`.
    pub fn apply(self, x: f64) -> f64 {
        let x = if self.slope != 1.0 { x * self.slope } else { x };
        if self.inter != 0.0 {
            x + self.inter
        } else {
            x
        }
    }
}

impl Nifti2Header {
    /// Reads the header from the first bytes of a file (at least [`HEADER_BYTES`] of them, or
    /// the reason it is not a NIfTI-2 header).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        if bytes.starts_with(&[0x1f, 0x8b]) {
            return Err("gzip-compressed: CIFTI files are not compressed; gunzip it".into());
        }
        let Some(h) = bytes.get(..HEADER_BYTES) else {
            return Err(short_header(bytes));
        };
        let big_endian = match (i32::from_le_bytes(b4(h, 0)), i32::from_be_bytes(b4(h, 0))) {
            (540, _) => false,
            (_, 540) => true,
            _ => return Err(short_header(bytes)),
        };
        let r = Fields { h, big_endian };
        if &h[4..12] != MAGIC {
            return Err(format!(
                "sizeof_hdr is 540 but the NIfTI-2 magic n+2 is missing (found \"{}\")",
                h[4..12].escape_ascii()
            ));
        }
        let datatype = Datatype::from_code(r.i16(12))?;
        let dim = std::array::from_fn(|i| r.i64(16 + 8 * i));
        let vox_offset = r.i64(168);
        let vox_offset = u64::try_from(vox_offset).map_err(|_| format!("vox_offset is negative ({vox_offset})"))?;
        let name = &h[508..524];
        let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
        Ok(Nifti2Header {
            big_endian,
            datatype,
            dim,
            vox_offset,
            scl_slope: r.f64(176),
            scl_inter: r.f64(184),
            intent_code: r.i32(504),
            intent_name: String::from_utf8_lossy(name).into_owned(),
        })
    }

    /// The scaling of the values, as nibabel's `get_fdata` applies it: none (`None`) when
    /// `scl_slope` is 0 or not finite; an error when the slope is valid and `scl_inter` is not
    /// finite (nibabel refuses such a header too).
    pub fn scaling(&self) -> Result<Option<Scaling>, String> {
        let (slope, inter) = (self.scl_slope, self.scl_inter);
        if slope == 0.0 || !slope.is_finite() {
            return Ok(None);
        }
        if !inter.is_finite() {
            return Err(format!("scl_slope is {} but scl_inter is {inter}, not a finite number", short(slope)));
        }
        Ok((slope != 1.0 || inter != 0.0).then_some(Scaling { slope, inter }))
    }
}

/// Why fewer than 540 bytes, or a `sizeof_hdr` other than 540, is not a NIfTI-2 header.
fn short_header(bytes: &[u8]) -> String {
    let size = bytes.get(..4).map(|s| (i32::from_le_bytes(b4(s, 0)), i32::from_be_bytes(b4(s, 0))));
    match size {
        Some((NIFTI1_BYTES, _) | (_, NIFTI1_BYTES)) => {
            "a NIfTI-1 file (sizeof_hdr 348): CIFTI-2 needs NIfTI-2 (sizeof_hdr 540)".into()
        }
        Some((540, _) | (_, 540)) => {
            format!("truncated: the file ends after {} bytes, inside the 540-byte NIfTI-2 header", bytes.len())
        }
        Some((le, _)) => format!("not a NIfTI-2 file: sizeof_hdr is {le}, not 540 (in either byte order)"),
        None => format!("truncated: the file ends after {} bytes, inside the 540-byte NIfTI-2 header", bytes.len()),
    }
}

/// `v` for a message: in exponent form when plain digits would be long (`1e300` has 301).
pub fn short(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-6..1e16).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

/// Four bytes of `b` at `at` (the caller has checked the length).
fn b4(b: &[u8], at: usize) -> [u8; 4] {
    [b[at], b[at + 1], b[at + 2], b[at + 3]]
}

/// Eight bytes of `b` at `at` (the caller has checked the length).
fn b8(b: &[u8], at: usize) -> [u8; 8] {
    std::array::from_fn(|i| b[at + i])
}

/// Fixed-offset fields of a 540-byte header in its byte order.
struct Fields<'a> {
    h: &'a [u8],
    big_endian: bool,
}

impl Fields<'_> {
    fn i16(&self, at: usize) -> i16 {
        let b = [self.h[at], self.h[at + 1]];
        if self.big_endian {
            i16::from_be_bytes(b)
        } else {
            i16::from_le_bytes(b)
        }
    }

    fn i32(&self, at: usize) -> i32 {
        read_i32(self.h, at, self.big_endian)
    }

    fn i64(&self, at: usize) -> i64 {
        let b = b8(self.h, at);
        if self.big_endian {
            i64::from_be_bytes(b)
        } else {
            i64::from_le_bytes(b)
        }
    }

    fn f64(&self, at: usize) -> f64 {
        f64::from_bits(self.i64(at) as u64)
    }
}

fn read_i32(b: &[u8], at: usize, big_endian: bool) -> i32 {
    if big_endian {
        i32::from_be_bytes(b4(b, at))
    } else {
        i32::from_le_bytes(b4(b, at))
    }
}

/// One header extension: its code and its content (after `esize` and `ecode`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extension {
    /// `ecode` (32: CIFTI-2 XML).
    pub code: i32,
    /// The content, padding included.
    pub content: Vec<u8>,
}

/// The extensions in `tail`: the bytes from the end of the header to `vox_offset`. Empty when
/// the 4-byte extender is absent or its first byte is 0. Every `esize` is bounded by `tail`.
pub fn extensions(tail: &[u8], big_endian: bool) -> Result<Vec<Extension>, String> {
    if tail.first().is_none_or(|&c| c == 0) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut at = 4usize;
    // Fewer than 16 bytes left are padding before the data (esize is a multiple of 16;
    // nibabel reads on while 16 bytes are left, and so does this reader).
    while tail.len().saturating_sub(at) >= 16 {
        let (esize, code) = (read_i32(tail, at, big_endian), read_i32(tail, at + 4, big_endian));
        let fits = usize::try_from(esize).ok().filter(|&s| s >= 8 && s <= tail.len() - at);
        let Some(size) = fits else {
            return Err(format!(
                "header extension {} (code {code}) at byte {}: esize {esize} is not between 8 and the {} bytes left \
                 before vox_offset",
                out.len() + 1,
                HEADER_BYTES + at,
                tail.len() - at
            ));
        };
        out.push(Extension { code, content: tail[at + 8..at + size].to_vec() });
        at += size;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_skips_a_slope_of_one_and_an_intercept_of_zero() {
        let s = Scaling { slope: 2.5, inter: 0.0 };
        assert_eq!(s.apply(-0.0).to_bits(), (-0.0f64).to_bits(), "-0.0 + 0.0 would be +0.0");
        assert_eq!(Scaling { slope: 1.0, inter: 0.5 }.apply(2.0), 2.5);
        // x * slope + inter, each rounded in f64 (no fused multiply-add).
        let (x, slope, inter) = (0.1f64, 10.0f64, -1.0f64);
        assert_eq!(Scaling { slope, inter }.apply(x).to_bits(), (x * slope + inter).to_bits());
        assert_ne!((x * slope + inter).to_bits(), x.mul_add(slope, inter).to_bits());
    }

    #[test]
    fn extensions_are_bounded_by_the_bytes_before_the_data() {
        let mut tail = vec![1u8, 0, 0, 0];
        tail.extend_from_slice(&16i32.to_le_bytes());
        tail.extend_from_slice(&32i32.to_le_bytes());
        tail.extend_from_slice(b"<CIFTI/>");
        // Four bytes of padding before the data: too few for another extension.
        tail.extend_from_slice(&[0; 4]);
        let e = extensions(&tail, false).unwrap();
        assert_eq!(e, [Extension { code: 32, content: b"<CIFTI/>".to_vec() }]);
        tail[4..8].copy_from_slice(&i32::MAX.to_le_bytes());
        let e = extensions(&tail, false).unwrap_err();
        assert_eq!(
            e,
            "header extension 1 (code 32) at byte 544: esize 2147483647 is not between 8 and the 20 bytes left before \
             vox_offset"
        );
        assert_eq!(extensions(&[0, 0, 0, 0, 1, 2, 3], false).unwrap(), []);
    }
}
