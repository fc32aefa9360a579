//! User profiles for personalization: users, `USER -PREFERS→ ATTR` edges and interaction
//! events, read from the JSON Lines file named by `refine.profiles` when an index is opened.
//!
//! One object per line, every line naming its `user`:
//!
//! ```text
//! {"user": "ana"}                                                    a user with no data yet
//! {"user": "ana", "prefers": {"tag": "security"}, "weight": 2}       PREFERS edge (weight 1)
//! {"user": "ana", "prefers": {"key": "level", "value": "beginner"}}  on an `extras` pair
//! {"user": "ana", "interaction": "course-12", "at": "2024-05-01"}    an event on an item
//! {"user": "ana", "interaction": {"tags": ["rust"]}, "at": 1714521600}
//! ```
//!
//! An interaction naming an item id takes the item's tags and `extras` from the index; one
//! naming attributes takes those. Its weight decays with a 14-day half-life at query time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use finder_core::{parse_date, Attr, Interaction, Settings, UserProfile};
use serde::Deserialize;
use tantivy::schema::Value;
use tantivy::{Index, TantivyDocument, Term};

use crate::error::{IndexError, Result};
use crate::record::FragmentRecord;
use crate::Problem;

/// Profiles by user id.
pub(crate) type Profiles = Arc<BTreeMap<String, UserProfile>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    user: String,
    #[serde(default)]
    prefers: Option<AttrSpec>,
    #[serde(default)]
    weight: Option<f64>,
    #[serde(default)]
    interaction: Option<ItemSpec>,
    #[serde(default)]
    at: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AttrSpec {
    Tag { tag: String },
    Extra { key: String, value: String },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ItemSpec {
    Id(String),
    Attrs {
        #[serde(default)]
        tags: Vec<String>,
        #[serde(default)]
        extras: BTreeMap<String, String>,
    },
}

/// Reads `refine.profiles` (empty: no profiles) for the index in `dir`.
pub(crate) fn load(dir: &Path, settings: &Settings, index: &Index) -> Result<Profiles> {
    let items = ItemLookup::new(index);
    read_profiles(dir, settings, |id| items.attrs(id))
}

/// Reads `refine.profiles` (empty: no profiles); `item` gives an indexed item's attributes
/// ([`envelope_attrs`] of its envelope) for interactions that name it. A relative path is
/// looked up in the current folder, then in `dir` (the index's, or the configuration's).
pub fn read_profiles(
    dir: &Path,
    settings: &Settings,
    item: impl Fn(&str) -> Option<Vec<Attr>>,
) -> Result<Arc<BTreeMap<String, UserProfile>>> {
    let name = settings.refine.profiles.trim();
    if name.is_empty() {
        return Ok(Profiles::default());
    }
    let path = resolve_path(dir, name);
    let text = std::fs::read_to_string(&path).map_err(|source| IndexError::Io {
        path: path.clone(),
        source,
    })?;
    parse(&text, &path, item)
}

/// The attributes a profile's interaction with an item takes: its tags and `extras` pairs.
pub fn envelope_attrs(e: &finder_core::Envelope) -> Vec<Attr> {
    e.tags
        .iter()
        .map(|t| Attr::tag(t))
        .chain(e.extras.iter().map(|(k, v)| Attr::extra(k, v)))
        .collect()
}

fn resolve_path(dir: &Path, name: &str) -> PathBuf {
    let given = PathBuf::from(name);
    if given.is_absolute() || given.exists() {
        given
    } else {
        dir.join(name)
    }
}

/// Parses the profile lines; `item` gives the attributes of an indexed item id.
pub(crate) fn parse(
    text: &str,
    path: &Path,
    item: impl Fn(&str) -> Option<Vec<Attr>>,
) -> Result<Profiles> {
    let mut users: BTreeMap<String, UserProfile> = BTreeMap::new();
    for (n, raw) in text.lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let problem = |reason: String| {
            IndexError::Input(Problem {
                place: format!("{}:{}", path.display(), n + 1),
                reason,
                source_id: None,
            })
        };
        let line: Line = serde_json::from_str(raw).map_err(|e| problem(e.to_string()))?;
        let profile = users.entry(line.user.clone()).or_default();
        if let Some(attr) = line.prefers {
            let weight = line.weight.unwrap_or(1.0);
            if !weight.is_finite() {
                return Err(problem("`weight` must be a finite number".into()));
            }
            profile.prefers.push((attr_of(attr), weight));
        }
        if let Some(spec) = line.interaction {
            let at = match &line.at {
                Some(serde_json::Value::Number(n)) => n.as_i64(),
                Some(serde_json::Value::String(s)) => parse_date(s),
                _ => None,
            }
            .ok_or_else(|| problem("an interaction needs a date or Unix time in `at`".into()))?;
            let attrs = match spec {
                ItemSpec::Id(id) => item(&id).ok_or_else(|| {
                    problem(format!("interaction with `{id}`, which is not indexed"))
                })?,
                ItemSpec::Attrs { tags, extras } => tags
                    .iter()
                    .map(|t| Attr::tag(t))
                    .chain(extras.iter().map(|(k, v)| Attr::extra(k, v)))
                    .collect(),
            };
            profile.interactions.push(Interaction { at, attrs });
        }
    }
    Ok(Arc::new(users))
}

fn attr_of(spec: AttrSpec) -> Attr {
    match spec {
        AttrSpec::Tag { tag } => Attr::tag(&tag),
        AttrSpec::Extra { key, value } => Attr::extra(&key, &value),
    }
}

/// Finds an indexed source's tags and extras by id.
struct ItemLookup {
    searcher: Option<tantivy::Searcher>,
    fields: Option<crate::schema::Fields>,
}

impl ItemLookup {
    fn new(index: &Index) -> Self {
        ItemLookup {
            searcher: index.reader().ok().map(|r| r.searcher()),
            fields: crate::schema::resolve(&index.schema()),
        }
    }

    fn attrs(&self, id: &str) -> Option<Vec<Attr>> {
        let (searcher, fields) = (self.searcher.as_ref()?, self.fields?);
        let term = Term::from_field_u64(fields.source_key, crate::keys::source_key(id).0);
        let query = tantivy::query::TermQuery::new(term, tantivy::schema::IndexRecordOption::Basic);
        let docs = searcher
            .search(&query, &tantivy::collector::DocSetCollector)
            .ok()?;
        for address in docs {
            let doc: TantivyDocument = searcher.doc(address).ok()?;
            let meta = doc.get_first(fields.meta).and_then(|v| v.as_str())?;
            let record: FragmentRecord = serde_json::from_str(meta).ok()?;
            if let Some(source) = record.source.filter(|s| s.id == id) {
                return Some(envelope_attrs(&source.envelope));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_make_preferences_and_interactions() {
        let text = r#"
{"user": "ana"}
{"user": "ana", "prefers": {"tag": "Security"}, "weight": 2}
{"user": "ana", "prefers": {"key": "level", "value": "beginner"}}
{"user": "ana", "interaction": "c-12", "at": "1970-01-02"}
{"user": "bo", "interaction": {"tags": ["rust"]}, "at": 86400}
"#;
        let users = parse(text, Path::new("users.jsonl"), |id| {
            (id == "c-12").then(|| vec![Attr::tag("ops")])
        })
        .unwrap();
        let ana = &users["ana"];
        assert_eq!(ana.prefers[0], (Attr::tag("security"), 2.0));
        assert_eq!(ana.prefers[1], (Attr::extra("level", "beginner"), 1.0));
        assert_eq!(ana.interactions[0].at, 86_400);
        assert_eq!(ana.interactions[0].attrs, vec![Attr::tag("ops")]);
        assert_eq!(users["bo"].interactions[0].attrs, vec![Attr::tag("rust")]);
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let err = parse(
            "{\"user\": \"a\"}\n{\"user\": \"a\", \"interaction\": \"x\"}\n",
            Path::new("u.jsonl"),
            |_| Some(Vec::new()),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("u.jsonl:2: "), "{err}");
        let err = parse(
            "{\"user\": \"a\", \"interaction\": \"gone\", \"at\": 5}\n",
            Path::new("u.jsonl"),
            |_| None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("not indexed"), "{err}");
    }
}
