//! Fuzz targets of the data readers' scale and picks (issue 29): label tables of up to 50,000
//! labels built from a recipe ([`label_table`]: the reader must stay linear), and the
//! `--format` pick ([`format()`]: any text is a format read, or an error naming `--format`).

use super::check::{Outcome, Target};
use super::mutate::{Format, Plan, Seed};
use super::targets::{cifti_fixture, file_len, put, scratch, CIFTI_DLABEL, CIFTI_DTSERIES};
use boldcast_data::write::{write_run, RunFormat};
use boldcast_data::{cifti, Dataset, Selection};
use boldcast_fixtures::SynthRun;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The most labels a recipe asks for.
pub const MAX_LABELS: usize = 50_000;

/// The label file the `label_table` target writes.
pub const LABEL_FILE: &str = "fuzz.dlabel.nii";

/// The labels `(key, name as XML text)` a recipe asks for: its first three bytes (little-endian)
/// give the count modulo `MAX_LABELS + 1`; each label takes one more byte of the rest, in turn,
/// which makes it ordinary (key `1000 + i`) or one of the cases a reader must survive: a key
/// given twice, a negative or huge key, an empty or repeated name, an escaped name, the key of
/// a label that grayordinates hold.
pub fn recipe_labels(bytes: &[u8]) -> Vec<(i64, String)> {
    let n = bytes.iter().take(3).enumerate().fold(0usize, |a, (i, &b)| a | usize::from(b) << (8 * i));
    let n = n % (MAX_LABELS + 1);
    let ops = bytes.get(3..).unwrap_or(&[]);
    let mut out: Vec<(i64, String)> = Vec::with_capacity(n);
    for i in 0..n {
        let op = if ops.is_empty() { 0 } else { ops[i % ops.len()] % 16 };
        let (key, name) = (1000 + i as i64, format!("L{i}"));
        let prev = out.last().cloned();
        out.push(match (op, prev) {
            (1, Some((k, _))) => (k, name),
            (2, _) => (-(i as i64) - 1, name),
            (3, _) => (key, String::new()),
            (4, Some((_, n))) => (key, n),
            (5, _) => (i64::MAX - i as i64, name),
            (6, _) => (key, format!("A&amp;B&lt;{i}")),
            (7, _) => ([1, 2, 3, 9][i % 4], name),
            _ => (key, name),
        });
    }
    out
}

/// The fixture label file with `labels` added to its table: the XML extension rebuilt (padded
/// to 16 bytes) and `vox_offset` moved.
pub fn dlabel_with_labels(labels: &[(i64, String)]) -> Vec<u8> {
    let b = std::fs::read(cifti_fixture(CIFTI_DLABEL)).expect("the label fixture");
    let vox = i64::from_le_bytes(b[168..176].try_into().expect("8 bytes")) as usize;
    let xml = String::from_utf8_lossy(&b[552..vox]);
    let table: String = labels
        .iter()
        .map(|(k, n)| format!("<Label Key=\"{k}\" Red=\"0\" Green=\"0\" Blue=\"0\" Alpha=\"1\">{n}</Label>"))
        .collect();
    let xml = xml.trim_end_matches('\0').replacen("</LabelTable>", &format!("{table}</LabelTable>"), 1);
    let mut content = xml.into_bytes();
    content.resize(content.len() + (16 - (content.len() + 8) % 16) % 16, 0);
    let mut out = b[..544].to_vec();
    out[168..176].copy_from_slice(&((552 + content.len()) as i64).to_le_bytes());
    out.extend_from_slice(&((content.len() + 8) as i32).to_le_bytes());
    out.extend_from_slice(&32i32.to_le_bytes());
    out.extend_from_slice(&content);
    out.extend_from_slice(&b[vox..]);
    out
}

/// A label table at scale ([`recipe_labels`]) parcellating the fixture dense series: a valid
/// one gives one parcel per label that grayordinates hold and at most two notes, however many
/// labels are left out.
pub fn label_table(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = scratch("label_table");
        std::fs::copy(cifti_fixture(CIFTI_DTSERIES), d.join(CIFTI_DTSERIES)).expect("copying the series fixture");
        d
    });
    let path = dir.join(LABEL_FILE);
    put(&path, &dlabel_with_labels(&recipe_labels(bytes)));
    let s = cifti::parcellate_dtseries(&dir.join(CIFTI_DTSERIES), &path).map_err(|e| e.to_string())?;
    assert!(!s.names.is_empty() && s.data.iter().all(|v| v.is_finite()));
    assert!(s.notes.len() <= 2, "{} notes", s.notes.len());
    Ok(())
}

/// The tree of the `format` target: `sub-01` in `.tsv` and `.csv`, `sub-02` in `.npy` only.
fn format_tree() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = scratch("format");
        let names: Vec<String> = (0..3).map(|q| format!("V{q}")).collect();
        for (s, f) in [("01", RunFormat::Tsv), ("01", RunFormat::Csv), ("02", RunFormat::Npy)] {
            let data = (0..36).map(|i| ((i * 7919) % 101) as f64 / 10.0).collect();
            let run = SynthRun { subject: s.into(), run: "1".into(), n_tr: 12, parcels: 3, data };
            let p = d.join(format!("sub-{s}_run-1_bold.{}", f.extension()));
            write_run(&p, &run, &names, f).expect("a format target run is written");
        }
        d
    })
}

/// `--format` given the input (as UTF-8, lossily): a load, or an error naming `--format`; a
/// load takes `sub-01` from the picked format's file.
pub fn format(bytes: &[u8]) -> Outcome {
    let root = format_tree();
    let f = String::from_utf8_lossy(bytes).into_owned();
    let sel = Selection { format: Some(f.clone()), ..Selection::default() };
    let ds = Dataset::load_with(root, &sel).map_err(|e| e.to_string())?;
    assert_eq!(ds.runs.len(), 2);
    assert!(ds.runs[0].path.to_string_lossy().ends_with(&format!(".{f}")), "{:?} for {f:?}", ds.runs[0].path);
    Ok(())
}

/// The targets of this module, with their seeds and plans (sized to a few seconds each).
pub fn reader_targets() -> Vec<Target> {
    let recipe = |count: usize, ops: &[u8]| {
        let mut b = count.to_le_bytes()[..3].to_vec();
        b.extend_from_slice(ops);
        b
    };
    vec![
        Target {
            name: "label_table",
            seeds: vec![
                Seed::new("plain-50000", Format::Binary, recipe(50_000, &[])),
                Seed::new("mixed-20000", Format::Binary, recipe(20_000, &[0, 2, 3, 5, 6, 0, 0, 4, 0, 8])),
                Seed::new("twice-1000", Format::Binary, recipe(1000, &[0, 0, 1])),
            ],
            plan: Plan { random: 30, ..Plan::default() },
            // The label file the recipe writes (about 90 bytes a label) and the series.
            other_input: MAX_LABELS * 96 + file_len(&cifti_fixture(CIFTI_DTSERIES)),
            must_name: &[LABEL_FILE],
            run: Box::new(label_table),
        },
        Target {
            name: "format",
            seeds: ["tsv", "csv", "npy", "ptseries.nii", "xlsx"]
                .into_iter()
                .map(|f| Seed::new(f, Format::Binary, f.as_bytes().to_vec()))
                .collect(),
            plan: Plan { random: 1500, ..Plan::default() },
            other_input: 4096,
            must_name: &["--format"],
            run: Box::new(format),
        },
    ]
}
