//! The SQL a query runs on one shard: term statistics, BM25 from them, nearest vectors, and
//! fragment lookups. Merging across shards is [`crate::finder`]'s.
//!
//! BM25 is computed in SQL from the stored statistics, not with `ts_rank`: the caller passes
//! each query term's weight (`idf · query tf`, with the IDF from the *global* `N` and `df`
//! summed over all shards) and the global average length, and the shard sums
//! `w · (k1+1) · tf / (tf + k1 · (1 − b + b · norm / avgdl))` over its postings. With global
//! statistics a fragment scores the same on any shard, so per-shard lists merge by score.

use postgres::types::ToSql;

use crate::cluster::Conn;
use finder_core::FragmentKey;

use crate::error::{db, Result};
use crate::schema::{from_db, to_db, WHOLE_WORDS, WORDS};

/// A fragment a shard found, with what later stages ask of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Found {
    pub fragment: FragmentKey,
    pub score: f32,
    pub meta: Meta,
}

/// Where a fragment belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    pub source: u64,
    pub ordinal: u32,
    pub entity: bool,
    pub shard: usize,
}

/// One shard's statistics for a field and the query's terms.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    pub docs: u64,
    pub tokens: u64,
    /// Document frequency of each query term, in the query's order.
    pub df: Vec<u64>,
}

impl Stats {
    /// Adds another shard's statistics (the global ones are the sums).
    pub fn add(&mut self, other: &Stats) {
        self.docs += other.docs;
        self.tokens += other.tokens;
        if self.df.len() < other.df.len() {
            self.df.resize(other.df.len(), 0);
        }
        for (a, b) in self.df.iter_mut().zip(&other.df) {
            *a += b;
        }
    }
}

/// What one shard knows of a query's terms, read in one statement ([`terms`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct ShardTerms {
    /// The stemmed field's statistics, with the document frequency of each query term.
    pub words: Stats,
    /// The whole-word field's statistics (its `df` stays empty: see `held`).
    pub whole: Stats,
    /// For each word to expand, this shard's whole words that hold it with their document
    /// frequencies: the word itself only when it is shorter than the expansion minimum, else
    /// the `cap` shortest (ties by bytes), in no order. A superset of its share of the global
    /// pick, so the frequencies of every picked word are all here.
    pub held: Vec<Vec<(String, u64)>>,
}

/// Reads, in one statement, both fields' statistics, the document frequency of each of
/// `terms` (stemmed words) and the whole words that hold each of `words` (see
/// [`ShardTerms::held`]).
pub(crate) fn terms(
    client: &mut Conn,
    shard: usize,
    terms: &[String],
    words: &[&str],
    cap: usize,
) -> Result<ShardTerms> {
    let exact: Vec<bool> = words
        .iter()
        .map(|w| w.len() < finder_index::expand::MIN_PARTIAL_BYTES)
        .collect();
    // `LIKE '%word%'` (the word's own `%`, `_` and `\\` escaped) is `strpos(term, word) > 0`,
    // and the whole-word field's trigram index (`schema::DDL`) serves it; the field is written
    // into the statement so the planner can match that partial index. A word too short to
    // expand is looked up by the primary key.
    let patterns: Vec<String> = words
        .iter()
        .map(|w| {
            let escaped = w
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            format!("%{escaped}%")
        })
        .collect();
    // Rows by kind: 0 a field's statistics (at = the field), 1 a query term's document
    // frequency (at = its place, from 1), 2 a whole word holding word `at`.
    let sql = format!(
        "SELECT 0::int2, field::int8, NULL::text, docs, tokens FROM finder_stats
         UNION ALL
         SELECT 1::int2, q.i, NULL::text, coalesce(t.df, 0), 0::int8
         FROM unnest($1::text[]) WITH ORDINALITY AS q(term, i)
         LEFT JOIN finder_terms t ON t.field = {WORDS} AND t.term = q.term
         UNION ALL
         SELECT 2::int2, q.i, t.term, t.df, 0::int8
         FROM unnest($2::text[], $3::bool[], $4::text[]) WITH ORDINALITY AS q(word, exact, pattern, i)
         CROSS JOIN LATERAL (
             (SELECT term, df FROM finder_terms
              WHERE q.exact AND field = {WHOLE_WORDS} AND term = q.word AND df > 0)
             UNION ALL
             (SELECT term, df FROM finder_terms
              WHERE NOT q.exact AND field = {WHOLE_WORDS} AND term LIKE q.pattern AND df > 0
              ORDER BY octet_length(term), term COLLATE \"C\"
              LIMIT $5::int8)
         ) t"
    );
    let rows = client
        .query(&sql, &[&terms, &words, &exact, &patterns, &(cap as i64)])
        .map_err(db(format!("shard {shard}: reading term statistics")))?;
    let mut out = ShardTerms {
        words: Stats {
            df: vec![0; terms.len()],
            ..Stats::default()
        },
        held: vec![Vec::new(); words.len()],
        ..ShardTerms::default()
    };
    for row in rows {
        let (kind, at, a, b): (i16, i64, i64, i64) =
            (row.get(0), row.get(1), row.get(3), row.get(4));
        let (a, b) = (a.max(0) as u64, b.max(0) as u64);
        match kind {
            0 if at == i64::from(WORDS) => (out.words.docs, out.words.tokens) = (a, b),
            0 if at == i64::from(WHOLE_WORDS) => (out.whole.docs, out.whole.tokens) = (a, b),
            1 => out.words.df[at as usize - 1] = a,
            2 => out.held[at as usize - 1].push((row.get(2), a)),
            _ => {}
        }
    }
    Ok(out)
}

/// Orders keys as unsigned numbers (stored signed): ties break as in the embedded index's
/// merge, on the key.
const KEY_ORDER: &str = "(fkey # (-9223372036854775807 - 1))";

/// The `depth` best fragments of this shard for weighted terms, best first: term `i` is
/// `terms[i]` of field `fields[i]`, weighing `weights[i]` (its IDF times its query weight), its
/// field's average length `avg_lens[i]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bm25(
    client: &mut Conn,
    shard: usize,
    fields: &[i16],
    terms: &[String],
    weights: &[f64],
    avg_lens: &[f64],
    (k1, b): (f32, f32),
    depth: usize,
) -> Result<Vec<Found>> {
    let sql = format!(
        "SELECT t.fkey, t.score, f.skey, f.ordinal, s.entity FROM (
             SELECT p.fkey, sum(q.w * ($3::float8 + 1) * p.tf
                        / (p.tf + $3::float8 * (1 - $4::float8 + $4::float8 * p.norm / q.avg)))::float4 AS score
             FROM unnest($1::int2[], $2::text[], $5::float8[], $6::float8[]) AS q(field, term, w, avg)
             JOIN finder_postings p ON p.field = q.field AND p.term = q.term
             GROUP BY p.fkey
             ORDER BY score DESC, {KEY_ORDER}
             LIMIT $7::int8) t
         JOIN finder_fragments f ON f.fkey = t.fkey
         JOIN finder_sources s ON s.skey = f.skey"
    );
    let rows = client
        .query(
            &sql,
            &[
                &fields,
                &terms,
                &f64::from(k1),
                &f64::from(b),
                &weights,
                &avg_lens,
                &(depth as i64),
            ],
        )
        .map_err(db(format!("shard {shard}: scoring BM25")))?;
    Ok(rows.into_iter().map(|row| found(&row, shard)).collect())
}

fn found(row: &postgres::Row, shard: usize) -> Found {
    Found {
        fragment: FragmentKey(from_db(row.get(0))),
        score: row.get(1),
        meta: Meta {
            source: from_db(row.get(2)),
            ordinal: row.get::<_, i32>(3) as u32,
            entity: row.get(4),
            shard,
        },
    }
}

/// Shards with at most this many fragments answer the vector list by comparing every vector:
/// up to here that costs no more than the HNSW walk at the default beam (measured with
/// MiniLM's 384 dimensions), and it is exact. See docs/perf/pg-lists-at-once.md.
pub(crate) const EXACT_SCAN_MAX: u64 = 8_000;

/// The `window` nearest fragments of this shard with their exact cosine similarity, by the
/// HNSW index or, when `exact`, by comparing every vector (pgvector computes `<=>` on the
/// stored vectors; the caller orders by it). With `window_weight` (the shard holds every
/// window of a long passage, `embed.windows`), a fragment scores as the embedded index scores
/// it: its first window's similarity plus `window_weight` times what its best window adds to
/// that; the walk then takes the window nearest first windows and nearest later windows, and
/// scores each of their fragments over all its windows.
pub(crate) fn nearest(
    client: &mut Conn,
    shard: usize,
    vector: &str,
    window: usize,
    ef_search: usize,
    exact: bool,
    window_weight: Option<f32>,
) -> Result<Vec<Found>> {
    if !exact {
        // pgvector caps ef_search at 1000; past it the iterative scan keeps the window full.
        let ef = ef_search.max(window).clamp(10, 1000).to_string();
        client
            .execute(
                "SELECT set_config('hnsw.ef_search', $1, true),
                        set_config('hnsw.iterative_scan', 'relaxed_order', true)",
                &[&ef],
            )
            .map_err(db(format!("shard {shard}: setting up the vector search")))?;
    }
    let (window, weight) = (window as i64, f64::from(window_weight.unwrap_or(0.0)));
    // pgvector caps ef_search at 1000: a wider beam is asked of the iterative scan as rows
    // (it walks on until it has returned that many), of which the exact cosine keeps the
    // best `window`.
    let beam = (ef_search as i64).max(window);
    const SIM: &str = "(1 - (embedding <=> $1::text::vector))";
    // With later windows: the first window's similarity plus `$3` of what the best adds.
    const FOLDED: &str = "(first + $3 * (greatest(first, best) - first))::float4";
    // Each arm scores its candidates `(fkey, skey, ordinal, sim)`; the best `window` of them
    // are kept by exact similarity below.
    let (scored, params): (String, Vec<&(dyn ToSql + Sync)>) =
        match (exact, window_weight.is_some()) {
            // Ordered by the similarity, which the HNSW index cannot serve: a scan.
            (true, false) => (
                format!(
                    "SELECT fkey, skey, ordinal, {SIM}::float4 AS sim
                 FROM finder_fragments WHERE embedding IS NOT NULL"
                ),
                vec![&vector, &window],
            ),
            (false, false) => (
                format!(
                    "SELECT fkey, skey, ordinal, {SIM}::float4 AS sim
                 FROM finder_fragments WHERE embedding IS NOT NULL
                 ORDER BY embedding <=> $1::text::vector
                 LIMIT $3"
                ),
                vec![&vector, &window, &beam],
            ),
            // Every fragment, each with its best later window, found by one grouped scan.
            (true, true) => (
                format!(
                    "SELECT fkey, skey, ordinal, {FOLDED} AS sim
                 FROM (SELECT fkey, skey, ordinal, {SIM} AS first
                       FROM finder_fragments WHERE embedding IS NOT NULL) f
                 LEFT JOIN (SELECT fkey, max({SIM}) AS best
                            FROM finder_parts GROUP BY fkey) b USING (fkey)"
                ),
                vec![&vector, &window, &weight],
            ),
            // The beam's nearest first windows and nearest later windows, each of their fragments
            // scored over all its windows (a few per candidate, by the primary key).
            (false, true) => (
                format!(
                    "SELECT fkey, skey, ordinal, {FOLDED} AS sim
                 FROM (SELECT f.fkey, f.skey, f.ordinal,
                              1 - (f.embedding <=> $1::text::vector) AS first,
                              (SELECT max(1 - (p.embedding <=> $1::text::vector))
                               FROM finder_parts p WHERE p.fkey = f.fkey) AS best
                       FROM finder_fragments f
                       WHERE f.embedding IS NOT NULL AND f.fkey IN (
                           (SELECT fkey FROM finder_fragments WHERE embedding IS NOT NULL
                            ORDER BY embedding <=> $1::text::vector LIMIT $4)
                           UNION
                           (SELECT fkey FROM finder_parts
                            ORDER BY embedding <=> $1::text::vector LIMIT $4))) w"
                ),
                vec![&vector, &window, &weight, &beam],
            ),
        };
    let rows = client
        .query(
            &format!(
                "SELECT n.fkey, n.sim, n.skey, n.ordinal, s.entity FROM (
                     SELECT fkey, skey, ordinal, sim FROM ({scored}) c
                     ORDER BY sim DESC, {KEY_ORDER}
                     LIMIT $2) n
                 JOIN finder_sources s ON s.skey = n.skey"
            ),
            &params,
        )
        .map_err(db(format!("shard {shard}: searching vectors")))?;
    Ok(rows.into_iter().map(|row| found(&row, shard)).collect())
}

/// Where the given fragments belong, for those this shard holds.
pub(crate) fn lookup(
    client: &mut Conn,
    shard: usize,
    fragments: &[FragmentKey],
) -> Result<Vec<(FragmentKey, Meta)>> {
    let keys: Vec<i64> = fragments.iter().map(|f| to_db(f.0)).collect();
    let rows = client
        .query(
            "SELECT f.fkey, 0::float4, f.skey, f.ordinal, s.entity
             FROM finder_fragments f JOIN finder_sources s ON s.skey = f.skey
             WHERE f.fkey = ANY($1)",
            &[&keys],
        )
        .map_err(db(format!("shard {shard}: looking up fragments")))?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let f = found(&row, shard);
            (f.fragment, f.meta)
        })
        .collect())
}

/// Parses pgvector's text form.
pub(crate) fn parse_vector(text: &str) -> Option<Vec<f32>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|x| x.trim().parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_add_up() {
        let mut a = Stats {
            docs: 3,
            tokens: 30,
            df: vec![1, 0],
        };
        a.add(&Stats {
            docs: 2,
            tokens: 10,
            df: vec![2, 1],
        });
        assert_eq!((a.docs, a.tokens, a.df), (5, 40, vec![3, 1]));
    }

    #[test]
    fn vectors_parse_back() {
        let v = [0.25f32, -1.5, 3.0e-8];
        let text = crate::writer::vector_text(&v);
        assert_eq!(parse_vector(&text).unwrap(), v.to_vec());
        assert_eq!(parse_vector("[]").unwrap(), Vec::<f32>::new());
        assert!(parse_vector("nope").is_none());
    }
}
