//! The per-query buffers of the boost, pooled on the graph between queries.

/// Reusable per-query buffers for [`boost_with`](super::boost_with). They grow to the graph's node count once and
/// are reset through lists of what was touched, so a query costs time proportional to what it
/// touches, not to the graph. One scratch per thread.
#[derive(Debug, Default)]
pub struct BoostScratch {
    /// Per-node state, one cache line per node.
    pub(super) slots: Vec<Slot>,
    /// Nodes with a boost, in first-touched order.
    pub(super) touched: Vec<u32>,
    /// Nodes of the current frontier and of the next.
    pub(super) cur: Vec<u32>,
    pub(super) next: Vec<u32>,
    /// Normalised restart vector, in first-seen order.
    pub(super) restart: Vec<(u32, f64)>,
}

impl BoostScratch {
    /// Empty buffers; they grow on first use.
    pub fn new() -> BoostScratch {
        BoostScratch::default()
    }
}

/// Everything a query keeps about one node. Kept together (and aligned to a cache line)
/// because the spread jumps between nodes at random: one miss per node, not one per array.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub(super) struct Slot {
    /// The boost so far.
    pub(super) p: f64,
    /// The frontier mass, `r_j` and `r_{j+1}` by round parity.
    pub(super) r: [f64; 2],
    /// Mass this node spread over all rounds.
    pub(super) sent: f64,
    /// Total edge weight, valid once the node has spread (`SENT`).
    pub(super) weight: f64,
    /// Strongest incoming contribution: amount, from, kind.
    pub(super) best: f64,
    pub(super) best_from: u32,
    pub(super) best_kind: u8,
    pub(super) flags: u8,
}

pub(super) const IN_P: u8 = 1;
/// In frontier 0 or 1; shifted by the round parity.
pub(super) const IN_R: u8 = 2;
pub(super) const SENT: u8 = 8;

impl Slot {
    pub(super) const EMPTY: Slot = Slot {
        p: 0.0,
        r: [0.0; 2],
        sent: 0.0,
        weight: 0.0,
        best: 0.0,
        best_from: u32::MAX,
        best_kind: 0,
        flags: 0,
    };
}

impl Default for Slot {
    fn default() -> Slot {
        Slot::EMPTY
    }
}
