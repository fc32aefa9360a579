//! The MCP tools' arguments and answers: what an agent sends and gets back, sized for a
//! model's context. The shapes are derived into the tools' input and output schemas; the
//! answers are built from the API's results (`wire`), keeping what a model reads and leaving
//! out what it does not (diagnostics, score breakdowns) unless asked for.

use std::collections::BTreeMap;

use finder_core::Hit;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wire::{
    ContextResult, Overrides, RecommendResult, SearchResult, SourceLines, StatusResult,
    DEFAULT_LIMIT,
};

fn default_limit() -> usize {
    DEFAULT_LIMIT
}

/// How much of each hit an answer carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Detail {
    /// Id, title and score only: a few tokens per hit.
    Ids,
    /// Also the summary and up to three passage hints with their line ranges.
    #[default]
    Hints,
    /// Also why each hit ranked where it did, and the response's diagnostics.
    Full,
}

/// Arguments of `search`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What to look for, in words (at most 2,000 characters).
    pub query: String,
    /// How many sources to return, 1 to 100.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: usize,
    /// Skip this many sources first (the next page starts at `offset + limit`).
    #[serde(default)]
    pub offset: usize,
    /// `ids`, `hints` (the default) or `full`.
    #[serde(default)]
    pub detail: Detail,
    /// Only sources whose metadata (`extras`) has every one of these values, compared
    /// case-insensitively, e.g. {"status": "draft"}. Every filter keeps the page full.
    #[serde(default)]
    pub extras: BTreeMap<String, String>,
    /// Only sources carrying every one of these tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Only sources dated on or after this, e.g. `2024-05-01`.
    #[serde(default)]
    pub date_from: Option<String>,
    /// Only sources dated on or before this (a bare date includes its whole day).
    #[serde(default)]
    pub date_to: Option<String>,
    /// Only sources whose path starts with this, e.g. `journal/2024/`.
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Only these source ids (as `search` returns them).
    #[serde(default)]
    pub scope: Option<Vec<String>>,
    /// Which index to search (see `status`); `default` when left out.
    #[serde(default)]
    pub space: Option<String>,
    /// Query-time setting overrides by dotted key, e.g. {"lexical.k1": 0.9}.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, Value>")]
    pub settings: Overrides,
}

/// Arguments of `context`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextArgs {
    /// The question to gather evidence for.
    pub query: String,
    /// Most characters of evidence, 200 to 200,000 (default 6,000).
    #[serde(default)]
    pub budget_chars: Option<usize>,
    /// Alternatively, a budget in tokens (about 4 characters each).
    #[serde(default)]
    pub budget_tokens: Option<usize>,
    /// Sources to draw passages from, 1 to 100.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: usize,
    /// Which index to use; `default` when left out.
    #[serde(default)]
    pub space: Option<String>,
    /// Query-time setting overrides by dotted key.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, Value>")]
    pub settings: Overrides,
}

/// Arguments of `get`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetArgs {
    /// A source id or path as `search` returns it, optionally with a line range after a
    /// colon: `notes/a.md` or `notes/a.md:40-80` (a hint's `at`).
    pub id: String,
    /// A line range, `40-80`, `40-`, `40` or `all`; wins over a range in `id`.
    #[serde(default)]
    pub lines: Option<String>,
    /// Which index to use; `default` when left out.
    #[serde(default)]
    pub space: Option<String>,
}

/// Arguments of `recommend`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecommendArgs {
    /// The source id to find neighbours of.
    pub target: String,
    /// How many sources to return, 1 to 100.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: usize,
    /// `ids`, `hints` (the default) or `full`.
    #[serde(default)]
    pub detail: Detail,
    /// Which index to use; `default` when left out.
    #[serde(default)]
    pub space: Option<String>,
    /// Query-time setting overrides by dotted key.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, Value>")]
    pub settings: Overrides,
}

/// Arguments of `status`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// One space; every space this session may use when left out.
    #[serde(default)]
    pub space: Option<String>,
}

/// A passage of a hit: where to read and what it says.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HintOut {
    /// `id:start-end`, ready for `get`.
    pub at: String,
    pub line_start: u32,
    pub line_end: u32,
    /// The page of a PDF passage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    pub preview: String,
}

/// One ranked source.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HitOut {
    pub rank: usize,
    pub id: String,
    pub title: String,
    /// Relative to the best hit of this answer (top is 1.0).
    pub score: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<HintOut>,
    /// With `detail: full`: how each channel and stage moved this hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain: Option<Value>,
}

/// What `search` answers.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SearchOut {
    pub space: String,
    pub query: String,
    pub hits: Vec<HitOut>,
    /// The `offset` of the next page, when this one was full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
    /// With `detail: full`: what each channel and stage did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Value>,
}

/// One cited passage of `context` (its text is in the answer's `text`, headed `[n]`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PieceOut {
    pub n: usize,
    pub source_id: String,
    pub title: String,
    /// `id:start-end`, ready for `get`.
    pub at: String,
    pub truncated: bool,
}

/// What `context` answers.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ContextOut {
    pub space: String,
    pub query: String,
    pub budget_chars: usize,
    pub used_chars: usize,
    /// The passages, each headed by `[n] title — id Lx-y`.
    pub text: String,
    pub pieces: Vec<PieceOut>,
    /// Passages that matched but did not fit the budget.
    pub omitted: usize,
}

/// What `recommend` answers.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RecommendOut {
    pub space: String,
    pub target: String,
    /// Which lists found the neighbours, e.g. `lexical+vector+graph`.
    pub basis: String,
    pub hits: Vec<HitOut>,
}

/// One space's state.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SpaceOut {
    pub space: String,
    pub built: bool,
    /// A layer (vectors) is still being built; words are searchable meanwhile.
    pub building: bool,
    pub sources: u64,
    pub fragments: u64,
    /// Seconds since the Unix epoch of the last commit (0 before the first).
    pub committed_at: u64,
    /// Fragments with vectors, of `vectors_total`, when a vector layer exists or is building.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors_done: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors_total: Option<u64>,
    /// The run under way, e.g. `vectors: embedding 1200/5890, 8.1/s, 9m 40s left`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// Documents written through the API.
    pub api_documents: usize,
}

/// What `status` answers.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StatusOut {
    pub spaces: Vec<SpaceOut>,
}

fn at(id: &str, start: u32, end: u32) -> String {
    format!("{id}:{start}-{end}")
}

fn hit_out(hit: Hit, detail: Detail) -> HitOut {
    let hints = if detail == Detail::Ids {
        Vec::new()
    } else {
        hit.hints
            .iter()
            .map(|h| HintOut {
                at: at(&hit.id, h.extent.line_start, h.extent.line_end),
                line_start: h.extent.line_start,
                line_end: h.extent.line_end,
                page: h.extent.page,
                preview: h.preview.clone(),
            })
            .collect()
    };
    let explain = (detail == Detail::Full)
        .then(|| serde_json::to_value(&hit.explain).ok())
        .flatten();
    let summary = (detail != Detail::Ids && !hit.summary.is_empty()).then_some(hit.summary);
    HitOut {
        rank: hit.rank,
        title: hit.envelope.title,
        score: (hit.score * 1000.0).round() / 1000.0,
        date: hit.envelope.date.filter(|_| detail != Detail::Ids),
        tags: if detail == Detail::Ids {
            Vec::new()
        } else {
            hit.envelope.tags
        },
        summary,
        hints,
        explain,
        id: hit.id,
    }
}

pub fn search_out(r: SearchResult, detail: Detail) -> SearchOut {
    let full_page = r.hits.len() == r.limit;
    let next_offset = full_page.then_some(r.offset + r.limit);
    let diagnostics = (detail == Detail::Full)
        .then(|| serde_json::to_value(&r.diagnostics).ok())
        .flatten();
    SearchOut {
        space: r.space,
        query: r.query,
        hits: r.hits.into_iter().map(|h| hit_out(h, detail)).collect(),
        next_offset,
        diagnostics,
    }
}

pub fn context_out(r: ContextResult) -> ContextOut {
    ContextOut {
        pieces: r
            .pieces
            .iter()
            .map(|p| PieceOut {
                n: p.n,
                at: at(&p.source_id, p.extent.line_start, p.extent.line_end),
                source_id: p.source_id.clone(),
                title: p.title.clone(),
                truncated: p.truncated,
            })
            .collect(),
        space: r.space,
        query: r.query,
        budget_chars: r.budget_chars,
        used_chars: r.used_chars,
        text: r.text,
        omitted: r.omitted,
    }
}

pub fn recommend_out(r: RecommendResult, detail: Detail) -> RecommendOut {
    RecommendOut {
        space: r.space,
        target: r.target,
        basis: r.basis,
        hits: r.hits.into_iter().map(|h| hit_out(h, detail)).collect(),
    }
}

pub fn space_out(r: StatusResult) -> SpaceOut {
    let index = &r.index;
    let number = |v: &Value| v.as_u64();
    SpaceOut {
        built: r.built,
        building: r.building,
        sources: number(&index["sources"]).unwrap_or(0),
        fragments: number(&index["fragments"]).unwrap_or(0),
        committed_at: number(&index["committed_at"]).unwrap_or(0),
        vectors_done: number(&index["vectors"]["done"]),
        vectors_total: number(&index["vectors"]["total"]),
        progress: index["indexing"]
            .as_object()
            .map(|_| ("indexing", &index["indexing"]))
            .or_else(|| {
                let build = &index["vectors"]["build"];
                build.as_object().map(|_| ("vectors", build))
            })
            .and_then(|(layer, run)| {
                let run: finder_index::LiveProgress = serde_json::from_value(run.clone()).ok()?;
                Some(format!("{layer}: {}", run.describe()))
            }),
        api_documents: r.api_documents,
        space: r.space,
    }
}

/// The compact text an agent reads: one line per hit, its summary and hints indented.
pub fn render_hits(hits: &[HitOut], out: &mut String) {
    for hit in hits {
        out.push_str(&format!(
            "{}. {} [{:.3}] {}\n",
            hit.rank, hit.title, hit.score, hit.id
        ));
        if let Some(summary) = &hit.summary {
            out.push_str(&format!("   {summary}\n"));
        }
        for hint in &hit.hints {
            out.push_str(&format!("   {}: {}\n", hint.at, hint.preview));
        }
    }
}

pub fn render_search(r: &SearchOut) -> String {
    if r.hits.is_empty() {
        return format!("No results for \"{}\" in space {}.", r.query, r.space);
    }
    let mut out = format!("Results for \"{}\" (space {}):\n", r.query, r.space);
    render_hits(&r.hits, &mut out);
    if let Some(next) = r.next_offset {
        out.push_str(&format!("More with offset {next}.\n"));
    }
    out
}

pub fn render_context(r: &ContextOut) -> String {
    if r.pieces.is_empty() {
        return format!("No evidence found for \"{}\".", r.query);
    }
    r.text.clone()
}

pub fn render_get(r: &SourceLines) -> String {
    let mut out = format!(
        "{} — {} (lines {}-{} of {})\n",
        r.title, r.id, r.line_start, r.line_end, r.last_line
    );
    out.push_str(&r.text);
    if r.truncated {
        out.push_str(&format!(
            "… cut here; read on with lines {}-\n",
            r.line_end + 1
        ));
    }
    out
}

pub fn render_recommend(r: &RecommendOut) -> String {
    if r.hits.is_empty() {
        return format!("Nothing similar to {} found.", r.target);
    }
    let mut out = format!("Sources similar to {} (by {}):\n", r.target, r.basis);
    render_hits(&r.hits, &mut out);
    out
}

pub fn render_status(r: &StatusOut) -> String {
    let mut out = String::new();
    for s in &r.spaces {
        if !s.built {
            out.push_str(&format!("space {}: no index yet\n", s.space));
            continue;
        }
        out.push_str(&format!(
            "space {}: {} sources, {} fragments, committed at {}",
            s.space, s.sources, s.fragments, s.committed_at
        ));
        if let (Some(done), Some(total)) = (s.vectors_done, s.vectors_total) {
            out.push_str(&format!(", vectors {done}/{total}"));
        }
        match &s.progress {
            Some(progress) => out.push_str(&format!(" ({progress})")),
            None if s.building => out.push_str(" (building)"),
            None => {}
        }
        out.push('\n');
    }
    out
}
