//! A dense series (`.dtseries.nii`) averaged over the labels of a `.dlabel.nii`: one parcel per
//! label, its value at each TR the mean of the series over the label's grayordinates.
//!
//! - **Parcels**: the label table's keys in ascending order, named by the labels; key 0 (the
//!   unlabelled `???` of every CIFTI label table) is left out, and so is every label that no
//!   grayordinate holds, with one note counting them and naming the first ten (a label table
//!   often lists labels that a given file's grayordinates do not use; they would have no
//!   mean). Linear in the labels: a table of 100,000 is read in well under a second. Two labels of one name, or one
//!   with an empty name, are an error (parcel names identify the columns).
//! - **The label file** has one label map, and the same brain models as the series: the same
//!   structures in the same order, with the same vertices and voxels; otherwise an error
//!   names both files and the first difference. Every grayordinate's label value is a key of
//!   the table.
//! - **The mean**, in f64: `s = 0.0; s += x[t, g]` over the label's grayordinates `g` in
//!   index order, then `s / count` (a label of one grayordinate holding -0.0 averages to
//!   +0.0). A fixed order makes it reproducible (pairwise or
//!   compensated sums differ in the last bits); the fixtures' expected means are computed
//!   with the same loop in Python.

use super::nifti2::short;
use super::xml::{dims_text, ijk_text, BrainModels, Elements, IndexMap, LabelMap};
use super::{check_finite, cifti_err, expect_intent, tr_of, CiftiFile, CiftiRun, INTENT_DENSE_LABELS};
use super::{RawRun, INTENT_DENSE_SERIES};
use crate::error::DataError;
use std::path::Path;

/// Reads `path` (a `.dtseries.nii`) averaged over the labels of `dlabel`.
pub(crate) fn read_dtseries_parcellated(path: &Path, dlabel: &Path) -> Result<CiftiRun, DataError> {
    let series = CiftiFile::open(path)?;
    let mut notes: Vec<String> = expect_intent(&series, INTENT_DENSE_SERIES)?.into_iter().map(String::from).collect();
    let tr = tr_of(path, &series.xml.rows)?;
    let grays = brain_models(&series)?;
    let labels = CiftiFile::open(dlabel)?;
    if let Some(n) = expect_intent(&labels, INTENT_DENSE_LABELS)? {
        if !notes.iter().any(|m| m == n) {
            notes.push(n.into());
        }
    }
    let map = one_label_map(&labels)?;
    if let Some(diff) = first_difference(grays, brain_models(&labels)?) {
        return Err(cifti_err(
            path,
            format!("its grayordinates are not those of the label file {}: {diff}", dlabel.display()),
        ));
    }
    let assign = assignment(&labels, map)?;
    let (n, p) = (series.rows, assign.names.len());
    // n * p <= n * grayordinates: the series file holds that many values.
    let mut sums = vec![0.0f64; n * p];
    series.for_each_column(|g, col| {
        if let Some(q) = assign.parcel[g] {
            for (t, &x) in col.iter().enumerate() {
                sums[t * p + q] += x;
            }
        }
    })?;
    for (i, s) in sums.iter_mut().enumerate() {
        *s /= assign.count[i % p] as f64;
    }
    check_finite(path, &sums, &assign.names)?;
    let raw = RawRun { n_tr: n, parcels: p, names: Some(assign.names), data: sums };
    notes.extend(assign.notes);
    Ok(CiftiRun { raw, tr_seconds: Some(tr), notes })
}

/// The brain models of matrix dimension 1.
fn brain_models(f: &CiftiFile) -> Result<&BrainModels, DataError> {
    match &f.xml.columns {
        IndexMap::BrainModels(b) => Ok(b),
        other => Err(cifti_err(&f.path, format!("matrix dimension 1 is {}, not brain models", other.kind()))),
    }
}

/// The one label map of a `.dlabel.nii`.
fn one_label_map(f: &CiftiFile) -> Result<&LabelMap, DataError> {
    match &f.xml.rows {
        IndexMap::Labels(maps) if maps.len() == 1 => Ok(&maps[0]),
        IndexMap::Labels(maps) => {
            Err(cifti_err(&f.path, format!("{} label maps: one is read (a parcellation per file)", maps.len())))
        }
        other => Err(cifti_err(&f.path, format!("matrix dimension 0 is {}, not labels", other.kind()))),
    }
}

/// The first way `a` (the series') and `b` (the labels') differ, in words.
fn first_difference(a: &BrainModels, b: &BrainModels) -> Option<String> {
    if a.models.len() != b.models.len() {
        return Some(format!("{} brain models, the label file {}", a.models.len(), b.models.len()));
    }
    for (i, (x, y)) in a.models.iter().zip(&b.models).enumerate() {
        let at = format!("brain model {} ({})", i + 1, x.structure);
        if x.structure != y.structure {
            return Some(format!("{at} is {} in the label file", y.structure));
        }
        if x.count != y.count {
            return Some(format!("{at} has {} grayordinates, in the label file {}", x.count, y.count));
        }
        let diff = match (&x.elements, &y.elements) {
            (Elements::Surface { vertices: u, .. }, Elements::Surface { vertices: v, .. }) => {
                u.iter().zip(v).position(|(p, q)| p != q).map(|j| format!("vertex {j} is {} and {}", u[j], v[j]))
            }
            (Elements::Voxels(u), Elements::Voxels(v)) => u
                .iter()
                .zip(v)
                .position(|(p, q)| p != q)
                .map(|j| format!("voxel {j} is {} and {}", ijk_text(&u[j]), ijk_text(&v[j]))),
            _ => Some("a surface in one file and voxels in the other".into()),
        };
        if let Some(d) = diff {
            return Some(format!("{at}: {d}"));
        }
        if let (Elements::Surface { surface_vertices: s, .. }, Elements::Surface { surface_vertices: t, .. }) =
            (&x.elements, &y.elements)
        {
            if s != t {
                return Some(format!("{at}: a surface of {s} vertices, in the label file {t}"));
            }
        }
    }
    let vol = |v: &Option<[u64; 3]>| v.as_ref().map_or_else(|| "none".to_string(), dims_text);
    (a.volume != b.volume).then(|| format!("volume {}, in the label file {}", vol(&a.volume), vol(&b.volume)))
}

/// Which parcel each grayordinate averages into.
struct Assignment {
    /// The parcel of each grayordinate (`None`: unlabelled).
    parcel: Vec<Option<usize>>,
    /// Grayordinates per parcel (at least 1).
    count: Vec<usize>,
    /// The parcels' names.
    names: Vec<String>,
    /// Labels left out.
    notes: Vec<String>,
}

/// The parcels of the label file's one map: keys ascending, key 0 and unused labels left out.
fn assignment(f: &CiftiFile, map: &LabelMap) -> Result<Assignment, DataError> {
    let mut keys: Vec<(i64, &str)> = map.labels.iter().map(|l| (l.key, l.name.as_str())).collect();
    keys.sort_unstable();
    let values = f.values()?;
    let mut used = vec![0usize; keys.len()];
    let mut slot = Vec::with_capacity(values.len());
    for (g, &v) in values.iter().enumerate() {
        // An integral value within i64 converts exactly (`as` saturates, which the check undoes).
        let key = (v.is_finite() && v.fract() == 0.0 && (v as i64) as f64 == v).then_some(v as i64);
        let k = key.and_then(|key| keys.binary_search_by_key(&key, |&(k, _)| k).ok());
        let k = k.ok_or_else(|| {
            cifti_err(&f.path, format!("grayordinate {g} holds {}, which is not a key of its label table", short(v)))
        })?;
        used[k] += 1;
        slot.push(k);
    }
    let (mut parcel_of_key, mut count, mut names) = (vec![None; keys.len()], vec![], vec![]);
    let (mut seen, mut unused) = (std::collections::HashSet::new(), Vec::new());
    for (k, &(key, name)) in keys.iter().enumerate() {
        if key == 0 {
            continue;
        }
        if used[k] == 0 {
            unused.push((key, name));
            continue;
        }
        if name.is_empty() || !seen.insert(name) {
            let why = if name.is_empty() { "an empty name".to_string() } else { format!("the name {name} twice") };
            return Err(cifti_err(&f.path, format!("label {key}: {why}; parcel names must be distinct and non-empty")));
        }
        parcel_of_key[k] = Some(names.len());
        count.push(used[k]);
        names.push(name.to_string());
    }
    if names.is_empty() {
        return Err(cifti_err(&f.path, "no grayordinate holds a label other than key 0: no parcels"));
    }
    let parcel = slot.into_iter().map(|k| parcel_of_key[k]).collect();
    Ok(Assignment { parcel, count, names, notes: unused_note(&unused).into_iter().collect() })
}

/// Labels listed by name in the note of labels left out; the rest are counted.
const NOTE_LABELS: usize = 10;

/// The one note of the labels `(key, name)` that no grayordinate holds (a table may list
/// thousands): their count and the first [`NOTE_LABELS`].
fn unused_note(unused: &[(i64, &str)]) -> Option<String> {
    match unused {
        [] => None,
        [(key, name)] => Some(format!("label {key} ({name}) holds no grayordinate and is left out")),
        _ => {
            let listed: Vec<String> =
                unused.iter().take(NOTE_LABELS).map(|(key, name)| format!("{key} ({name})")).collect();
            let more = if unused.len() > NOTE_LABELS { ", ..." } else { "" };
            Some(format!("{} labels hold no grayordinate and are left out: {}{more}", unused.len(), listed.join(", ")))
        }
    }
}
