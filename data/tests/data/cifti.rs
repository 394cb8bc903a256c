//! The CIFTI-2 reader against nibabel: the fixtures of `tests/fixtures/cifti` were written by
//! nibabel (`make_fixtures.py`), which also saved what it reads back (`get_fdata()` as
//! float64 `.npy`, names and TR in `expected.json`). Values must equal nibabel's to the bit;
//! each malformed file (made here by editing a fixture's bytes) must give its error text.

use boldcast_data::cifti::nifti2::Datatype;
use boldcast_data::cifti::xml::{Elements, IndexMap};
use boldcast_data::cifti::{parcellate_dtseries, ptseries, CiftiFile, ParcelSeries};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cifti").join(name)
}

/// nibabel's `get_fdata()` of `name`: its shape and values (row-major).
fn expected_values(name: &str) -> (Vec<u64>, Vec<f64>) {
    let bytes = std::fs::read(fixture(&format!("{name}.expected.npy"))).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    assert_eq!(npy.order(), npyz::Order::C);
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<f64>().unwrap())
}

fn expected_json(name: &str) -> serde_json::Value {
    let all: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture("expected.json")).unwrap()).unwrap();
    all[name].clone()
}

/// The TR nibabel reads, from its bits.
fn expected_tr(e: &serde_json::Value) -> f64 {
    f64::from_bits(u64::from_str_radix(e["tr_bits"].as_str().unwrap(), 16).unwrap())
}

fn names(e: &serde_json::Value) -> Vec<String> {
    e["names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn assert_same_series(got: &ParcelSeries, name: &str, expected: &str) {
    let e = expected_json(name);
    let (shape, values) = expected_values(expected);
    assert_eq!(got.n_tr as u64, shape[0], "{name}");
    assert_eq!(got.names, names(&e), "{name}");
    assert_eq!(got.names.len() as u64, shape[1], "{name}");
    assert_eq!(bits(&got.data), bits(&values), "{name}: values differ from nibabel's");
    assert_eq!(got.tr_seconds.to_bits(), expected_tr(&e).to_bits(), "{name}");
}

const PTSERIES: [&str; 6] = [
    "f32.ptseries.nii",
    "f64.ptseries.nii",
    "i16.ptseries.nii",
    "u8.ptseries.nii",
    "be.ptseries.nii",
    "f32-scaled.ptseries.nii",
];

#[test]
fn ptseries_equal_nibabel_to_the_bit() {
    for name in PTSERIES {
        let got = ptseries(&fixture(name)).unwrap_or_else(|e| panic!("{e}"));
        assert_same_series(&got, name, name);
        assert!(got.notes.is_empty());
    }
}

#[test]
fn headers_say_what_was_stored() {
    let open = |n: &str| CiftiFile::open(&fixture(n)).unwrap();
    let f = open("f32.ptseries.nii");
    assert_eq!((f.header().datatype, f.header().big_endian, f.shape()), (Datatype::F32, false, (30, 5)));
    assert_eq!(f.intent(), 3004);
    assert_eq!(f.scaling(), None, "slope 1, intercept 0: no scaling");
    let be = open("be.ptseries.nii");
    assert_eq!((be.header().datatype, be.header().big_endian, be.shape()), (Datatype::F64, true, (20, 5)));
    let i16 = open("i16.ptseries.nii");
    assert_eq!(i16.header().datatype, Datatype::I16);
    let s = i16.scaling().expect("nibabel scales int16");
    let e = expected_json("i16.ptseries.nii")["scl_slope_inter"].clone();
    assert_eq!((s.slope, s.inter), (e[0].as_f64().unwrap(), e[1].as_f64().unwrap()));
    assert_eq!(open("u8.ptseries.nii").header().datatype, Datatype::U8);
    // -0.0 times 2.5 stays -0.0: the intercept 0 is not added (nibabel skips it too).
    let scaled = ptseries(&fixture("f32-scaled.ptseries.nii")).unwrap();
    assert_eq!(scaled.data[0].to_bits(), (-0.0f64).to_bits());
    assert_eq!(scaled.data[1], 2.5 * ptseries(&fixture("f32.ptseries.nii")).unwrap().data[1]);
}

#[test]
fn dense_and_label_files_equal_nibabel_to_the_bit() {
    for name in ["sub-01_run-1.dtseries.nii", "atlas.dlabel.nii", "shifted.dlabel.nii"] {
        let f = CiftiFile::open(&fixture(name)).unwrap();
        let (shape, values) = expected_values(name);
        assert_eq!([f.shape().0 as u64, f.shape().1 as u64], shape[..], "{name}");
        assert_eq!(bits(&f.values().unwrap()), bits(&values), "{name}");
    }
    let d = CiftiFile::open(&fixture("sub-01_run-1.dtseries.nii")).unwrap();
    let IndexMap::BrainModels(b) = &d.xml().columns else { panic!("brain models") };
    let structures: Vec<&str> = b.models.iter().map(|m| m.structure.as_str()).collect();
    assert_eq!(
        structures,
        ["CIFTI_STRUCTURE_CORTEX_LEFT", "CIFTI_STRUCTURE_CORTEX_RIGHT", "CIFTI_STRUCTURE_THALAMUS_LEFT"]
    );
    assert_eq!(b.models.iter().map(|m| (m.offset, m.count)).collect::<Vec<_>>(), [(0, 30), (30, 30), (60, 8)]);
    let Elements::Surface { surface_vertices, vertices } = &b.models[0].elements else { panic!("a surface") };
    assert_eq!((*surface_vertices, &vertices[..4]), (40, &[0u64, 2, 3, 4][..]));
    let Elements::Voxels(ijk) = &b.models[2].elements else { panic!("voxels") };
    // Flat indices 0, 4, 8, 9 of a C-order 3x3x3 mask.
    assert_eq!(ijk[..4], [[0, 0, 0], [0, 1, 1], [0, 2, 2], [1, 0, 0]]);
    assert_eq!(b.volume, Some([3, 3, 3]));
    let l = CiftiFile::open(&fixture("atlas.dlabel.nii")).unwrap();
    let IndexMap::Labels(maps) = &l.xml().rows else { panic!("labels") };
    let keys: Vec<(i64, &str)> = maps[0].labels.iter().map(|l| (l.key, l.name.as_str())).collect();
    assert_eq!(keys, [(0, "???"), (9, "Thal"), (1, "Vis"), (3, "Mot"), (7, "Unused"), (2, "DMN")]);
}

#[test]
fn dtseries_parcellated_equals_the_sequential_mean_to_the_bit() {
    let got = parcellate_dtseries(&fixture("sub-01_run-1.dtseries.nii"), &fixture("atlas.dlabel.nii")).unwrap();
    assert_same_series(&got, "sub-01_run-1.parcellated", "sub-01_run-1.parcellated");
    // Keys ascending (1, 2, 3, 9); 0 and the unused 7 left out.
    assert_eq!(got.names, ["Vis", "DMN", "Mot", "Thal"]);
    assert_eq!(got.notes, ["label 7 (Unused) holds no grayordinate and is left out"]);
}

#[test]
fn a_label_file_on_other_grayordinates_is_an_error_naming_both_files() {
    let e = parcellate_dtseries(&fixture("sub-01_run-1.dtseries.nii"), &fixture("shifted.dlabel.nii"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sub-01_run-1.dtseries.nii: its grayordinates are not those of the label file")
            && e.contains("shifted.dlabel.nii: brain model 2 (CIFTI_STRUCTURE_CORTEX_RIGHT): vertex 0 is 5 and 6"),
        "{e}"
    );
    // The files swapped: each reader checks its intent.
    let e = parcellate_dtseries(&fixture("atlas.dlabel.nii"), &fixture("sub-01_run-1.dtseries.nii"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "atlas.dlabel.nii: intent 3007 (ConnDenseLabel, a .dlabel.nii), but a 3002 (ConnDenseSeries, a \
                    .dtseries.nii) is read here"
        ),
        "{e}"
    );
}

/// The error of [`ptseries`] on `bytes` written to a file named `name`.
fn error_of(name: &str, bytes: &[u8]) -> String {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    let e = ptseries(&p).unwrap_err().to_string();
    assert!(e.starts_with(&p.display().to_string()), "names the file: {e}");
    assert!(!e.contains('{'), "a sentence, not a Debug dump: {e}");
    e
}

fn f32_bytes() -> Vec<u8> {
    std::fs::read(fixture("f32.ptseries.nii")).unwrap()
}

/// The f32 fixture with `at..at + with.len()` replaced.
fn patched(at: usize, with: &[u8]) -> Vec<u8> {
    let mut b = f32_bytes();
    b[at..at + with.len()].copy_from_slice(with);
    b
}

/// The f32 fixture with XML text `from` replaced by `to` (of the same length).
fn xml_patched(from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut b = f32_bytes();
    let at = b.windows(from.len()).position(|w| w == from.as_bytes()).unwrap_or_else(|| panic!("{from}"));
    b[at..at + to.len()].copy_from_slice(to.as_bytes());
    b
}

#[test]
fn files_that_are_not_nifti2_say_what_they_are() {
    let gz = std::fs::read(fixture("f32.ptseries.nii.gz")).unwrap();
    let e = error_of("x.ptseries.nii", &gz);
    assert!(e.ends_with("x.ptseries.nii: gzip-compressed: CIFTI files are not compressed; gunzip it"), "{e}");
    let n1 = std::fs::read(fixture("nifti1.nii")).unwrap();
    let e = error_of("x.ptseries.nii", &n1);
    assert!(e.ends_with(": a NIfTI-1 file (sizeof_hdr 348): CIFTI-2 needs NIfTI-2 (sizeof_hdr 540)"), "{e}");
    let e = error_of("x.ptseries.nii", b"hello world");
    assert!(e.ends_with(": not a NIfTI-2 file: sizeof_hdr is 1819043176, not 540 (in either byte order)"), "{e}");
    let e = error_of("x.ptseries.nii", &patched(4, b"n+1\0"));
    assert!(
        e.ends_with(": sizeof_hdr is 540 but the NIfTI-2 magic n+2 is missing (found \"n+1\\x00\\r\\n\\x1a\\n\")"),
        "{e}"
    );
}

#[test]
fn truncated_files_are_errors_at_every_part() {
    let b = f32_bytes();
    let e = error_of("x.ptseries.nii", &b[..300]);
    assert!(e.ends_with(": truncated: the file ends after 300 bytes, inside the 540-byte NIfTI-2 header"), "{e}");
    // Inside the XML: vox_offset (2112) is past the end.
    let e = error_of("x.ptseries.nii", &b[..1000]);
    assert!(
        e.ends_with(
            ": vox_offset 2112 is not between the end of the 540-byte header and the end of the file (1000 bytes)"
        ),
        "{e}"
    );
    let e = error_of("x.ptseries.nii", &b[..b.len() - 3]);
    assert!(
        e.ends_with(": truncated: 30 x 5 values of 4 bytes need 600 bytes after vox_offset 2112, the file holds 597"),
        "{e}"
    );
    let mut long = b.clone();
    long.extend_from_slice(&[0; 4]);
    let e = error_of("x.ptseries.nii", &long);
    assert!(
        e.ends_with(
            ": bytes after the data: 30 x 5 values of 4 bytes need 600 bytes after vox_offset 2112, the file holds 604"
        ),
        "{e}"
    );
}

#[test]
fn bad_offsets_and_extension_sizes_are_errors() {
    let e = error_of("x.ptseries.nii", &patched(168, &10i64.to_le_bytes()));
    assert!(e.contains(": vox_offset 10 is not between the end of the 540-byte header"), "{e}");
    let e = error_of("x.ptseries.nii", &patched(168, &(-16i64).to_le_bytes()));
    assert!(e.ends_with(": vox_offset is negative (-16)"), "{e}");
    // vox_offset inside the XML: the extension's esize runs past it.
    let e = error_of("x.ptseries.nii", &patched(168, &1024i64.to_le_bytes()));
    assert!(
        e.ends_with(": header extension 1 (code 32) at byte 544: esize 1568 is not between 8 and the 480 bytes left before vox_offset"),
        "{e}"
    );
    let e = error_of("x.ptseries.nii", &patched(544, &4i32.to_le_bytes()));
    assert!(e.contains(": header extension 1 (code 32) at byte 544: esize 4 is not between 8"), "{e}");
    let e = error_of("x.ptseries.nii", &patched(548, &40i32.to_le_bytes()));
    assert!(e.ends_with(": no CIFTI-2 XML: none of its 1 header extensions has code 32 (codes: 40)"), "{e}");
    let e = error_of("x.ptseries.nii", &patched(540, &[0]));
    assert!(
        e.ends_with(": no CIFTI-2 XML: the file has no header extension (CIFTI-2 keeps its XML in one of code 32)"),
        "{e}"
    );
}

#[test]
fn header_fields_out_of_range_are_errors() {
    let e = error_of("x.ptseries.nii", &patched(12, &8i16.to_le_bytes()));
    assert!(
        e.ends_with(": datatype 8 (int32) is not read: only uint8 (2), int16 (4), float32 (16) and float64 (64) are"),
        "{e}"
    );
    let e = error_of("x.ptseries.nii", &patched(504, &1234i32.to_le_bytes()));
    assert!(e.ends_with(": intent code 1234 is not a CIFTI-2 intent (3000 to 3012)"), "{e}");
    let e = error_of("x.ptseries.nii", &patched(504, &3006i32.to_le_bytes()));
    assert!(
        e.ends_with(": intent 3006 (ConnDenseScalar, a .dscalar.nii), but a 3004 (ConnParcelSries, a .ptseries.nii) is read here"),
        "{e}"
    );
    let e = error_of("x.ptseries.nii", &patched(16, &7i64.to_le_bytes()));
    assert!(e.contains(": dims [7, 1, 1, 1, 1, 30, 5, 1]: a 2-D CIFTI-2 matrix has dim[0] = 6"), "{e}");
    let mut slope = 2.0f64.to_le_bytes().to_vec();
    slope.extend_from_slice(&f64::NAN.to_le_bytes());
    let e = error_of("x.ptseries.nii", &patched(176, &slope));
    assert!(e.ends_with(": scl_slope is 2 but scl_inter is NaN, not a finite number"), "{e}");
    // A NaN slope means no scaling (nibabel's rule): the stored values.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("nan-slope.ptseries.nii");
    std::fs::write(&p, patched(176, &f64::NAN.to_le_bytes())).unwrap();
    assert_eq!(bits(&ptseries(&p).unwrap().data), bits(&expected_values("f32.ptseries.nii").1));
}

#[test]
fn xml_that_disagrees_with_the_data_is_an_error_with_the_numbers() {
    let e = error_of("x.ptseries.nii", &xml_patched("NumberOfSeriesPoints=\"30\"", "NumberOfSeriesPoints=\"31\""));
    assert!(
        e.ends_with(": the XML's matrix dimension 0 (CIFTI_INDEX_TYPE_SERIES) has 31 indices, but dim[5] is 30"),
        "{e}"
    );
    let e = error_of("x.ptseries.nii", &xml_patched("Name=\"thalamus\"", "Name=\"L_visual\""));
    assert!(e.ends_with(": two parcels are named \"L_visual\""), "{e}");
    let e = error_of("x.ptseries.nii", &xml_patched("SeriesUnit=\"SECOND\"", "SeriesUnit=\"HERTZ\" "));
    assert!(e.ends_with(": SeriesUnit is HERTZ: a BOLD series is in SECOND"), "{e}");
    let e = error_of("x.ptseries.nii", &xml_patched("<Matrix>", "<Matrix "));
    assert!(e.contains(": the CIFTI-2 XML is not well-formed: "), "{e}");
    let e =
        error_of("x.ptseries.nii", &xml_patched("AppliesToMatrixDimension=\"1\"", "AppliesToMatrixDimension=\"0\""));
    assert!(e.ends_with(": matrix dimension 0 has two MatrixIndicesMaps"), "{e}");
}

#[test]
fn non_finite_values_are_errors_naming_row_and_parcel() {
    let b = f32_bytes();
    // Column-major: the value of TR 3, parcel 2 (0-based 1) is stored at 1 * 30 + 3.
    let e = error_of("x.ptseries.nii", &patched(2112 + 4 * 33, &f32::INFINITY.to_le_bytes()));
    assert!(e.ends_with("x.ptseries.nii, row 3, column 2 (L_motor): non-finite value inf"), "{e}");
    assert_eq!(b.len(), 2712);
}

#[test]
fn a_label_value_that_is_not_a_key_is_an_error_naming_the_grayordinate() {
    let mut b = std::fs::read(fixture("atlas.dlabel.nii")).unwrap();
    let at = CiftiFile::open(&fixture("atlas.dlabel.nii")).unwrap().header().vox_offset as usize;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("bad.dlabel.nii");
    for (g, v, shown) in
        [(0usize, 5.0f32, "5"), (7, 1.5, "1.5"), (2, f32::NAN, "NaN"), (3, -1e38, "-9.999999680285692e37")]
    {
        let mut c = b.clone();
        c[at + 4 * g..at + 4 * g + 4].copy_from_slice(&v.to_le_bytes());
        std::fs::write(&p, &c).unwrap();
        let e = parcellate_dtseries(&fixture("sub-01_run-1.dtseries.nii"), &p).unwrap_err().to_string();
        assert!(
            e.ends_with(&format!(
                "bad.dlabel.nii: grayordinate {g} holds {shown}, which is not a key of its label table"
            )),
            "{e}"
        );
    }
    // Key 7 ("Unused") on grayordinate 0 makes it a parcel of one grayordinate, after Mot (3).
    b[at..at + 4].copy_from_slice(&7.0f32.to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    let got = parcellate_dtseries(&fixture("sub-01_run-1.dtseries.nii"), &p).unwrap();
    assert_eq!(got.names, ["Vis", "DMN", "Mot", "Unused", "Thal"]);
    assert!(got.notes.is_empty());
    let dense = CiftiFile::open(&fixture("sub-01_run-1.dtseries.nii")).unwrap().values().unwrap();
    let column: Vec<f64> = (0..got.n_tr).map(|t| got.data[t * 5 + 3]).collect();
    // The sum starts at +0.0 (as the generator's Python loop does), so the -0.0 at TR 0 is +0.0.
    let expected: Vec<f64> = (0..got.n_tr).map(|t| (0.0 + dense[t * 68]) / 1.0).collect();
    assert_eq!(dense[0].to_bits(), (-0.0f64).to_bits());
    assert_eq!(bits(&column), bits(&expected));
    assert_eq!(column[0].to_bits(), 0.0f64.to_bits());
}

/// Files whose intent nibabel left unset (3000, ConnUnknown: what `Cifti2Image(...)
/// .to_filename(...)` writes) are read by their index maps, with one note; the same values
/// with the intent set read the same bits. A file whose maps contradict its name is refused.
#[test]
fn files_with_the_intent_unset_are_read_by_their_maps() {
    let unset = ptseries(&fixture("unset.ptseries.nii")).unwrap_or_else(|e| panic!("{e}"));
    assert_same_series(&unset, "unset.ptseries.nii", "unset.ptseries.nii");
    let set = ptseries(&fixture("set.ptseries.nii")).unwrap();
    assert_eq!((bits(&set.data), &set.names, set.tr_seconds), (bits(&unset.data), &unset.names, unset.tr_seconds));
    assert!(set.notes.is_empty(), "{:?}", set.notes);
    assert_eq!(
        unset.notes,
        ["CIFTI files with intent 3000 (ConnUnknown, what nibabel writes when the intent is not set) were read by \
          their index maps"]
    );
    let got = parcellate_dtseries(&fixture("unset.dtseries.nii"), &fixture("unset.dlabel.nii")).unwrap();
    assert_same_series(&got, "unset.parcellated", "unset.parcellated");
    assert_eq!(got.notes.iter().filter(|n| n.contains("intent 3000")).count(), 1, "{:?}", got.notes);
    let e = ptseries(&fixture("unset-dense.ptseries.nii")).unwrap_err().to_string();
    assert!(
        e.ends_with(
            "unset-dense.ptseries.nii: intent 3000 (ConnUnknown, a .nii), and its maps are CIFTI_INDEX_TYPE_SERIES x \
             CIFTI_INDEX_TYPE_BRAIN_MODELS, not the CIFTI_INDEX_TYPE_SERIES x CIFTI_INDEX_TYPE_PARCELS of a \
             3004 (ConnParcelSries, a .ptseries.nii)"
        ),
        "{e}"
    );
    // Through the loader: one note for the data set.
    let d = tempfile::tempdir().unwrap();
    for s in ["01", "02"] {
        std::fs::copy(fixture("unset.ptseries.nii"), d.path().join(format!("sub-{s}_run-1_bold.ptseries.nii")))
            .unwrap();
    }
    let ds = boldcast_data::Dataset::load(d.path()).unwrap();
    assert_eq!(ds.notes().iter().filter(|n| n.contains("intent 3000")).count(), 1, "{:?}", ds.notes());
}

/// The fixture label file with `extra` labels (keys 1000.., named `L<key>`) that no
/// grayordinate holds added to its table (the test kit's builder).
fn dlabel_with_labels(extra: usize) -> Vec<u8> {
    let labels: Vec<(i64, String)> = (1000..1000 + extra as i64).map(|k| (k, format!("L{k}"))).collect();
    boldcast_testkit::fuzz::reader_targets::dlabel_with_labels(&labels)
}

/// A label table of 100,000 labels that no grayordinate holds is read in linear time, and the
/// labels left out are one note (a count and the first few), not one each.
#[test]
fn many_labels_without_grayordinates_are_linear_and_one_note() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("many.dlabel.nii");
    std::fs::write(&path, dlabel_with_labels(100_000)).unwrap();
    let t = std::time::Instant::now();
    let got = parcellate_dtseries(&fixture("sub-01_run-1.dtseries.nii"), &path).unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_same_series(&got, "sub-01_run-1.parcellated", "sub-01_run-1.parcellated");
    assert_eq!(
        got.notes,
        ["100001 labels hold no grayordinate and are left out: 7 (Unused), 1000 (L1000), 1001 (L1001), 1002 \
          (L1002), 1003 (L1003), 1004 (L1004), 1005 (L1005), 1006 (L1006), 1007 (L1007), 1008 (L1008), ..."]
    );
    assert!(secs < 20.0, "{secs} s for 100,000 labels");
}
