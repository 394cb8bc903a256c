//! The mutation engine: from one valid file (a [`Seed`]), a fixed, deterministic sequence of
//! inputs ([`cases`]), each with a description of how it was made.
//!
//! In order, for every seed:
//!
//! 1. the seed itself;
//! 2. **truncation** at every length up to [`Plan::all_truncations_up_to`] bytes (and at every
//!    length of a binary header, however long), then [`Plan::sampled_truncations`] lengths
//!    beyond, spread over the rest of the file;
//! 3. **huge numbers**: every number of the text (of the header, for `.npy` and safetensors)
//!    replaced by each of [`HUGE_NUMBERS`] (`18446744073709551615`, `2^63`, `1e308`, `-1`,
//!    `NaN`, ...), at most [`Plan::max_numbers`] of them, sampled evenly beyond;
//! 4. **structured mutations** of the [`Format`]'s fields (at most [`Plan::max_structured`]):
//!    JSON fields removed, replaced by values of every kind or added, JSON held in a string
//!    mutated in turn; TOML values replaced, lines removed, repeated or renamed; TSV/CSV cells,
//!    rows, columns and header names; the `.npy` header dict's `descr`, `fortran_order` and
//!    `shape`, its version and length field, and non-finite values in its data; the
//!    safetensors header's `dtype`, `shape` and `data_offsets` (with the length prefix
//!    rewritten to fit, or set wrong on purpose) and non-finite values in its tensors; the
//!    NIfTI-2 header's fields and first extension's size and code (`mutate/nifti.rs`);
//! 5. [`Plan::random`] **random mutations**, each drawn from its own seed (ChaCha8 of
//!    [`Plan::rng_seed`] and the case number): bit flips, bytes set to random or boundary
//!    values, ranges deleted or repeated, syntax tokens inserted, numbers made huge, and two to
//!    four of these at once; three in four land in the header of a binary format.
//!
//! The cases are made one at a time as the iterator is read (a case is a small description
//! until then), so a long plan on a large seed holds one input at a time.

mod nifti;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

/// What a seed's bytes are: decides its structured mutations and where the header is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Bytes of no structure known to the engine: only the generic mutations.
    Binary,
    /// JSON text.
    Json,
    /// TOML text, mutated line by line.
    Toml,
    /// Delimited text (TSV, CSV, `parcels.tsv`) with this separator.
    Delimited(u8),
    /// A `.npy` file (version 1, 2 or 3).
    Npy,
    /// A safetensors file: 8-byte little-endian header length, JSON header, data.
    Safetensors,
    /// A NIfTI-2 file (a CIFTI-2 `.nii`): the 540-byte header and its extensions up to
    /// `vox_offset` are its header (its field edits: `mutate/nifti.rs`).
    Nifti,
}

/// A valid input to start from.
#[derive(Clone, Debug)]
pub struct Seed {
    /// A short name, part of every case's description.
    pub name: String,
    /// What the bytes are.
    pub format: Format,
    /// The bytes.
    pub bytes: Vec<u8>,
}

impl Seed {
    /// A seed named `name`.
    pub fn new(name: impl Into<String>, format: Format, bytes: impl Into<Vec<u8>>) -> Self {
        Seed { name: name.into(), format, bytes: bytes.into() }
    }
}

/// How many cases of each kind a seed gives (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Every truncation length below this many bytes (and below the end of a binary header).
    pub all_truncations_up_to: usize,
    /// Truncation lengths sampled beyond.
    pub sampled_truncations: usize,
    /// Huge-number substitutions at most.
    pub max_numbers: usize,
    /// Structured mutations at most.
    pub max_structured: usize,
    /// Random mutations.
    pub random: usize,
    /// The seed of the random choices.
    pub rng_seed: u64,
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            all_truncations_up_to: 4096,
            sampled_truncations: 256,
            max_numbers: 1500,
            max_structured: 1500,
            random: 1000,
            rng_seed: 0xB01D_CA57,
        }
    }
}

/// One input and how it was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// E.g. `tiny.json: field /lr = -1`.
    pub how: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// The numbers that replace the numbers of a seed: the integer and float boundaries a
/// header field or cell may overflow, wrap, or misuse.
pub const HUGE_NUMBERS: &[&str] = &[
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "4294967296",
    "4294967295",
    "2147483648",
    "65536",
    "340282366920938463463374607431768211457",
    "1e308",
    "1.7976931348623157e308",
    "1e309",
    "-1e308",
    "5e-324",
    "1e-400",
    "-1",
    "-0",
    "0",
    "1",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "1e99999999999999999999",
];

/// Values a JSON field is replaced by: every kind, and the boundaries of integers and floats.
fn json_values() -> Vec<Value> {
    use serde_json::json;
    vec![
        json!(null),
        json!(true),
        json!(0),
        json!(-1),
        json!(1),
        json!(0.5),
        json!(-0.5),
        json!(1e308),
        json!(-1e308),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(4294967296u64),
        json!(""),
        json!("x"),
        json!("NaN"),
        json!([]),
        json!({}),
        json!([0]),
        json!([-1]),
        json!([u64::MAX, u64::MAX]),
        json!([1e308]),
        json!([[0, 1]]),
        json!({"x": 1}),
    ]
}

/// Values a TOML `key = value` line gets.
const TOML_VALUES: &[&str] = &[
    "-1",
    "0",
    "1",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "18446744073709551615",
    "4294967296",
    "1e308",
    "-1e308",
    "1e309",
    "nan",
    "inf",
    "-inf",
    "-0.0",
    "0.5",
    "\"\"",
    "\"x\"",
    "\"mamba2\"",
    "\"constant\"",
    "\"adam_l2\"",
    "\"dfdx-cuda\"",
    "true",
    "[]",
    "[0]",
    "[-1]",
    "[1, 1]",
    "[1e308, 1e308]",
    "[[]]",
    "{}",
    "1979-05-27",
    "'unterminated",
];

/// Values a TSV/CSV cell gets.
const CELL_VALUES: &[&str] = &[
    "",
    " ",
    "n/a",
    "NA",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "-1e309",
    "1e308",
    "x",
    "\"1\"",
    "\"",
    "1 2",
    "0x10",
    "-0",
    "5e-324",
    "\u{feff}1",
    "\r",
];

/// Bytes a random mutation sets or inserts: syntax of every format here, and boundaries.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"(",
    b")",
    b"\"",
    b"'",
    b",",
    b":",
    b"=",
    b"\n",
    b"\t",
    b"\r\n",
    b"-",
    b".",
    b"e",
    b"#",
    b"\\",
    b"\\u0000",
    b"null",
    b"true",
    b"NaN",
    b"1e308",
    b"18446744073709551615",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\0",
    b"'shape': (",
    b"\"dtype\":",
    b"\"data_offsets\":[",
    b"[train]",
    b"\"\"\"",
];

/// A path into a JSON document: object keys and array indices.
#[derive(Clone, Debug, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
    /// The JSON text held in a string value.
    Inner,
}

#[derive(Clone, Debug, PartialEq)]
enum JsonEdit {
    Remove,
    Replace(Value),
    AddUnknown,
}

/// One case, before its bytes are made.
#[derive(Clone, Debug)]
enum Op {
    Original,
    Truncate(usize),
    /// Replace `len` bytes at `at` by `with`.
    Splice {
        at: usize,
        len: usize,
        with: Vec<u8>,
        how: String,
    },
    /// An edit of the JSON document (of the safetensors header for that format).
    Json {
        path: Vec<Seg>,
        edit: JsonEdit,
    },
    /// A safetensors file whose length prefix is `prefix`.
    StPrefix(u64),
    /// A `.npy` file of another version, header dict or header length.
    Npy {
        version: u8,
        dict: String,
        len_field: Option<u32>,
        how: String,
    },
    /// Whole bytes made by a structured mutation that is not a splice.
    Whole {
        bytes: Vec<u8>,
        how: String,
    },
    Random(u64),
}

/// Every case of `seed` under `plan`, in a fixed order (see the module documentation).
pub fn cases<'a>(seed: &'a Seed, plan: &Plan) -> impl Iterator<Item = Case> + 'a {
    let ctx = Ctx::new(seed);
    let ops = ctx.ops(plan);
    ops.into_iter().map(move |op| ctx.apply(&op))
}

/// What the engine knows of a seed.
struct Ctx<'a> {
    seed: &'a Seed,
    /// The end of the header of a binary format (the whole file for text).
    hot_end: usize,
    /// The JSON document (the safetensors header for that format).
    json: Option<Value>,
    /// The data after a safetensors header, or after a `.npy` header.
    tail: &'a [u8],
    /// The `.npy` header dict.
    npy_dict: Option<String>,
}

impl<'a> Ctx<'a> {
    fn new(seed: &'a Seed) -> Self {
        let b = &seed.bytes[..];
        let (mut hot_end, mut json, mut tail, mut npy_dict) = (b.len(), None, &b[b.len()..], None);
        match seed.format {
            Format::Json => json = serde_json::from_slice(b).ok(),
            Format::Safetensors => {
                if let Some(n) = b.get(..8).map(|p| u64::from_le_bytes(p.try_into().expect("8 bytes")) as usize) {
                    if let Some(h) = b.get(8..8usize.saturating_add(n)) {
                        json = serde_json::from_slice(h).ok();
                        hot_end = 8 + n;
                        tail = &b[8 + n..];
                    }
                }
            }
            Format::Nifti => {
                if let Some(end) = nifti::data_offset(b) {
                    hot_end = end;
                    tail = &b[end..];
                }
            }
            Format::Npy => {
                if let Some((start, end)) = npy_header(b) {
                    hot_end = end;
                    tail = &b[end..];
                    npy_dict = Some(String::from_utf8_lossy(&b[start..end]).trim_end().to_string());
                }
            }
            _ => {}
        }
        Ctx { seed, hot_end, json, tail, npy_dict }
    }

    fn ops(&self, plan: &Plan) -> Vec<Op> {
        let len = self.seed.bytes.len();
        let mut rng = ChaCha8Rng::seed_from_u64(plan.rng_seed ^ fnv(self.seed.name.as_bytes()));
        let mut ops = vec![Op::Original];
        // Truncations.
        let all = plan.all_truncations_up_to.max(if self.seed.format.has_header() { self.hot_end + 64 } else { 0 });
        let all = all.min(len);
        ops.extend((0..all).map(Op::Truncate));
        if all < len {
            let rest = len - all;
            let mut lens: Vec<usize> =
                (0..plan.sampled_truncations).map(|i| all + i * rest / plan.sampled_truncations).collect();
            lens.extend([len - 1, len.saturating_sub(2), len.saturating_sub(4), len.saturating_sub(8)]);
            lens.retain(|&l| l >= all && l < len);
            lens.sort_unstable();
            lens.dedup();
            ops.extend(lens.into_iter().map(Op::Truncate));
        }
        // Huge numbers.
        let numbers = number_runs(&self.seed.bytes[..self.hot_end]);
        let mut subs: Vec<Op> = Vec::new();
        for &(at, n) in &numbers {
            for h in HUGE_NUMBERS {
                subs.push(Op::Splice {
                    at,
                    len: n,
                    with: h.as_bytes().to_vec(),
                    how: format!(
                        "number `{}` at byte {at} -> {h}",
                        String::from_utf8_lossy(&self.seed.bytes[at..at + n])
                    ),
                });
            }
        }
        ops.extend(sample(subs, plan.max_numbers));
        // Structured mutations.
        let structured = match self.seed.format {
            Format::Json | Format::Safetensors => self.json_ops(),
            Format::Toml => self.toml_ops(),
            Format::Delimited(sep) => self.delimited_ops(sep, &mut rng),
            Format::Npy => self.npy_ops(&mut rng),
            Format::Nifti => nifti::ops(&self.seed.bytes),
            Format::Binary => Vec::new(),
        };
        ops.extend(sample(structured, plan.max_structured));
        ops.extend((0..plan.random).map(|_| Op::Random(rng.random())));
        ops
    }

    fn json_ops(&self) -> Vec<Op> {
        let Some(doc) = &self.json else { return Vec::new() };
        let mut paths = Vec::new();
        json_paths(doc, &mut Vec::new(), &mut paths);
        let values = json_values();
        let mut ops = Vec::new();
        for (path, node) in &paths {
            if !path.is_empty() && !matches!(path.last(), Some(Seg::Inner)) {
                ops.push(Op::Json { path: path.clone(), edit: JsonEdit::Remove });
            }
            if node.is_object() {
                ops.push(Op::Json { path: path.clone(), edit: JsonEdit::AddUnknown });
            }
            for v in &values {
                if v != node {
                    ops.push(Op::Json { path: path.clone(), edit: JsonEdit::Replace(v.clone()) });
                }
            }
        }
        let deep = |open: &str, n: usize| open.repeat(n).into_bytes();
        if self.seed.format == Format::Json {
            ops.push(Op::Whole { bytes: deep("[", 100_000), how: "100000 nested arrays".into() });
            ops.push(Op::Whole { bytes: deep("{\"a\":", 100_000), how: "100000 nested objects".into() });
        } else {
            let h = self.seed.bytes.len() - self.tail.len() - 8;
            for prefix in [
                0,
                1,
                2,
                7,
                h as u64 - 1,
                h as u64 + 1,
                self.seed.bytes.len() as u64,
                u64::MAX,
                1 << 63,
                1 << 32,
                100_000_001,
            ] {
                ops.push(Op::StPrefix(prefix));
            }
            // Non-finite values in the tensors (f32 and f64 patterns at aligned offsets).
            for (i, at) in (0..self.tail.len().saturating_sub(8)).step_by(8).take(64).enumerate() {
                let at = self.seed.bytes.len() - self.tail.len() + at;
                let (with, what): (&[u8], &str) = match i % 4 {
                    0 => (&[0, 0, 0xc0, 0x7f], "f32 NaN"),
                    1 => (&[0, 0, 0x80, 0xff], "f32 -inf"),
                    2 => (&[0, 0, 0, 0, 0, 0, 0xf8, 0x7f], "f64 NaN"),
                    _ => (&[0xff; 8], "all ones"),
                };
                ops.push(Op::Splice { at, len: with.len(), with: with.to_vec(), how: format!("{what} at byte {at}") });
            }
        }
        ops
    }

    fn toml_ops(&self) -> Vec<Op> {
        let text = String::from_utf8_lossy(&self.seed.bytes);
        let mut ops = Vec::new();
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let body = line.trim_end_matches(['\n', '\r']);
            let trimmed = body.trim_start();
            let splice = |with: String, how: String| Op::Splice { at, len: body.len(), with: with.into_bytes(), how };
            if trimmed.starts_with('[') {
                let name = trimmed.trim_matches(|c| c == '[' || c == ']');
                ops.push(splice(String::new(), format!("header `{trimmed}` removed")));
                ops.push(splice(format!("{body}\n{body}"), format!("header `{trimmed}` twice")));
                ops.push(splice("[fuzz_unknown]".into(), format!("header `{trimmed}` renamed")));
                ops.push(splice(format!("[[{name}]]"), format!("header `{trimmed}` as an array of tables")));
                ops.push(splice(format!("{body}\nfuzz_unknown = 1"), format!("unknown key in `{trimmed}`")));
            } else if let Some((key, value)) = trimmed.split_once('=').filter(|_| !trimmed.starts_with('#')) {
                let key = key.trim();
                ops.push(splice(String::new(), format!("`{key}` removed")));
                ops.push(splice(format!("{body}\n{body}"), format!("`{key}` twice")));
                ops.push(splice(format!("fuzz_unknown ={value}"), format!("`{key}` renamed")));
                ops.push(splice(format!("{key}.fuzz = 1"), format!("`{key}` as a table")));
                for v in TOML_VALUES {
                    ops.push(splice(format!("{key} = {v}"), format!("`{key}` = {v}")));
                }
            }
            at += line.len();
        }
        let mut deep = self.seed.bytes.clone();
        deep.extend_from_slice(b"\nfuzz = ");
        deep.extend(std::iter::repeat_n(b'[', 50_000));
        ops.push(Op::Whole { bytes: deep, how: "50000 nested arrays".into() });
        let mut deep = self.seed.bytes.clone();
        deep.extend_from_slice(b"\nfuzz = ");
        deep.extend(std::iter::repeat_n(&b"{a="[..], 20_000).flatten());
        ops.push(Op::Whole { bytes: deep, how: "20000 nested inline tables".into() });
        ops
    }

    fn delimited_ops(&self, sep: u8, rng: &mut ChaCha8Rng) -> Vec<Op> {
        let b = &self.seed.bytes;
        let sep_s = (sep as char).to_string();
        let mut ops = Vec::new();
        // Lines as (start, end without the newline).
        let mut lines = Vec::new();
        let mut start = 0;
        for (i, &c) in b.iter().enumerate() {
            if c == b'\n' {
                lines.push((start, i));
                start = i + 1;
            }
        }
        if start < b.len() {
            lines.push((start, b.len()));
        }
        for (li, &(s, e)) in lines.iter().enumerate() {
            let line = String::from_utf8_lossy(&b[s..e]).into_owned();
            let splice = |with: String, how: String| Op::Splice { at: s, len: e - s, with: with.into_bytes(), how };
            ops.push(splice(String::new(), format!("line {} emptied", li + 1)));
            ops.push(splice(format!("{line}\n{line}"), format!("line {} twice", li + 1)));
            ops.push(splice(format!("{line}{sep_s}1"), format!("line {}: a cell more", li + 1)));
            ops.push(splice(
                line.rsplit_once(sep as char).map_or(String::new(), |(a, _)| a.to_string()),
                format!("line {}: a cell less", li + 1),
            ));
            ops.push(splice(format!("{line}\r"), format!("line {}: CR LF", li + 1)));
            // Cells: every cell of the header and a sample of the others.
            let mut at = s;
            for (ci, cell) in line.split(sep as char).enumerate() {
                let take = li == 0 || rng.random_bool(0.05);
                if take {
                    for v in CELL_VALUES {
                        ops.push(Op::Splice {
                            at,
                            len: cell.len(),
                            with: v.as_bytes().to_vec(),
                            how: format!("line {}, cell {}: `{cell}` -> `{v}`", li + 1, ci + 1),
                        });
                    }
                    ops.push(Op::Splice {
                        at,
                        len: cell.len(),
                        with: vec![0xff, 0xfe],
                        how: format!("line {}, cell {}: not UTF-8", li + 1, ci + 1),
                    });
                }
                at += cell.len() + 1;
            }
        }
        if let Some(&(s, e)) = lines.first() {
            // A header name repeated, and every line one column shorter.
            let header = String::from_utf8_lossy(&b[s..e]).into_owned();
            if let Some(first) = header.split(sep as char).next() {
                ops.push(Op::Splice {
                    at: e,
                    len: 0,
                    with: format!("{sep_s}{first}").into_bytes(),
                    how: "first header name repeated".into(),
                });
            }
            let shorter: Vec<u8> = lines
                .iter()
                .flat_map(|&(s, e)| {
                    let l = String::from_utf8_lossy(&b[s..e]).into_owned();
                    let l = l.split_once(sep as char).map_or(String::new(), |(_, r)| r.to_string());
                    (l + "\n").into_bytes()
                })
                .collect();
            ops.push(Op::Whole { bytes: shorter, how: "first column removed".into() });
        }
        let mut bom = b"\xef\xbb\xbf".to_vec();
        bom.extend_from_slice(b);
        ops.push(Op::Whole { bytes: bom, how: "byte-order mark".into() });
        let crlf: Vec<u8> = b.iter().flat_map(|&c| if c == b'\n' { vec![b'\r', b'\n'] } else { vec![c] }).collect();
        ops.push(Op::Whole { bytes: crlf, how: "CR LF line ends".into() });
        ops.push(Op::Whole { bytes: vec![b'a'; 1 << 20], how: "one line of 1 MiB".into() });
        ops.push(Op::Whole { bytes: sep_s.repeat(1 << 18).into_bytes(), how: "a header of 262144 empty names".into() });
        ops
    }

    fn npy_ops(&self, rng: &mut ChaCha8Rng) -> Vec<Op> {
        let Some(dict) = &self.npy_dict else { return Vec::new() };
        let mut ops = npy_field_ops(dict);
        ops.extend(self.npy_header_ops(dict));
        ops.extend(self.npy_data_ops(dict, rng));
        ops
    }

    /// The header's structure, version and length field.
    fn npy_header_ops(&self, dict: &str) -> Vec<Op> {
        let mut ops = Vec::new();
        let npy = |dict: String, how: String| Op::Npy { version: 1, dict, len_field: None, how };
        for (d, how) in [
            // Nesting: npyz's header parser backtracks exponentially on it.
            (dict.replacen("'descr': ", &format!("'descr': {}", "{".repeat(30)), 1), "30 unclosed braces"),
            (dict.replacen("'shape': ", &format!("'shape': {}", "(".repeat(30)), 1), "30 unclosed parentheses"),
            (String::new(), "empty header"),
            ("[]".into(), "a list, not a dict"),
            (dict.trim_end_matches('}').trim_end().trim_end_matches(',').to_string(), "unterminated dict"),
            (dict.replacen('{', "{'fuzz_unknown': 1, ", 1), "unknown key"),
            (format!("{dict}{}", " ".repeat(70_000)), "header of 70000 bytes"),
        ] {
            ops.push(npy(d, how.into()));
        }
        for version in [0u8, 2, 3, 4, 255] {
            ops.push(Op::Npy { version, dict: dict.to_string(), len_field: None, how: format!("version {version}") });
        }
        let hl = (self.hot_end - 10) as u32;
        for len_field in [0, 1, hl - 1, hl + 1, hl + 64, u16::MAX as u32] {
            ops.push(Op::Npy {
                version: 1,
                dict: dict.to_string(),
                len_field: Some(len_field),
                how: format!("header length {len_field}"),
            });
        }
        ops
    }

    /// Special values in the data, and bytes past its end.
    fn npy_data_ops(&self, dict: &str, rng: &mut ChaCha8Rng) -> Vec<Op> {
        let mut ops = Vec::new();
        let (_, p) = npy_shape(dict).unwrap_or((1, 1));
        let data_at = self.hot_end;
        let tail = self.tail.len();
        let elem = if dict.contains("f4") { 4 } else { 8 };
        for k in 0..24usize {
            let at = data_at + (rng.random_range(0..tail.max(1) / elem)) * elem;
            let with: Vec<u8> = match (elem, k % 3) {
                (4, 0) => f32::NAN.to_le_bytes().to_vec(),
                (4, 1) => f32::INFINITY.to_le_bytes().to_vec(),
                (4, _) => f32::MAX.to_le_bytes().to_vec(),
                (_, 0) => f64::NAN.to_le_bytes().to_vec(),
                (_, 1) => f64::NEG_INFINITY.to_le_bytes().to_vec(),
                _ => f64::MAX.to_le_bytes().to_vec(),
            };
            if at + elem <= self.seed.bytes.len() {
                ops.push(Op::Splice { at, len: elem, with, how: format!("data: special value {k} at byte {at}") });
            }
        }
        for (extra, how) in [(1usize, "one byte more"), (elem, "one element more"), (elem * p, "one row more")] {
            let mut b = self.seed.bytes.clone();
            b.extend(std::iter::repeat_n(0u8, extra));
            ops.push(Op::Whole { bytes: b, how: how.into() });
        }
        ops
    }

    fn apply(&self, op: &Op) -> Case {
        let b = &self.seed.bytes;
        let name = &self.seed.name;
        let (how, bytes) = match op {
            Op::Original => ("the seed".to_string(), b.clone()),
            Op::Truncate(n) => (format!("truncated to {n} of {} bytes", b.len()), b[..*n].to_vec()),
            Op::Splice { at, len, with, how } => (how.clone(), splice(b, *at, *len, with)),
            Op::Json { path, edit } => {
                let mut doc = self.json.clone().expect("JSON ops come from a parsed document");
                edit_json(&mut doc, path, edit);
                let text = serde_json::to_vec(&doc).expect("a Value serializes");
                let bytes = match self.seed.format {
                    Format::Safetensors => {
                        let mut out = (text.len() as u64).to_le_bytes().to_vec();
                        out.extend_from_slice(&text);
                        out.extend_from_slice(self.tail);
                        out
                    }
                    _ => text,
                };
                (format!("field {} {}", fmt_path(path), fmt_edit(edit)), bytes)
            }
            Op::StPrefix(p) => {
                let mut out = b.clone();
                out[..8].copy_from_slice(&p.to_le_bytes());
                (format!("header length prefix {p}"), out)
            }
            Op::Npy { version, dict, len_field, how } => {
                (how.clone(), npy_bytes(*version, dict, *len_field, self.tail))
            }
            Op::Whole { bytes, how } => (how.clone(), bytes.clone()),
            Op::Random(s) => {
                let mut rng = ChaCha8Rng::seed_from_u64(*s);
                let mut out = b.clone();
                let mut hows = Vec::new();
                let n = if rng.random_bool(0.25) { rng.random_range(2..=4) } else { 1 };
                for _ in 0..n {
                    hows.push(self.random_edit(&mut rng, &mut out));
                }
                (format!("random {s:#018x}: {}", hows.join("; ")), out)
            }
        };
        Case { how: format!("{name}: {how}"), bytes }
    }

    /// One random edit of `out` (see the module documentation); its description.
    fn random_edit(&self, rng: &mut ChaCha8Rng, out: &mut Vec<u8>) -> String {
        if out.is_empty() {
            out.extend_from_slice(TOKENS[rng.random_range(0..TOKENS.len())]);
            return "a token into an empty file".into();
        }
        let len = out.len();
        let hot = self.hot_end.clamp(1, len);
        let pos = |rng: &mut ChaCha8Rng| {
            if self.seed.format.has_header() && rng.random_bool(0.75) {
                rng.random_range(0..hot)
            } else {
                rng.random_range(0..len)
            }
        };
        match rng.random_range(0..7) {
            0 => {
                let (at, bit) = (pos(rng), rng.random_range(0..8));
                out[at] ^= 1 << bit;
                format!("bit {bit} of byte {at} flipped")
            }
            1 => {
                let k = rng.random_range(1..=8);
                let mut at = Vec::new();
                for _ in 0..k {
                    let i = pos(rng);
                    out[i] = rng.random();
                    at.push(i);
                }
                format!("bytes {at:?} randomized")
            }
            2 => {
                let at = pos(rng);
                let v = [0u8, 0xff, 0x7f, 0x80, b'0', b'9', b' '][rng.random_range(0..7)];
                out[at] = v;
                format!("byte {at} set to {v:#04x}")
            }
            3 => {
                let at = pos(rng);
                let n = rng.random_range(1..=(len - at).min(64));
                out.drain(at..at + n);
                format!("{n} bytes deleted at {at}")
            }
            4 => {
                let at = pos(rng);
                let n = rng.random_range(1..=(len - at).min(64));
                let copy = out[at..at + n].to_vec();
                let times = if rng.random_bool(0.1) { 1000 } else { 1 };
                out.splice(at..at, copy.repeat(times));
                format!("{n} bytes at {at} repeated {times} times")
            }
            5 => {
                let at = pos(rng);
                let t = TOKENS[rng.random_range(0..TOKENS.len())];
                out.splice(at..at, t.iter().copied());
                format!("`{}` inserted at {at}", String::from_utf8_lossy(t))
            }
            _ => {
                let runs = number_runs(&out[..self.hot_end.min(out.len())]);
                if runs.is_empty() {
                    let at = pos(rng);
                    out[at] = b'9';
                    return format!("byte {at} set to `9`");
                }
                let (at, n) = runs[rng.random_range(0..runs.len())];
                let h = HUGE_NUMBERS[rng.random_range(0..HUGE_NUMBERS.len())];
                out.splice(at..at + n, h.bytes());
                format!("number at byte {at} -> {h}")
            }
        }
    }
}

impl Format {
    /// Whether the format has a binary header (truncated at every length, the target of most
    /// random edits).
    fn has_header(self) -> bool {
        matches!(self, Format::Npy | Format::Safetensors | Format::Nifti)
    }
}

/// FNV-1a 64 (the per-seed stream of random choices).
/// The `descr` values of the `.npy` header's edits.
const NPY_DESCRS: &[&str] = &[
    "'<f8'",
    "'<f4'",
    "'>f8'",
    "'>f4'",
    "'=f8'",
    "'|f8'",
    "'<f2'",
    "'<f16'",
    "'<i4'",
    "'<i8'",
    "'|u1'",
    "'|b1'",
    "'<c16'",
    "'|O'",
    "'<U4'",
    "'|S0'",
    "''",
    "'<f99999999999999999999'",
    "'<f18446744073709551616'",
    "[('a', '<f8')]",
    "<f8",
    "'<f8",
    "None",
];

/// The `fortran_order` values of the `.npy` header's edits.
const NPY_ORDERS: &[&str] = &["True", "False", "1", "0", "None", "'True'", "tru", "[]"];

/// The `shape` values of the `.npy` header's edits, around the seed's `(n, p)`.
fn npy_shapes(n: usize, p: usize) -> Vec<String> {
    [
        "()".into(),
        "(0,)".into(),
        format!("({n},)"),
        format!("({p}, {n})"),
        format!("(0, {p})"),
        format!("({n}, 0)"),
        "(0, 0)".into(),
        format!("({n}, {p}, 1)"),
        format!("(1, {n}, {p})"),
        format!("({},)", n * p),
        format!("({}, {p})", n + 1),
        format!("({}, {p})", n.saturating_sub(1)),
        format!("({n}, {})", p + 1),
        format!("(18446744073709551615, {p})"),
        "(18446744073709551616, 1)".into(),
        "(9223372036854775808, 2)".into(),
        "(4294967296, 4294967296)".into(),
        "(3221225472, 4)".into(),
        format!("(-1, {p})"),
        format!("({n}, -1)"),
        format!("(1e3, {p})"),
        format!("({n}.0, {p})"),
        format!("[{n}, {p}]"),
        format!("({n} {p})"),
        "(".into(),
        "(,)".into(),
        format!("({n},, {p})"),
        format!("(0x10, {p})"),
        format!("({n}, {p}"),
    ]
    .into()
}

/// Each header field's value replaced by the alternatives, the field removed, and given twice.
fn npy_field_ops(dict: &str) -> Vec<Op> {
    let mut ops = Vec::new();
    let npy = |dict: String, how: String| Op::Npy { version: 1, dict, len_field: None, how };
    let fields: [(&str, &[&str]); 3] = [("descr", NPY_DESCRS), ("fortran_order", NPY_ORDERS), ("shape", &[])];
    let (n, p) = npy_shape(dict).unwrap_or((1, 1));
    let shapes = npy_shapes(n, p);
    for (field, alts) in fields {
        let Some(range) = dict_value(dict, field) else { continue };
        let alts: Vec<String> =
            if field == "shape" { shapes.clone() } else { alts.iter().map(|s| s.to_string()).collect() };
        for a in alts {
            let mut d = dict.to_string();
            d.replace_range(range.clone(), &a);
            ops.push(npy(d, format!("'{field}': {a}")));
        }
        // The field removed, and given twice.
        let key_at = dict.find(&format!("'{field}'")).unwrap_or(0);
        let mut end = range.end;
        if dict[end..].starts_with(',') {
            end += 1;
        }
        let mut d = dict.to_string();
        d.replace_range(key_at..end, "");
        ops.push(npy(d, format!("'{field}' removed")));
        let d = dict.replacen('{', &format!("{{{}, ", &dict[key_at..range.end]), 1);
        ops.push(npy(d, format!("'{field}' twice")));
    }
    ops
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| (h ^ u64::from(c)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// At most `max` of `ops`, evenly spread.
fn sample(ops: Vec<Op>, max: usize) -> Vec<Op> {
    if ops.len() <= max {
        return ops;
    }
    let n = ops.len();
    ops.into_iter().enumerate().filter(|(i, _)| (i * max) % n < max).map(|(_, o)| o).collect()
}

fn splice(b: &[u8], at: usize, len: usize, with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len() - len + with.len());
    out.extend_from_slice(&b[..at]);
    out.extend_from_slice(with);
    out.extend_from_slice(&b[at + len..]);
    out
}

/// The numbers of `b`: `(start, length)` of every `-?digits(.digits)?([eE][+-]?digits)?`.
fn number_runs(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let start = if i > 0 && b[i - 1] == b'-' { i - 1 } else { i };
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            if i + 1 < b.len() && (b[i] == b'e' || b[i] == b'E') {
                let mut j = i + 1;
                if b[j] == b'+' || b[j] == b'-' {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_digit() {
                    i = j;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            out.push((start, i - start));
        } else {
            i += 1;
        }
    }
    out
}

/// Every node of `v` with its path (a copy of the node: the nodes of JSON held in strings
/// live only here).
fn json_paths(v: &Value, path: &mut Vec<Seg>, out: &mut Vec<(Vec<Seg>, Value)>) {
    out.push((path.clone(), v.clone()));
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                path.push(Seg::Key(k.clone()));
                json_paths(x, path, out);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(Seg::Index(i));
                json_paths(x, path, out);
                path.pop();
            }
        }
        Value::String(s) if !path.contains(&Seg::Inner) && (s.starts_with('{') || s.starts_with('[')) => {
            if let Ok(inner) = serde_json::from_str::<Value>(s) {
                path.push(Seg::Inner);
                json_paths(&inner, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn edit_json(doc: &mut Value, path: &[Seg], edit: &JsonEdit) {
    let Some((first, rest)) = path.split_first() else {
        match edit {
            JsonEdit::Replace(v) => *doc = v.clone(),
            JsonEdit::AddUnknown => {
                if let Value::Object(m) = doc {
                    m.insert("fuzz_unknown".into(), Value::from(1));
                }
            }
            JsonEdit::Remove => {}
        }
        return;
    };
    if rest.is_empty() && *edit == JsonEdit::Remove {
        match (doc, first) {
            (Value::Object(m), Seg::Key(k)) => {
                m.remove(k);
            }
            (Value::Array(a), Seg::Index(i)) if *i < a.len() => {
                a.remove(*i);
            }
            _ => {}
        }
        return;
    }
    match (doc, first) {
        (Value::Object(m), Seg::Key(k)) => {
            if let Some(x) = m.get_mut(k) {
                edit_json(x, rest, edit);
            }
        }
        (Value::Array(a), Seg::Index(i)) => {
            if let Some(x) = a.get_mut(*i) {
                edit_json(x, rest, edit);
            }
        }
        (v @ Value::String(_), Seg::Inner) => {
            if let Some(Ok(mut inner)) = v.as_str().map(serde_json::from_str::<Value>) {
                edit_json(&mut inner, rest, edit);
                *v = Value::String(inner.to_string());
            }
        }
        _ => {}
    }
}

fn fmt_path(path: &[Seg]) -> String {
    if path.is_empty() {
        return "/".into();
    }
    path.iter()
        .map(|s| match s {
            Seg::Key(k) => format!("/{k}"),
            Seg::Index(i) => format!("/{i}"),
            Seg::Inner => "/(json)".into(),
        })
        .collect()
}

fn fmt_edit(e: &JsonEdit) -> String {
    match e {
        JsonEdit::Remove => "removed".into(),
        JsonEdit::Replace(v) => format!("= {v}"),
        JsonEdit::AddUnknown => "+ unknown key".into(),
    }
}

/// The `(start, end)` of a `.npy` header dict: after the length field, up to the data.
fn npy_header(b: &[u8]) -> Option<(usize, usize)> {
    if b.get(..6)? != b"\x93NUMPY" {
        return None;
    }
    let (start, len) = match b.get(6)? {
        1 => (10, u16::from_le_bytes(b.get(8..10)?.try_into().ok()?) as usize),
        _ => (12, u32::from_le_bytes(b.get(8..12)?.try_into().ok()?) as usize),
    };
    (start + len <= b.len()).then_some((start, start + len))
}

/// The byte range of the value of `'field'` in a header dict.
fn dict_value(dict: &str, field: &str) -> Option<std::ops::Range<usize>> {
    let key = format!("'{field}'");
    let at = dict.find(&key)? + key.len();
    let colon = at + dict[at..].find(':')? + 1;
    let start = colon + (dict[colon..].len() - dict[colon..].trim_start().len());
    let rest = &dict[start..];
    let end = match rest.chars().next()? {
        '(' | '[' => rest.find([')', ']'])? + 1,
        '\'' => rest[1..].find('\'')? + 2,
        _ => rest.find([',', '}'])?,
    };
    Some(start..start + end)
}

/// `(n, p)` of a header dict's 2-D shape.
fn npy_shape(dict: &str) -> Option<(usize, usize)> {
    let r = dict_value(dict, "shape")?;
    let inner = dict[r].trim_matches(|c| c == '(' || c == ')');
    let mut it = inner.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::parse::<usize>);
    Some((it.next()?.ok()?, it.next()?.ok()?))
}

/// A `.npy` file: magic, `version`, the header `dict` padded as numpy pads it, `data`; the
/// length field is the header's own length unless `len_field` says otherwise.
pub fn npy_bytes(version: u8, dict: &str, len_field: Option<u32>, data: &[u8]) -> Vec<u8> {
    let prefix = if version == 1 || version == 0 || version > 3 { 10 } else { 12 };
    let mut header = dict.to_string();
    while !(prefix + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version, 0]);
    let len = len_field.unwrap_or(header.len() as u32);
    if prefix == 10 {
        out.extend_from_slice(&(len.min(u16::MAX as u32) as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(seed: &Seed, plan: &Plan) -> Vec<Case> {
        cases(seed, plan).collect()
    }

    #[test]
    fn cases_are_deterministic_and_start_with_the_seed_and_every_truncation() {
        let seed = Seed::new("t.json", Format::Json, br#"{"lr": 0.001, "shape": [2, 3], "name": "x"}"#.to_vec());
        let plan = Plan { random: 50, ..Plan::default() };
        let (a, b) = (all(&seed, &plan), all(&seed, &plan));
        assert_eq!(a, b);
        assert_eq!(a[0].bytes, seed.bytes);
        for n in 0..seed.bytes.len() {
            assert_eq!(a[1 + n].bytes, &seed.bytes[..n], "{}", a[1 + n].how);
        }
        let texts: Vec<String> = a.iter().map(|c| String::from_utf8_lossy(&c.bytes).into_owned()).collect();
        assert!(texts.iter().any(|t| t == r#"{"lr": 18446744073709551615, "shape": [2, 3], "name": "x"}"#));
        assert!(texts.iter().any(|t| t == r#"{"shape":[2,3],"name":"x"}"# || t == r#"{"name":"x","shape":[2,3]}"#));
        assert!(texts.iter().any(|t| t.contains(r#""lr":-1"#)), "a field replaced by -1");
        assert!(a.iter().any(|c| c.how.contains("field /shape/1 = 18446744073709551615")));
        let random = a.iter().filter(|c| c.how.contains("random")).count();
        assert_eq!(random, 50);
        // Another rng seed gives other random cases and the same fixed ones.
        let c = all(&seed, &Plan { rng_seed: 1, ..plan });
        assert_eq!(c.len(), a.len());
        assert_ne!(c.last(), a.last());
    }

    #[test]
    fn long_seeds_sample_truncations_and_binary_headers_are_truncated_everywhere() {
        let seed = Seed::new("b", Format::Binary, vec![7u8; 10_000]);
        let plan = Plan { all_truncations_up_to: 100, sampled_truncations: 10, random: 0, ..Plan::default() };
        let lens: Vec<usize> = all(&seed, &plan).iter().skip(1).map(|c| c.bytes.len()).collect();
        assert_eq!(&lens[..100], (0..100).collect::<Vec<_>>().as_slice());
        assert!(lens.len() < 120 && lens.contains(&9999) && lens.iter().all(|&l| l < 10_000), "{lens:?}");
        let npy = npy_bytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 1), }", None, &[0; 16]);
        // The header padded as numpy pads it: magic, version, length and dict to 128 bytes.
        assert_eq!(npy.len(), 128 + 16);
        let seed = Seed::new("x.npy", Format::Npy, npy.clone());
        let c = all(&seed, &Plan { all_truncations_up_to: 0, ..plan });
        let lens: Vec<usize> = c.iter().filter(|c| c.how.contains("truncated")).map(|c| c.bytes.len()).collect();
        assert_eq!(lens, (0..144).collect::<Vec<_>>(), "the header and 64 bytes beyond: all of this file");
        let texts: Vec<String> = c.iter().map(|c| String::from_utf8_lossy(&c.bytes).into_owned()).collect();
        assert!(texts.iter().any(|t| t.contains("'shape': (18446744073709551615, 1)")));
        assert!(texts.iter().any(|t| t.contains("'descr': '<i4'")));
        assert!(texts.iter().any(|t| t.contains("'fortran_order': None")));
        assert!(c.iter().any(|c| c.how == "x.npy: version 2" && c.bytes[6] == 2 && c.bytes.len() == 128 + 16));
    }

    #[test]
    fn safetensors_headers_are_rewritten_with_their_prefix() {
        let header = br#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header);
        file.extend_from_slice(&[0; 8]);
        let seed = Seed::new("s", Format::Safetensors, file);
        let c = all(&seed, &Plan { random: 0, ..Plan::default() });
        let edited = c.iter().find(|c| c.how == "s: field /a/dtype = \"x\"").expect("a dtype replaced");
        let n = u64::from_le_bytes(edited.bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(&edited.bytes[8..8 + n], br#"{"a":{"data_offsets":[0,8],"dtype":"x","shape":[2]}}"#);
        assert_eq!(&edited.bytes[8 + n..], &[0; 8]);
        assert!(c.iter().any(|c| c.how == "s: header length prefix 18446744073709551615"));
        assert!(c.iter().any(|c| c.how.contains("/a/data_offsets/1 = -1")));
    }

    #[test]
    fn text_formats_get_their_own_edits() {
        let toml = Seed::new("c.toml", Format::Toml, b"[train]\nlr = 0.1\n".to_vec());
        let texts: Vec<String> = all(&toml, &Plan { random: 0, ..Plan::default() })
            .iter()
            .map(|c| String::from_utf8_lossy(&c.bytes).into_owned())
            .collect();
        for want in ["[train]\nlr = nan\n", "[train]\n\n", "[train]\nlr = 0.1\nlr = 0.1\n", "[[train]]\nlr = 0.1\n"] {
            assert!(texts.iter().any(|t| t == want), "{want:?}");
        }
        let tsv = Seed::new("r.tsv", Format::Delimited(b'\t'), b"a\tb\n1\t2\n".to_vec());
        let texts: Vec<String> = all(&tsv, &Plan { random: 0, ..Plan::default() })
            .iter()
            .map(|c| String::from_utf8_lossy(&c.bytes).into_owned())
            .collect();
        for want in ["a\tb\n1\t2\t1\n", "a\tb\ta\n1\t2\n", "\tb\n1\t2\n", "b\n2\n", "\u{feff}a\tb\n1\t2\n"] {
            assert!(texts.iter().any(|t| t == want), "{want:?}");
        }
    }

    #[test]
    fn numbers_are_found_with_sign_fraction_and_exponent() {
        assert_eq!(number_runs(b"a -12.5e-3, 7 x1"), vec![(2, 8), (12, 1), (15, 1)]);
    }
}
