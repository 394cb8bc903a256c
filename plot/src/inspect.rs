//! Reading a drawn figure back: the texts of an SVG and the pixels of a PNG, for the tests of
//! this crate and of `bc-cli`, and for anyone checking a figure by program. The functions
//! panic on a file that is not a figure: they are for checks, not for input.

use std::path::Path;

/// The text elements of an SVG written by plotters, trimmed.
pub fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string()))
        .collect()
}

/// The decoded PNG: width, height and RGB(A) samples.
pub fn png_pixels(path: &Path) -> (usize, usize, usize, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    (info.width as usize, info.height as usize, info.color_type.samples(), buf)
}

/// Dark (text or axis) pixels in the rectangle `[x0, x1) x [y0, y1)`.
pub fn dark_pixels(png: &(usize, usize, usize, Vec<u8>), (x0, x1): (usize, usize), (y0, y1): (usize, usize)) -> usize {
    let (w, _, px, buf) = png;
    let mut n = 0;
    for y in y0..y1 {
        for x in x0..x1 {
            let p = &buf[(y * w + x) * px..][..3];
            n += usize::from(p.iter().all(|&c| c < 100));
        }
    }
    n
}
