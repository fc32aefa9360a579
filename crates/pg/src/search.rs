//! The SQL a query runs on one shard: term statistics, BM25 from them, nearest vectors, and
//! fragment lookups. Merging across shards is [`crate::finder`]'s.
//!
//! BM25 is computed in SQL from the stored statistics, not with `ts_rank`: the caller passes
//! each query term's weight (`idf · query tf`, with the IDF from the *global* `N` and `df`
//! summed over all shards) and the global average length, and the shard sums
//! `w · (k1+1) · tf / (tf + k1 · (1 − b + b · norm / avgdl))` over its postings. With global
//! statistics a fragment scores the same on any shard, so per-shard lists merge by score.

use crate::cluster::Conn;
use finder_core::FragmentKey;

use crate::error::{db, Result};
use crate::schema::WHOLE_WORDS;
use crate::schema::{from_db, to_db};

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

pub(crate) fn stats(
    client: &mut Conn,
    shard: usize,
    field: i16,
    terms: &[String],
) -> Result<Stats> {
    let row = client
        .query_one(
            "SELECT docs, tokens FROM finder_stats WHERE field = $1",
            &[&field],
        )
        .map_err(db(format!("shard {shard}: reading field statistics")))?;
    let (docs, tokens): (i64, i64) = (row.get(0), row.get(1));
    let rows = client
        .query(
            "SELECT q.i, t.df FROM unnest($2::text[]) WITH ORDINALITY AS q(term, i)
             JOIN finder_terms t ON t.field = $1 AND t.term = q.term",
            &[&field, &terms],
        )
        .map_err(db(format!("shard {shard}: reading term statistics")))?;
    let mut df = vec![0u64; terms.len()];
    for row in rows {
        let (i, n): (i64, i64) = (row.get(0), row.get(1));
        df[(i - 1) as usize] = n.max(0) as u64;
    }
    Ok(Stats {
        docs: docs.max(0) as u64,
        tokens: tokens.max(0) as u64,
        df,
    })
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

/// For each of `words`, this shard's whole words that hold it (only the word itself when it is
/// shorter than the expansion minimum), shortest first, ties by bytes, at most `cap`: a
/// superset of its share of the global pick. One statement for all the words.
pub(crate) fn holding(
    client: &mut Conn,
    shard: usize,
    words: &[&str],
    cap: usize,
) -> Result<Vec<Vec<String>>> {
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
    let sql = format!(
        "SELECT q.i, t.term
         FROM unnest($1::text[], $2::bool[], $3::text[]) WITH ORDINALITY AS q(word, exact, pattern, i)
         CROSS JOIN LATERAL (
             (SELECT term FROM finder_terms
              WHERE q.exact AND field = {WHOLE_WORDS} AND term = q.word AND df > 0)
             UNION ALL
             (SELECT term FROM finder_terms
              WHERE NOT q.exact AND field = {WHOLE_WORDS} AND term LIKE q.pattern AND df > 0
              ORDER BY octet_length(term), term COLLATE \"C\"
              LIMIT $4::int8)
         ) t
         ORDER BY q.i, octet_length(t.term), t.term COLLATE \"C\""
    );
    let rows = client
        .query(&sql, &[&words, &exact, &patterns, &(cap as i64)])
        .map_err(db(format!("shard {shard}: expanding {words:?}")))?;
    let mut out = vec![Vec::new(); words.len()];
    for row in rows {
        let i: i64 = row.get(0);
        out[i as usize - 1].push(row.get(1));
    }
    Ok(out)
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

/// The `window` nearest fragments of this shard by the HNSW index, with their exact cosine
/// similarity (pgvector computes `<=>` on the stored vectors; the caller orders by it).
pub(crate) fn nearest(
    client: &mut Conn,
    shard: usize,
    vector: &str,
    window: usize,
    ef_search: usize,
) -> Result<Vec<Found>> {
    // pgvector caps ef_search at 1000; past it the iterative scan keeps the window full.
    let ef = ef_search.max(window).clamp(10, 1000).to_string();
    client
        .execute(
            "SELECT set_config('hnsw.ef_search', $1, true),
                    set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            &[&ef],
        )
        .map_err(db(format!("shard {shard}: setting up the vector search")))?;
    let rows = client
        .query(
            "SELECT n.fkey, n.sim, n.skey, n.ordinal, s.entity FROM (
                 SELECT fkey, skey, ordinal,
                        (1 - (embedding <=> $1::text::vector))::float4 AS sim
                 FROM finder_fragments WHERE embedding IS NOT NULL
                 ORDER BY embedding <=> $1::text::vector
                 LIMIT $2) n
             JOIN finder_sources s ON s.skey = n.skey",
            &[&vector, &(window as i64)],
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
