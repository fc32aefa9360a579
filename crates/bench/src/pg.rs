//! `run --pg`: the same benchmark over Finder's PostgreSQL backend, sharded over the given
//! servers. Each shard gets a fresh database (created here, dropped afterwards unless kept),
//! so a run always measures a full build and never touches existing data.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use finder_pg::{PgConfig, PgFinder, ShardUrls};
use postgres::{Client, NoTls};
use serde_json::{json, Value};

use crate::dataset::Dataset;
use crate::run::{load_queries, run_modes, write_records, Modes, RunOptions, Ticker, K};

/// Fresh databases, one per shard, dropped with the value unless `keep` is set.
struct Databases {
    admin: Vec<String>,
    names: Vec<String>,
    keep: bool,
}

impl Drop for Databases {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for (admin, name) in self.admin.iter().zip(&self.names) {
            if let Ok(mut client) = Client::connect(admin, NoTls) {
                let _ =
                    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        }
    }
}

/// Runs the benchmark over PostgreSQL with one shard per URL (a server URL; the database in
/// it is only used to create the shard's own).
pub fn run_pg(options: &RunOptions, urls: &[String]) -> Result<Value> {
    let dataset = Dataset::open(&options.data)?;
    let meta = &dataset.meta;
    let shards = urls.len();
    let system = format!("finder-pg-{shards}shards");
    let specs = crate::run::specs(options)?;
    let mut notes: Vec<String> = Vec::new();

    let mut dbs = Databases {
        admin: Vec::new(),
        names: Vec::new(),
        keep: options.keep,
    };
    let mut config = PgConfig {
        shards: Vec::new(),
        tls_ca: None,
    };
    for (i, url) in urls.iter().enumerate() {
        if options.reuse {
            config.shards.push(ShardUrls {
                write: url.clone(),
                read: Vec::new(),
            });
            continue;
        }
        let name = format!("finder_bench_{}_{i}", std::process::id());
        let mut admin =
            Client::connect(url, NoTls).with_context(|| format!("connecting to {url}"))?;
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .with_context(|| format!("creating database {name} on {url}"))?;
        dbs.admin.push(url.clone());
        dbs.names.push(name.clone());
        config.shards.push(ShardUrls {
            write: finder_pg::with_database(url, &name),
            read: Vec::new(),
        });
    }

    let settings = crate::run::bench_settings(options, meta.dim)?;
    let (index_s, fragments) = if options.reuse {
        notes.push("databases reused (index figures not measured)".into());
        (0.0, 0)
    } else {
        index(&dataset, &config, &settings, options, &system, &mut notes)?
    };
    let mut index_bytes = 0i64;
    for shard in &config.shards {
        let mut client = Client::connect(&shard.write, NoTls)?;
        let row = client.query_one("SELECT pg_database_size(current_database())", &[])?;
        index_bytes += row.get::<_, i64>(0);
    }
    if options.progress {
        eprintln!(
            "{system}: index {index_s:.1} s, {:.1} MB in {shards} databases",
            index_bytes as f64 / 1e6
        );
    }

    let mut finder = PgFinder::open(&config, settings.clone())?;
    let embedder = finder_embed::Embedder::from_settings(&settings.embed)?
        .context("the precomputed backend is always available")?;
    let embedder: Arc<dyn finder_core::Embed> = Arc::new(embedder);
    finder.attach_embedder(Ok(Some(embedder)));
    // As `finder serve` does with `storage.node_walk`: the node's own vector graphs, loaded
    // and linked before the timed queries (their time is reported apart).
    let mut node_s = 0.0;
    if settings.storage.node_walk {
        let started = std::time::Instant::now();
        finder.walk_on_node(&finder_pg::NodeVectors::default());
        let reports = finder.sync_node_vectors()?;
        node_s = started.elapsed().as_secs_f64();
        if !reports.is_empty() {
            let vectors: usize = reports.iter().map(|r| r.vectors).sum();
            notes.push(format!(
                "the node's vector graphs: {vectors} vectors of {} shards read and linked in {node_s:.1} s before the queries",
                reports.len()
            ));
        }
    }
    let queries = load_queries(&dataset, options.queries_limit, &mut notes)?;
    let Modes {
        modes,
        stages,
        lists,
    } = run_modes(
        &system,
        &specs,
        &queries,
        |overrides| Ok(finder.settings_with(overrides)?),
        |q, settings| Ok(finder.search_with_vector(&q.text, Some(&q.vector), settings, 0, K)?),
        options.progress,
        &mut notes,
    )?;
    drop(finder);
    if options.keep {
        notes.push(format!("databases kept: {}", dbs.names.join(", ")));
    }
    Ok(json!({
        "system": system,
        "dataset": meta.name,
        "docs": meta.docs,
        "fragments": fragments,
        "queries": queries.len(),
        "index_s": index_s,
        "index_lexical_s": index_s,
        "index_vector_s": 0.0,
        "node_vectors_s": node_s,
        "index_bytes": index_bytes,
        "peak_rss_bytes": Value::Null,
        "self_rss_bytes": crate::run::self_peak_rss(),
        "shards": shards,
        "modes": modes,
        "stages": stages,
        "lists": lists,
        "notes": notes,
    }))
}

/// Indexes the dataset into the fresh databases of `config`: the seconds it took and the
/// fragments written.
fn index(
    dataset: &Dataset,
    config: &PgConfig,
    settings: &finder_core::Settings,
    options: &RunOptions,
    system: &str,
    notes: &mut Vec<String>,
) -> Result<(f64, usize)> {
    let meta = &dataset.meta;
    let scratch = tempfile::Builder::new()
        .prefix("finder-bench-pg-")
        .tempdir()
        .context("creating a temporary folder")?;
    let records = scratch.path().join("records.jsonl");
    let (docs, _) = write_records(dataset, &records)?;
    let started = Instant::now();
    let mut ticker = Ticker::new(options.progress);
    let report = finder_pg::index_inputs_with(
        config,
        std::slice::from_ref(&records),
        settings,
        None,
        &mut |done| {
            ticker.tick(|| {
                let rate = done as f64 / started.elapsed().as_secs_f64();
                format!("{system}: indexed {done}/{docs} sources ({rate:.0}/s)")
            })
        },
    )
    .context("indexing into PostgreSQL")?;
    let index_s = started.elapsed().as_secs_f64();
    ticker.done();
    drop(scratch);
    notes.push(
        "PostgreSQL writes terms and vectors in one run: index_lexical_s is the whole build".into(),
    );
    let fragments = report.fragments as usize;
    crate::run::ingest_notes(
        &report.problems,
        meta.docs,
        report.sources,
        report.fragments,
        notes,
    );
    Ok((index_s, fragments))
}
