//! Runs a dataset's judged queries through the index, one or more named runs in one process.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use finder_core::{Embed, Settings, StorageBackend};
use finder_index::{build_vectors, VectorProgress};
use finder_store::Store;

use crate::dataset::{corpus_fingerprint, Dataset};
use crate::error::EvalError;
use crate::metrics::{Metrics, QueryMetrics};
use crate::report::{note_degraded, LatencyRecorder, Report, RunReport};

/// Hits judged per query: enough for Recall@100.
const DEPTH: usize = 100;
/// The page whose latency is reported.
const PAGE: usize = 10;

const NO_BOOST: &str = "graph.boost=false";
const NO_ENTITIES: &str = "graph.entities=false";
const NO_NEIGHBOURS: &str = "graph.neighbours=false";
const NO_COMMUNITIES: &str = "graph.communities=false";

/// One named run: a preset or `name:key=value,...`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    pub name: String,
    /// `key=value` overrides, applied like `--set`.
    pub overrides: Vec<String>,
}

impl RunSpec {
    /// Parses `name:key=value,key=value` (commas inside `[...]` belong to the value).
    pub fn parse(spec: &str) -> Result<RunSpec, EvalError> {
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let name = name.trim();
        if name.is_empty() {
            return Err(EvalError::Run(format!(
                "run `{spec}`: expected NAME:key=value,..."
            )));
        }
        let mut overrides = Vec::new();
        let mut depth = 0i32;
        let mut current = String::new();
        for c in rest.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ',' if depth == 0 => {
                    overrides.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        overrides.push(current);
        overrides.retain(|o| !o.trim().is_empty());
        if let Some(bad) = overrides.iter().find(|o| !o.contains('=')) {
            return Err(EvalError::Run(format!(
                "run `{spec}`: `{bad}` is not key=value"
            )));
        }
        Ok(RunSpec {
            name: name.to_string(),
            overrides,
        })
    }
}

/// The preset that asks for sources related to each query's own source (`Query::like`, as
/// `recommend` does) instead of searching its text: for datasets built from links.
pub const RECOMMEND: &str = "recommend";

/// Expands a comma-separated list of preset names: `lexical` (BM25 lists only), `dense`
/// (vector list only), `hybrid` (both, no graph), `boost` (hybrid + the graph boost, no graph
/// channel), `full` (every layer on: the defaults), `recommend` (the defaults, from the
/// query's own source rather than its text).
pub fn presets(names: &str) -> Result<Vec<RunSpec>, EvalError> {
    let spec = |name: &str, overrides: &[&str]| RunSpec {
        name: name.to_string(),
        overrides: overrides.iter().map(|s| s.to_string()).collect(),
    };
    names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|name| match name {
            "lexical" => Ok(spec(name, &["vector.enabled=false", NO_BOOST, NO_ENTITIES, NO_NEIGHBOURS, NO_COMMUNITIES])),
            "dense" => Ok(spec(name, &["lexical.enabled=false", NO_BOOST, NO_ENTITIES, NO_NEIGHBOURS, NO_COMMUNITIES])),
            "hybrid" => Ok(spec(name, &[NO_BOOST, NO_ENTITIES, NO_NEIGHBOURS, NO_COMMUNITIES])),
            "boost" => Ok(spec(name, &[NO_ENTITIES, NO_NEIGHBOURS, NO_COMMUNITIES])),
            "full" | RECOMMEND => Ok(spec(name, &[])),
            other => Err(EvalError::Run(format!(
                "unknown preset `{other}`; known: lexical, dense, hybrid, boost, full, recommend (or --run NAME:key=value,...)"
            ))),
        })
        .collect()
}

/// Where a dataset's queries and judgments come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Queries {
    /// A BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.
    #[default]
    Beir,
    /// A folder of linked notes: each note's text asks for the notes it links to
    /// ([`crate::links_dataset`]).
    Links,
}

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// The dataset's folder, read as `queries` says.
    pub dataset: PathBuf,
    pub queries: Queries,
    /// Index folder to reuse or build; default: the cache.
    pub index: Option<PathBuf>,
    pub split: String,
    pub runs: Vec<RunSpec>,
    /// Settings every run starts from (index-time settings shape the index).
    pub base: Settings,
    /// When set, each run's rankings are written here as `<run>.trec` (TREC run format:
    /// `query Q0 doc rank score run`, the 100-deep ranking the metrics read), for comparing
    /// with other systems' runs or for significance tests.
    pub trec: Option<PathBuf>,
}

/// Where eval indexes are cached: `$FINDER_CACHE_DIR`, else `$XDG_CACHE_HOME/finder`, else
/// `~/.cache/finder`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FINDER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("finder");
    }
    let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    home.join(".cache").join("finder")
}

/// The cache folder for a corpus, index-time settings and word analysis (an index cached by
/// an older analysis is left alone, not rebuilt in place).
fn cached_index(dataset: &Dataset, settings: &Settings) -> Result<PathBuf, EvalError> {
    let fingerprint = match &dataset.fingerprint {
        Some(f) => f.clone(),
        None => corpus_fingerprint(&dataset.dir)?,
    };
    let index_settings = format!(
        "{}analysis = {}\n",
        toml::to_string(&settings.index).unwrap_or_default(),
        finder_index::ANALYSIS
    );
    let settings_hash = blake3::hash(index_settings.as_bytes()).to_hex();
    Ok(cache_dir().join("eval").join(format!(
        "{}-{fingerprint}-{}",
        dataset.name,
        &settings_hash[..8]
    )))
}

/// Where the searched copy of a vault evaluated by its links goes: a cache folder per vault.
fn links_copy(folder: &Path) -> PathBuf {
    let canonical = folder
        .canonicalize()
        .unwrap_or_else(|_| folder.to_path_buf());
    let key = blake3::hash(canonical.display().to_string().as_bytes()).to_hex();
    let name = folder
        .file_name()
        .map_or_else(|| "vault".into(), |n| n.to_string_lossy().into_owned());
    cache_dir()
        .join("eval")
        .join(format!("{name}-links-{}", &key[..8]))
}

/// Indexes the corpus (incrementally, so a cached index costs a hash check) and runs every
/// judged query for every run. `progress` receives short status messages.
pub fn evaluate(
    options: &EvalOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, EvalError> {
    if options.runs.is_empty() {
        return Err(EvalError::Run("no runs asked for".into()));
    }
    let mut base = options.base.clone();
    let dataset = match options.queries {
        Queries::Beir => {
            // BEIR corpora are titled passages: each title is an entity its mentions link to.
            base.graph.link_titles = true;
            Dataset::load(&options.dataset, &options.split)?
        }
        Queries::Links => {
            progress(&format!(
                "reading the links of {}",
                options.dataset.display()
            ));
            crate::links_dataset(&options.dataset, &base, &links_copy(&options.dataset))?
        }
    };
    if dataset.sources.is_none() && options.runs.iter().any(|r| r.name == RECOMMEND) {
        return Err(EvalError::Run(format!(
            "run `{RECOMMEND}` starts from each query's own source: it needs a dataset built from links (--queries links)"
        )));
    }
    let options = &EvalOptions {
        base,
        ..options.clone()
    };
    let index_dir = match &options.index {
        Some(dir) => dir.clone(),
        None => cached_index(&dataset, &options.base)?,
    };
    progress(&format!(
        "indexing {} into {}",
        dataset.name,
        index_dir.display()
    ));
    let semantic = query_model(&options.base);
    // A run into PostgreSQL embeds as it writes (incremental by content hash, like any input);
    // the embedded index builds its vectors after.
    let model = semantic.as_ref().ok().cloned().flatten();
    finder_store::index_inputs(
        &index_dir,
        std::slice::from_ref(&dataset.dir),
        &options.base,
        model.as_deref(),
    )?;
    let postgres = options.base.storage.backend == StorageBackend::Postgres;
    if let (false, Some(model)) = (postgres, &model) {
        build(&index_dir, &options.base, model.as_ref(), progress)?;
    }
    let mut finder = Store::open(&index_dir, options.base.clone())?;
    // Origins add up over runs: shards that hold another input too would mix its sources
    // into the rankings.
    if postgres {
        let status = finder.status()?;
        if status.origins().len() > 1 {
            return Err(EvalError::Run(format!(
                "the shards hold other inputs besides the dataset ({}): evaluate on empty databases",
                status.origins().join(", ")
            )));
        }
    }
    finder.attach_embedder(semantic.clone());

    let mut report = Report::new(dataset.name.clone(), dataset.queries.len());
    for spec in &options.runs {
        let settings = finder
            .settings_with(&spec.overrides)
            .map_err(|source| EvalError::settings(&spec.name, source))?;
        if spec.name == "dense" {
            if let Err(reason) = &semantic {
                return Err(EvalError::Run(format!(
                    "run `dense` needs the semantic layer: {reason}"
                )));
            }
        }
        progress(&format!("run {}", spec.name));
        finder.attach_refiners(
            finder_embed::reranker(&settings.refine, semantic.clone().ok().flatten()),
            finder_embed::plugins(&settings.refine),
        );
        let Answers {
            per_query,
            latency,
            notes,
            rankings,
        } = run_queries(
            &finder,
            &dataset,
            &settings,
            spec.name == RECOMMEND,
            options.trec.is_some(),
        )?;
        if let Some(dir) = &options.trec {
            write_trec(dir, &spec.name, &rankings)?;
        }
        let mut run = RunReport::new(
            Metrics::mean(&per_query),
            &latency,
            settings_json(&settings),
        );
        run.notes = notes;
        report.add_run(spec.name.clone(), run);
    }
    Ok(report)
}

/// The embedding model (`Ok(None)`: the semantic layer is off); `Err(reason)` when it is
/// unavailable, which runs report as a note.
fn query_model(settings: &Settings) -> Result<Option<Arc<dyn Embed>>, String> {
    match finder_embed::Embedder::from_settings(&settings.embed) {
        Ok(Some(e)) => Ok(Some(Arc::new(e) as Arc<dyn Embed>)),
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Builds the embedded index's vectors (incrementally).
fn build(
    index_dir: &std::path::Path,
    settings: &Settings,
    embedder: &dyn Embed,
    progress: &mut dyn FnMut(&str),
) -> Result<(), EvalError> {
    build_vectors(index_dir, settings, embedder, &mut |p| match p {
        VectorProgress::Embedding { done, total } if total > 0 => {
            progress(&format!("embedding {done}/{total} fragments"));
        }
        VectorProgress::Graph { done, total } if total > 0 => {
            progress(&format!("ANN graph {done}/{total} vectors"));
        }
        _ => {}
    })?;
    Ok(())
}

/// One query's ranking as a run file lists it: its id, the document ids best first, and their
/// scores.
struct Ranking {
    query: String,
    /// Document ids, best first.
    ranked: Vec<String>,
    scores: Vec<f64>,
}

/// What one run's queries gave.
struct Answers {
    per_query: Vec<QueryMetrics>,
    latency: LatencyRecorder,
    /// Degraded channels, once each.
    notes: Vec<String>,
    /// Empty unless asked for (`--trec`).
    rankings: Vec<Ranking>,
}

/// The request a query makes for hits `0..limit`: its text, or with `recommend` its own
/// source's related sources. A query that is a source of the corpus leaves it out.
fn request(
    finder: &Store,
    dataset: &Dataset,
    query: &crate::Query,
    recommend: bool,
    limit: usize,
) -> Result<finder_core::Query, EvalError> {
    if recommend {
        return Ok(finder.like_query(&query.id, limit)?);
    }
    let mut request = finder_core::Query::text(query.text.as_str(), 0, limit);
    if let Some(sources) = &dataset.sources {
        request.scope = Some(
            sources
                .iter()
                .filter(|s| **s != query.id)
                .cloned()
                .collect(),
        );
    }
    Ok(request)
}

fn run_queries(
    finder: &Store,
    dataset: &Dataset,
    settings: &Settings,
    recommend: bool,
    keep_rankings: bool,
) -> Result<Answers, EvalError> {
    let mut rankings = Vec::new();
    let mut per_query = Vec::with_capacity(dataset.queries.len());
    let mut latency = LatencyRecorder::new();
    let mut notes: Vec<String> = Vec::new();
    for query in &dataset.queries {
        // Latency is measured on the query a user makes (the first page, with hints); the
        // metrics on a deep ranking (one extra hit, in case the query's own id is dropped).
        let page = finder.query(&request(finder, dataset, query, recommend, PAGE)?, settings)?;
        latency.record_diagnostics(&page.diagnostics);
        let deep = request(finder, dataset, query, recommend, DEPTH + 1)?;
        let response = finder.query(&deep, settings)?;
        note_degraded(&response.diagnostics, &mut notes);
        let (ranked, scores): (Vec<String>, Vec<f64>) = response
            .hits
            .into_iter()
            .map(|h| (h.id, h.score))
            .filter(|(id, _)| *id != query.id)
            .take(DEPTH)
            .unzip();
        let judged = &dataset.qrels[&query.id];
        per_query.push(QueryMetrics::compute(&ranked, judged));
        if keep_rankings {
            rankings.push(Ranking {
                query: query.id.clone(),
                ranked,
                scores,
            });
        }
    }
    Ok(Answers {
        per_query,
        latency,
        notes,
        rankings,
    })
}

/// Writes `dir/<run>.trec`: one line `query Q0 doc rank score run` per ranked document.
fn write_trec(dir: &Path, run: &str, rankings: &[Ranking]) -> Result<(), EvalError> {
    std::fs::create_dir_all(dir).map_err(|e| EvalError::io(dir, e))?;
    let path = dir.join(format!("{run}.trec"));
    let mut out = String::new();
    for Ranking {
        query,
        ranked,
        scores,
    } in rankings
    {
        for (i, (doc, score)) in ranked.iter().zip(scores).enumerate() {
            out.push_str(&format!("{query} Q0 {doc} {} {score:.6} {run}\n", i + 1));
        }
    }
    std::fs::write(&path, out).map_err(|e| EvalError::io(&path, e))
}

/// The query-time sections of a run's settings, as JSON for the report.
fn settings_json(settings: &Settings) -> serde_json::Value {
    let mut value = serde_json::to_value(settings).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.remove("index");
    }
    value
}

/// Checks `[run.]metric=minimum` thresholds (`ndcg@10=0.675` for every run,
/// `hybrid.ndcg@10=0.715` for one). The minimum is a number, or another run's value of the same
/// metric with an optional margin (`full.ndcg@10=hybrid-0.003`: full may trail hybrid by at
/// most 0.003). The error lists each miss.
pub fn check_minimums(report: &Report, minimums: &[String]) -> Result<(), EvalError> {
    let mut misses = Vec::new();
    for spec in minimums {
        let Some((target, min)) = spec.split_once('=') else {
            return Err(EvalError::Run(format!(
                "--min `{spec}`: expected [RUN.]METRIC=VALUE, e.g. ndcg@10=0.675 or full.ndcg@10=hybrid-0.003"
            )));
        };
        let (only_run, metric) = match target.trim().split_once('.') {
            Some((run, metric)) => (Some(run), metric),
            None => (None, target.trim()),
        };
        let run_named = |run: &str| {
            report.runs.get(run).ok_or_else(|| {
                EvalError::Run(format!("--min `{spec}`: no run named `{run}` in this eval"))
            })
        };
        let metric_of = |run: &RunReport| {
            let entries = run.metrics.entries();
            match entries.iter().find(|(k, _)| *k == metric) {
                Some(&(_, value)) => Ok(value),
                None => {
                    let known: Vec<&str> = entries.iter().map(|(k, _)| *k).collect();
                    Err(EvalError::Run(format!(
                        "--min: unknown metric `{metric}`; known: {}",
                        known.join(", ")
                    )))
                }
            }
        };
        if let Some(run) = only_run {
            run_named(run)?;
        }
        let (min, shown) = match min.trim().parse::<f64>() {
            Ok(min) => (min, min.to_string()),
            Err(_) => {
                // Another run's value of this metric, give or take a margin.
                let other = min.trim();
                let split = other.find(['-', '+']).unwrap_or(other.len());
                let (base, margin) = other.split_at(split);
                let margin: f64 = match margin {
                    "" => 0.0,
                    m => m.parse().map_err(|_| {
                        EvalError::Run(format!(
                            "--min `{spec}`: `{min}` is neither a number nor RUN[-MARGIN]"
                        ))
                    })?,
                };
                let min = metric_of(run_named(base)?)? + margin;
                (min, format!("{min:.4} ({other})"))
            }
        };
        for (name, run) in report.ordered_runs() {
            if only_run.is_some_and(|r| r != name) {
                continue;
            }
            let value = metric_of(run)?;
            if value < min {
                misses.push(format!("{name} {metric} = {value:.4} < {shown}"));
            }
        }
    }
    if misses.is_empty() {
        Ok(())
    } else {
        Err(EvalError::BelowThreshold(misses.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_specs_parse_with_arrays() {
        let spec =
            RunSpec::parse("tuned:lexical.k1=0.9,finder.rollup_weights=[1, 0.2],lexical.b=0.4")
                .unwrap();
        assert_eq!(spec.name, "tuned");
        assert_eq!(
            spec.overrides,
            vec![
                "lexical.k1=0.9",
                "finder.rollup_weights=[1, 0.2]",
                "lexical.b=0.4"
            ]
        );
        assert!(RunSpec::parse(":a=1").is_err());
        assert!(RunSpec::parse("x:novalue").is_err());
        assert_eq!(
            RunSpec::parse("plain").unwrap().overrides,
            Vec::<String>::new()
        );
    }

    #[test]
    fn presets_toggle_channels() {
        let runs = presets("lexical, dense,hybrid").unwrap();
        let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, vec!["lexical", "dense", "hybrid"]);
        assert_eq!(runs[0].overrides[0], "vector.enabled=false");
        assert_eq!(runs[1].overrides[0], "lexical.enabled=false");
        // Only `full` runs the graph layer; `boost` adds the boost alone.
        assert_eq!(
            runs[2].overrides,
            vec![NO_BOOST, NO_ENTITIES, NO_NEIGHBOURS, NO_COMMUNITIES]
        );
        assert_eq!(
            presets("boost").unwrap()[0].overrides,
            vec![NO_ENTITIES, NO_NEIGHBOURS, NO_COMMUNITIES]
        );
        assert!(presets("full").unwrap()[0].overrides.is_empty());
        assert!(presets("bogus")
            .unwrap_err()
            .to_string()
            .contains("known: lexical"));
    }
}
