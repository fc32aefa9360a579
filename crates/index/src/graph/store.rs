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
    names: Vec<(u32, Vec<String>)>,
    /// Each source's title, at its first fragment node: `titles[title_at[node]]`
    /// ([`NO_TITLE`] elsewhere). An array, not a map: explain looks up every boosted node,
    /// and a map of a million titles would take half as much memory again.
    title_at: Vec<u32>,
    titles: Vec<String>,
    entity_sources: std::collections::HashSet<u32>,
    labels: HashMap<u32, String>,
    min_alias_chars: usize,
    matcher: OnceLock<Option<MentionMatcher>>,
}

/// A fragment node that starts no source, see `GraphIndex::title_at`.
const NO_TITLE: u32 = u32::MAX;

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
        Ok(Some(GraphIndex::from_file(file)))
    }

    /// The graph a build produced, as queries use it.
    pub fn from_file(file: GraphFile) -> GraphIndex {
        let nodes = (file.fragments.len() + file.entities.len()) as u32;
        let graph = Graph::from_edges(nodes, &file.edges);
        let mut title_at = vec![NO_TITLE; file.fragments.len()];
        let mut titles = Vec::with_capacity(file.titles.len());
        for (node, title) in file.titles {
            if let Some(slot) = title_at.get_mut(node as usize) {
                *slot = titles.len() as u32;
                titles.push(title);
            }
        }
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
            names: file.names,
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
                let named = self
                    .names
                    .iter()
                    .enumerate()
                    .map(|(i, (_, aliases))| (i as u32, aliases.iter().map(String::as_str)));
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
            .map(|&i| &self.titles[i as usize]);
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
            .map(|m| (m.range.len(), self.names[m.entity as usize].0))
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
