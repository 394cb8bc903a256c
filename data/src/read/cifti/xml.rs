//! The CIFTI-2 XML of header extension 32: its two `MatrixIndicesMap`s (one per matrix
//! dimension), each a series, parcels, brain models, labels or scalars, checked for the
//! consistency the format promises (offsets in order, indices inside their surface or volume,
//! unique parcel names, unique label keys). Only what a BOLD reader needs is kept: parcel
//! names but not their vertices, label keys and names but not their colours.

use roxmltree::{Document, Node};

/// The CIFTI-2 XML of a file: what each of the matrix's two dimensions indexes.
#[derive(Clone, Debug, PartialEq)]
pub struct CiftiXml {
    /// The `Version` attribute (`2` or `2.0`).
    pub version: String,
    /// The map of matrix dimension 0 (NIfTI `dim[5]`: the rows, e.g. TRs of a series).
    pub rows: IndexMap,
    /// The map of matrix dimension 1 (NIfTI `dim[6]`: the columns, e.g. parcels).
    pub columns: IndexMap,
}

/// What one matrix dimension indexes (`IndicesMapToDataType`).
#[derive(Clone, Debug, PartialEq)]
pub enum IndexMap {
    /// `CIFTI_INDEX_TYPE_SERIES`: evenly spaced points (TRs).
    Series(Series),
    /// `CIFTI_INDEX_TYPE_PARCELS`: the parcels' names, in order.
    Parcels(Vec<String>),
    /// `CIFTI_INDEX_TYPE_BRAIN_MODELS`: grayordinates (surface vertices and voxels).
    BrainModels(BrainModels),
    /// `CIFTI_INDEX_TYPE_LABELS`: one label table per map.
    Labels(Vec<LabelMap>),
    /// `CIFTI_INDEX_TYPE_SCALARS`: the maps' names.
    Scalars(Vec<String>),
}

impl IndexMap {
    /// The number of indices along the dimension.
    pub fn len(&self) -> usize {
        match self {
            IndexMap::Series(s) => s.points,
            IndexMap::Parcels(n) | IndexMap::Scalars(n) => n.len(),
            IndexMap::BrainModels(b) => b.grayordinates(),
            IndexMap::Labels(l) => l.len(),
        }
    }

    /// Whether the dimension has no index.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `IndicesMapToDataType` name, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            IndexMap::Series(_) => "CIFTI_INDEX_TYPE_SERIES",
            IndexMap::Parcels(_) => "CIFTI_INDEX_TYPE_PARCELS",
            IndexMap::BrainModels(_) => "CIFTI_INDEX_TYPE_BRAIN_MODELS",
            IndexMap::Labels(_) => "CIFTI_INDEX_TYPE_LABELS",
            IndexMap::Scalars(_) => "CIFTI_INDEX_TYPE_SCALARS",
        }
    }
}

/// A series map.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// `NumberOfSeriesPoints`.
    pub points: usize,
    /// `SeriesStart` times `10^SeriesExponent`.
    pub start: f64,
    /// `SeriesStep` times `10^SeriesExponent` (the TR, for a unit of seconds).
    pub step: f64,
    /// `SeriesUnit`: `SECOND`, `HERTZ`, `METER` or `RADIAN`.
    pub unit: String,
}

/// The grayordinates of a brain-models map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrainModels {
    /// The models in index order (each starts where the one before ends).
    pub models: Vec<BrainModel>,
    /// `VolumeDimensions` of the `Volume` element, when there is one.
    pub volume: Option<[u64; 3]>,
}

impl BrainModels {
    /// Grayordinates in all.
    pub fn grayordinates(&self) -> usize {
        self.models.last().map_or(0, |m| m.offset + m.count)
    }
}

/// One brain model: a structure's vertices or voxels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrainModel {
    /// `BrainStructure`, e.g. `CIFTI_STRUCTURE_CORTEX_LEFT`.
    pub structure: String,
    /// `IndexOffset`: its first grayordinate.
    pub offset: usize,
    /// `IndexCount`: its grayordinates.
    pub count: usize,
    /// Its vertices or voxels.
    pub elements: Elements,
}

/// The vertices of a surface model or the voxels of a volume model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Elements {
    /// `CIFTI_MODEL_TYPE_SURFACE`: vertex indices of a surface of `surface_vertices`.
    Surface {
        /// `SurfaceNumberOfVertices`.
        surface_vertices: u64,
        /// `VertexIndices`, one per grayordinate.
        vertices: Vec<u64>,
    },
    /// `CIFTI_MODEL_TYPE_VOXELS`: `VoxelIndicesIJK`, one triple per grayordinate.
    Voxels(Vec<[u64; 3]>),
}

/// One map of a labels dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelMap {
    /// `MapName`.
    pub name: String,
    /// The label table in file order.
    pub labels: Vec<Label>,
}

/// One label of a label table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    /// `Key`: the value the data holds for it.
    pub key: i64,
    /// The label's name (the element's text).
    pub name: String,
}

/// Parses the XML text (trailing NUL padding already removed), or says what is wrong.
pub fn parse(text: &str) -> Result<CiftiXml, String> {
    // roxmltree recurses per level of nesting: 200000 nested elements overflow the stack
    // (an abort, not an error), so depth is measured first; CIFTI-2 nests 6 deep.
    let depth = nesting(text.as_bytes());
    if depth > MAX_DEPTH {
        return Err(format!("the CIFTI-2 XML nests elements {depth} deep (at most {MAX_DEPTH})"));
    }
    let doc = Document::parse(text).map_err(|e| format!("the CIFTI-2 XML is not well-formed: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "CIFTI" {
        return Err(format!("the XML's root element is <{}>, not <CIFTI>", root.tag_name().name()));
    }
    let version = root.attribute("Version").unwrap_or("").to_string();
    if version != "2" && !version.starts_with("2.") {
        return Err(format!("CIFTI Version \"{version}\": only CIFTI-2 (Version 2) is read"));
    }
    let matrix = one_child(root, "Matrix")?.ok_or("the CIFTI-2 XML has no <Matrix>")?;
    let mut dims: [Option<IndexMap>; 2] = [None, None];
    for node in children(matrix, "MatrixIndicesMap") {
        let map = index_map(node)?;
        let applies = attr(node, "AppliesToMatrixDimension")?;
        for d in applies.split(',').map(str::trim) {
            let d: usize =
                d.parse().map_err(|_| format!("AppliesToMatrixDimension \"{applies}\" is not 0, 1 or 0,1"))?;
            let slot = dims.get_mut(d).ok_or_else(|| {
                format!("AppliesToMatrixDimension {d}: only 2-D CIFTI matrices (dimensions 0 and 1) are read")
            })?;
            if slot.replace(map.clone()).is_some() {
                return Err(format!("matrix dimension {d} has two MatrixIndicesMaps"));
            }
        }
    }
    let [rows, columns] = dims;
    let missing = |d: usize| format!("matrix dimension {d} has no MatrixIndicesMap");
    Ok(CiftiXml { version, rows: rows.ok_or_else(|| missing(0))?, columns: columns.ok_or_else(|| missing(1))? })
}

/// The deepest element nesting [`parse`] hands to roxmltree.
const MAX_DEPTH: usize = 64;

/// How deep elements nest in `xml`, at most: start tags (outside comments, CDATA, processing
/// instructions and declarations) open a level unless they close themselves, end tags close
/// one; a `>` inside a quoted attribute value does not end a tag. Malformed text gets some
/// number, and roxmltree's error.
fn nesting(xml: &[u8]) -> usize {
    let (mut at, mut depth, mut max) = (0usize, 0usize, 0usize);
    let find = |from: usize, pat: &[u8]| {
        xml.get(from..).and_then(|r| r.windows(pat.len()).position(|w| w == pat)).map_or(xml.len(), |i| from + i)
    };
    while let Some(i) = xml.get(at..).and_then(|r| r.iter().position(|&c| c == b'<')).map(|i| at + i) {
        let rest = &xml[i..];
        at = if rest.starts_with(b"<!--") {
            find(i + 4, b"-->") + 3
        } else if rest.starts_with(b"<![CDATA[") {
            find(i + 9, b"]]>") + 3
        } else if rest.starts_with(b"<?") {
            find(i + 2, b"?>") + 2
        } else {
            let end = tag_end(xml, i + 1);
            match rest.get(1) {
                Some(b'/') => depth = depth.saturating_sub(1),
                Some(b'!') => {}
                _ if xml.get(end.wrapping_sub(1)) == Some(&b'/') => {}
                _ => {
                    depth += 1;
                    max = max.max(depth);
                }
            }
            end + 1
        };
    }
    max
}

/// The index of the `>` that ends the tag whose name starts at `from` (quotes respected), or
/// the end of `xml`.
fn tag_end(xml: &[u8], from: usize) -> usize {
    let mut quote = None;
    for (i, &c) in xml.iter().enumerate().skip(from) {
        match (quote, c) {
            (None, b'"' | b'\'') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, b'>') => return i,
            _ => {}
        }
    }
    xml.len()
}

/// One `MatrixIndicesMap`.
fn index_map(node: Node) -> Result<IndexMap, String> {
    let kind = attr(node, "IndicesMapToDataType")?;
    Ok(match kind {
        "CIFTI_INDEX_TYPE_SERIES" => IndexMap::Series(series(node)?),
        "CIFTI_INDEX_TYPE_PARCELS" => IndexMap::Parcels(parcel_names(node)?),
        "CIFTI_INDEX_TYPE_BRAIN_MODELS" => IndexMap::BrainModels(brain_models(node)?),
        "CIFTI_INDEX_TYPE_LABELS" => {
            IndexMap::Labels(children(node, "NamedMap").map(label_map).collect::<Result<_, _>>()?)
        }
        "CIFTI_INDEX_TYPE_SCALARS" => {
            IndexMap::Scalars(children(node, "NamedMap").map(|m| map_name(m)).collect::<Result<_, _>>()?)
        }
        other => return Err(format!("IndicesMapToDataType \"{other}\" is not a CIFTI-2 index type")),
    })
}

/// A series map; the start and step are scaled by `10^SeriesExponent` as nibabel does.
fn series(node: Node) -> Result<Series, String> {
    let points = number::<usize>(node, "NumberOfSeriesPoints")?;
    let exponent = number::<i32>(node, "SeriesExponent")?;
    let scale = 10f64.powf(f64::from(exponent));
    let (start, step) = (number::<f64>(node, "SeriesStart")?, number::<f64>(node, "SeriesStep")?);
    let unit = attr(node, "SeriesUnit")?.to_string();
    if !["SECOND", "HERTZ", "METER", "RADIAN"].contains(&unit.as_str()) {
        return Err(format!("SeriesUnit \"{unit}\" is not SECOND, HERTZ, METER or RADIAN"));
    }
    // A factor of 1 (exponent 0) is skipped, as `x * 1` is `x`; Python's `10 ** -3` is pow().
    let scaled = |x: f64| if exponent == 0 { x } else { x * scale };
    Ok(Series { points, start: scaled(start), step: scaled(step), unit })
}

/// The names of a parcels map, which must be non-empty and distinct.
fn parcel_names(node: Node) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    for p in children(node, "Parcel") {
        let name = attr(p, "Name")?;
        if name.is_empty() {
            return Err(format!("parcel {} has an empty Name", names.len() + 1));
        }
        names.push(name.to_string());
    }
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("two parcels are named \"{}\"", w[0]));
    }
    Ok(names)
}

/// A brain-models map: models in index order, indices inside their surface or volume.
fn brain_models(node: Node) -> Result<BrainModels, String> {
    let volume = one_child(node, "Volume")?.map(volume_dims).transpose()?;
    let mut models: Vec<BrainModel> = Vec::new();
    for m in children(node, "BrainModel") {
        let model = brain_model(m, volume)?;
        let expected = models.last().map_or(0, |l| l.offset + l.count);
        if model.offset != expected {
            return Err(format!(
                "brain model {} ({}) has IndexOffset {}, but the models before it end at {expected}",
                models.len() + 1,
                model.structure,
                model.offset
            ));
        }
        models.push(model);
    }
    Ok(BrainModels { models, volume })
}

/// `VolumeDimensions="i,j,k"`.
fn volume_dims(v: Node) -> Result<[u64; 3], String> {
    let text = attr(v, "VolumeDimensions")?;
    let dims: Vec<u64> = text.split(',').map(|d| d.trim().parse().ok()).collect::<Option<_>>().unwrap_or_default();
    <[u64; 3]>::try_from(dims).map_err(|_| format!("VolumeDimensions \"{text}\" is not three integers"))
}

/// One `BrainModel`; its indices are counted against `IndexCount` and bounded.
fn brain_model(m: Node, volume: Option<[u64; 3]>) -> Result<BrainModel, String> {
    let structure = attr(m, "BrainStructure")?.to_string();
    let (offset, count) = (number::<usize>(m, "IndexOffset")?, number::<usize>(m, "IndexCount")?);
    if offset.checked_add(count).is_none() {
        return Err(format!("brain model {structure}: IndexOffset {offset} + IndexCount {count} overflows"));
    }
    let what = format!("brain model {structure}");
    let elements = match attr(m, "ModelType")? {
        "CIFTI_MODEL_TYPE_SURFACE" => {
            let surface_vertices = number::<u64>(m, "SurfaceNumberOfVertices")?;
            let vertices = indices(m, "VertexIndices", &what)?;
            if let Some(v) = vertices.iter().find(|&&v| v >= surface_vertices) {
                return Err(format!("{what}: vertex {v} is outside its surface of {surface_vertices} vertices"));
            }
            expect_count(&what, "vertex indices", vertices.len(), count)?;
            Elements::Surface { surface_vertices, vertices }
        }
        "CIFTI_MODEL_TYPE_VOXELS" => {
            let flat = indices(m, "VoxelIndicesIJK", &what)?;
            if flat.len() % 3 != 0 {
                return Err(format!("{what}: {} voxel indices, not a multiple of 3 (i j k)", flat.len()));
            }
            let dims = volume.ok_or_else(|| format!("{what} has voxels, but the map has no <Volume>"))?;
            let ijk: Vec<[u64; 3]> = flat.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
            if let Some(v) = ijk.iter().find(|v| (0..3).any(|a| v[a] >= dims[a])) {
                return Err(format!("{what}: voxel {} is outside the volume {}", ijk_text(v), dims_text(&dims)));
            }
            expect_count(&what, "voxels", ijk.len(), count)?;
            Elements::Voxels(ijk)
        }
        other => return Err(format!("{what}: ModelType \"{other}\" is not SURFACE or VOXELS")),
    };
    Ok(BrainModel { structure, offset, count, elements })
}

fn expect_count(what: &str, of: &str, found: usize, count: usize) -> Result<(), String> {
    if found == count {
        Ok(())
    } else {
        Err(format!("{what}: IndexCount is {count}, but it lists {found} {of}"))
    }
}

/// The whitespace-separated integers of the one child `name` of `m`.
fn indices(m: Node, name: &'static str, what: &str) -> Result<Vec<u64>, String> {
    let node = one_child(m, name)?.ok_or_else(|| format!("{what} has no <{name}>"))?;
    let text = node.text().unwrap_or("");
    text.split_ascii_whitespace()
        .map(|t| t.parse::<u64>().map_err(|_| format!("{what}: <{name}> holds \"{}\", not an index", clip(t))))
        .collect()
}

/// One `NamedMap` of a labels map: its name and label table (keys distinct).
fn label_map(m: Node) -> Result<LabelMap, String> {
    let name = map_name(m)?;
    let table = one_child(m, "LabelTable")?.ok_or_else(|| format!("label map \"{name}\" has no <LabelTable>"))?;
    let mut labels: Vec<Label> = Vec::new();
    // A set, not a scan of the labels so far: a table of 100,000 labels is read in linear time.
    let mut keys = std::collections::HashSet::new();
    for l in children(table, "Label") {
        let key = number::<i64>(l, "Key")?;
        if !keys.insert(key) {
            return Err(format!("label map \"{name}\": key {key} is in its label table twice"));
        }
        labels.push(Label { key, name: l.text().unwrap_or("").trim().to_string() });
    }
    Ok(LabelMap { name, labels })
}

/// The `MapName` of a `NamedMap`.
fn map_name(m: Node) -> Result<String, String> {
    let n = one_child(m, "MapName")?.ok_or("a NamedMap has no <MapName>")?;
    Ok(n.text().unwrap_or("").trim().to_string())
}

/// The element children of `node` named `name`.
fn children<'a, 'i>(node: Node<'a, 'i>, name: &'static str) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children().filter(move |c| c.is_element() && c.tag_name().name() == name)
}

/// The child `name` of `node` when there is at most one.
fn one_child<'a, 'i>(node: Node<'a, 'i>, name: &'static str) -> Result<Option<Node<'a, 'i>>, String> {
    let mut it = children(node, name);
    let first = it.next();
    if it.next().is_some() {
        return Err(format!("<{}> has more than one <{name}>", node.tag_name().name()));
    }
    Ok(first)
}

fn attr<'a>(node: Node<'a, '_>, name: &str) -> Result<&'a str, String> {
    node.attribute(name).ok_or_else(|| format!("<{}> has no {name} attribute", node.tag_name().name()))
}

/// Attribute `name` of `node` as a `T`; the message quotes the text.
fn number<T: std::str::FromStr>(node: Node, name: &str) -> Result<T, String> {
    let text = attr(node, name)?;
    text.trim().parse().map_err(|_| {
        format!("<{}> {name}=\"{}\" is not a valid {}", node.tag_name().name(), clip(text), kind_of::<T>())
    })
}

/// What a number of type `T` is, in words.
fn kind_of<T>() -> &'static str {
    match std::any::type_name::<T>() {
        "f64" => "number",
        "i32" | "i64" => "integer",
        _ => "count (a non-negative integer)",
    }
}

/// `(i, j, k)`, for messages.
pub(super) fn ijk_text(v: &[u64; 3]) -> String {
    format!("({}, {}, {})", v[0], v[1], v[2])
}

/// `i x j x k`, for messages.
pub(super) fn dims_text(d: &[u64; 3]) -> String {
    format!("{} x {} x {}", d[0], d[1], d[2])
}

/// At most 40 characters of `s`, for messages.
fn clip(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERIES: &str = r#"<MatrixIndicesMap AppliesToMatrixDimension="0" IndicesMapToDataType="CIFTI_INDEX_TYPE_SERIES" NumberOfSeriesPoints="3" SeriesExponent="-3" SeriesStart="0" SeriesStep="720" SeriesUnit="SECOND"/>"#;

    fn cifti(maps: &str) -> String {
        format!(r#"<CIFTI Version="2"><Matrix>{maps}</Matrix></CIFTI>"#)
    }

    #[test]
    fn one_map_may_apply_to_both_dimensions() {
        let parcels = r#"<MatrixIndicesMap AppliesToMatrixDimension="0,1" IndicesMapToDataType="CIFTI_INDEX_TYPE_PARCELS"><Parcel Name="a"/><Parcel Name="b"/></MatrixIndicesMap>"#;
        let x = parse(&cifti(parcels)).unwrap();
        assert_eq!(x.rows, IndexMap::Parcels(vec!["a".into(), "b".into()]));
        assert_eq!(x.rows, x.columns);
    }

    #[test]
    fn series_exponent_scales_as_python_does() {
        let scalars = r#"<MatrixIndicesMap AppliesToMatrixDimension="1" IndicesMapToDataType="CIFTI_INDEX_TYPE_SCALARS"><NamedMap><MapName>m</MapName></NamedMap></MatrixIndicesMap>"#;
        let x = parse(&cifti(&format!("{SERIES}{scalars}"))).unwrap();
        // Python: 720.0 * 10 ** -3.
        let IndexMap::Series(s) = x.rows else { panic!("a series") };
        assert_eq!(s.step, 720.0 * 0.001);
        assert_eq!((s.points, s.unit.as_str()), (3, "SECOND"));
        assert_eq!(x.columns, IndexMap::Scalars(vec!["m".into()]));
    }

    #[test]
    fn malformed_maps_are_errors_in_words() {
        let e = parse(&cifti(SERIES.replace("\"0\"", "\"2\"").as_str())).unwrap_err();
        assert_eq!(e, "AppliesToMatrixDimension 2: only 2-D CIFTI matrices (dimensions 0 and 1) are read");
        let e = parse(&cifti(SERIES)).unwrap_err();
        assert_eq!(e, "matrix dimension 1 has no MatrixIndicesMap");
        let e = parse(&cifti(&SERIES.replace("720", "x"))).unwrap_err();
        assert_eq!(e, "<MatrixIndicesMap> SeriesStep=\"x\" is not a valid number");
        let bm = r#"<MatrixIndicesMap AppliesToMatrixDimension="1" IndicesMapToDataType="CIFTI_INDEX_TYPE_BRAIN_MODELS"><BrainModel IndexOffset="0" IndexCount="2" ModelType="CIFTI_MODEL_TYPE_SURFACE" BrainStructure="CIFTI_STRUCTURE_CORTEX_LEFT" SurfaceNumberOfVertices="4"><VertexIndices>0 4</VertexIndices></BrainModel></MatrixIndicesMap>"#;
        let e = parse(&cifti(&format!("{SERIES}{bm}"))).unwrap_err();
        assert_eq!(e, "brain model CIFTI_STRUCTURE_CORTEX_LEFT: vertex 4 is outside its surface of 4 vertices");
        let e = parse(&cifti(&format!("{SERIES}{}", bm.replace("0 4", "0 1 2")))).unwrap_err();
        assert_eq!(e, "brain model CIFTI_STRUCTURE_CORTEX_LEFT: IndexCount is 2, but it lists 3 vertex indices");
        let e = parse(&cifti(&format!(
            "{SERIES}{}",
            bm.replace("IndexOffset=\"0\"", "IndexOffset=\"5\"").replace("0 4", "0 1")
        )))
        .unwrap_err();
        assert_eq!(
            e,
            "brain model 1 (CIFTI_STRUCTURE_CORTEX_LEFT) has IndexOffset 5, but the models before it end at 0"
        );
    }

    #[test]
    fn a_dtd_and_deep_nesting_are_refused_or_read_without_recursion() {
        let e = parse(&format!("<!DOCTYPE CIFTI [<!ENTITY a \"b\">]>{}", cifti(SERIES))).unwrap_err();
        assert!(e.starts_with("the CIFTI-2 XML is not well-formed: "), "{e}");
        // 200000 nested elements overflowed roxmltree's stack: refused before it parses.
        let deep = format!("{}{}", "<a>".repeat(200_000), "</a>".repeat(200_000));
        let e = parse(&cifti(&format!("{SERIES}{deep}"))).unwrap_err();
        assert_eq!(e, "the CIFTI-2 XML nests elements 200002 deep (at most 64)");
        // 62 levels inside <CIFTI><Matrix> are read (and ignored: no map is that deep).
        let deep = format!("{}{}", "<a>".repeat(62), "</a>".repeat(62));
        let e = parse(&cifti(&format!("{SERIES}{deep}"))).unwrap_err();
        assert_eq!(e, "matrix dimension 1 has no MatrixIndicesMap");
    }

    #[test]
    fn nesting_counts_elements_not_comments_or_quoted_brackets() {
        assert_eq!(nesting(b"<?xml version='1.0'?><a><b x='>' y=\"/>\"/><!-- <c><c> --><![CDATA[<d>]]><e/></a>"), 1);
        assert_eq!(nesting(b"<a><b><c/></b><b>text > x</b></a>"), 2);
        assert_eq!(nesting(b"<a><b"), 2);
    }
}
