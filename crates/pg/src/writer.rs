//! Indexing runs into PostgreSQL: read the inputs with the embedded engine's ingestion, redo
//! changed sources, drop the ones gone from this run's inputs, and commit each shard's
//! transaction once.
//!
//! Within a shard a run is atomic: rows, term statistics and the run record change in one
//! transaction, and readers (each query reads one snapshot) see the run whole or not at all.
//! Across shards the commits follow one another; a run stopped between them leaves some shards
//! at the new run, and the next run (incremental by content hash) brings the rest along.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use finder_core::{EmbedBackend, Settings};
use finder_index::{Problem, RunCounts, SourceDoc};
use postgres::Transaction;

use crate::cluster::{connect, shard_of, PgConfig};
use crate::error::{db, PgError, Result};
use crate::graph;
use crate::schema::{self, to_db, RunRecord, TRIGRAMS, WORDS};
use crate::terms::{field_terms, indexed_text, stored_fragments, Analyzers};

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct PgRunReport {
    pub counts: RunCounts,
    pub problems: Vec<Problem>,
    /// Everything was rewritten because the index-time settings or the vector length changed.
    pub rebuilt: bool,
    /// Sources and fragments in all shards after the run.
    pub sources: u64,
    pub fragments: u64,
    /// The relation graph, when this run rebuilt it (`None`: it was current, or
    /// `graph.build = false`).
    pub graph: Option<finder_index::graph::GraphReport>,
}

/// Key of the advisory lock a run holds on each shard, so two runs never interleave (the
/// embedded index's directory lock).
const WRITE_LOCK: i64 = 0x4669_6e64_6572; // "Finder"

/// Indexes `inputs` into the shards of `config`, creating the tables when needed.
pub fn index_inputs(
    config: &PgConfig,
    inputs: &[PathBuf],
    settings: &Settings,
) -> Result<PgRunReport> {
    config.validate()?;
    let n = config.shards.len();
    let mut clients = Vec::with_capacity(n);
    for (i, s) in config.shards.iter().enumerate() {
        let mut client = connect(&s.write, i)?;
        schema::create(&mut client, i)?;
        clients.push(client);
    }
    let mut txs: Vec<Transaction<'_>> = Vec::with_capacity(n);
    for (i, c) in clients.iter_mut().enumerate() {
        let mut tx = c
            .transaction()
            .map_err(db(format!("shard {i}: starting the run")))?;
        let locked: bool = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&WRITE_LOCK])
            .map_err(db(format!("shard {i}: taking the write lock")))?
            .get(0);
        if !locked {
            return Err(PgError::Busy(i));
        }
        txs.push(tx);
    }
    let mut previous = Vec::with_capacity(n);
    for (i, tx) in txs.iter_mut().enumerate() {
        previous.push(schema::read_meta(tx, i, n)?);
    }

    let dim = (settings.embed.backend == EmbedBackend::Precomputed).then_some(settings.embed.dim);
    let mut origins = Vec::new();
    for input in inputs {
        let canonical = input.canonicalize().map_err(|e| {
            PgError::Input(Problem {
                place: input.display().to_string(),
                reason: e.to_string(),
                source_id: None,
            })
        })?;
        origins.push(canonical.display().to_string());
    }
    let rebuild = previous
        .iter()
        .flatten()
        .any(|r| r.settings != settings.index || r.dim != dim);
    let known: BTreeSet<String> = previous
        .iter()
        .flatten()
        .flat_map(|r| r.origins.iter().cloned())
        .collect();
    if rebuild {
        let missing: Vec<&String> = known.iter().filter(|o| !origins.contains(o)).collect();
        if !missing.is_empty() {
            return Err(PgError::Input(Problem {
                place: "postgres".into(),
                reason: format!(
                    "index-time settings changed, so the whole index is rebuilt; pass every input it holds (missing: {})",
                    missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ),
                source_id: None,
            }));
        }
    }
    for (i, tx) in txs.iter_mut().enumerate() {
        if rebuild || previous[i].is_none() {
            schema::reset(tx, i, dim)?;
        }
    }

    // id → (hash, origin) of every stored source.
    let mut catalog: HashMap<String, (String, String)> = HashMap::new();
    for (i, tx) in txs.iter_mut().enumerate() {
        for row in tx
            .query("SELECT id, hash, origin FROM finder_sources", &[])
            .map_err(db(format!("shard {i}: reading the catalog")))?
        {
            catalog.insert(row.get(0), (row.get(1), row.get(2)));
        }
    }

    let mut analyzers = Analyzers::new(&settings.index.language);
    let mut report = PgRunReport {
        rebuilt: rebuild,
        ..PgRunReport::default()
    };
    let mut seen: HashSet<String> = HashSet::new();
    let mut written: HashSet<String> = HashSet::new();
    let mut incomplete: HashSet<String> = HashSet::new();
    let mut failure: Option<PgError> = None;
    for (input, origin) in inputs.iter().zip(&origins) {
        let mut sink = |item: std::result::Result<SourceDoc, Problem>| {
            if failure.is_some() {
                return;
            }
            let source = match item {
                Err(problem) => {
                    match &problem.source_id {
                        Some(id) => {
                            seen.insert(id.clone());
                        }
                        None => {
                            incomplete.insert(origin.clone());
                        }
                    }
                    report.problems.push(problem);
                    return;
                }
                Ok(source) => source,
            };
            if let Some(reason) = vector_problem(&source, settings) {
                seen.insert(source.id.clone());
                report.problems.push(Problem {
                    place: source.origin.clone(),
                    reason: format!("source `{}`: {reason}", source.id),
                    source_id: Some(source.id.clone()),
                });
                return;
            }
            if !seen.insert(source.id.clone()) {
                report.problems.push(Problem {
                    place: source.origin.clone(),
                    reason: format!(
                        "source id `{}` also comes from another input; the later one wins",
                        source.id
                    ),
                    source_id: Some(source.id.clone()),
                });
            }
            let previous = catalog.get(&source.id);
            if !rebuild
                && previous
                    .is_some_and(|(hash, from)| *hash == source.hash && *from == source.origin)
            {
                report.counts.unchanged += 1;
                return;
            }
            if previous.is_some() && !rebuild {
                report.counts.updated += 1;
            } else {
                report.counts.added += 1;
            }
            let key = finder_index::source_key(&source.id);
            let shard = shard_of(key, n);
            let tx = &mut txs[shard];
            let done = delete_source(tx, shard, key.0)
                .and_then(|()| write_source(tx, shard, &source, settings, dim, &mut analyzers));
            match done {
                Ok(()) => {
                    written.insert(source.id.clone());
                }
                Err(e) => failure = Some(e),
            }
        };
        finder_index::read_input(input, origin, &settings.index, &mut sink)
            .map_err(PgError::Input)?;
        if let Some(e) = failure.take() {
            return Err(e);
        }
    }

    // Sources of this run's inputs that were not seen are gone from their input, unless the
    // input had errors that hid which ids it holds.
    let mut kept = 0u64;
    for (id, (_, origin)) in &catalog {
        if seen.contains(id) || !origins.contains(origin) {
            continue;
        }
        if incomplete.contains(origin) {
            kept += 1;
            continue;
        }
        let key = finder_index::source_key(id);
        let shard = shard_of(key, n);
        delete_source(&mut txs[shard], shard, key.0)?;
        report.counts.removed += 1;
    }
    let failed: HashSet<&String> = report
        .problems
        .iter()
        .filter_map(|p| p.source_id.as_ref())
        .collect();
    report.counts.kept = kept
        + failed
            .iter()
            .filter(|id| catalog.contains_key(**id) && !written.contains(**id))
            .count() as u64;
    report.counts.problems = report.problems.len() as u64;

    let changed = report.counts.added + report.counts.updated + report.counts.removed > 0;
    let generation = previous
        .iter()
        .flatten()
        .map(|r| r.generation)
        .max()
        .unwrap_or(0)
        + u64::from(changed || rebuild || previous.iter().any(Option::is_none));
    let mut all_origins = if rebuild { BTreeSet::new() } else { known };
    all_origins.extend(origins);
    let committed_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for (i, tx) in txs.iter_mut().enumerate() {
        tx.batch_execute("DELETE FROM finder_terms WHERE df <= 0")
            .map_err(db(format!("shard {i}: dropping unused terms")))?;
        let row = tx
            .query_one(
                "SELECT (SELECT count(*) FROM finder_sources), (SELECT count(*) FROM finder_fragments)",
                &[],
            )
            .map_err(db(format!("shard {i}: counting")))?;
        let (sources, fragments): (i64, i64) = (row.get(0), row.get(1));
        report.sources += sources as u64;
        report.fragments += fragments as u64;
        let record = RunRecord {
            settings: settings.index.clone(),
            dim,
            sources: sources as u64,
            fragments: fragments as u64,
            origins: all_origins.iter().cloned().collect(),
            last_run: report.counts,
            committed_at,
            generation,
        };
        schema::write_meta(tx, i, n, &record)?;
    }
    for (i, tx) in txs.into_iter().enumerate() {
        tx.commit()
            .map_err(db(format!("shard {i}: committing the run")))?;
    }
    // The graph spans the shards, so it is built once every shard has committed.
    let key = finder_index::graph::build_key(&settings.graph, generation);
    if !settings.graph.build || !graph::is_current(&mut clients[graph::GRAPH_SHARD], &key)? {
        report.graph = graph::rebuild(&mut clients, settings, &key, committed_at)?;
    }
    Ok(report)
}

/// Why a source's precomputed vector cannot be used, when the backend uses them.
fn vector_problem(source: &SourceDoc, settings: &Settings) -> Option<String> {
    if settings.embed.backend != EmbedBackend::Precomputed {
        return None;
    }
    let v = source.vector.as_ref()?;
    if v.len() != settings.embed.dim {
        return Some(format!(
            "`vector` has {} numbers; embed.dim is {}",
            v.len(),
            settings.embed.dim
        ));
    }
    v.iter()
        .any(|x| !x.is_finite())
        .then(|| "`vector` holds a number that is not finite".to_string())
}

/// Removes a source (cascading to its fragments, postings and relations) and takes its
/// share out of the term statistics first. Nothing happens for an unknown key.
fn delete_source(tx: &mut Transaction<'_>, shard: usize, skey: u64) -> Result<()> {
    let key = to_db(skey);
    tx.execute(
        "WITH gone AS (
             SELECT p.field, p.term, count(*) AS n
             FROM finder_postings p JOIN finder_fragments f ON f.fkey = p.fkey
             WHERE f.skey = $1 GROUP BY p.field, p.term)
         UPDATE finder_terms t SET df = t.df - gone.n
         FROM gone WHERE t.field = gone.field AND t.term = gone.term",
        &[&key],
    )
    .map_err(db(format!("shard {shard}: updating term statistics")))?;
    tx.execute(
        "UPDATE finder_stats s SET
             docs = s.docs - c.docs,
             tokens = s.tokens - CASE s.field WHEN 0 THEN c.words ELSE c.trigrams END
         FROM (SELECT count(*) AS docs, coalesce(sum(words), 0) AS words,
                      coalesce(sum(trigrams), 0) AS trigrams
               FROM finder_fragments WHERE skey = $1) c",
        &[&key],
    )
    .map_err(db(format!("shard {shard}: updating field statistics")))?;
    tx.execute("DELETE FROM finder_sources WHERE skey = $1", &[&key])
        .map_err(db(format!("shard {shard}: deleting a source")))?;
    Ok(())
}

/// pgvector's text form of a vector: `[x,y,…]` (Rust prints the shortest exact `f32`).
pub(crate) fn vector_text(v: &[f32]) -> String {
    let mut s = String::with_capacity(v.len() * 10 + 2);
    s.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push(']');
    s
}

/// Writes a source: its row, its fragments (with the vector when there is one), their
/// postings and relations, and adds its share to the term statistics.
fn write_source(
    tx: &mut Transaction<'_>,
    shard: usize,
    source: &SourceDoc,
    settings: &Settings,
    dim: Option<usize>,
    analyzers: &mut Analyzers,
) -> Result<()> {
    let place = |what: &str| format!("shard {shard}: writing {what} of `{}`", source.id);
    let skey = to_db(finder_index::source_key(&source.id).0);
    let envelope = serde_json::to_value(&source.envelope).expect("envelope serialises");
    let aliases = serde_json::to_value(&source.aliases).expect("aliases serialise");
    tx.execute(
        "INSERT INTO finder_sources (skey, id, origin, hash, envelope, summary, entity, aliases, fragments)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &skey,
            &source.id,
            &source.origin,
            &source.hash,
            &envelope,
            &source.summary,
            &source.entity,
            &aliases,
            &(source.fragments.len() as i32),
        ],
    )
    .map_err(db(place("the source")))?;

    let vector = match (dim, &source.vector) {
        (Some(_), Some(v)) => Some(vector_text(v)),
        _ => None,
    };
    let (mut fields, mut terms, mut fkeys, mut tfs, mut norms) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut words_total, mut trigrams_total) = (0i64, 0i64);
    let fragments = stored_fragments(source);
    for fragment in &fragments {
        let fkey = to_db(finder_index::fragment_key(&source.id, fragment.ordinal).0);
        let indexed = indexed_text(&source.envelope.title, fragment, &settings.index);
        let words = field_terms(&mut analyzers.words, &indexed);
        let trigrams = if settings.index.trigrams {
            Some(field_terms(&mut analyzers.trigrams, &indexed))
        } else {
            None
        };
        let trigram_len = trigrams.as_ref().map_or(0, |t| t.len);
        words_total += i64::from(words.len);
        trigrams_total += i64::from(trigram_len);
        // As in the embedded index, a fragment with no text has no vector.
        let embedding = vector.as_ref().filter(|_| !fragment.text.trim().is_empty());
        let e = fragment.extent;
        tx.execute(
            "INSERT INTO finder_fragments (fkey, skey, ordinal, body, heading, byte_start, byte_end,
                 line_start, line_end, words, trigrams, embedding)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::text::vector)",
            &[
                &fkey,
                &skey,
                &(fragment.ordinal as i32),
                &fragment.text,
                &fragment.heading,
                &(e.byte_start as i64),
                &(e.byte_end as i64),
                &(e.line_start as i32),
                &(e.line_end as i32),
                &(words.len as i32),
                &(trigram_len as i32),
                &embedding,
            ],
        )
        .map_err(db(place("a fragment")))?;
        for (field, t) in [(WORDS, Some(words)), (TRIGRAMS, trigrams)] {
            let Some(t) = t else { continue };
            for (term, tf) in t.counts {
                fields.push(field);
                terms.push(term);
                fkeys.push(fkey);
                tfs.push(tf as i32);
                norms.push(t.norm as i32);
            }
        }
    }
    tx.execute(
        "INSERT INTO finder_postings (field, term, fkey, tf, norm)
         SELECT * FROM unnest($1::int2[], $2::text[], $3::int8[], $4::int4[], $5::int4[])",
        &[&fields, &terms, &fkeys, &tfs, &norms],
    )
    .map_err(db(place("the postings")))?;
    tx.execute(
        "INSERT INTO finder_terms (field, term, df)
         SELECT field, term, count(*) FROM unnest($1::int2[], $2::text[]) AS p(field, term)
         GROUP BY field, term
         ON CONFLICT (field, term) DO UPDATE SET df = finder_terms.df + EXCLUDED.df",
        &[&fields, &terms],
    )
    .map_err(db(place("the term statistics")))?;
    tx.execute(
        "UPDATE finder_stats SET docs = docs + $1::int8,
             tokens = tokens + CASE field WHEN 0 THEN $2::int8 ELSE $3::int8 END",
        &[&(fragments.len() as i64), &words_total, &trigrams_total],
    )
    .map_err(db(place("the field statistics")))?;
    if !source.relations.is_empty() {
        let (to, kind): (Vec<&str>, Vec<&str>) = source
            .relations
            .iter()
            .map(|(t, k)| (t.as_str(), k.as_str()))
            .unzip();
        tx.execute(
            "INSERT INTO finder_relations (skey, to_id, kind)
             SELECT $1, * FROM unnest($2::text[], $3::text[])",
            &[&skey, &to, &kind],
        )
        .map_err(db(place("the relations")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_print_in_pgvector_text_form() {
        assert_eq!(vector_text(&[1.0, -0.5, 0.1]), "[1,-0.5,0.1]");
        assert_eq!(vector_text(&[]), "[]");
    }
}
