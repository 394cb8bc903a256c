//! The one content hash of the project: FNV-1a 64 ([`Fnv64`]), stable across Rust versions
//! and platforms, for identities recorded in files (a configuration's hash, the tensors of a
//! checkpoint file, a dataset's fingerprint). It detects accidents (an edited, truncated,
//! copied or bit-flipped file), not adversaries.

/// An FNV-1a 64-bit hasher fed with bytes.
#[derive(Clone, Debug)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv64 {
    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) -> &mut Self {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    /// Feeds a length or count as 8 little-endian bytes, so that `["ab","c"]` and `["a","bc"]`
    /// fed with their lengths hash differently.
    pub fn count(&mut self, n: usize) -> &mut Self {
        self.update(&(n as u64).to_le_bytes())
    }

    /// Feeds a string with its length in front.
    pub fn text(&mut self, s: &str) -> &mut Self {
        self.count(s.len()).update(s.as_bytes())
    }

    /// The hash so far, as 16 lower-case hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// The FNV-1a 64 hash of `bytes` as 16 hex digits.
pub fn fnv1a_hex(bytes: &[u8]) -> String {
    Fnv64::default().update(bytes).hex()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_of_fnv1a_64() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(fnv1a_hex(b""), "cbf29ce484222325");
        assert_eq!(fnv1a_hex(b"a"), "af63dc4c8601ec8c");
        assert_eq!(fnv1a_hex(b"foobar"), "85944171f73967e8");
    }

    #[test]
    fn lengths_separate_fields() {
        let a = Fnv64::default().text("ab").text("c").hex();
        let b = Fnv64::default().text("a").text("bc").hex();
        assert_ne!(a, b);
    }
}
