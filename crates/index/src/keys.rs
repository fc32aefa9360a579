//! Stable 64-bit keys for sources and fragments, derived from ids so they survive re-indexing.

use finder_core::{FragmentKey, SourceKey};

fn hash64(parts: &[&[u8]]) -> u64 {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p);
    }
    first_u64(&h.finalize())
}

fn first_u64(hash: &blake3::Hash) -> u64 {
    u64::from_le_bytes(hash.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// Hash of the text a vector was made from: a vector is reused only for the same text.
pub(crate) fn text_hash(text: &str) -> u64 {
    first_u64(&blake3::hash(text.as_bytes()))
}

/// The key of source `id` (other stores, such as the PostgreSQL backend, key on it too).
pub fn source_key(id: &str) -> SourceKey {
    SourceKey(hash64(&[b"source", id.as_bytes()]))
}

/// The key of fragment `ordinal` of source `source_id`.
pub fn fragment_key(source_id: &str, ordinal: u32) -> FragmentKey {
    FragmentKey(hash64(&[
        b"fragment",
        source_id.as_bytes(),
        &ordinal.to_le_bytes(),
    ]))
}

/// The vector-graph key of part `part` of a fragment's vectors (one part per window its model
/// read): the fragment's own key for the first part, a key derived from it for the others.
pub fn part_key(fragment: u64, part: usize) -> u64 {
    if part == 0 {
        return fragment;
    }
    hash64(&[
        b"part",
        &fragment.to_le_bytes(),
        &(part as u64).to_le_bytes(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_distinct() {
        assert_eq!(source_key("a.md"), source_key("a.md"));
        assert_ne!(source_key("a.md"), source_key("b.md"));
        assert_ne!(fragment_key("a.md", 0), fragment_key("a.md", 1));
        assert_ne!(fragment_key("a", 10), fragment_key("a1", 0));
        assert_eq!(part_key(7, 0), 7);
        assert_ne!(part_key(7, 1), part_key(7, 2));
    }
}
