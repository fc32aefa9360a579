//! The graph as queries use it: loaded once per opened index (compact adjacency, key maps),
//! with a matcher for the names a query can contain built on first use.

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use finder_core::{FragmentKey, Graph, GraphAccess};

use super::build::{EntityKind, EntityNode, GraphFile, GRAPH_DIR, GRAPH_FILE};
use super::{MentionConfig, MentionMatcher};

pub(crate) struct GraphIndex {
    graph: Graph,
    fragments: Vec<u64>,
    node_of: HashMap<u64, u32>,
    entities: Vec<EntityNode>,
    /// What a query can name: the node of each name entry, and its aliases (title, aliases),
    /// those of entry `i` at `aliases[alias_ends[i - 1]..alias_ends[i]]`.
    name_nodes: Vec<u32>,
    alias_ends: Vec<u32>,
    aliases: Strings,
    /// Each source's title, at its first fragment node: `titles[title_at[node]]`
    /// ([`NO_TITLE`] elsewhere). An array, not a map: explain looks up every boosted node,
    /// and a map of a million titles would take half as much memory again.
    title_at: Vec<u32>,
    titles: Strings,
    entity_sources: std::collections::HashSet<u32>,
    labels: HashMap<u32, String>,
    min_alias_chars: usize,
    matcher: OnceLock<Option<MentionMatcher>>,
}

/// A fragment node that starts no source, see `GraphIndex::title_at`.
const NO_TITLE: u32 = u32::MAX;

/// Strings end to end in one buffer, 8 bytes each on top of their text. As `String`s each
/// took a heap block and 24 bytes: at a million fragments, whose titles and names are a
/// million short strings each, the loaded graph was 374 MB against 222 MB this way
/// (docs/BENCHMARKS.md, twenty-fifth pass).
struct Strings {
    text: String,
    /// Where each string ends in `text`; it starts where the one before ends.
    ends: Vec<usize>,
}

impl Strings {
    /// Room for `count` strings of `bytes` in all: filled to that, the buffers are their size
    /// (grown by doubling they would hold up to half as much again, unused).
    fn with_capacity(count: usize, bytes: usize) -> Strings {
        Strings {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(count),
        }
    }

    fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    /// The `i`th string; panics past [`Strings::len`], as a slice does.
    fn get(&self, i: usize) -> &str {
        let start = i.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.text[start..self.ends[i]]
    }
}

impl GraphIndex {
    /// Loads the graph of the index in `dir`: `Ok(None)` when none was built.
    pub fn load(dir: &Path) -> Result<Option<GraphIndex>, String> {
        let path = dir.join(GRAPH_DIR).join(GRAPH_FILE);
        let reader = match std::fs::File::open(&path) {
            Ok(f) => std::io::BufReader::with_capacity(1 << 16, f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        // parsed as it is read: the file (200 MB at a million fragments) is not held whole
        let file: GraphFile =
            serde_json::from_reader(reader).map_err(|e| format!("{}: {e}", path.display()))?;
        file.check_format()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Some(GraphIndex::from_file(file)))
    }

    /// The graph a build produced, as queries use it.
    pub fn from_file(file: GraphFile) -> GraphIndex {
        let nodes = (file.fragments.len() + file.entities.len()) as u32;
        let graph = Graph::from_edges(nodes, &file.edges);
        let mut title_at = vec![NO_TITLE; file.fragments.len()];
        let mut titles = Strings::with_capacity(
            file.titles.len(),
            file.titles.iter().map(|(_, t)| t.len()).sum(),
        );
        for (node, title) in &file.titles {
            if let Some(slot) = title_at.get_mut(*node as usize) {
                *slot = titles.len() as u32;
                titles.push(title);
            }
        }
        drop(file.titles);
        let mut name_nodes = Vec::with_capacity(file.names.len());
        let mut alias_ends = Vec::with_capacity(file.names.len());
        let mut aliases = Strings::with_capacity(
            file.names.iter().map(|(_, all)| all.len()).sum(),
            file.names
                .iter()
                .flat_map(|(_, all)| all)
                .map(String::len)
                .sum(),
        );
        for (node, all) in &file.names {
            name_nodes.push(*node);
            all.iter().for_each(|alias| aliases.push(alias));
            alias_ends.push(aliases.len() as u32);
        }
        drop(file.names);
        let node_of = file
            .fragments
            .iter()
            .enumerate()
            .map(|(i, &k)| (k, i as u32))
            .collect();
        GraphIndex {
            graph,
            node_of,
            fragments: file.fragments,
            entities: file.entities,
            name_nodes,
            alias_ends,
            aliases,
            title_at,
            titles,
            entity_sources: file.entity_sources.into_iter().collect(),
            labels: file.labels.into_iter().collect(),
            min_alias_chars: file.min_alias_chars,
            matcher: OnceLock::new(),
        }
    }

    fn entity(&self, node: u32) -> Option<&EntityNode> {
        (node as usize)
            .checked_sub(self.fragments.len())
            .and_then(|i| self.entities.get(i))
    }

    fn matcher(&self) -> Option<&MentionMatcher> {
        self.matcher
            .get_or_init(|| {
                let config = MentionConfig {
                    min_chars: self.min_alias_chars,
                    max_df: 1.0,
                    ..MentionConfig::default()
                };
                let mut start = 0;
                let named = self.alias_ends.iter().enumerate().map(|(i, &end)| {
                    let range = start as usize..end as usize;
                    start = end;
                    (i as u32, range.map(|a| self.aliases.get(a)))
                });
                MentionMatcher::build(named, &config).ok()
            })
            .as_ref()
    }
}

impl GraphAccess for GraphIndex {
    fn graph(&self) -> &Graph {
        &self.graph
    }

    fn node(&self, fragment: FragmentKey) -> Option<u32> {
        self.node_of.get(&fragment.0).copied()
    }

    fn fragment(&self, node: u32) -> Option<FragmentKey> {
        self.fragments.get(node as usize).map(|&k| FragmentKey(k))
    }

    fn describe(&self, node: u32) -> String {
        if let Some(e) = self.entity(node) {
            let what = match e.kind {
                EntityKind::Missing | EntityKind::Title => "entity",
                EntityKind::Tag => "tag",
                EntityKind::Hub => "group",
            };
            return format!("{what} \"{}\"", e.name);
        }
        let title = self
            .title_at
            .get(node as usize)
            .filter(|&&i| i != NO_TITLE)
            .map(|&i| self.titles.get(i as usize));
        match title {
            Some(title) if self.entity_sources.contains(&node) => format!("entity \"{title}\""),
            Some(title) if !title.is_empty() => format!("\"{title}\""),
            _ => "a passage".to_string(),
        }
    }

    fn named(&self, text: &str) -> Vec<u32> {
        let Some(matcher) = self.matcher() else {
            return Vec::new();
        };
        let mut found: Vec<(usize, u32)> = matcher
            .find(text)
            .into_iter()
            .map(|m| (m.range.len(), self.name_nodes[m.entity as usize]))
            .collect();
        found.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut out: Vec<u32> = Vec::new();
        for (_, node) in found {
            if !out.contains(&node) {
                out.push(node);
            }
        }
        out
    }

    fn label(&self, node: u32) -> Option<&str> {
        self.labels.get(&node).map(String::as_str)
    }

    fn is_hub(&self, node: u32) -> bool {
        self.entity(node)
            .is_some_and(|e| matches!(e.kind, EntityKind::Tag | EntityKind::Hub))
    }
}

#[cfg(test)]
mod tests {
    use super::Strings;

    #[test]
    fn strings_give_back_what_was_pushed_empty_ones_included() {
        let given = ["Alpha", "", "Ünïcode näme", "", "z"];
        let mut strings = Strings::with_capacity(given.len(), given.iter().map(|s| s.len()).sum());
        given.iter().for_each(|s| strings.push(s));
        assert_eq!(strings.len(), given.len());
        let back: Vec<&str> = (0..strings.len()).map(|i| strings.get(i)).collect();
        assert_eq!(back, given);
        // sized exactly: nothing grew past what was asked for
        assert_eq!(strings.text.capacity(), strings.text.len());
    }
}
