//! The structured mutations of a NIfTI-2 file ([`Format::Nifti`](super::Format::Nifti)): each
//! header field a reader trusts (`sizeof_hdr`, `datatype`, `dim`, `vox_offset`, the scaling,
//! `intent_code`, the extender and the first extension's `esize` and `ecode`) overwritten, in
//! the file's byte order, by boundary values and by its own value plus or minus one.

use super::Op;

/// Where the data of a NIfTI-2 file starts (`vox_offset`, bounded by the file), in either
/// byte order; `None` when `bytes` is not a NIfTI-2 header.
pub(super) fn data_offset(bytes: &[u8]) -> Option<usize> {
    let be = big_endian(bytes)?;
    let v = i64::from_be_bytes(field(bytes, 168, be)?);
    Some(usize::try_from(v).unwrap_or(0).clamp(540, bytes.len()))
}

/// Whether the header is big-endian (`sizeof_hdr` 540 read big-endian).
fn big_endian(bytes: &[u8]) -> Option<bool> {
    let s: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    match (i32::from_le_bytes(s), i32::from_be_bytes(s)) {
        (540, _) => Some(false),
        (_, 540) => Some(true),
        _ => None,
    }
}

/// `N` bytes at `at` as big-endian bytes (reversed when the file is little-endian).
fn field<const N: usize>(bytes: &[u8], at: usize, big_endian: bool) -> Option<[u8; N]> {
    let mut b: [u8; N] = bytes.get(at..at + N)?.try_into().ok()?;
    if !big_endian {
        b.reverse();
    }
    Some(b)
}

/// The field mutations of `bytes` (none when it is not a NIfTI-2 header).
pub(super) fn ops(bytes: &[u8]) -> Vec<Op> {
    let Some(be) = big_endian(bytes) else { return Vec::new() };
    let order = |mut b: Vec<u8>| {
        if !be {
            b.reverse();
        }
        b
    };
    let mut ops = Vec::new();
    let mut put = |at: usize, name: &str, with: Vec<u8>, shown: String| {
        if at + with.len() <= bytes.len() {
            let how = format!("NIfTI {name} (byte {at}) -> {shown}");
            ops.push(Op::Splice { at, len: with.len(), with, how });
        }
    };
    let own_i64 = |at: usize| field::<8>(bytes, at, be).map_or(0, i64::from_be_bytes);
    let own_i32 = |at: usize| field::<4>(bytes, at, be).map_or(0, i32::from_be_bytes);
    let near64 = |v: i64| [v.wrapping_sub(1), v.wrapping_add(1), v.wrapping_add(16), v.wrapping_mul(2)];
    let near32 = |v: i32| [v.wrapping_sub(1), v.wrapping_add(1), v.wrapping_add(16), v.wrapping_mul(2)];
    for v in [348i32, 540, 0, -1] {
        put(0, "sizeof_hdr", order(v.to_be_bytes().to_vec()), v.to_string());
    }
    for v in [0i16, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1536, 2304, -1, i16::MAX] {
        put(12, "datatype", order(v.to_be_bytes().to_vec()), v.to_string());
    }
    let len = bytes.len() as i64;
    let big = [0i64, 1, -1, 2, 6, 7, 8, 1 << 31, 1 << 32, 1 << 40, i64::MAX, i64::MIN];
    for d in 0..8 {
        let at = 16 + 8 * d;
        for v in big.into_iter().chain(near64(own_i64(at))) {
            put(at, &format!("dim[{d}]"), order(v.to_be_bytes().to_vec()), v.to_string());
        }
    }
    for v in [0i64, 348, 539, 540, 544, 552, len, len + 1, -1, i64::MAX].into_iter().chain(near64(own_i64(168))) {
        put(168, "vox_offset", order(v.to_be_bytes().to_vec()), v.to_string());
    }
    let floats = [0.0f64, -0.0, 1.0, -1.0, 2.5, 1e308, -1e308, 5e-324, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    for (at, name) in [(176, "scl_slope"), (184, "scl_inter")] {
        for v in floats {
            put(at, name, order(v.to_be_bytes().to_vec()), v.to_string());
        }
    }
    for v in [0i32, 2, 2999, 3000, 3001, 3002, 3003, 3004, 3006, 3007, 3012, 3013, -1, i32::MAX] {
        put(504, "intent_code", order(v.to_be_bytes().to_vec()), v.to_string());
    }
    for v in [0u8, 1, 255] {
        put(540, "extender", vec![v, 0, 0, 0], v.to_string());
    }
    for v in [0i32, 4, 7, 8, 9, 16, -1, -8, i32::MAX, i32::MIN].into_iter().chain(near32(own_i32(544))) {
        put(544, "esize", order(v.to_be_bytes().to_vec()), v.to_string());
    }
    for v in [0i32, 4, 31, 33, -1] {
        put(548, "ecode", order(v.to_be_bytes().to_vec()), v.to_string());
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::super::{cases, Format, Plan, Seed};

    /// A big-endian NIfTI-2 header, an extender and 16 bytes of one extension, then 8 of data.
    fn file() -> Vec<u8> {
        let mut b = vec![0u8; 568];
        b[..4].copy_from_slice(&540i32.to_be_bytes());
        b[16..24].copy_from_slice(&6i64.to_be_bytes());
        b[168..176].copy_from_slice(&560i64.to_be_bytes());
        b[540] = 1;
        b[544..548].copy_from_slice(&16i32.to_be_bytes());
        b[548..552].copy_from_slice(&32i32.to_be_bytes());
        b
    }

    #[test]
    fn header_fields_are_edited_in_the_files_byte_order() {
        assert_eq!(super::data_offset(&file()), Some(560));
        assert_eq!(super::data_offset(&[0; 600]), None);
        let seed = Seed::new("n", Format::Nifti, file());
        let c: Vec<_> = cases(&seed, &Plan { random: 0, all_truncations_up_to: 0, ..Plan::default() }).collect();
        let find = |how: &str| c.iter().find(|c| c.how == format!("n: {how}")).unwrap_or_else(|| panic!("{how}"));
        assert_eq!(find("NIfTI vox_offset (byte 168) -> -1").bytes[168..176], (-1i64).to_be_bytes());
        assert_eq!(find("NIfTI dim[0] (byte 16) -> 7").bytes[16..24], 7i64.to_be_bytes());
        assert_eq!(find("NIfTI esize (byte 544) -> 17").bytes[544..548], 17i32.to_be_bytes(), "its own size + 1");
        assert_eq!(find("NIfTI scl_slope (byte 176) -> NaN").bytes[176..184], f64::NAN.to_be_bytes());
        // Every truncation through the extensions and 64 bytes beyond (all of this file).
        let lens: Vec<usize> = c.iter().filter(|c| c.how.contains("truncated")).map(|c| c.bytes.len()).collect();
        assert_eq!(lens, (0..568).collect::<Vec<_>>());
    }
}
