//! `graph/parts.json` (PostgreSQL: `finder_graph_parts`; a watch's `Follower` holds them in
//! memory): what a graph build found in each source's texts (each fragment's links, tags and
//! alias hits), by source id and content hash. The next build reads and scans only the
//! sources whose hash changed and takes the rest from here, unless a name appeared that the
//! kept hits were not scanned for (a new title, a new link target): then every text is
//! scanned again. Parts from an older build (one that crashed before writing its own) serve
//! alike, each source checked by its hash. Either way the graph equals a build from scratch.

use std::path::Path;

use finder_core::FastMap;
use serde::{Deserialize, Serialize};

pub(super) const PARTS_FILE: &str = "parts.json";

/// What the kept parts depend on besides the texts: the link syntax, the word analysis
/// (mentions fold words by it) and the index settings (they cut the fragments).
pub(super) fn parts_key(
    g: &finder_core::GraphSettings,
    index: &finder_core::IndexSettings,
) -> String {
    format!(
        "1:{:?}:a{}:{}",
        g.link_order,
        crate::ANALYSIS,
        serde_json::to_string(index).unwrap_or_default()
    )
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Parts {
    pub key: String,
    /// The folded aliases the hits were scanned for; a hit's alias indexes this.
    pub aliases: Vec<String>,
    pub sources: FastMap<String, SourceParts>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SourceParts {
    /// The source's content hash when it was scanned.
    pub hash: String,
    pub fragments: Vec<FragmentParts>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct FragmentParts {
    pub key: u64,
    /// The fragment had a text to scan (it counts in the aliases' fragment frequencies).
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub text: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// `(start, end, alias)` of every alias occurrence, as the scan found them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hits: Vec<(u32, u32, u32)>,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

impl Parts {
    /// The parts kept in `gdir` if they were found under `key`; `None` otherwise (a missing,
    /// unreadable or outdated file only costs a build from scratch).
    pub fn load(gdir: &Path, key: &str) -> Option<Parts> {
        Parts::from_slice(&std::fs::read(gdir.join(PARTS_FILE)).ok()?, key)
    }

    /// The parts serialised as `bytes`, if they were found under `key`.
    pub fn from_slice(bytes: &[u8], key: &str) -> Option<Parts> {
        let parts: Parts = serde_json::from_slice(bytes).ok()?;
        (parts.key == key).then_some(parts)
    }

    /// No parts yet, under `key`: the build reads every text.
    pub fn empty(key: String) -> Parts {
        Parts {
            key,
            ..Parts::default()
        }
    }

    /// The kept parts of source `id`, if its hash and fragments are still those scanned.
    pub fn unchanged<'a>(
        &self,
        id: &str,
        hash: &str,
        keys: impl ExactSizeIterator<Item = &'a u64>,
    ) -> Option<&SourceParts> {
        let kept = self.sources.get(id)?;
        let same = !hash.is_empty()
            && kept.hash == hash
            && kept.fragments.len() == keys.len()
            && kept.fragments.iter().zip(keys).all(|(f, k)| f.key == *k);
        same.then_some(kept)
    }
}
