//! The relation graph as compact adjacency arrays (CSR), built once and read by every query.

use std::sync::Mutex;

use super::kind::{RelationKind, KIND_COUNT};
use super::scratch::BoostScratch;

/// An undirected multigraph over nodes `0..node_count`, stored as compressed sparse rows.
///
/// Every edge is stored at both ends. A node's entries are sorted by (neighbour, kind), so
/// parallel edges between the same pair sit next to each other; they are kept, and their
/// weights add up at query time. Kinds are stored as bytes; the weights that turn them into
/// numbers are chosen per query ([`KindWeights`](super::KindWeights)).
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// `offsets[u]..offsets[u + 1]` are the entries of node `u`; `node_count + 1` long.
    offsets: Vec<usize>,
    /// The other end of each entry.
    neighbours: Vec<u32>,
    /// The relation kind of each entry, below [`KIND_COUNT`].
    kinds: Vec<u8>,
    /// Per node, bit `k` is set when the node has an entry of kind `k`. It lets a query tell
    /// in O(1) whether the weights leave a node any edge at all.
    kind_masks: Vec<u8>,
    /// Edges skipped by [`Graph::from_edges`]: self-loops and ends outside the node range.
    ignored: usize,
    /// Boost buffers sized to this graph, kept between queries (see [`Graph::with_scratch`]).
    scratch: ScratchPool,
}

/// Boost buffers kept for reuse; a clone of a graph starts with none.
#[derive(Debug, Default)]
struct ScratchPool(Mutex<Vec<BoostScratch>>);

impl Clone for ScratchPool {
    fn clone(&self) -> ScratchPool {
        ScratchPool::default()
    }
}

// Kind masks hold one bit per kind.
const _: () = assert!(KIND_COUNT <= 8);

impl Graph {
    /// Builds the graph from `(from, to, kind)` edges over nodes `0..node_count`.
    ///
    /// Kinds at or above [`KIND_COUNT`] are stored as [`RelationKind::Other`]. Self-loops
    /// (a node related to itself carries relevance nowhere) and edges naming a node at or
    /// beyond `node_count` are skipped and counted in [`Graph::ignored_edges`]. The result does
    /// not depend on the order of `edges`.
    pub fn from_edges(node_count: u32, edges: &[(u32, u32, u8)]) -> Graph {
        let n = node_count as usize;
        let usable = |&(a, b, _): &(u32, u32, u8)| a != b && (a as usize) < n && (b as usize) < n;

        let mut offsets = vec![0usize; n + 1];
        let mut ignored = 0usize;
        for edge in edges {
            if usable(edge) {
                offsets[edge.0 as usize + 1] += 1;
                offsets[edge.1 as usize + 1] += 1;
            } else {
                ignored += 1;
            }
        }
        for u in 0..n {
            offsets[u + 1] += offsets[u];
        }

        // Pack (neighbour, kind) into one word so a plain integer sort orders a row.
        let mut packed = vec![0u64; offsets[n]];
        let mut fill = offsets[..n].to_vec();
        for edge in edges.iter().filter(|e| usable(e)) {
            let kind = stored_kind(edge.2) as u64;
            for (from, to) in [(edge.0, edge.1), (edge.1, edge.0)] {
                let slot = &mut fill[from as usize];
                packed[*slot] = (u64::from(to) << 8) | kind;
                *slot += 1;
            }
        }

        let mut kind_masks = vec![0u8; n];
        for u in 0..n {
            let row = &mut packed[offsets[u]..offsets[u + 1]];
            row.sort_unstable();
            kind_masks[u] = row.iter().fold(0u8, |mask, &e| mask | (1 << (e & 0xff)));
        }
        let neighbours = packed.iter().map(|&e| (e >> 8) as u32).collect();
        let kinds = packed.iter().map(|&e| (e & 0xff) as u8).collect();

        Graph {
            offsets,
            neighbours,
            kinds,
            kind_masks,
            ignored,
            scratch: ScratchPool::default(),
        }
    }

    /// Runs `f` with boost buffers sized to this graph, taken from the graph's pool (or new
    /// when every pooled one is in use) and returned after. A fresh scratch writes one slot
    /// per node (64 MB at a million nodes, milliseconds of a query), so the pool keeps as
    /// many as ran at once, and they go with the graph when it is replaced.
    pub fn with_scratch<T>(&self, f: impl FnOnce(&mut BoostScratch) -> T) -> T {
        let pooled = self.scratch.0.lock().ok().and_then(|mut pool| pool.pop());
        let mut scratch = pooled.unwrap_or_default();
        let out = f(&mut scratch);
        if let Ok(mut pool) = self.scratch.0.lock() {
            pool.push(scratch);
        }
        out
    }

    /// The number of nodes; ids run from 0 to one less than this.
    pub fn node_count(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// The number of undirected edges stored (each is two adjacency entries).
    pub fn edge_count(&self) -> usize {
        self.neighbours.len() / 2
    }

    /// How many edges [`Graph::from_edges`] skipped (self-loops, ends out of range).
    pub fn ignored_edges(&self) -> usize {
        self.ignored
    }

    /// The number of adjacency entries of `node`, parallel edges counted; 0 for an unknown node.
    pub fn degree(&self, node: u32) -> usize {
        let range = self.range(node);
        range.end - range.start
    }

    /// The neighbours of `node` with the kind of each edge, sorted by (neighbour, kind);
    /// empty for an unknown node.
    pub fn neighbours(&self, node: u32) -> impl Iterator<Item = (u32, RelationKind)> + '_ {
        let range = self.range(node);
        self.neighbours[range.clone()]
            .iter()
            .zip(&self.kinds[range])
            .map(|(&v, &k)| (v, RelationKind::from_u8(k)))
    }

    /// The entry range of `node`; empty for an unknown node.
    pub(crate) fn range(&self, node: u32) -> std::ops::Range<usize> {
        let u = node as usize;
        match (self.offsets.get(u), self.offsets.get(u + 1)) {
            (Some(&start), Some(&end)) => start..end,
            _ => 0..0,
        }
    }

    /// The raw rows of `node`: neighbours and kinds, same length.
    pub(crate) fn row(&self, node: u32) -> (&[u32], &[u8]) {
        let range = self.range(node);
        (&self.neighbours[range.clone()], &self.kinds[range])
    }

    /// The kinds present at `node` as a bit set (bit `k` for kind `k`); 0 for an unknown node.
    pub(crate) fn kind_mask(&self, node: u32) -> u8 {
        self.kind_masks.get(node as usize).copied().unwrap_or(0)
    }
}

/// The byte stored for an edge of kind `kind`.
fn stored_kind(kind: u8) -> u8 {
    if (kind as usize) < KIND_COUNT {
        kind
    } else {
        RelationKind::Other.as_u8()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_each_edge_both_ways_sorted() {
        let g = Graph::from_edges(4, &[(2, 0, 1), (0, 1, 0), (0, 2, 0), (1, 0, 0)]);
        assert_eq!(g.node_count(), 4);
        assert_eq!(g.edge_count(), 4);
        let row0: Vec<_> = g.neighbours(0).collect();
        assert_eq!(
            row0,
            vec![
                (1, RelationKind::Mentions),
                (1, RelationKind::Mentions),
                (2, RelationKind::Mentions),
                (2, RelationKind::LinksTo)
            ]
        );
        assert_eq!(g.degree(2), 2);
        assert_eq!(g.degree(3), 0);
        assert_eq!(g.kind_mask(0), 0b11);
        assert_eq!(g.kind_mask(3), 0);
    }

    #[test]
    fn skips_self_loops_and_unknown_nodes_and_folds_kinds() {
        let g = Graph::from_edges(3, &[(0, 0, 0), (0, 3, 0), (7, 1, 0), (0, 1, 42)]);
        assert_eq!(g.ignored_edges(), 3);
        assert_eq!(g.edge_count(), 1);
        assert_eq!(
            g.neighbours(1).collect::<Vec<_>>(),
            vec![(0, RelationKind::Other)]
        );
        assert_eq!(g.degree(99), 0);
        assert_eq!(g.neighbours(99).count(), 0);
    }

    #[test]
    fn empty_graph() {
        let g = Graph::from_edges(0, &[(0, 1, 0)]);
        assert_eq!(g.node_count(), 0);
        assert_eq!(g.edge_count(), 0);
        assert_eq!(Graph::default().node_count(), 0);
        assert_eq!(Graph::default().degree(0), 0);
    }
}
