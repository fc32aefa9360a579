//! Settings: one validated structure built from defaults, `finder.toml` and `--set` overrides.
//!
//! Every key has a named default constant and an allowed range. Unknown keys are rejected with
//! the nearest valid key. Index-time settings (`index.*`) shape what is stored; every other
//! section is read per query and never requires re-indexing.

use serde::{Deserialize, Serialize};

use crate::error::{SettingsError, SettingsErrorKind};

mod table;

pub use table::{readme_toml, reference_markdown, spec_of, Spec, When, SETTINGS};

pub const DEFAULT_K1: f32 = 1.2;
pub const DEFAULT_B: f32 = 0.75;
/// BM25's query-term saturation ([`crate::query_term_weight`]): chosen on short and long
/// queries together (SciFact and the vaults' links, docs/BENCHMARKS.md "Long queries").
pub const DEFAULT_K3: f32 = 3.0;
pub const DEFAULT_FTS_LIST_SIZE: usize = 100;
pub const DEFAULT_TRIGRAM_WEIGHT: f32 = 0.5;
pub const DEFAULT_TRIGRAM_EXPANSIONS: usize = 8;
/// The design's 60 lost to 20 on every set measured (SciFact's train split picked it, its
/// test split, the 10k and 100k synthetic corpora and the HotpotQA slice agreed):
/// docs/perf/fusion-constant.md.
pub const DEFAULT_RRF_K: u32 = 20;
pub const DEFAULT_VEC_LIST_SIZE: usize = 200;
pub const DEFAULT_MAX_HINTS: usize = 3;
pub const DEFAULT_ROLLUP_WEIGHTS: [f64; 3] = [1.0, 0.1, 0.05];
pub const DEFAULT_PREVIEW_CHARS: usize = 240;
pub const DEFAULT_FRAGMENT_MAX_CHARS: usize = 3200;
pub const DEFAULT_SUMMARY_MAX_CHARS: usize = 280;
pub const DEFAULT_LANGUAGE: &str = "auto";
pub const DEFAULT_MAX_VECTOR_DISTANCE: f32 = 0.9;
/// `vector.ef_search` 0: the beam grows with the index ([`VectorSettings::beam`]).
pub const DEFAULT_EF_SEARCH: usize = 0;
/// With `vector.ef_search = 0`, the HNSW beam is this many times the square root of the
/// vectors searched: 300 at 10,000, 949 at 100,000, 3,000 at a million
/// (docs/perf/hnsw-beam.md).
pub const BEAM_PER_SQRT_ROW: f64 = 3.0;
pub const DEFAULT_QUERY_EMBED_TIMEOUT_MS: u64 = 2_000;
/// How far a fragment's best later window lifts its score above its first window's, with
/// `embed.windows` (docs/perf/embedding-windows.md).
pub const DEFAULT_WINDOW_WEIGHT: f32 = 0.5;
pub const DEFAULT_ALPHA: f64 = 0.5;
pub const DEFAULT_EMBED_MAX_TOKENS: usize = 256;
pub const DEFAULT_EMBED_BATCH_SIZE: usize = 32;
/// Vector length of the `precomputed` backend (MiniLM's).
pub const DEFAULT_PRECOMPUTED_DIM: usize = 384;

/// Languages with a stemmer and a stop list; `auto` picks them per word by its script
/// (Cyrillic words Russian, the rest English).
pub const LANGUAGES: &[&str] = &[
    "auto",
    "english",
    "danish",
    "dutch",
    "finnish",
    "french",
    "german",
    "hungarian",
    "italian",
    "norwegian",
    "portuguese",
    "romanian",
    "russian",
    "spanish",
    "swedish",
    "turkish",
];

/// All settings, one section per stage.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub index: IndexSettings,
    pub embed: EmbedSettings,
    pub lexical: LexicalSettings,
    pub vector: VectorSettings,
    pub finder: FinderSettings,
    pub graph: crate::graph::GraphSettings,
    pub refine: crate::refine::RefineSettings,
    pub storage: StorageSettings,
}

/// Which model makes the vectors. Index-time for the vector layer: a change rebuilds the
/// vectors (and only them) on the next `finder index`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbedSettings {
    /// `minilm`, `static`, `http`, `precomputed` or `none` (no semantic layer).
    pub backend: EmbedBackend,
    /// Model folder (MiniLM or static); empty means the backend's default data folder.
    pub model_dir: String,
    /// Vector length of the `precomputed` backend (records' `vector` and query vectors).
    pub dim: usize,
    /// Longest input, in word pieces.
    pub max_tokens: usize,
    /// Texts per inference batch.
    pub batch_size: usize,
    /// Embed every window of a passage longer than `max_tokens`, not only its first.
    pub windows: bool,
    /// OpenAI-compatible `/v1/embeddings` URL, or Ollama's `/api/embed`.
    pub http_url: String,
    pub http_model: String,
    /// Bearer token for the endpoint; empty for none. Prefer `FINDER_EMBED_API_KEY`.
    pub http_api_key: String,
    pub http_timeout_ms: u64,
    pub http_retries: u32,
}

impl Default for EmbedSettings {
    fn default() -> Self {
        EmbedSettings {
            backend: EmbedBackend::Minilm,
            model_dir: String::new(),
            dim: DEFAULT_PRECOMPUTED_DIM,
            max_tokens: DEFAULT_EMBED_MAX_TOKENS,
            batch_size: DEFAULT_EMBED_BATCH_SIZE,
            windows: true,
            http_url: String::new(),
            http_model: String::new(),
            http_api_key: String::new(),
            http_timeout_ms: 30_000,
            http_retries: 3,
        }
    }
}

/// Where sources, fragments, statistics, vectors and the graph are kept (index-time: it
/// chooses the store, so a query may not override it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageSettings {
    pub backend: StorageBackend,
    /// `postgres`: one connection URL per shard (the primary indexing writes to), in a fixed
    /// order: a source lives on shard `key mod shards`.
    pub urls: Vec<String>,
    /// `postgres`: per shard, the streaming replicas queries read from (tried in turn, then
    /// the primary). Shorter than `urls` is fine.
    pub read_urls: Vec<Vec<String>>,
    /// `postgres`: a PEM file of CA certificates to trust besides the web's roots (a private
    /// CA), relative to the config file; empty for none.
    pub tls_ca: String,
    /// `postgres`: neighbours per node of each shard's HNSW index (pgvector's `m`).
    pub hnsw_m: u32,
    /// `postgres`: the beam while building each shard's HNSW index (pgvector's
    /// `ef_construction`), at least twice `hnsw_m`.
    pub hnsw_ef_construction: u32,
    /// `postgres`: a long-running query node (`finder serve`, `finder mcp`) walks each
    /// shard's vectors over an HNSW graph of its own, held in memory and kept up to date from
    /// the changed sources, instead of pgvector's index (which it walks until the graph is
    /// loaded). About 1.7 KB of memory a 384-dimensional vector.
    pub node_walk: bool,
}

/// pgvector's own default `m` for its HNSW index.
pub const DEFAULT_PG_HNSW_M: u32 = 16;
/// The HNSW build's beam. pgvector's own 64 kept a million fragments' dense nDCG@10 0.045 below
/// exact search, even walked with the default beam; 200 matches `m` 32's recall at about half
/// its build time (docs/BENCHMARKS.md, *1M synthetic fragments over 2 shards*).
pub const DEFAULT_PG_HNSW_EF_CONSTRUCTION: u32 = 200;

impl Default for StorageSettings {
    fn default() -> Self {
        StorageSettings {
            backend: StorageBackend::default(),
            urls: Vec::new(),
            read_urls: Vec::new(),
            tls_ca: String::new(),
            hnsw_m: DEFAULT_PG_HNSW_M,
            hnsw_ef_construction: DEFAULT_PG_HNSW_EF_CONSTRUCTION,
            node_walk: true,
        }
    }
}

/// The stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageBackend {
    /// The index folder (tantivy, vectors, graph): one machine, no server.
    #[default]
    Embedded,
    /// PostgreSQL + pgvector, over one or more shards (the `finder-pg` crate).
    Postgres,
}

/// The embedding backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedBackend {
    /// all-MiniLM-L6-v2 run in Rust; used when its model folder is present.
    Minilm,
    /// A Model2Vec-format static model (token vectors averaged; `finder model distill`
    /// makes one from MiniLM).
    Static,
    /// An embedding server speaking the OpenAI or Ollama API.
    Http,
    /// Vectors given with the data (`vector` in JSONL records) and with each query.
    Precomputed,
    /// No semantic layer.
    None,
}

/// The vector channel (query-time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VectorSettings {
    pub enabled: bool,
    /// Candidates taken from the vector list.
    pub vec_list_size: usize,
    /// Hits farther than this cosine distance (1 − cosine) are dropped.
    pub max_vector_distance: f32,
    /// ANN beam width; 0 sizes it by the index ([`VectorSettings::beam`]). The walk never
    /// uses less than its window of 1.5 × `vec_list_size` (300 at the defaults), which is
    /// reordered by exact cosine.
    pub ef_search: usize,
    /// Past this, the query is answered without the vector channel.
    pub query_embed_timeout_ms: u64,
    /// A fragment embedded in windows (`embed.windows`) scores as its first window's cosine
    /// plus this share of what its best window adds to it: 1 takes the best window.
    pub window_weight: f32,
}

impl Default for VectorSettings {
    fn default() -> Self {
        VectorSettings {
            enabled: true,
            vec_list_size: DEFAULT_VEC_LIST_SIZE,
            max_vector_distance: DEFAULT_MAX_VECTOR_DISTANCE,
            ef_search: DEFAULT_EF_SEARCH,
            query_embed_timeout_ms: DEFAULT_QUERY_EMBED_TIMEOUT_MS,
            window_weight: DEFAULT_WINDOW_WEIGHT,
        }
    }
}

impl VectorSettings {
    /// The HNSW beam a search over `rows` vectors walks with: `ef_search`, or when it is 0,
    /// [`BEAM_PER_SQRT_ROW`] × √rows. A graph walk loses more of the exact neighbours the
    /// larger the graph it walks, so a fixed beam that keeps them all at ten thousand keeps
    /// six in ten at a million. The caller widens it to at least its window.
    pub fn beam(&self, rows: usize) -> usize {
        match self.ef_search {
            0 => (BEAM_PER_SQRT_ROW * (rows as f64).sqrt()).ceil() as usize,
            ef => ef,
        }
    }
}

/// How channel lists merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// Reciprocal rank fusion.
    Rrf,
    /// Convex combination of min-max normalised scores, `alpha` toward dense.
    Cc,
}

/// Index-time settings: changing them rebuilds the index on the next `finder index`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexSettings {
    /// Stemmer and stop-word language.
    pub language: String,
    /// Largest fragment, in characters; fragments break at headings, then paragraphs, then
    /// sentences.
    pub fragment_max_chars: usize,
    /// Longest derived summary, in characters.
    pub summary_max_chars: usize,
    /// Also index each fragment's whole words (punctuation trimmed, unstemmed), which the
    /// trigram expansion of partial words and identifiers needs.
    pub trigrams: bool,
    /// Index the source title (and heading) with every fragment, not only the first.
    pub title_in_fragments: bool,
}

impl Default for IndexSettings {
    fn default() -> Self {
        IndexSettings {
            language: DEFAULT_LANGUAGE.to_string(),
            fragment_max_chars: DEFAULT_FRAGMENT_MAX_CHARS,
            summary_max_chars: DEFAULT_SUMMARY_MAX_CHARS,
            trigrams: true,
            title_in_fragments: true,
        }
    }
}

/// Which query words the trigram expansion turns into the dictionary words that hold them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrigramMode {
    /// None.
    Off,
    /// Identifier-like words (a digit, or an inner `-`, `_`, `.`, `/`).
    Auto,
    /// Every word (partial words too).
    On,
}

/// The BM25 channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LexicalSettings {
    /// Run the BM25 lists (off only for ablations such as the `dense` eval preset).
    pub enabled: bool,
    pub k1: f32,
    pub b: f32,
    /// How a word the query repeats weighs ([`crate::query_term_weight`]): 0 counts it once.
    pub k3: f32,
    /// Candidates taken from each lexical list.
    pub fts_list_size: usize,
    pub trigram: TrigramMode,
    /// Weight of an expanded word in the lexical list, times the share of it the query word
    /// covers (`auth` in `oauth`: 0.8).
    pub trigram_weight: f32,
    /// Dictionary words one query word expands into at most (shortest first).
    pub trigram_expansions: usize,
}

impl Default for LexicalSettings {
    fn default() -> Self {
        LexicalSettings {
            enabled: true,
            k1: DEFAULT_K1,
            b: DEFAULT_B,
            k3: DEFAULT_K3,
            fts_list_size: DEFAULT_FTS_LIST_SIZE,
            trigram: TrigramMode::Auto,
            trigram_weight: DEFAULT_TRIGRAM_WEIGHT,
            trigram_expansions: DEFAULT_TRIGRAM_EXPANSIONS,
        }
    }
}

/// Fusion, rollup and result shaping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FinderSettings {
    pub fusion: Fusion,
    pub rrf_k: u32,
    /// Weight of the dense list in `cc` fusion.
    pub alpha: f64,
    pub max_hints: usize,
    /// Weights of a source's best, second and third fragment.
    pub rollup_weights: Vec<f64>,
    /// Longest hint preview, in characters.
    pub preview_chars: usize,
}

impl Default for FinderSettings {
    fn default() -> Self {
        FinderSettings {
            fusion: Fusion::Rrf,
            rrf_k: DEFAULT_RRF_K,
            alpha: DEFAULT_ALPHA,
            max_hints: DEFAULT_MAX_HINTS,
            rollup_weights: DEFAULT_ROLLUP_WEIGHTS.to_vec(),
            preview_chars: DEFAULT_PREVIEW_CHARS,
        }
    }
}

impl Settings {
    /// Parses and validates a `finder.toml`. `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Settings, SettingsError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e.span().map(|s| 1 + text[..s.start].matches('\n').count());
            SettingsError {
                origin: match line {
                    Some(l) => format!("{origin}:{l}"),
                    None => origin.to_string(),
                },
                key: String::new(),
                kind: SettingsErrorKind::Syntax {
                    message: e.message().to_string(),
                },
            }
        })?;
        let mut keys = Vec::new();
        flatten_keys("", &table, &mut keys);
        let valid = Settings::keys();
        for key in &keys {
            let value = lookup(&table, key);
            if valid.contains(key)
                || (is_section(key, &valid) && value.is_some_and(toml::Value::is_table))
            {
                continue;
            }
            // A section written as a value (`lexical = 3`, `[[lexical]]`) is the wrong shape,
            // not an unknown name.
            let kind = if is_section(key, &valid) {
                SettingsErrorKind::Invalid {
                    value: shown(value),
                    expected: format!("a [{key}] table"),
                }
            } else {
                SettingsErrorKind::UnknownKey {
                    suggestion: nearest(key, &valid),
                }
            };
            return Err(SettingsError {
                origin: origin.to_string(),
                key: key.clone(),
                kind,
            });
        }
        let settings = from_table(table, origin, &keys)?;
        settings.validate(origin)?;
        Ok(settings)
    }

    /// Every valid dotted key, e.g. `lexical.k1`, as the settings table lists them (what
    /// unknown keys are matched against for a suggestion).
    pub fn keys() -> Vec<String> {
        SETTINGS.iter().map(|s| s.key.to_string()).collect()
    }

    /// Applies one `key=value` override (value in TOML syntax; bare words are strings) and
    /// validates the result. On error `self` is unchanged.
    pub fn set(&mut self, assignment: &str) -> Result<(), SettingsError> {
        let origin = format!("--set {assignment}");
        let Some((key, raw)) = assignment.split_once('=') else {
            return Err(SettingsError {
                origin,
                key: assignment.to_string(),
                kind: SettingsErrorKind::Invalid {
                    value: assignment.to_string(),
                    expected: "key=value".to_string(),
                },
            });
        };
        let (key, raw) = (key.trim(), raw.trim());
        let valid = Settings::keys();
        if !valid.iter().any(|k| k == key) {
            return Err(SettingsError {
                origin,
                key: key.to_string(),
                kind: SettingsErrorKind::UnknownKey {
                    suggestion: nearest(key, &valid),
                },
            });
        }
        let value = parse_value(raw);
        let mut table = to_table(self);
        let (section, leaf) = key.split_once('.').expect("keys are section.leaf");
        table
            .get_mut(section)
            .and_then(toml::Value::as_table_mut)
            .expect("section exists")
            .insert(leaf.to_string(), value);
        let updated = from_table(table, &origin, &[key.to_string()])?;
        updated.validate(&origin)?;
        *self = updated;
        Ok(())
    }

    /// The list size a channel is asked for by default.
    pub fn list_size(&self, channel: crate::Channel) -> usize {
        match channel {
            crate::Channel::Lexical | crate::Channel::Trigram => self.lexical.fts_list_size,
            crate::Channel::Vector => self.vector.vec_list_size,
            crate::Channel::Entities
            | crate::Channel::Neighbours
            | crate::Channel::Communities
            | crate::Channel::Like
            | crate::Channel::Events => self.lexical.fts_list_size,
        }
    }

    /// Checks every number against its range in the settings table ([`SETTINGS`]).
    fn check_ranges(&self, check: &Check<'_>) -> Result<(), SettingsError> {
        let values = to_table(self);
        for spec in SETTINGS {
            let Some((lo, hi)) = spec.range else { continue };
            let (section, leaf) = spec.key.split_once('.').expect("keys are section.leaf");
            let Some(value) = values.get(section).and_then(|t| t.get(leaf)) else {
                continue;
            };
            let numbers = match value {
                toml::Value::Array(items) => items.iter().filter_map(number).collect(),
                other => number(other).into_iter().collect::<Vec<f64>>(),
            };
            for x in numbers {
                check.range(spec.key, x, lo, hi)?;
            }
        }
        Ok(())
    }

    /// Checks every value: ranges from the settings table, then what a range cannot say.
    pub fn validate(&self, origin: &str) -> Result<(), SettingsError> {
        let check = Check { origin };
        let i = &self.index;
        if !LANGUAGES.contains(&i.language.as_str()) {
            return Err(check.invalid(
                "index.language",
                &i.language,
                &format!("one of {}", LANGUAGES.join(", ")),
            ));
        }
        self.check_ranges(&check)?;
        self.refine.validate(origin)?;
        let e = &self.embed;
        if e.backend == EmbedBackend::Http && e.http_url.is_empty() {
            return Err(check.invalid(
                "embed.http_url",
                "\"\"",
                "an http(s) URL when embed.backend = \"http\"",
            ));
        }
        let f = &self.finder;
        if f.rollup_weights.is_empty() || f.rollup_weights.len() > 10 {
            return Err(check.invalid(
                "finder.rollup_weights",
                &format!("{:?}", f.rollup_weights),
                "1 to 10 weights",
            ));
        }
        let st = &self.storage;
        match st.backend {
            StorageBackend::Postgres if st.urls.is_empty() => {
                return Err(check.invalid(
                    "storage.urls",
                    "[]",
                    "one PostgreSQL URL per shard with storage.backend = \"postgres\"",
                ))
            }
            StorageBackend::Embedded if !st.urls.is_empty() || !st.read_urls.is_empty() => {
                return Err(check.invalid(
                    "storage.urls",
                    &format!("{:?}", st.urls),
                    "no URLs with storage.backend = \"embedded\" (set it to \"postgres\")",
                ))
            }
            _ => {}
        }
        if st.hnsw_ef_construction < 2 * st.hnsw_m {
            return Err(check.invalid(
                "storage.hnsw_ef_construction",
                &st.hnsw_ef_construction.to_string(),
                &format!("at least twice storage.hnsw_m ({})", 2 * st.hnsw_m),
            ));
        }
        if st.read_urls.len() > st.urls.len() {
            return Err(check.invalid(
                "storage.read_urls",
                &format!("{} lists", st.read_urls.len()),
                &format!(
                    "at most one list per shard ({} in storage.urls)",
                    st.urls.len()
                ),
            ));
        }
        if let Some(bad) = st
            .urls
            .iter()
            .chain(st.read_urls.iter().flatten())
            .find(|u| {
                !(u.starts_with("postgres://") || u.starts_with("postgresql://") || u.contains('='))
            })
        {
            return Err(check.invalid(
                "storage.urls",
                bad,
                "a PostgreSQL URL (postgresql://user@host:port/db) or key=value connection string",
            ));
        }
        Ok(())
    }
}

fn number(value: &toml::Value) -> Option<f64> {
    match value {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(x) => Some(*x),
        _ => None,
    }
}

struct Check<'a> {
    origin: &'a str,
}

impl Check<'_> {
    fn range(&self, key: &str, value: f64, lo: f64, hi: f64) -> Result<(), SettingsError> {
        if value.is_finite() && (lo..=hi).contains(&value) {
            return Ok(());
        }
        Err(SettingsError {
            origin: self.origin.to_string(),
            key: key.to_string(),
            kind: SettingsErrorKind::OutOfRange {
                value: value.to_string(),
                range: format!("{lo}–{hi}"),
            },
        })
    }

    fn invalid(&self, key: &str, value: &str, expected: &str) -> SettingsError {
        SettingsError {
            origin: self.origin.to_string(),
            key: key.to_string(),
            kind: SettingsErrorKind::Invalid {
                value: value.to_string(),
                expected: expected.to_string(),
            },
        }
    }
}

fn to_table(settings: &Settings) -> toml::Table {
    toml::Table::try_from(settings).expect("settings serialise to a table")
}

/// The settings in `table`. serde's error names neither the key nor the value, so on failure
/// each of `keys` (those the user gave) is tried alone on the defaults, and the first one that
/// fails is named with its value and the type it should have.
fn from_table(
    table: toml::Table,
    origin: &str,
    keys: &[String],
) -> Result<Settings, SettingsError> {
    let whole = match Settings::deserialize(table.clone()) {
        Ok(settings) => return Ok(settings),
        Err(e) => e,
    };
    let alone = keys.iter().find_map(|key| {
        let value = lookup(&table, key)?;
        let (section, leaf) = key.split_once('.')?;
        let mut single = to_table(&Settings::default());
        single
            .get_mut(section)
            .and_then(toml::Value::as_table_mut)?
            .insert(leaf.to_string(), value.clone());
        let e = Settings::deserialize(single).err()?;
        Some((key.clone(), Some(value), e.message().to_string()))
    });
    let (key, value, message) = alone.unwrap_or_else(|| {
        let key = keys.first().cloned().unwrap_or_default();
        let value = lookup(&table, &key);
        (key, value, whole.message().to_string())
    });
    Err(SettingsError {
        origin: origin.to_string(),
        key,
        kind: SettingsErrorKind::Invalid {
            value: shown(value),
            expected: expected_from(&message),
        },
    })
}

/// The value at a dotted key of a settings table.
fn lookup<'t>(table: &'t toml::Table, key: &str) -> Option<&'t toml::Value> {
    let mut parts = key.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

/// Whether `key` names a section (`lexical`) rather than a setting.
fn is_section(key: &str, valid: &[String]) -> bool {
    valid.iter().any(|v| {
        v.strip_prefix(key)
            .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// A value as the user wrote it (TOML syntax), shortened when long.
fn shown(value: Option<&toml::Value>) -> String {
    const MAX: usize = 80;
    let Some(value) = value else {
        return "(none)".to_string();
    };
    let text = value.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let head: String = text.chars().take(MAX).collect();
    format!("{head}…")
}

/// What serde's message says was expected, in the words of a settings file: `invalid type:
/// string "x", expected f32` → `a number`.
fn expected_from(message: &str) -> String {
    let expected = message
        .rsplit_once("expected ")
        .map_or(message, |(_, e)| e)
        .trim();
    match expected {
        "f32" | "f64" => "a number".to_string(),
        "u8" => "a whole number from 0 to 255".to_string(),
        "u16" => "a whole number from 0 to 65535".to_string(),
        "u32" => "a whole number from 0 to 4294967295".to_string(),
        "u64" | "usize" => "a whole number, 0 or more".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
        "a boolean" => "true or false".to_string(),
        "a sequence" => "an array".to_string(),
        "string only" => "a string".to_string(),
        "struct Settings" => "a table".to_string(),
        other => other.to_string(),
    }
}

/// A `--set` value: TOML syntax when it parses (numbers, booleans, arrays, quoted strings),
/// otherwise the raw text as a string.
fn parse_value(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

fn flatten_keys(prefix: &str, table: &toml::Table, out: &mut Vec<String>) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            // Settings are `section.leaf`: only sections are entered, so a table given for a
            // setting is that setting's (wrong) value. An empty section is named too, so
            // `[typo]` alone is refused as unknown.
            toml::Value::Table(t) if prefix.is_empty() && !t.is_empty() => {
                flatten_keys(&key, t, out)
            }
            _ => out.push(key),
        }
    }
}

fn nearest(key: &str, valid: &[String]) -> Option<String> {
    if !key.contains('.') {
        // A section name: suggest a section.
        let mut sections: Vec<String> = valid
            .iter()
            .filter_map(|v| v.split_once('.').map(|(s, _)| s.to_string()))
            .collect();
        sections.dedup();
        return sections
            .into_iter()
            .map(|s| (levenshtein(key, &s), s))
            .filter(|(d, s)| *d <= (s.len() / 3).max(1))
            .min()
            .map(|(_, s)| s);
    }
    let leaf = key.rsplit('.').next().unwrap_or(key);
    valid
        .iter()
        .map(|v| {
            let vleaf = v.rsplit('.').next().unwrap_or(v);
            (levenshtein(key, v).min(levenshtein(leaf, vleaf) + 1), v)
        })
        .filter(|(d, v)| *d <= (v.len() / 2).max(3))
        .min_by_key(|(d, v)| (*d, usize::MAX - common_prefix(key, v)))
        .map(|(_, v)| v.clone())
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// Edit distance between two strings, by characters.
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_keys_are_dotted() {
        Settings::default().validate("defaults").unwrap();
        let keys = Settings::keys();
        assert!(keys.contains(&"lexical.k1".to_string()));
        assert!(keys.contains(&"finder.rrf_k".to_string()));
    }

    #[test]
    fn the_default_beam_grows_with_the_square_root_of_the_vectors() {
        let mut v = VectorSettings::default();
        let beams: Vec<usize> = [0, 10_000, 100_000, 1_000_000]
            .into_iter()
            .map(|rows| v.beam(rows))
            .collect();
        assert_eq!(beams, [0, 300, 949, 3_000]);
        // A beam set by hand holds at every size.
        v.ef_search = 512;
        assert_eq!((v.beam(10), v.beam(1_000_000)), (512, 512));
        let mut s = Settings::default();
        s.set("vector.ef_search=0").unwrap();
        assert!(s.set("vector.ef_search=-1").is_err());
    }

    #[test]
    fn set_changes_a_query_time_value() {
        let mut s = Settings::default();
        s.set("lexical.k1=0.9").unwrap();
        assert_eq!(s.lexical.k1, 0.9);
        s.set("lexical.trigram=off").unwrap();
        assert_eq!(s.lexical.trigram, TrigramMode::Off);
    }

    #[test]
    fn out_of_range_names_the_range_and_leaves_settings_alone() {
        let mut s = Settings::default();
        let err = s.set("finder.rrf_k=5").unwrap_err();
        assert_eq!(
            err.to_string(),
            "--set finder.rrf_k=5: `finder.rrf_k`: value 5 is out of range; allowed: 10–200"
        );
        assert_eq!(s, Settings::default());
    }

    #[test]
    fn unknown_key_suggests_the_nearest() {
        let err = Settings::default().set("lexical.k=1").unwrap_err();
        assert_eq!(
            err.kind,
            SettingsErrorKind::UnknownKey {
                suggestion: Some("lexical.k1".into())
            }
        );
        let err = Settings::from_toml("[finder]\nrrfk = 30\n", "finder.toml").unwrap_err();
        assert!(
            err.to_string().contains("did you mean `finder.rrf_k`"),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_is_invalid() {
        let err = Settings::default()
            .set("lexical.fts_list_size=many")
            .unwrap_err();
        assert!(
            matches!(err.kind, SettingsErrorKind::Invalid { .. }),
            "{err}"
        );
    }

    #[test]
    fn file_syntax_error_names_the_line() {
        let err = Settings::from_toml("[lexical]\nk1 = = 3\n", "finder.toml").unwrap_err();
        assert!(err.origin.starts_with("finder.toml:2"), "{err}");
    }

    #[test]
    fn file_values_are_validated() {
        let s = Settings::from_toml("[lexical]\nb = 0.4\n", "f").unwrap();
        assert_eq!(s.lexical.b, 0.4);
        assert_eq!(s.lexical.k1, DEFAULT_K1);
        let err = Settings::from_toml("[lexical]\nb = 1.5\n", "f").unwrap_err();
        assert!(matches!(err.kind, SettingsErrorKind::OutOfRange { .. }));
    }

    #[test]
    fn a_wrong_value_is_named_with_its_key_value_and_type() {
        let err = Settings::from_toml("[lexical]\nk1 = 1.0\nb = \"x\"\n", "f").unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: `lexical.b`: invalid value \"x\"; expected a number"
        );
        let err = Settings::default()
            .set("lexical.fts_list_size=-1")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--set lexical.fts_list_size=-1: `lexical.fts_list_size`: invalid value -1; expected a whole number, 0 or more"
        );
        let err = Settings::default().set("lexical.enabled=1").unwrap_err();
        assert!(err.to_string().ends_with("expected true or false"), "{err}");
        let err = Settings::default().set("finder.fusion=max").unwrap_err();
        assert!(err.to_string().contains("`rrf`"), "{err}");
    }

    #[test]
    fn sections_and_tables_in_the_wrong_place_are_named() {
        let err = Settings::from_toml("[typo]\n", "f").unwrap_err();
        assert_eq!(
            (err.key.as_str(), &err.kind),
            ("typo", &SettingsErrorKind::UnknownKey { suggestion: None })
        );
        let err = Settings::from_toml("[lexicl]\n", "f").unwrap_err();
        assert!(
            err.to_string().ends_with("did you mean `lexical`?"),
            "{err}"
        );
        let err = Settings::from_toml("lexical = 3\n", "f").unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: `lexical`: invalid value 3; expected a [lexical] table"
        );
        let err = Settings::from_toml("[embed.backend]\na = 1\n", "f").unwrap_err();
        assert_eq!(err.key, "embed.backend");
        assert!(
            matches!(err.kind, SettingsErrorKind::Invalid { .. }),
            "{err}"
        );
        Settings::from_toml("[lexical]\n[graph]\n", "f").expect("empty known sections");
    }

    #[test]
    fn levenshtein_counts_edits() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
    }
}
