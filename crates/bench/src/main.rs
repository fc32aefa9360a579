//! The `finder-bench` command: `gen`, `embed`, `embed-speed`, `run`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use finder_bench::{embed, embed_speed, gen, run};

/// `finder`'s allocator (see crates/cli/src/main.rs), so that what is measured is what runs.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "finder-bench",
    about = "Finder's benchmark harness: datasets and Finder runs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a synthetic dataset (deterministic: the same seed gives the same bytes).
    Gen {
        #[arg(long)]
        docs: usize,
        #[arg(long, default_value_t = 1000)]
        queries: usize,
        #[arg(long, default_value_t = 384)]
        dim: usize,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Words in the vocabulary.
        #[arg(long, default_value_t = gen::DEFAULT_VOCAB)]
        vocab: usize,
        /// Topics (default: one per 20 documents, 1 to 1,000).
        #[arg(long)]
        topics: Option<usize>,
        /// Noise added to query vectors (higher: harder for dense retrieval).
        #[arg(long, default_value_t = gen::DEFAULT_QUERY_NOISE)]
        query_noise: f32,
        /// Chance each query word is swapped for another topic word (higher: harder for BM25).
        #[arg(long, default_value_t = gen::DEFAULT_QUERY_SWAP)]
        query_swap: f64,
        #[arg(long)]
        out: PathBuf,
        /// Write nothing: exit 0 when --out already holds the dataset these options make (same
        /// sizes, same generator parameters), 1 when it does not.
        #[arg(long)]
        check: bool,
    },
    /// Turn a BEIR folder into a dataset with Finder's own all-MiniLM-L6-v2 vectors.
    Embed {
        #[arg(long)]
        beir: PathBuf,
        /// The qrels split whose queries are kept.
        #[arg(long, default_value = "test")]
        split: String,
        #[arg(long)]
        out: PathBuf,
    },
    /// Time MiniLM embedding (tokens per second) on the fragments `finder index` would embed
    /// from INPUT, Finder's encoder against the candle reference; prints JSON.
    EmbedSpeed {
        input: PathBuf,
        /// Embed only the first N fragments.
        #[arg(long)]
        limit: Option<usize>,
        /// Time Finder's encoder only.
        #[arg(long)]
        skip_reference: bool,
    },
    /// Index a dataset with Finder, time every query per mode, write the result JSON.
    Run {
        #[arg(long)]
        data: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Index folder (new or empty); default: a temporary folder, removed afterwards.
        #[arg(long)]
        index: Option<PathBuf>,
        /// Keep the temporary index folder.
        #[arg(long)]
        keep: bool,
        /// Query the index an earlier `run --index DIR` built in DIR instead of indexing
        /// (the index figures are then not measured): for profiling queries. With `--pg`,
        /// the URLs name the databases an earlier `run --pg URL,... --keep` left (its notes
        /// list them).
        #[arg(long, conflicts_with = "keep")]
        reuse: bool,
        #[arg(long, default_value = "lexical,dense,hybrid")]
        modes: String,
        /// Another run after the modes, `NAME:key=value,...` as `finder eval --run` takes it,
        /// e.g. `dense-wide:lexical.enabled=false,vector.ef_search=4000` (repeatable).
        #[arg(long = "run", value_name = "NAME:KEY=VALUE,...")]
        runs: Vec<String>,
        #[arg(long)]
        queries_limit: Option<usize>,
        /// No progress lines.
        #[arg(long)]
        quiet: bool,
        /// Run over Finder's PostgreSQL backend instead, one shard per server URL (a fresh
        /// database is made on each).
        #[arg(long, value_delimiter = ',', value_name = "URL[,URL...]")]
        pg: Vec<String>,
        /// A settings override for the index and the queries, e.g. `index.trigrams=false`
        /// (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
}

fn run_pg(options: &run::RunOptions, urls: &[String]) -> Result<serde_json::Value> {
    finder_bench::pg::run_pg(options, urls)
}

fn main() -> ExitCode {
    // Measure what `finder` runs: the same process tuning.
    finder_tuning::install();
    match main_inner() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("finder-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn main_inner() -> Result<()> {
    match Cli::parse().command {
        Command::Gen {
            docs,
            queries,
            dim,
            seed,
            vocab,
            topics,
            query_noise,
            query_swap,
            out,
            check,
        } => {
            let options = gen::GenOptions {
                queries,
                dim,
                seed,
                vocab,
                topics,
                query_noise,
                query_swap,
                progress: true,
                ..gen::GenOptions::new(docs)
            };
            if check {
                let current = gen::is_current(&options, &out);
                eprintln!(
                    "gen: {} {}",
                    out.display(),
                    if current {
                        "holds this dataset"
                    } else {
                        "does not hold this dataset (missing, or made with other options or an older generator)"
                    }
                );
                std::process::exit(if current { 0 } else { 1 });
            }
            let r = gen::generate(&options, &out)?;
            eprintln!(
                "gen: {} docs, {} queries, {} topics, {:.1} words/doc, {:.2} links/doc, {:.1} MB of text in {:.1} s → {}",
                r.docs,
                r.queries,
                r.topics,
                r.words as f64 / r.docs as f64,
                r.links as f64 / r.docs as f64,
                r.bytes as f64 / 1e6,
                r.seconds,
                out.display()
            );
        }
        Command::Embed { beir, split, out } => {
            let r = embed::embed(&embed::EmbedOptions {
                beir,
                out: out.clone(),
                split,
                progress: true,
            })?;
            if r.skipped {
                eprintln!(
                    "embed: {} is up to date ({} docs, {} queries)",
                    out.display(),
                    r.docs,
                    r.queries
                );
            } else {
                eprintln!(
                    "embed: {} docs, {} queries in {:.1} s → {}",
                    r.docs,
                    r.queries,
                    r.seconds,
                    out.display()
                );
            }
        }
        Command::EmbedSpeed {
            input,
            limit,
            skip_reference,
        } => {
            let result = embed_speed::speed(&embed_speed::SpeedOptions {
                input,
                limit,
                skip_reference,
            })?;
            println!("{}", serde_json::to_string_pretty(&result)?);
        }
        Command::Run {
            data,
            out,
            index,
            keep,
            reuse,
            modes,
            runs,
            queries_limit,
            quiet,
            pg,
            set,
        } => {
            if reuse && index.is_none() && pg.is_empty() {
                anyhow::bail!("--reuse needs --index DIR, or --pg with the kept databases' URLs");
            }
            let options = run::RunOptions {
                data,
                index,
                keep,
                reuse,
                modes,
                runs,
                queries_limit,
                progress: !quiet,
                set,
            };
            let mut result = if pg.is_empty() {
                run::run(&options)?
            } else {
                run_pg(&options, &pg)?
            };
            if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            // The top-10 lists go beside the result, as the peers' do (bench/common.py), for
            // the harness's share of the exact neighbours; the result itself stays small.
            if let Some(lists) = result.as_object_mut().and_then(|r| r.remove("lists")) {
                let path = out.with_file_name("lists.json");
                std::fs::write(&path, serde_json::to_string(&lists)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            let mut text = serde_json::to_string_pretty(&result)?;
            text.push('\n');
            std::fs::write(&out, text).with_context(|| format!("writing {}", out.display()))?;
            eprintln!("{}", run::summary_line(&result));
        }
    }
    Ok(())
}
