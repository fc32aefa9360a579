//! One note file to a source: for Markdown or plain text the UTF-8 check, BOM, front
//! matter, title, summary and fragments; HTML, DOCX, Org and PDF are read into Markdown-shaped
//! text first (`formats`).

use std::path::Path;

use finder_core::{Envelope, IndexSettings};

use super::formats::{self, Converted, Format};
use super::front_matter;
use super::markdown::{blocks, BlockKind};
use super::summary::strip_inline;
use super::{clip_title, derive_summary, fragment};
use crate::document::{Problem, SourceDoc};

const BOM: &str = "\u{feff}";

/// Reads the file at `path` (source id `id`) and sends its source and problems to `sink`.
pub(super) fn read_note(
    id: &str,
    path: &Path,
    origin: &str,
    settings: &IndexSettings,
    sink: &mut dyn FnMut(Result<SourceDoc, Problem>),
) {
    match std::fs::read(path) {
        Ok(bytes) => note_from_bytes(id, &bytes, origin, settings)
            .into_iter()
            .for_each(sink),
        // Gone between the walk and the read (renamed or deleted while a run was reading):
        // as if the walk had not listed it. Its removal or new name is the next run's.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => sink(Err(problem(
            id.to_string(),
            format!("cannot read file: {e}"),
            id,
        ))),
    }
}

/// The source and problems of one note, the source first: the writer takes an id named by a
/// problem before its source as a second source with that id. A note whose front matter cannot be
/// read is still indexed, whole; a note that is not UTF-8 is not.
pub(crate) fn note_from_bytes(
    id: &str,
    bytes: &[u8],
    origin: &str,
    settings: &IndexSettings,
) -> Vec<Result<SourceDoc, Problem>> {
    if let Some(format) = formats::format_of(id) {
        return vec![document(id, format, bytes, origin, settings)];
    }
    let line_of = |at: usize| 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count();
    if bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]) {
        return vec![Err(problem(
            id.to_string(),
            "UTF-16 text (byte-order mark); save it as UTF-8 to index it".to_string(),
            id,
        ))];
    }
    // A NUL byte is valid UTF-8 but never in a text note: the file is binary (an image or an
    // archive named `.md`), and its "words" would only pollute the index.
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return vec![Err(problem(
            id.to_string(),
            format!("binary file (NUL byte at offset {at}); not indexed"),
            id,
        ))];
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let at = e.valid_up_to();
            return vec![Err(problem(
                format!("{id}:{}", line_of(at)),
                format!("not valid UTF-8 (byte offset {at})"),
                id,
            ))];
        }
    };
    let skip = if text.starts_with(BOM) { BOM.len() } else { 0 };
    let split = front_matter::split(&text[skip..]);
    let problems: Vec<Result<SourceDoc, Problem>> = split
        .problem
        .into_iter()
        .map(|(line, reason)| Err(problem(format!("{id}:{line}"), reason, id)))
        .collect();
    let body_start = skip + split.body_start;
    let body = &text[body_start..];
    let fragments = fragment(
        body,
        body_start as u64,
        split.body_line,
        settings.fragment_max_chars,
    );
    let mut out = vec![Ok(source(
        id,
        origin,
        bytes,
        body,
        split.fields,
        fragments,
        settings,
    ))];
    out.extend(problems);
    out
}

/// A document of another format: read into text, then a source like a note's, its
/// fragments numbered by the lines of that text.
fn document(
    id: &str,
    format: Format,
    bytes: &[u8],
    origin: &str,
    settings: &IndexSettings,
) -> Result<SourceDoc, Problem> {
    let Converted {
        text,
        title,
        date,
        tags,
        summary,
        extras,
        page_lines,
    } = formats::convert(format, bytes).map_err(|reason| problem(id.to_string(), reason, id))?;
    let mut fragments = fragment(&text, 0, 1, settings.fragment_max_chars);
    for f in &mut fragments {
        f.extent.page = formats::page_of(&page_lines, f.extent.line_start);
    }
    let fields = front_matter::Fields {
        title: title.filter(|t| !t.is_empty()),
        date,
        tags,
        summary,
        extras,
    };
    Ok(source(
        id, origin, bytes, &text, fields, fragments, settings,
    ))
}

/// The source of a file whose text is `body`: what its own fields say, the rest derived (the
/// title from the first level-one heading or the file name, the summary from the text).
fn source(
    id: &str,
    origin: &str,
    bytes: &[u8],
    body: &str,
    fields: front_matter::Fields,
    fragments: Vec<crate::document::FragmentDoc>,
    settings: &IndexSettings,
) -> SourceDoc {
    SourceDoc {
        vector: None,
        entity: false,
        aliases: Vec::new(),
        relations: Vec::new(),
        id: id.to_string(),
        origin: origin.to_string(),
        envelope: Envelope {
            title: clip_title(
                fields
                    .title
                    .or_else(|| first_title(body))
                    .unwrap_or_else(|| stem(id)),
            ),
            path: id.to_string(),
            date: fields.date,
            tags: fields.tags,
            extras: fields.extras,
        },
        summary: fields
            .summary
            .unwrap_or_else(|| derive_summary(body, settings.summary_max_chars)),
        hash: blake3::hash(bytes).to_hex().to_string(),
        fragments,
    }
}

fn problem(place: String, reason: String, id: &str) -> Problem {
    Problem {
        place,
        reason,
        source_id: Some(id.to_string()),
    }
}

/// The text of the first level-one heading (outside code blocks), markup stripped.
fn first_title(body: &str) -> Option<String> {
    blocks(body).into_iter().find_map(|b| match b.kind {
        BlockKind::Heading { level: 1, title } => {
            Some(strip_inline(&title)).filter(|t| !t.is_empty())
        }
        _ => None,
    })
}

/// The file name without its last extension: `a.b.c.md` → `a.b.c`.
fn stem(id: &str) -> String {
    let name = id.rsplit('/').next().unwrap_or(id);
    name.rsplit_once('.')
        .map_or(name, |(stem, _)| stem)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> IndexSettings {
        IndexSettings::default()
    }

    #[test]
    fn a_note_gone_before_its_read_is_neither_source_nor_problem() {
        let dir = tempfile::tempdir().unwrap();
        let mut got = 0;
        read_note(
            "moved.md",
            &dir.path().join("moved.md"),
            "notes",
            &settings(),
            &mut |_| got += 1,
        );
        assert_eq!(got, 0);
    }

    fn one(id: &str, bytes: &[u8]) -> (Vec<Problem>, Option<SourceDoc>) {
        let mut problems = Vec::new();
        let mut source = None;
        for item in note_from_bytes(id, bytes, "origin", &settings()) {
            match item {
                Ok(s) => source = Some(s),
                Err(p) => problems.push(p),
            }
        }
        (problems, source)
    }

    /// Every fragment's extent slices the file to exactly its text.
    fn assert_extents(bytes: &[u8], source: &SourceDoc) {
        for f in &source.fragments {
            let e = f.extent;
            assert_eq!(
                &bytes[e.byte_start as usize..e.byte_end as usize],
                f.text.as_bytes()
            );
            let before = &bytes[..e.byte_start as usize];
            assert_eq!(
                e.line_start as usize,
                1 + before.iter().filter(|&&b| b == b'\n').count()
            );
        }
    }

    #[test]
    fn front_matter_fills_the_envelope() {
        let file = b"---\ntitle: Restore a backup\ndate: 2024-05-02\ntags: [ops, db]\nsummary: How to restore.\nteam: platform\nreviewed: true\npriority: 3\n---\n# Ignored heading\n\nSteps here.\n";
        let (problems, source) = one("ops/restore.md", file);
        assert!(problems.is_empty());
        let s = source.unwrap();
        assert_eq!(s.id, "ops/restore.md");
        assert_eq!(s.origin, "origin");
        assert_eq!(s.envelope.title, "Restore a backup");
        assert_eq!(s.envelope.path, "ops/restore.md");
        assert_eq!(s.envelope.date.as_deref(), Some("2024-05-02"));
        assert_eq!(s.envelope.tags, vec!["ops", "db"]);
        assert_eq!(
            s.envelope.extras.get("team").map(String::as_str),
            Some("platform")
        );
        assert_eq!(
            s.envelope.extras.get("reviewed").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            s.envelope.extras.get("priority").map(String::as_str),
            Some("3")
        );
        assert_eq!(s.summary, "How to restore.");
        assert_eq!(s.hash, blake3::hash(file).to_hex().to_string());
        assert_eq!(s.fragments.len(), 1);
        assert_eq!(s.fragments[0].text, "# Ignored heading\n\nSteps here.");
        assert_eq!(
            (
                s.fragments[0].extent.line_start,
                s.fragments[0].extent.line_end
            ),
            (10, 12)
        );
        assert_extents(file, &s);
    }

    #[test]
    fn title_from_first_heading_then_stem_and_summary_derived() {
        let (_, s) = one(
            "a/b.md",
            b"Lead text.\n\n```\n# not this\n```\n# Real Title\n",
        );
        let s = s.unwrap();
        assert_eq!(s.envelope.title, "Real Title");
        assert_eq!(s.summary, "Lead text.");
        let (_, s) = one("notes/ops.deploy.runbook.md", b"## Only a level two\n");
        assert_eq!(s.unwrap().envelope.title, "ops.deploy.runbook");
    }

    #[test]
    fn broken_yaml_is_a_problem_and_the_whole_file_is_indexed() {
        let file = b"---\ntitle: [unclosed\n---\nBody text.\n";
        let (problems, s) = one("x.md", file);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].place.starts_with("x.md:"), "{:?}", problems[0]);
        assert!(problems[0].reason.contains("YAML"));
        assert_eq!(problems[0].source_id.as_deref(), Some("x.md"));
        let s = s.unwrap();
        assert_eq!(s.envelope.title, "x");
        assert_eq!(s.fragments[0].extent.byte_start, 0);
        assert!(s.fragments.iter().any(|f| f.text.contains("Body text.")));
        assert_extents(file, &s);
    }

    #[test]
    fn no_closing_fence_names_line_one() {
        let (problems, s) = one("n.md", b"---\ntitle: x\nsome text\n");
        assert_eq!(problems[0].place, "n.md:1");
        assert_eq!(problems[0].reason, "front matter has no closing `---` line");
        assert_eq!(s.unwrap().fragments[0].text, "---\ntitle: x\nsome text");
    }

    #[test]
    fn bom_is_skipped_but_counted_in_offsets() {
        let file = "\u{feff}---\ntitle: Bom\n---\nHello\n".as_bytes();
        let (problems, s) = one("bom.md", file);
        assert!(problems.is_empty());
        let s = s.unwrap();
        assert_eq!(s.envelope.title, "Bom");
        assert_eq!(s.fragments[0].extent.byte_start, 3 + 19);
        assert_eq!(s.fragments[0].extent.line_start, 4);
        assert_extents(file, &s);
        let (_, s) = one("plain.txt", "\u{feff}# T\nx".as_bytes());
        let s = s.unwrap();
        assert_eq!(s.envelope.title, "T");
        assert_eq!(s.fragments[0].extent.byte_start, 3);
    }

    #[test]
    fn non_utf8_names_line_and_offset() {
        let (problems, s) = one("bad.md", b"ok line\nsecond \xff\xfe line\n");
        assert!(s.is_none());
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].place, "bad.md:2");
        assert_eq!(problems[0].reason, "not valid UTF-8 (byte offset 15)");
        assert_eq!(problems[0].source_id.as_deref(), Some("bad.md"));
    }

    #[test]
    fn binary_and_utf16_files_are_refused_with_the_place() {
        let (problems, s) = one("img.md", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
        assert!(s.is_none());
        assert_eq!(problems[0].place, "img.md");
        assert_eq!(
            problems[0].reason,
            "binary file (NUL byte at offset 8); not indexed"
        );
        let (problems, s) = one("nul.md", b"text\0more");
        assert!(s.is_none());
        assert_eq!(problems[0].place, "nul.md");
        let (problems, s) = one("wide.md", b"\xff\xfe#\0 \0T\0");
        assert!(s.is_none());
        assert_eq!(problems[0].place, "wide.md");
        assert!(
            problems[0].reason.starts_with("UTF-16 text"),
            "{problems:?}"
        );
    }

    #[test]
    fn runaway_titles_are_cut() {
        let heading = format!("# {}\n\nbody\n", "word ".repeat(10_000));
        let (_, s) = one("long.md", heading.as_bytes());
        let title = s.unwrap().envelope.title;
        assert!(
            title.chars().count() <= super::super::MAX_TITLE_CHARS,
            "{}",
            title.len()
        );
        assert!(title.ends_with("word…"), "{title}");
        let (_, s) = one(
            "x.md",
            format!("---\ntitle: {}\n---\n", "é".repeat(2_000)).as_bytes(),
        );
        let title = s.unwrap().envelope.title;
        assert_eq!(title.chars().count(), super::super::MAX_TITLE_CHARS);
    }

    #[test]
    fn empty_file_is_a_source_without_fragments() {
        let (problems, s) = one("dir/empty.md", b"");
        assert!(problems.is_empty());
        let s = s.unwrap();
        assert_eq!(s.envelope.title, "empty");
        assert_eq!(s.summary, "");
        assert!(s.fragments.is_empty());
    }

    #[test]
    fn dendron_note_keeps_label_first_links_in_text() {
        let file = b"---\nid: abc123\ntitle: How We Work\ndesc: ''\nupdated: 1636510062341\ncreated: 1630626288000\n---\n\n- See [[the handbook|dendron.handbook]] first\n";
        let (problems, s) = one("careers.how-we-work.md", file);
        assert!(problems.is_empty());
        let s = s.unwrap();
        assert_eq!(s.envelope.title, "How We Work");
        assert_eq!(
            s.envelope.extras.get("updated").map(String::as_str),
            Some("1636510062341")
        );
        assert_eq!(
            s.envelope.extras.get("created").map(String::as_str),
            Some("1630626288000")
        );
        assert_eq!(
            s.envelope.extras.get("id").map(String::as_str),
            Some("abc123")
        );
        assert_eq!(s.summary, "See the handbook first");
        assert_eq!(
            s.fragments[0].text,
            "- See [[the handbook|dendron.handbook]] first"
        );
        assert_extents(file, &s);
    }

    #[test]
    fn crlf_note_extents_hold() {
        let file = b"---\r\ntitle: Win\r\n---\r\n# A\r\n\r\npara one\r\n\r\n## B\r\ntext\r\n";
        let (problems, s) = one("win.md", file);
        assert!(problems.is_empty());
        let s = s.unwrap();
        assert_eq!(s.fragments.len(), 2);
        assert_eq!(s.fragments[1].heading.as_deref(), Some("A > B"));
        assert_extents(file, &s);
    }
}
