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
/// (docs/perf/query-open-memory.md).
struct Strings {
    text: String,
    /// Where each string ends in `text`; it starts where the one before ends.
    ends: Vec<usize>,
}

impl Strings {
    /// `strings` in order, in buffers of exactly their size (grown by doubling they would hold
    /// up to half as much again, unused): the iterator is walked once to size them.
    fn of<'a>(strings: impl Iterator<Item = &'a str> + Clone) -> Strings {
        let (count, bytes) = strings
            .clone()
            .fold((0, 0), |(n, b), s| (n + 1, b + s.len()));
        let mut out = Strings {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(count),
        };
        for s in strings {
            out.text.push_str(s);
            out.ends.push(out.text.len());
        }
        out
    }

    /// The `i`th string; panics past the last, as a slice does.
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
        let fragments = file.fragments.len();
        let mut title_at = vec![NO_TITLE; fragments];
        let kept = file
            .titles
            .iter()
            .filter(|(node, _)| (*node as usize) < fragments);
        for (i, (node, _)) in kept.clone().enumerate() {
            title_at[*node as usize] = i as u32;
        }
        let titles = Strings::of(kept.map(|(_, title)| title.as_str()));
        drop(file.titles);
        let name_nodes = file.names.iter().map(|(node, _)| *node).collect();
        let alias_ends = file
            .names
            .iter()
            .scan(0, |end, (_, all)| {
                *end += all.len() as u32;
                Some(*end)
            })
            .collect();
        let aliases = Strings::of(
            file.names
                .iter()
                .flat_map(|(_, all)| all.iter().map(String::as_str)),
        );
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
        let strings = Strings::of(given.iter().copied());
        assert_eq!(strings.ends.len(), given.len());
        let back: Vec<&str> = (0..given.len()).map(|i| strings.get(i)).collect();
        assert_eq!(back, given);
        // sized exactly: nothing grew past what was asked for
        assert_eq!(strings.text.capacity(), strings.text.len());
    }
}
