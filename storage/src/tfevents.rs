//! TensorBoard event files of scalars: the TFRecord framing (length, masked CRC-32C of the
//! length, the record, masked CRC-32C of the record) around `Event` protocol buffers, the
//! first holding `file_version = "brain.Event:2"` and each other one scalar
//! (`summary.value[0] = {tag, simple_value}`) at a step. Only what scalars need is encoded,
//! and [`read_scalars`] reads back exactly that, so a resumed run can drop the scalars past
//! its checkpoint.
//!
//! ```
//! use boldcast_storage::tfevents::{encode_scalar, read_scalars, Scalar, FILE_VERSION};
//! let mut bytes = boldcast_storage::tfevents::encode_version(0.0);
//! bytes.extend(encode_scalar(&Scalar { wall_time: 1.5, step: 7, tag: "train/loss".into(), value: 0.25 }));
//! let back = read_scalars(&bytes).unwrap();
//! assert_eq!(back, [Scalar { wall_time: 1.5, step: 7, tag: "train/loss".into(), value: 0.25 }]);
//! # let _ = FILE_VERSION;
//! ```

/// The `file_version` of the first event, as TensorFlow writes it.
pub const FILE_VERSION: &str = "brain.Event:2";

/// One scalar of an event file.
#[derive(Clone, Debug, PartialEq)]
pub struct Scalar {
    /// Seconds since the Unix epoch.
    pub wall_time: f64,
    /// The step it belongs to.
    pub step: i64,
    /// The tag (`train/loss`).
    pub tag: String,
    /// The value; event files hold it as a 32-bit float.
    pub value: f32,
}

/// The first record of a file: its version.
pub fn encode_version(wall_time: f64) -> Vec<u8> {
    let mut event = Vec::new();
    put_tag(&mut event, 1, 1);
    event.extend(wall_time.to_le_bytes());
    put_bytes(&mut event, 3, FILE_VERSION.as_bytes());
    frame(&event)
}

/// The record of one scalar.
pub fn encode_scalar(s: &Scalar) -> Vec<u8> {
    let mut value = Vec::new();
    put_bytes(&mut value, 1, s.tag.as_bytes());
    put_tag(&mut value, 2, 5);
    value.extend(s.value.to_le_bytes());
    let mut summary = Vec::new();
    put_bytes(&mut summary, 1, &value);
    let mut event = Vec::new();
    put_tag(&mut event, 1, 1);
    event.extend(s.wall_time.to_le_bytes());
    put_tag(&mut event, 2, 0);
    put_varint(&mut event, s.step as u64);
    put_bytes(&mut event, 5, &summary);
    frame(&event)
}

/// The scalars of an event file's bytes (the version record and any event that is not one
/// scalar are skipped). A truncated last record (a killed writer) ends the list; a record
/// whose checksum does not match is an error.
pub fn read_scalars(bytes: &[u8]) -> Result<Vec<Scalar>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= 12 {
        let len_bytes = &bytes[at..at + 8];
        let len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes"));
        if masked_crc(len_bytes) != u32::from_le_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes")) {
            return Err(format!("record at byte {at}: the length's checksum does not match"));
        }
        let Some(end) = usize::try_from(len).ok().and_then(|l| (at + 12).checked_add(l)) else { break };
        if end + 4 > bytes.len() {
            break;
        }
        let data = &bytes[at + 12..end];
        if masked_crc(data) != u32::from_le_bytes(bytes[end..end + 4].try_into().expect("4 bytes")) {
            return Err(format!("record at byte {at}: the data's checksum does not match"));
        }
        if let Some(s) = decode_scalar(data) {
            out.push(s);
        }
        at = end + 4;
    }
    Ok(out)
}

fn frame(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend(len);
    out.extend(masked_crc(&len).to_le_bytes());
    out.extend(data);
    out.extend(masked_crc(data).to_le_bytes());
    out
}

fn put_tag(out: &mut Vec<u8>, field: u64, wire: u64) {
    put_varint(out, field << 3 | wire);
}

fn put_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_tag(out, field, 2);
    put_varint(out, bytes.len() as u64);
    out.extend(bytes);
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The fields of a protocol buffer message: `(field, wire value)`.
enum Field<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Fixed32([u8; 4]),
    Bytes(&'a [u8]),
}

fn fields(mut b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b)?;
        let f = match key & 7 {
            0 => Field::Varint(varint(&mut b)?),
            1 => Field::Fixed64(take(&mut b, 8)?.try_into().ok()?),
            5 => Field::Fixed32(take(&mut b, 4)?.try_into().ok()?),
            2 => {
                let n = usize::try_from(varint(&mut b)?).ok()?;
                Field::Bytes(take(&mut b, n)?)
            }
            _ => return None,
        };
        out.push((key >> 3, f));
    }
    Some(out)
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, tail) = (b.get(..n)?, b.get(n..)?);
    *b = tail;
    Some(head)
}

fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

fn decode_scalar(event: &[u8]) -> Option<Scalar> {
    let (mut wall_time, mut step, mut summary) = (0.0, 0i64, None);
    for (n, f) in fields(event)? {
        match (n, f) {
            (1, Field::Fixed64(b)) => wall_time = f64::from_le_bytes(b),
            (2, Field::Varint(v)) => step = v as i64,
            (5, Field::Bytes(b)) => summary = Some(b),
            _ => {}
        }
    }
    let value = fields(summary?)?.into_iter().find_map(|(n, f)| match (n, f) {
        (1, Field::Bytes(b)) => Some(b),
        _ => None,
    })?;
    let (mut tag, mut simple) = (None, None);
    for (n, f) in fields(value)? {
        match (n, f) {
            (1, Field::Bytes(b)) => tag = Some(String::from_utf8(b.to_vec()).ok()?),
            (2, Field::Fixed32(b)) => simple = Some(f32::from_le_bytes(b)),
            _ => {}
        }
    }
    Some(Scalar { wall_time, step, tag: tag?, value: simple? })
}

/// CRC-32C (Castagnoli), masked as TFRecord masks it.
fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

fn crc32c(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 == 1 { (c >> 1) ^ 0x82f6_3b78 } else { c >> 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    !data.iter().fold(!0u32, |c, &b| TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // The check value of CRC-32C (RFC 3720, and every CRC catalogue): "123456789".
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn scalars_round_trip_and_a_cut_file_keeps_its_whole_records() {
        let s = |step, tag: &str, value| Scalar { wall_time: 1e9 + step as f64, step, tag: tag.into(), value };
        let want = vec![s(1, "train/loss", 0.5), s(300, "validation/loss_h5", -2.25e-7), s(1 << 40, "a", f32::MAX)];
        let mut bytes = encode_version(3.0);
        want.iter().for_each(|x| bytes.extend(encode_scalar(x)));
        assert_eq!(read_scalars(&bytes).unwrap(), want);
        assert_eq!(read_scalars(&bytes[..bytes.len() - 3]).unwrap(), want[..2]);
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n - 6] ^= 1;
        assert!(read_scalars(&bad).unwrap_err().contains("checksum"));
    }

    #[test]
    fn hostile_bytes_never_panic() {
        for bytes in [&[0xffu8; 40][..], &[0u8; 13], b"\x05\0\0\0\0\0\0\0"] {
            let _ = read_scalars(bytes);
        }
        let mut huge = u64::MAX.to_le_bytes().to_vec();
        huge.extend(masked_crc(&u64::MAX.to_le_bytes()).to_le_bytes());
        huge.extend([0u8; 8]);
        assert_eq!(read_scalars(&huge).unwrap(), []);
    }
}
