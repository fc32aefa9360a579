//! The settings table: every key with when it is read, its range and what it does. It drives
//! the range checks of [`Settings::validate`](super::Settings::validate), the reference in
//! `docs/CONFIG.md` and the settings block of the README (tests check both are current).
//! Defaults come from [`Settings::default`](super::Settings), so they cannot drift either.

use std::fmt::Write as _;

use super::{to_table, Settings};

/// When a setting is read, and what a change to it costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Shapes what `finder index` stores: a change rebuilds the index on the next run.
    Index,
    /// Chooses the embedding model: a change rebuilds the vectors and nothing else.
    Vectors,
    /// Chooses the store; fixed for an index.
    Store,
    /// Read by `finder index` for the graph, which it rebuilds from each commit.
    Build,
    /// Read per query; `--set` and the API's `settings` override it.
    Query,
}

impl When {
    pub fn name(self) -> &'static str {
        match self {
            When::Index => "index-time",
            When::Vectors => "vectors",
            When::Store => "store",
            When::Build => "graph build",
            When::Query => "query-time",
        }
    }
}

/// One setting.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// `section.key`.
    pub key: &'static str,
    pub when: When,
    /// The inclusive range of a number, or of each number of a list.
    pub range: Option<(f64, f64)>,
    /// What it does, in a line.
    pub doc: &'static str,
}

const fn spec(key: &'static str, when: When, doc: &'static str) -> Spec {
    Spec {
        key,
        when,
        range: None,
        doc,
    }
}

const fn ranged(key: &'static str, when: When, lo: f64, hi: f64, doc: &'static str) -> Spec {
    Spec {
        key,
        when,
        range: Some((lo, hi)),
        doc,
    }
}

use When::{Build, Index, Query, Store, Vectors};

/// Every setting, section by section, in the order the documents list them.
pub const SETTINGS: &[Spec] = &[
    spec("index.language", Index, "stemmer and stop words: auto (per word by script: Cyrillic as Russian, Latin in the source's detected language, else English), english, danish, dutch, finnish, french, german, hungarian, italian, norwegian, portuguese, romanian, russian, spanish, swedish, turkish"),
    ranged("index.fragment_max_chars", Index, 200.0, 20_000.0, "the longest passage a source is cut into"),
    ranged("index.summary_max_chars", Index, 40.0, 2_000.0, "the longest derived summary"),
    spec("index.trigrams", Index, "index whole words too, so identifiers and partial words can expand into the words that hold them"),
    spec("index.title_in_fragments", Index, "every passage's words include its source's title"),
    spec("embed.backend", Vectors, "minilm | static | http (OpenAI-compatible /v1/embeddings or Ollama /api/embed) | precomputed (`vector` in records, `--vector` per query) | none"),
    spec("embed.model_dir", Vectors, "model folder; empty: $FINDER_MODEL_DIR or ~/.local/share/finder/models/all-minilm-l6-v2 (static: minilm-static beside it)"),
    ranged("embed.dim", Vectors, 1.0, 4_096.0, "vector length of the precomputed backend"),
    ranged("embed.max_tokens", Vectors, 8.0, 512.0, "tokens of a passage the model reads"),
    ranged("embed.batch_size", Vectors, 1.0, 1_024.0, "passages per model call"),
    spec("embed.windows", Vectors, "embed every window of a passage longer than max_tokens (MiniLM), not only the first"),
    spec("embed.http_url", Vectors, "the embedding server, with backend = \"http\""),
    spec("embed.http_model", Vectors, "the model the server is asked for"),
    spec("embed.http_api_key", Vectors, "the server's key; FINDER_EMBED_API_KEY is read when empty"),
    ranged("embed.http_timeout_ms", Vectors, 100.0, 600_000.0, "per request to the server"),
    ranged("embed.http_retries", Vectors, 0.0, 10.0, "retries of a failed request"),
    spec("storage.backend", Store, "embedded (the index folder) | postgres (PostgreSQL + pgvector)"),
    spec("storage.urls", Store, "postgres: one connection URL per shard, in a fixed order"),
    spec("storage.read_urls", Store, "postgres: per shard, the replicas queries read from"),
    spec("storage.tls_ca", Store, "postgres: PEM certificates to trust besides the web's roots"),
    ranged("storage.hnsw_m", Store, 2.0, 100.0, "postgres: neighbours per node of each shard's HNSW index; a change rebuilds the index at the next `finder index` (API writes keep it)"),
    ranged("storage.hnsw_ef_construction", Store, 4.0, 1_000.0, "postgres: the HNSW build's beam, at least 2 × hnsw_m; a change rebuilds the index at the next `finder index` (API writes keep it)"),
    spec("storage.node_walk", Store, "postgres: serve and mcp walk each shard's vectors over an HNSW graph of their own, in memory, instead of pgvector's index"),
    spec("lexical.enabled", Query, "the BM25 list; off only for ablations"),
    ranged("lexical.k1", Query, 0.0, 3.0, "BM25 term-frequency saturation"),
    ranged("lexical.b", Query, 0.0, 1.0, "BM25 length normalisation"),
    ranged("lexical.k3", Query, 0.0, 1000.0, "how a word the query repeats weighs: (k3+1)·n/(k3+n) for n times; 0 counts it once"),
    ranged("lexical.fts_list_size", Query, 10.0, 200.0, "passages the BM25 list returns"),
    spec("lexical.trigram", Query, "which query words expand into indexed words holding them: off | auto (identifier-like words) | on (all)"),
    ranged("lexical.trigram_weight", Query, 0.0, 2.0, "an expansion's weight, times the share of it the query word covers"),
    ranged("lexical.trigram_expansions", Query, 1.0, 64.0, "indexed words one query word expands into, shortest first"),
    spec("vector.enabled", Query, "the nearest-neighbour list"),
    ranged("vector.vec_list_size", Query, 10.0, 500.0, "passages the vector list returns"),
    ranged("vector.max_vector_distance", Query, 0.0, 2.0, "cosine distance past which hits are dropped"),
    ranged("vector.ef_search", Query, 0.0, 20_000.0, "HNSW beam; 0 sizes it by the index (3 × √vectors); never below the window reordered by exact cosine (1.5 × vec_list_size)"),
    ranged("vector.query_embed_timeout_ms", Query, 1.0, 600_000.0, "past it the query runs without its vector list"),
    ranged("vector.window_weight", Query, 0.0, 1.0, "with embed.windows: the share of what a passage's best window adds to its first window's cosine"),
    spec("finder.fusion", Query, "rrf | cc (min-max normalised scores, alpha toward dense)"),
    ranged("finder.rrf_k", Query, 10.0, 200.0, "reciprocal rank fusion's constant"),
    ranged("finder.alpha", Query, 0.0, 1.0, "cc: the dense list's weight"),
    ranged("finder.max_hints", Query, 0.0, 10.0, "passages shown per hit"),
    ranged("finder.rollup_weights", Query, 0.0, 1.0, "a source's score from its best passages, 1 to 10 weights"),
    ranged("finder.preview_chars", Query, 40.0, 2_000.0, "the longest preview of a hint"),
    spec("graph.build", Build, "links, tags, typed hubs and mentions into graph/graph.json"),
    spec("graph.link_order", Build, "target_first ([[target|label]]) | label_first (Dendron's [[label|target]])"),
    spec("graph.mentions", Build, "a passage naming a source's title (or a missing link's entity) links to it"),
    spec("graph.link_titles", Build, "titles become entities with an `is` edge (BEIR-style titled passages)"),
    ranged("graph.min_alias_chars", Build, 1.0, 100.0, "shorter names never link"),
    ranged("graph.max_alias_df", Build, 0.0, 1.0, "names found in more than this share of passages never link"),
    spec("graph.boost", Query, "personalised PageRank from the best fused passages; adds, never gates"),
    ranged("graph.damping", Query, 0.0, 0.95, "share of a node's mass passed to its neighbours each round"),
    ranged("graph.iterations", Query, 1.0, 100.0, "most rounds of the spread"),
    ranged("graph.epsilon", Query, 0.0, 0.1, "stop once a round changes the boost by less"),
    ranged("graph.seeds", Query, 1.0, 500.0, "best fused passages the spread restarts from"),
    spec("graph.entities", Query, "channel: what the query names (titles, aliases)"),
    spec("graph.node_labels", Query, "only entities with these labels are named; [] for all"),
    spec("graph.neighbours", Query, "channel: one hop from the seeds"),
    ranged("graph.fan_out", Query, 1.0, 100.0, "neighbours per seed"),
    spec("graph.communities", Query, "channel: members of the seeds' tags and typed hubs"),
    spec("graph.events", Query, "channel: candidates weighted by 0.5^(age / event_half_life_days)"),
    ranged("graph.event_half_life_days", Query, 1.0, 36_500.0, "the events channel's half-life"),
    ranged("graph.weight_mentions", Query, 0.0, 10.0, "edge weight of mentions (0 removes the kind)"),
    ranged("graph.weight_links_to", Query, 0.0, 10.0, "edge weight of links"),
    ranged("graph.weight_tagged", Query, 0.0, 10.0, "edge weight of tags"),
    ranged("graph.weight_next", Query, 0.0, 10.0, "edge weight between a source's consecutive passages"),
    ranged("graph.weight_is", Query, 0.0, 10.0, "edge weight from a title entity to its source"),
    ranged("graph.weight_member_of", Query, 0.0, 10.0, "edge weight to typed hubs"),
    ranged("graph.weight_relates", Query, 0.0, 10.0, "edge weight of declared relations"),
    spec("refine.recency", Query, "blend with the source's date (skipped when no hit is dated)"),
    ranged("refine.recency_blend", Query, 0.0, 1.0, "blend · score + (1 − blend) · 0.5^(age / half-life)"),
    ranged("refine.recency_half_life_days", Query, 1.0, 36_500.0, "the recency blend's half-life"),
    spec("refine.sort", Query, "score | date (newest first, instead of the blend)"),
    spec("refine.dedup", Query, "collapse near-duplicates by simhash; the kept hit lists what it absorbed"),
    ranged("refine.simhash_shingle", Query, 1.0, 8.0, "words per shingle"),
    ranged("refine.simhash_max_distance", Query, 0.0, 32.0, "bits apart that still count as duplicates"),
    spec("refine.rerank", Query, "none | http (a /rerank server: TEI, Cohere, Jina) | local (the embedding model)"),
    spec("refine.rerank_mode", Query, "default (rerank the first 10) | catalog (retrieve at least 50, rerank 50)"),
    spec("refine.rerank_url", Query, "the rerank server, with rerank = \"http\"; key from FINDER_RERANK_API_KEY"),
    spec("refine.rerank_model", Query, "empty: TEI's request shape; set: Cohere/Jina's with this model"),
    ranged("refine.timeout_ms", Query, 10.0, 600_000.0, "per reranker or plugin call; past it the stage is skipped, not the query"),
    spec("refine.plugins", Query, "plugin retriever URLs, merged below the frozen head"),
    ranged("refine.plugin_depth", Query, 1.0, 500.0, "hits asked of each plugin"),
    ranged("refine.frozen_head", Query, 0.0, 100.0, "hits of the core ranking plugins cannot displace"),
    spec("refine.mmr", Query, "diversify the first mmr_depth hits"),
    ranged("refine.mmr_lambda", Query, 0.0, 1.0, "relevance against novelty"),
    ranged("refine.mmr_depth", Query, 1.0, 500.0, "hits the diversification reorders"),
    spec("refine.prefilter", Query, "apply filters inside every channel (page kept full) instead of after ranking"),
    ranged("refine.min_score", Query, 0.0, 1.0, "drop hits whose comparable relevance is below this"),
    ranged("refine.personal_lambdas", Query, 0.0, 1.0, "personalisation's weight for queries of 1 / 2 / 3 / 4+ content words (0 with a digit)"),
    ranged("refine.interaction_half_life_days", Query, 1.0, 3_650.0, "how fast a user's interactions fade"),
    spec("refine.catalog_only", Query, "personalise only hits with extras.node_id"),
    spec("refine.profiles", Query, "users.jsonl: preferences and interactions, read when the index opens"),
];

/// The spec of `key`, if it is a setting.
pub fn spec_of(key: &str) -> Option<&'static Spec> {
    SETTINGS.iter().find(|s| s.key == key)
}

/// A value as the documents show it: floats that came from `f32`s without their binary tail.
fn shown(value: &toml::Value) -> String {
    match value {
        toml::Value::Float(x) => {
            let short = *x as f32;
            if f64::from(short) == *x {
                format!("{short:?}")
            } else {
                format!("{x:?}")
            }
        }
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(shown).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

fn range_text((lo, hi): (f64, f64)) -> String {
    format!("{lo}–{hi}")
}

/// Each setting with its default, in table order.
fn with_defaults() -> Vec<(&'static Spec, String)> {
    let defaults = to_table(&Settings::default());
    SETTINGS
        .iter()
        .map(|s| {
            let (section, leaf) = s.key.split_once('.').expect("keys are section.leaf");
            let value = defaults
                .get(section)
                .and_then(|t| t.get(leaf))
                .unwrap_or_else(|| panic!("{} is in the table but not in Settings", s.key));
            (s, shown(value))
        })
        .collect()
}

/// `docs/CONFIG.md`: every setting with its default, range and when it is read.
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "# Settings\n\n\
         Generated from the settings table (`crates/core/src/settings/table.rs`); a test checks \
         it is current.\nSet them in `finder.toml` (in the index folder, or `--config FILE`), \
         one section per stage.\nQuery-time keys can be overridden per query: `--set key=value` \
         on the command line,\n`settings` in an API request. Values outside their range and \
         unknown keys are refused,\nthe latter with the nearest valid key.\n",
    );
    let mut section = "";
    for (s, default) in with_defaults() {
        let this = s.key.split_once('.').map_or("", |(a, _)| a);
        if this != section {
            section = this;
            let _ = write!(
                out,
                "\n## [{section}]\n\n| key | default | range | read | what it does |\n|---|---|---|---|---|\n"
            );
        }
        let range = s.range.map_or(String::new(), range_text);
        let _ = writeln!(
            out,
            "| `{}` | `{}` | {} | {} | {} |",
            s.key,
            default,
            range,
            s.when.name(),
            s.doc.replace('|', "\\|")
        );
    }
    out
}

/// The README's settings block: a `finder.toml` with every default, one comment per key.
pub fn readme_toml() -> String {
    let mut out = String::new();
    let mut section = "";
    for (s, default) in with_defaults() {
        let (this, leaf) = s.key.split_once('.').expect("keys are section.leaf");
        if this != section {
            if !section.is_empty() {
                out.push('\n');
            }
            section = this;
            let _ = writeln!(out, "[{section}]");
        }
        let line = format!("{leaf} = {default}");
        let range = s
            .range
            .map_or(String::new(), |r| format!(" ({})", range_text(r)));
        let when = if s.when == When::Query {
            String::new()
        } else {
            format!("{}: ", s.when.name())
        };
        let _ = writeln!(out, "{line:<31}# {when}{}{range}", s.doc);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_every_setting_once_and_ranges_every_number() {
        let mut keys = Vec::new();
        super::super::flatten_keys("", &to_table(&Settings::default()), &mut keys);
        for key in &keys {
            let n = SETTINGS.iter().filter(|s| s.key == key).count();
            assert_eq!(n, 1, "{key} is listed {n} times in SETTINGS");
        }
        for spec in SETTINGS {
            assert!(
                keys.iter().any(|k| k == spec.key),
                "{} is no setting",
                spec.key
            );
        }
        for (spec, default) in with_defaults() {
            let numeric = default
                .trim_start_matches('[')
                .starts_with(|c: char| c.is_ascii_digit());
            assert_eq!(
                numeric,
                spec.range.is_some(),
                "{} (default {default}): a number has a range and nothing else does",
                spec.key
            );
        }
    }

    #[test]
    fn every_range_in_the_table_is_enforced() {
        let defaults = to_table(&Settings::default());
        for spec in SETTINGS {
            let Some((lo, hi)) = spec.range else { continue };
            let (section, leaf) = spec.key.split_once('.').unwrap();
            let default = &defaults[section][leaf];
            let above = |v: &toml::Value| match v {
                toml::Value::Integer(_) => toml::Value::Integer(hi as i64 + 1),
                _ => toml::Value::Float(hi + 0.5),
            };
            let bad = match default {
                toml::Value::Array(items) => {
                    let mut items = items.clone();
                    items[0] = above(&items[0]);
                    toml::Value::Array(items)
                }
                other => above(other),
            };
            let err = Settings::default()
                .set(&format!("{}={bad}", spec.key))
                .unwrap_err();
            assert_eq!(err.key, spec.key, "{err}");
            let expected = format!("{lo}–{hi}");
            assert!(err.to_string().contains(&expected), "{err}");
            if lo > 0.0 {
                let below = match default {
                    toml::Value::Integer(_) => toml::Value::Integer(lo as i64 - 1),
                    toml::Value::Array(_) => continue,
                    _ => toml::Value::Float(lo - 0.5),
                };
                let err = Settings::default()
                    .set(&format!("{}={below}", spec.key))
                    .unwrap_err();
                assert_eq!(err.key, spec.key, "{err}");
            }
        }
    }

    #[test]
    fn the_readme_block_parses_back_to_the_defaults() {
        let parsed = Settings::from_toml(&readme_toml(), "README").unwrap();
        assert_eq!(parsed, Settings::default());
    }
}
