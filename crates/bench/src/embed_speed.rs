//! `finder-bench embed-speed`: MiniLM embedding throughput, Finder's encoder against the
//! candle reference it replaced, on the texts `finder index` would embed from an input.
//!
//! Both embed the same texts in the vector build's order (shortest first, batches of
//! `embed.batch_size`); tokens are counted after truncation, so tokens per second compares
//! like with like. The vectors are compared too: the mean and lowest cosine between the two.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use finder_core::Settings;
use finder_embed::{CandleMiniLm, MiniLm};
use serde_json::{json, Value};

use crate::run::self_cpu_s;

#[derive(Debug, Clone)]
pub struct SpeedOptions {
    /// A folder of notes or a BEIR folder, read as `finder index` reads it.
    pub input: PathBuf,
    /// Embed only the first this many fragments (in input order).
    pub limit: Option<usize>,
    /// Skip the candle reference (its throughput and the agreement are then missing).
    pub skip_reference: bool,
}

/// The fragments' embedding texts: title, newline, fragment, as the vector build makes them.
fn texts(options: &SpeedOptions, settings: &Settings) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut sink = |item: Result<finder_index::SourceDoc, finder_index::Problem>| {
        if let Ok(source) = item {
            for f in &source.fragments {
                if !f.text.trim().is_empty() {
                    out.push(finder_index::fragment_text_to_embed(
                        &source.envelope.title,
                        &f.text,
                    ));
                }
            }
        }
    };
    finder_index::read_input(&options.input, "bench", &settings.index, &mut sink)
        .map_err(|p| anyhow::anyhow!("{p}"))?;
    if let Some(limit) = options.limit {
        out.truncate(limit);
    }
    Ok(out)
}

/// Runs `embed` over the batches and times it.
fn timed(
    batches: &[Vec<&str>],
    mut embed: impl FnMut(&[&str]) -> Result<Vec<Vec<f32>>>,
) -> Result<(Vec<Vec<f32>>, f64, Option<f64>)> {
    let cpu = self_cpu_s();
    let started = Instant::now();
    let mut vectors = Vec::new();
    for batch in batches {
        vectors.extend(embed(batch)?);
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu.zip(self_cpu_s()).map(|(a, b)| b - a);
    Ok((vectors, wall, cpu))
}

pub fn speed(options: &SpeedOptions) -> Result<Value> {
    let settings = Settings::default();
    let dir = finder_embed::model_dir_or_default(&settings.embed.model_dir);
    let max_tokens = settings.embed.max_tokens;
    let model = MiniLm::load(&dir, max_tokens)
        .with_context(|| format!("loading MiniLM from {}", dir.display()))?;
    let mut texts = texts(options, &settings)?;
    texts.sort_by_key(String::len);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batches: Vec<Vec<&str>> = refs
        .chunks(settings.embed.batch_size.max(1))
        .map(<[&str]>::to_vec)
        .collect();
    let tokens = model.tokens(&refs)?;
    let chars: usize = texts.iter().map(String::len).sum();
    let row = |wall: f64, cpu: Option<f64>| {
        json!({
            "seconds": wall,
            "tokens_per_s": tokens as f64 / wall,
            "cpu_per_wall": cpu.map(|c| c / wall),
        })
    };
    let (finder, wall, cpu) = timed(&batches, |b| Ok(model.embed(b)?))?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The ceiling: the integer kernel alone, and what the whole encoder made of it (MiniLM's
    // linear layers are 4·h² + 2·h·i multiply-adds a token a layer).
    let kernel_macs = finder_embed::kernel_rate(threads, 3.0);
    let linear_macs = 6.0 * (4.0 * 384.0 * 384.0 + 2.0 * 384.0 * 1536.0) * tokens as f64 / wall;
    let mut result = json!({
        "input": options.input.display().to_string(),
        "texts": texts.len(),
        "chars": chars,
        "tokens": tokens,
        "max_tokens": max_tokens,
        "threads": threads,
        "finder": row(wall, cpu),
        "kernel_gmacs_per_s": kernel_macs / 1e9,
        "linear_gmacs_per_s": linear_macs / 1e9,
    });
    if !options.skip_reference {
        let reference = CandleMiniLm::load(&dir, max_tokens)?;
        let (want, ref_wall, ref_cpu) = timed(&batches, |b| Ok(reference.embed(b)?))?;
        let cosines: Vec<f32> = finder
            .iter()
            .zip(&want)
            .map(|(a, b)| a.iter().zip(b).map(|(x, y)| x * y).sum())
            .collect();
        let mean = cosines.iter().sum::<f32>() / cosines.len().max(1) as f32;
        let min = cosines.iter().copied().fold(f32::INFINITY, f32::min);
        result["candle"] = row(ref_wall, ref_cpu);
        result["speedup"] = json!(ref_wall / wall);
        result["cosine_to_candle"] = json!({"mean": mean, "min": min});
    }
    Ok(result)
}
