//! YAML front matter: finding the fenced block at the top of a note, and reading title, date,
//! tags, summary and scalar extras from it.

use std::collections::BTreeMap;

use yaml_serde::Value;

/// What the front matter says about its note.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Fields {
    pub title: Option<String>,
    pub date: Option<String>,
    pub tags: Vec<String>,
    pub summary: Option<String>,
    pub extras: BTreeMap<String, String>,
}

/// A note split into front matter and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Split {
    pub fields: Fields,
    /// Byte offset of the body in the text.
    pub body_start: usize,
    /// One-based line of the body's first line.
    pub body_line: u32,
    /// A front matter that could not be read: the line it concerns and why. The body is then
    /// the whole text, so nothing is lost from the index.
    pub problem: Option<(u32, String)>,
}

impl Split {
    fn whole(fields: Fields, problem: Option<(u32, String)>) -> Split {
        Split {
            fields,
            body_start: 0,
            body_line: 1,
            problem,
        }
    }
}

/// Splits `text` (BOM already removed) at its front matter: a first line `---` and a closing
/// line `---` or `...`.
pub(super) fn split(text: &str) -> Split {
    let first_end = text.find('\n').unwrap_or(text.len());
    if text[..first_end].trim_end() != "---" {
        return Split::whole(Fields::default(), None);
    }
    let yaml_start = (first_end + 1).min(text.len());
    let mut line_no = 1u32;
    let mut close = None;
    let mut offset = yaml_start;
    for line in text[yaml_start..].split_inclusive('\n') {
        line_no += 1;
        let bare = line.trim_end();
        if bare == "---" || bare == "..." {
            close = Some((offset, offset + line.len(), line_no));
            break;
        }
        offset += line.len();
    }
    let Some((yaml_end, body_start, close_line)) = close else {
        return Split::whole(
            Fields::default(),
            Some((1, "front matter has no closing `---` line".to_string())),
        );
    };
    match parse(&text[yaml_start..yaml_end]) {
        Ok(fields) => Split {
            fields,
            body_start,
            body_line: close_line + 1,
            problem: None,
        },
        Err((yaml_line, reason)) => {
            // YAML lines count from the line after the opening fence.
            Split::whole(Fields::default(), Some((1 + yaml_line, reason)))
        }
    }
}

/// Reads the fields from the YAML text; an error gives the YAML line (0 when unknown) and why.
fn parse(yaml: &str) -> Result<Fields, (u32, String)> {
    let value: Value = yaml_serde::from_str(yaml).map_err(|e| {
        let line = e
            .location()
            .map_or(0, |l| u32::try_from(l.line()).unwrap_or(0));
        let message = e.to_string();
        // The message's own "at line N" counts within the YAML; the place names the file line.
        let message = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_string();
        (line, format!("front matter is not valid YAML: {message}"))
    })?;
    let map = match value {
        Value::Null => return Ok(Fields::default()),
        Value::Mapping(map) => map,
        _ => {
            return Err((
                0,
                "front matter is not a mapping of `key: value` lines".to_string(),
            ))
        }
    };
    let mut fields = Fields::default();
    let mut summaries: [Option<String>; 3] = Default::default();
    for (key, value) in &map {
        let Some(key) = scalar(key) else { continue };
        match key.to_lowercase().as_str() {
            "title" => {
                fields.title = scalar(value)
                    .map(|t| collapse(&t))
                    .filter(|t| !t.is_empty())
            }
            "date" => {
                fields.date = scalar(value)
                    .map(|d| d.trim().to_string())
                    .filter(|d| !d.is_empty())
            }
            "tags" => fields.tags = tags(value),
            "summary" => summaries[0] = scalar(value),
            "description" => summaries[1] = scalar(value),
            "desc" => summaries[2] = scalar(value),
            _ => {
                if let Some(v) = scalar(value) {
                    fields.extras.insert(key, v);
                }
            }
        }
    }
    fields.summary = summaries
        .into_iter()
        .flatten()
        .map(|s| collapse(&s))
        .find(|s| !s.is_empty());
    Ok(fields)
}

/// A string, number or boolean as text; None for null, lists and maps.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Tagged(tagged) => scalar(&tagged.value),
        Value::Null | Value::Sequence(_) | Value::Mapping(_) => None,
    }
}

/// Tags from a list, or from one string separated by commas or spaces; a leading `#` is
/// dropped and repeats are kept once, in first-seen order.
fn tags(value: &Value) -> Vec<String> {
    let raw: Vec<String> = match value {
        Value::Sequence(items) => items.iter().filter_map(scalar).collect(),
        other => scalar(other)
            .map(|s| {
                s.split(|c: char| c == ',' || c.is_whitespace())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    };
    let mut out: Vec<String> = Vec::new();
    for tag in raw {
        let tag = tag.trim().trim_start_matches('#').trim();
        if !tag.is_empty() && !out.iter().any(|t| t == tag) {
            out.push(tag.to_string());
        }
    }
    out
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_known_keys_and_scalar_extras() {
        let text = "---\ntitle: Backups\ndate: 2024-03-01\ntags: [ops, \"#db\", ops]\nsummary: |\n  Nightly\n  snapshots.\nteam: platform\nreviewed: true\npriority: 2\nowners: [ana, bo]\n---\n# Body\n";
        let split = split(text);
        assert_eq!(split.problem, None);
        assert_eq!(split.body_start, text.find("# Body").unwrap());
        assert_eq!(split.body_line, 13);
        let f = split.fields;
        assert_eq!(f.title.as_deref(), Some("Backups"));
        assert_eq!(f.date.as_deref(), Some("2024-03-01"));
        assert_eq!(f.tags, vec!["ops", "db"]);
        assert_eq!(f.summary.as_deref(), Some("Nightly snapshots."));
        let extras: Vec<_> = f
            .extras
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            extras,
            vec![
                ("priority", "2"),
                ("reviewed", "true"),
                ("team", "platform")
            ]
        );
    }

    #[test]
    fn tags_from_one_string_split_on_commas_and_spaces() {
        let f = split("---\ntags: ops, db backup\n---\n").fields;
        assert_eq!(f.tags, vec!["ops", "db", "backup"]);
    }

    #[test]
    fn summary_falls_back_to_description_then_desc_when_non_empty() {
        assert_eq!(
            split("---\nsummary: ''\ndesc: Short one\n---\n")
                .fields
                .summary
                .as_deref(),
            Some("Short one")
        );
        assert_eq!(split("---\ndesc: ''\n---\n").fields.summary, None);
        let f = split("---\ndescription: Long\ndesc: short\n---\n").fields;
        assert_eq!(f.summary.as_deref(), Some("Long"));
        assert!(f.extras.is_empty(), "summary keys never become extras");
    }

    #[test]
    fn bad_yaml_names_the_file_line_and_keeps_the_whole_text() {
        let text = "---\ntitle: ok\ntags: [a, b\nnext: 1\n---\nbody\n";
        let split = split(text);
        let (line, reason) = split.problem.unwrap();
        assert!((3..=5).contains(&line), "line {line}");
        assert!(
            reason.starts_with("front matter is not valid YAML"),
            "{reason}"
        );
        assert!(!reason.contains(" at line "), "{reason}");
        assert_eq!((split.body_start, split.body_line), (0, 1));
        assert_eq!(split.fields, Fields::default());
    }

    #[test]
    fn missing_close_and_non_mapping_are_problems_on_the_opening_line() {
        let open = split("---\ntitle: x\nno end\n");
        assert_eq!(
            open.problem,
            Some((1, "front matter has no closing `---` line".to_string()))
        );
        let list = split("---\n- a\n- b\n---\nbody");
        assert_eq!(list.problem.map(|p| p.0), Some(1));
        assert_eq!(list.body_start, 0);
    }

    #[test]
    fn empty_front_matter_and_dots_close() {
        let s = split("---\n---\nbody");
        assert_eq!((s.body_start, s.body_line, s.problem), (8, 3, None));
        let s = split("---\r\ntitle: x\r\n...\r\nbody");
        assert_eq!(s.fields.title.as_deref(), Some("x"));
        assert_eq!(&"---\r\ntitle: x\r\n...\r\nbody"[s.body_start..], "body");
    }

    #[test]
    fn no_front_matter_when_the_first_line_is_not_a_fence() {
        let s = split("# Title\n---\n");
        assert_eq!((s.body_start, s.body_line, s.problem), (0, 1, None));
        let s = split("");
        assert_eq!((s.body_start, s.problem), (0, None));
    }

    #[test]
    fn dendron_keys_become_extras_as_strings() {
        let f = split("---\nid: lQONqUOX3bFd7L4TMekQ5\ntitle: How We Work\ndesc: ''\nupdated: 1636510062341\ncreated: 1630626288000\nnav_exclude: true\n---\n").fields;
        assert_eq!(f.title.as_deref(), Some("How We Work"));
        assert_eq!(f.summary, None);
        assert_eq!(
            f.extras.get("updated").map(String::as_str),
            Some("1636510062341")
        );
        assert_eq!(
            f.extras.get("created").map(String::as_str),
            Some("1630626288000")
        );
        assert_eq!(
            f.extras.get("id").map(String::as_str),
            Some("lQONqUOX3bFd7L4TMekQ5")
        );
        assert_eq!(
            f.extras.get("nav_exclude").map(String::as_str),
            Some("true")
        );
        assert!(!f.extras.contains_key("desc"));
    }
}
