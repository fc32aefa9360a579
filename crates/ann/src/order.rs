//! Scores as integers: `f32`s mapped to `u32`s whose unsigned order is `f32::total_cmp`'s, so
//! candidates packed with their ids into one integer select and sort as plain integers (the
//! BM25 list's candidates, the HNSW search's).

/// `x`'s bits, mapped so that unsigned order is `f32::total_cmp`'s order.
pub fn ordered_bits(x: f32) -> u32 {
    let bits = x.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

/// The inverse of [`ordered_bits`].
pub fn from_ordered_bits(bits: u32) -> f32 {
    f32::from_bits(if bits >> 31 == 1 {
        bits & !(1 << 31)
    } else {
        !bits
    })
}
