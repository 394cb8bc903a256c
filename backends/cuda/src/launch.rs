//! Launch shapes: the grid and block each kind of kernel runs with, chosen from the problem
//! size only (never from the device or timing), so that a reduction's order, and with it its
//! bits, is a function of the sizes.

/// A grid or block size, CUDA's `dim3` (C layout, as the shim's launchers take it).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim3 {
    /// Fastest-varying dimension.
    pub x: u32,
    /// Second dimension.
    pub y: u32,
    /// Slowest dimension.
    pub z: u32,
}

impl Dim3 {
    /// A 1-D size.
    pub const fn x(x: u32) -> Self {
        Self { x, y: 1, z: 1 }
    }
    /// A 2-D size.
    pub const fn xy(x: u32, y: u32) -> Self {
        Self { x, y, z: 1 }
    }
    /// The number of threads (or blocks) it spans.
    pub fn count(self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }
}

/// The most threads a block may have (every CUDA device since compute capability 2.0).
pub const MAX_BLOCK: u32 = 1024;

/// The grid and block of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Blocks.
    pub grid: Dim3,
    /// Threads per block.
    pub block: Dim3,
}

/// Threads per block of the elementwise kernels.
pub const ELEMENTWISE_BLOCK: u32 = 256;
/// The most blocks an elementwise launch uses; the kernels' grid-stride loops cover the rest.
pub const ELEMENTWISE_MAX_GRID: u32 = 4096;

/// An elementwise kernel over `n` elements: blocks of 256, as many as cover `n` up to 4096.
pub fn elementwise(n: usize) -> Launch {
    let blocks = n.div_ceil(ELEMENTWISE_BLOCK as usize).clamp(1, ELEMENTWISE_MAX_GRID as usize);
    Launch { grid: Dim3::x(blocks as u32), block: Dim3::x(ELEMENTWISE_BLOCK) }
}

/// A row kernel (one block per row of width `m`): the block is the power of two at or above
/// `m / 4` (each thread takes about four elements), at least 32 (a warp) and at most 1024.
pub fn rows(rows: usize, m: usize) -> Launch {
    let block = m.div_ceil(4).next_power_of_two().clamp(32, MAX_BLOCK as usize);
    Launch { grid: Dim3::x(rows as u32), block: Dim3::x(block as u32) }
}

/// Rows per chunk of the first stage of a sum over rows (LayerNorm's parameter gradients).
pub const ROWS_PER_CHUNK: usize = 128;

/// Elements per block of the first stage of the global norm.
pub const NORM_CHUNK: usize = 16384;

/// Threads per block of the reductions of the global norm.
pub const NORM_BLOCK: u32 = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_sizes() {
        assert_eq!(elementwise(0).grid, Dim3::x(1));
        assert_eq!(elementwise(257).grid, Dim3::x(2));
        assert_eq!(elementwise(usize::MAX / 2).grid, Dim3::x(ELEMENTWISE_MAX_GRID));
        assert_eq!(rows(3, 5).block, Dim3::x(32));
        assert_eq!(rows(3, 1000).block, Dim3::x(256));
        assert_eq!(rows(3, 100_000).block, Dim3::x(MAX_BLOCK));
    }
}
