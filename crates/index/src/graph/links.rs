//! Links between notes: `[[wiki-links]]` (either label order, headings, embeds) and Markdown
//! links to local files, found outside code; the key a target resolves by; and the
//! resolver from targets to notes.

use std::ops::Range;

use finder_core::FastMap;

use super::code::{code_ranges, contains, covering, overlaps};

/// Which side of the `|` in `[[a|b]]` names the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkStyle {
    /// `[[target|label]]`: Obsidian, Foam, SilverBullet, most wikis.
    #[default]
    TargetFirst,
    /// `[[label|target]]`: Dendron.
    LabelFirst,
}

/// How a link was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkSyntax {
    /// `[[…]]`, or `![[…]]` for an embed.
    Wiki,
    /// `[label](destination)`.
    Markdown,
}

/// One link found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The linked note as written: trimmed, without its heading or block anchor and without
    /// a `dendron://vault/` prefix; a Markdown destination also loses `./`, a query and a
    /// `.md` extension, and is percent-decoded. Empty for a link to a heading of the same
    /// note (`[[#Setup]]`). Resolve it with [`normalize_target`] / [`LinkResolver`].
    pub target: String,
    /// What follows the first `#` of the target (a heading, `^block` id or Dendron range),
    /// or the `^block` of `[[note^block]]`; None when absent or empty.
    pub heading: Option<String>,
    /// The label shown instead of the target, when one is given and not empty.
    pub label: Option<String>,
    /// An embed (`![[note]]`): the note's content is shown in place.
    pub embed: bool,
    /// Wiki or Markdown syntax.
    pub syntax: LinkSyntax,
    /// Byte range of the link in the text: from `[[` to `]]` for wiki-links (an embed's `!`
    /// lies just before it), from `[` to `)` for Markdown links.
    pub range: Range<usize>,
}

/// Every link of `text` (wiki and Markdown) outside code, in text order.
pub fn links(text: &str, style: LinkStyle) -> Vec<Link> {
    // Both kinds open with `[`; most texts have none.
    if memchr::memchr(b'[', text.as_bytes()).is_none() {
        return Vec::new();
    }
    let code = code_ranges(text);
    let mut out = wiki_links_outside(text, style, &code);
    let wiki: Vec<Range<usize>> = out.iter().map(|l| l.range.clone()).collect();
    out.extend(
        markdown_links_outside(text, &code)
            .into_iter()
            .filter(|l| !overlaps(&wiki, &l.range)),
    );
    out.sort_by_key(|l| l.range.start);
    out
}

/// The wiki-links and embeds of `text` outside code, in text order.
pub fn wiki_links(text: &str, style: LinkStyle) -> Vec<Link> {
    wiki_links_outside(text, style, &code_ranges(text))
}

/// The Markdown links of `text` outside code that point at local files: URLs with a scheme
/// (`https:`, `mailto:`), same-page anchors, images and links to assets such as `.png` or
/// `.pdf` are left out.
pub fn markdown_links(text: &str) -> Vec<Link> {
    markdown_links_outside(text, &code_ranges(text))
}

/// The key a link target or a note id resolves by: trimmed, `\` read as `/`, leading `./`
/// and `/` removed, whitespace runs collapsed, lowercased, and a trailing `.md` removed.
/// Path separators and dots are kept: `Dendron.Topic.Lookup` and `dendron.topic.lookup.md`
/// both give `dendron.topic.lookup`, `Library/Std/Config` gives `library/std/config`. Only
/// `.md` goes: in Dendron's dotted names other endings are hierarchy levels
/// (`dendron.topic.markdown` is the note `dendron.topic.markdown.md`).
pub fn normalize_target(target: &str) -> String {
    let slashed = target.trim().replace('\\', "/");
    let mut t = slashed.as_str();
    loop {
        let before = t;
        t = t.strip_prefix("./").unwrap_or(t).trim_start_matches('/');
        if t == before {
            break;
        }
    }
    let mut key = t.split_whitespace().collect::<Vec<_>>().join(" ");
    key = key.to_lowercase();
    if key.len() > 3 && key.ends_with(".md") {
        key.truncate(key.len() - 3);
    }
    key
}

/// Resolves link targets to notes, by [`normalize_target`] keys.
///
/// A target resolves to the note whose id has the same key; else, from a note in a folder,
/// to the note at that path relative to the folder (`../` understood); else to the one note
/// whose path ends with the target as whole segments (`[[Config]]` → `Library/Std/Config.md`
/// when no other note is called `Config`). Note ids are the paths Finder stores (`a/b.md`);
/// a `.markdown` or `.txt` note also answers to its name without the extension. When two notes share a
/// key, the first one given wins.
#[derive(Debug, Clone, Default)]
pub struct LinkResolver {
    keys: FastMap<String, usize>,
    /// Last path segment of each key → the notes with it.
    names: FastMap<String, Vec<usize>>,
    /// Per note: its key, and its key without a `.markdown` / `.txt` extension.
    notes: Vec<(String, Option<String>)>,
}

impl LinkResolver {
    /// A resolver over `note_ids`; [`LinkResolver::resolve`] answers positions in this order.
    pub fn new<I, S>(note_ids: I) -> LinkResolver
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut r = LinkResolver::default();
        for id in note_ids {
            let id = id.as_ref();
            let stem = other_note_extension(id).map(normalize_target);
            r.notes.push((normalize_target(id), stem));
        }
        // Names without an extension never shadow a note's own key, whatever the order.
        for pass in 0..2 {
            for (index, (key, stem)) in r.notes.iter().enumerate() {
                let Some(k) = (if pass == 0 { Some(key) } else { stem.as_ref() }) else {
                    continue;
                };
                let name = k.rsplit('/').next().unwrap_or(k).to_string();
                let names = r.names.entry(name).or_default();
                if !names.contains(&index) {
                    names.push(index);
                }
                r.keys.entry(k.clone()).or_insert(index);
            }
        }
        r
    }

    /// The position of the note `target` points at, linked from the note with id `from`
    /// (for relative paths); None when no single note answers or the target is empty.
    pub fn resolve(&self, from: &str, target: &str) -> Option<usize> {
        let key = normalize_target(target);
        if key.is_empty() {
            return None;
        }
        let relative = key.starts_with("../") || target.trim_start().starts_with("./");
        if !relative {
            if let Some(&i) = self.keys.get(&key) {
                return Some(i);
            }
        }
        let from = normalize_target(from);
        let dir = from.rsplit_once('/').map_or("", |(dir, _)| dir);
        if let Some(&i) = join(dir, &key).and_then(|joined| self.keys.get(&joined)) {
            return Some(i);
        }
        if relative || key.split('/').any(|s| s == ".." || s == ".") {
            return None;
        }
        let name = key.rsplit('/').next().unwrap_or(&key);
        let suffix = format!("/{key}");
        let mut found = self
            .names
            .get(name)?
            .iter()
            .filter(|&&i| {
                self.notes.get(i).is_some_and(|(full, stem)| {
                    [Some(full), stem.as_ref()]
                        .into_iter()
                        .flatten()
                        .any(|k| k == &key || k.ends_with(&suffix))
                })
            })
            .copied();
        let first = found.next()?;
        found.next().is_none().then_some(first)
    }

    /// The number of notes.
    pub fn len(&self) -> usize {
        self.notes.len()
    }

    /// Whether there are no notes.
    pub fn is_empty(&self) -> bool {
        self.notes.is_empty()
    }
}

/// A note id without the `.markdown` or `.txt` its file name ends with (any case).
fn other_note_extension(id: &str) -> Option<&str> {
    let id = id.trim();
    [".markdown", ".txt"]
        .iter()
        .find_map(|ext| {
            let at = id.len().checked_sub(ext.len())?;
            let tail = id.get(at..)?;
            tail.eq_ignore_ascii_case(ext).then(|| &id[..at])
        })
        .filter(|stem| !stem.is_empty() && !stem.ends_with('/'))
}

/// `dir/rel` with `.` and `..` segments applied; None when `..` climbs above the root.
fn join(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

fn wiki_links_outside(text: &str, style: LinkStyle, code: &[Range<usize>]) -> Vec<Link> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(found) = text.get(i..).and_then(|rest| rest.find("[[")) {
        let mut open = i + found;
        if let Some(r) = covering(code, open) {
            i = r.end.max(open + 1);
            continue;
        }
        // `[[[x]]]` links `x`: the innermost pair of brackets opens the link.
        while bytes.get(open + 2) == Some(&b'[') {
            open += 1;
        }
        let start = open + 2;
        let mut j = start;
        let mut close = None;
        while j < bytes.len() {
            match bytes[j] {
                b'\n' => break,
                b'[' if bytes.get(j + 1) == Some(&b'[') => break,
                b']' if bytes.get(j + 1) == Some(&b']') => {
                    close = Some(j);
                    break;
                }
                _ => j += 1,
            }
        }
        let Some(close) = close else {
            // A line break or a new `[[` before any `]]`: this one never closed.
            i = j.max(start);
            continue;
        };
        i = close + 2;
        // Only the opening brackets must lie outside code: a label may hold inline code
        // (`[[`Apply Template`|commands.apply]]`).
        let range = open..close + 2;
        let Some(content) = text.get(start..close) else {
            continue;
        };
        if let Some(link) = parse_wiki(content, style, open > 0 && bytes[open - 1] == b'!', range) {
            out.push(link);
        }
    }
    out
}

/// The parts of the inside of a `[[…]]`.
fn parse_wiki(content: &str, style: LinkStyle, embed: bool, range: Range<usize>) -> Option<Link> {
    if content.trim().is_empty() {
        return None;
    }
    // In tables the pipe is escaped (`[[a\|b]]`); the backslash belongs to the syntax.
    let parts: Vec<&str> = content.split('|').collect();
    let n = parts.len();
    let part = |k: usize| -> &str {
        let p = parts.get(k).copied().unwrap_or("");
        if k + 1 < n {
            p.strip_suffix('\\').unwrap_or(p)
        } else {
            p
        }
    };
    let (target, label) = match (style, n) {
        (_, 1) => (part(0), String::new()),
        (LinkStyle::TargetFirst, _) => (part(0), (1..n).map(part).collect::<Vec<_>>().join("|")),
        (LinkStyle::LabelFirst, _) => (
            part(n - 1),
            (0..n - 1).map(part).collect::<Vec<_>>().join("|"),
        ),
    };
    let (target, heading) = split_anchor(strip_vault(target.trim()));
    if target.is_empty() && heading.is_none() {
        return None;
    }
    let label = label.trim();
    Some(Link {
        target: target.to_string(),
        heading,
        label: (!label.is_empty()).then(|| label.to_string()),
        embed,
        syntax: LinkSyntax::Wiki,
        range,
    })
}

/// `dendron://vault/note` → `note`: Dendron's cross-vault prefix names the vault, not the note.
fn strip_vault(target: &str) -> &str {
    match target.strip_prefix("dendron://") {
        Some(rest) => rest.split_once('/').map_or(rest, |(_, note)| note),
        None => target,
    }
}

/// Splits the target at its first `#` (heading) or else `^` (block), trimming both.
fn split_anchor(target: &str) -> (&str, Option<String>) {
    let (note, anchor) = if let Some((note, anchor)) = target.split_once('#') {
        (note, anchor)
    } else if let Some(at) = target.find('^') {
        (&target[..at], &target[at..])
    } else {
        (target, "")
    };
    let anchor = anchor.trim();
    (
        note.trim(),
        (!anchor.is_empty()).then(|| anchor.to_string()),
    )
}

/// Longest label or destination read, so a line of unclosed brackets stays linear.
const MAX_LABEL: usize = 1_000;
const MAX_DESTINATION: usize = 2_000;

fn markdown_links_outside(text: &str, code: &[Range<usize>]) -> Vec<Link> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(found) = memchr::memchr(b'[', &bytes[i.min(bytes.len())..]) {
        i += found;
        if contains(code, i) {
            i += 1;
            continue;
        }
        let open = i;
        let image = open > 0 && bytes[open - 1] == b'!';
        let Some(label_end) = label_close(bytes, open) else {
            i += 1;
            continue;
        };
        let Some((dest, close)) = destination(text, label_end + 1) else {
            i += 1;
            continue;
        };
        let range = open..close + 1;
        if image {
            i = close + 1;
            continue;
        }
        if let Some((target, heading)) = local_note(dest) {
            let label = text.get(open + 1..label_end).unwrap_or("").trim();
            out.push(Link {
                target,
                heading,
                label: (!label.is_empty()).then(|| label.to_string()),
                embed: false,
                syntax: LinkSyntax::Markdown,
                range,
            });
        }
        i = close + 1;
    }
    out
}

/// The `]` closing the label opened at `open` (brackets nested, backslash escapes, one
/// line), when a `(` follows it.
fn label_close(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = open + 1;
    let end = bytes.len().min(open + 1 + MAX_LABEL);
    while j < end {
        match bytes[j] {
            b'\\' => j += 1,
            b'\n' => return None,
            b'[' => depth += 1,
            b']' if depth == 0 => {
                return (bytes.get(j + 1) == Some(&b'(')).then_some(j);
            }
            b']' => depth -= 1,
            _ => {}
        }
        j += 1;
    }
    None
}

/// The destination of `(dest "title")` whose `(` is at `at`, and the byte of its `)`.
fn destination(text: &str, at: usize) -> Option<(&str, usize)> {
    let bytes = text.as_bytes();
    let end = bytes.len().min(at + 1 + MAX_DESTINATION);
    let mut j = at + 1;
    while j < end && (bytes[j] == b' ' || bytes[j] == b'\t') {
        j += 1;
    }
    let dest_start;
    let dest_end;
    if j < end && bytes[j] == b'<' {
        dest_start = j + 1;
        let close = bytes[dest_start..end]
            .iter()
            .position(|&b| b == b'>' || b == b'\n')?;
        dest_end = dest_start + close;
        if bytes[dest_end] != b'>' {
            return None;
        }
        j = dest_end + 1;
    } else {
        dest_start = j;
        let mut depth = 0usize;
        while j < end {
            match bytes[j] {
                // an escape covers ASCII punctuation only (a `\` before a newline is a
                // backslash, and the newline still ends the destination)
                b'\\' if bytes.get(j + 1).is_some_and(u8::is_ascii_punctuation) => j += 1,
                b'(' => depth += 1,
                b')' if depth == 0 => break,
                b')' => depth -= 1,
                b if b.is_ascii_whitespace() || b.is_ascii_control() => break,
                _ => {}
            }
            j += 1;
        }
        dest_end = j.min(end);
    }
    while j < end && (bytes[j] == b' ' || bytes[j] == b'\t') {
        j += 1;
    }
    // An optional title: "…", '…' or (…).
    if let Some(&q) = bytes
        .get(j)
        .filter(|&&b| b == b'"' || b == b'\'' || b == b'(')
    {
        let closing = if q == b'(' { b')' } else { q };
        let rest = bytes.get(j + 1..end)?;
        j += 2 + rest.iter().position(|&b| b == closing)?;
        while j < end && (bytes[j] == b' ' || bytes[j] == b'\t') {
            j += 1;
        }
    }
    if j >= end || bytes[j] != b')' {
        return None;
    }
    Some((text.get(dest_start..dest_end)?, j))
}

/// Extensions of files that are not notes.
const ASSETS: &[&str] = &[
    "png",
    "jpg",
    "jpeg",
    "gif",
    "svg",
    "webp",
    "bmp",
    "ico",
    "tif",
    "tiff",
    "avif",
    "pdf",
    "zip",
    "gz",
    "tgz",
    "tar",
    "7z",
    "mp3",
    "mp4",
    "m4a",
    "wav",
    "ogg",
    "webm",
    "mov",
    "avi",
    "mkv",
    "css",
    "js",
    "html",
    "htm",
    "xml",
    "csv",
    "json",
    "yaml",
    "yml",
    "doc",
    "docx",
    "xls",
    "xlsx",
    "ppt",
    "pptx",
    "excalidraw",
    "canvas",
];

/// The target and heading of a Markdown destination that points at a local note.
fn local_note(dest: &str) -> Option<(String, Option<String>)> {
    let dest = dest.trim();
    if dest.is_empty() || dest.starts_with('#') || dest.starts_with("//") || has_scheme(dest) {
        return None;
    }
    let (path, heading) = match dest.split_once('#') {
        Some((path, heading)) => (path, Some(heading)),
        None => (dest, None),
    };
    let path = path.split('?').next().unwrap_or(path);
    let decoded = percent_decode(path);
    let mut path = decoded.trim();
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    if let Some((stem, ext)) = name.rsplit_once('.') {
        let ext = ext.to_ascii_lowercase();
        if ext == "md" || ext == "markdown" {
            if stem.is_empty() {
                return None;
            }
            path = &path[..path.len() - ext.len() - 1];
        } else if ASSETS.contains(&ext.as_str()) {
            return None;
        }
    }
    if path.is_empty() || path.ends_with('/') {
        return None;
    }
    let heading = heading
        .map(|h| percent_decode(h).trim().to_string())
        .filter(|h| !h.is_empty());
    Some((path.to_string(), heading))
}

/// `scheme:` per RFC 3986 (a letter, then letters, digits, `+`, `-`, `.`); one letter is a
/// Windows drive, which no note link uses either.
fn has_scheme(dest: &str) -> bool {
    let Some((scheme, _)) = dest.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `%XX` escapes decoded; text that would not be UTF-8 after decoding is kept as written.
fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' {
            if let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|&b| hex(b)),
                bytes.get(i + 2).and_then(|&b| hex(b)),
            ) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `target #heading |label` per link, `!` for embeds, `md:` for Markdown links.
    fn check(text: &str, style: LinkStyle) -> Vec<String> {
        links(text, style)
            .into_iter()
            .map(|l| {
                let mut s = String::new();
                if l.embed {
                    s.push('!');
                }
                if l.syntax == LinkSyntax::Markdown {
                    s.push_str("md:");
                }
                s.push_str(&l.target);
                if let Some(h) = l.heading {
                    s.push_str(&format!(" #{h}"));
                }
                if let Some(label) = l.label {
                    s.push_str(&format!(" |{label}"));
                }
                s
            })
            .collect()
    }

    #[test]
    fn target_first_forms() {
        let text = "[[Note]] [[ Note A | the label ]] [[Note#Setup]] [[Note#Setup|go]] [[#Local]]";
        assert_eq!(
            check(text, LinkStyle::TargetFirst),
            vec![
                "Note",
                "Note A |the label",
                "Note #Setup",
                "Note #Setup |go",
                " #Local"
            ]
        );
    }

    #[test]
    fn label_first_takes_the_last_part_as_target() {
        let text = "See [[the handbook|dendron.handbook]] and [[Docs|dendron://dendron.dendron-site/dendron.ref.commands#configure]].";
        assert_eq!(
            check(text, LinkStyle::LabelFirst),
            vec![
                "dendron.handbook |the handbook",
                "dendron.ref.commands #configure |Docs"
            ]
        );
        assert_eq!(
            check(text, LinkStyle::TargetFirst),
            vec![
                "the handbook |dendron.handbook",
                "Docs |dendron://dendron.dendron-site/dendron.ref.commands#configure"
            ]
        );
    }

    #[test]
    fn embeds_blocks_and_dendron_ranges() {
        let text = "![[careers.mission]]\n![[dendron#motivation,1:#*]] [[changelog^kSChN1jT6OMc]] [[x#^blk]]";
        assert_eq!(
            check(text, LinkStyle::LabelFirst),
            vec![
                "!careers.mission",
                "!dendron #motivation,1:#*",
                "changelog #^kSChN1jT6OMc",
                "x #^blk"
            ]
        );
        let l = &wiki_links(text, LinkStyle::LabelFirst)[0];
        assert_eq!(
            (l.range.clone(), &text[l.range.clone()]),
            (1..20, "[[careers.mission]]")
        );
    }

    #[test]
    fn code_is_skipped() {
        let text = "[[a]] `[[b]]` ``x [[c]] x``\n\n```md\n[[d]]\n[e](e.md)\n```\n~~~\n[[f]]\n~~~\n[[g]] `[[h]]";
        assert_eq!(check(text, LinkStyle::TargetFirst), vec!["a", "g", "h"]);
        // Code inside a label does not hide the link.
        assert_eq!(
            check(
                "Run [[`Dendron: Apply Template`|templates.apply]] or [`x`](y.md)",
                LinkStyle::LabelFirst
            ),
            vec!["templates.apply |`Dendron: Apply Template`", "md:y |`x`"]
        );
    }

    #[test]
    fn unclosed_nested_and_multiline_brackets() {
        assert_eq!(
            check(
                "[[a [[b]] [[c\nd]] [[]] [[ | ]] [[[e]]]",
                LinkStyle::TargetFirst
            ),
            vec!["b", "e"]
        );
        // Dendron's changelog has this shape: the inner link is the link.
        let text = "type `[[^` to find blocks. More details [[here|dendron._ref.intellisense]]";
        assert_eq!(
            check(text, LinkStyle::LabelFirst),
            vec!["dendron._ref.intellisense |here"]
        );
    }

    #[test]
    fn escaped_pipe_in_tables() {
        assert_eq!(
            check("| [[Note\\|label]] |", LinkStyle::TargetFirst),
            vec!["Note |label"]
        );
        assert_eq!(
            check("| [[label\\|Note]] |", LinkStyle::LabelFirst),
            vec!["Note |label"]
        );
    }

    #[test]
    fn markdown_links_to_local_notes_only() {
        let text = "[one](other-note.md) [two](./dir/My%20Note.md#Part) [p](people.kevin-lin) \
            [w](https://x.org/a.md) [m](mailto:a@b.c) [c](command:dendron.initWS) [h](#top) \
            ![img](a.png) [pdf](doc.pdf) [t](<with space.md> \"Title\") [q](n.md?x=1) [u](//cdn/x)";
        assert_eq!(
            check(text, LinkStyle::TargetFirst),
            vec![
                "md:other-note |one",
                "md:dir/My Note #Part |two",
                "md:people.kevin-lin |p",
                "md:with space |t",
                "md:n |q"
            ]
        );
        let l = &markdown_links("x [a [b] c](n.md) y")[0];
        assert_eq!(
            (l.label.as_deref(), l.range.clone()),
            (Some("a [b] c"), 2..17)
        );
        assert!(markdown_links("[a](b c)").is_empty());
        assert!(markdown_links("[a] (b.md)").is_empty());
    }

    #[test]
    fn wiki_and_markdown_links_in_order_without_double_counting() {
        assert_eq!(
            check("[x](a.md) [[b]] [[c]](d.md)", LinkStyle::TargetFirst),
            vec!["md:a |x", "b", "c"]
        );
    }

    #[test]
    fn normalized_keys() {
        assert_eq!(
            normalize_target(" Dendron.Topic.Lookup "),
            "dendron.topic.lookup"
        );
        assert_eq!(
            normalize_target("dendron.topic.lookup.md"),
            "dendron.topic.lookup"
        );
        assert_eq!(
            normalize_target("./Library/Std/Config.MD"),
            "library/std/config"
        );
        assert_eq!(normalize_target("dir\\My   Note.md"), "dir/my note");
        assert_eq!(
            normalize_target("Dendron.Topic.Markdown"),
            "dendron.topic.markdown"
        );
        assert_eq!(normalize_target("/abs/x"), "abs/x");
        assert_eq!(normalize_target("notes.txt"), "notes.txt");
        assert_eq!(normalize_target(".md"), ".md");
        assert_eq!(normalize_target(""), "");
    }

    #[test]
    fn resolver_exact_relative_then_unique_name() {
        let ids = [
            "dendron.topic.lookup.md",
            "Library/Std/Config.md",
            "a/x.md",
            "b/x.md",
            "a/sub/y.md",
            "plain.txt",
            "dendron.topic.markdown.md",
            "dir/long.markdown",
        ];
        let r = LinkResolver::new(ids);
        assert_eq!(r.len(), 8);
        assert_eq!(r.resolve("q.md", "dendron.topic.markdown"), Some(6));
        assert_eq!(r.resolve("q.md", "dendron.topic.markdown.md"), Some(6));
        assert_eq!(r.resolve("q.md", "dir/long"), Some(7));
        assert_eq!(r.resolve("q.md", "long.markdown"), Some(7));
        assert_eq!(r.resolve("q.md", "long"), Some(7));
        assert_eq!(r.resolve("q.md", "Dendron.Topic.Lookup"), Some(0));
        assert_eq!(r.resolve("q.md", "dendron.topic"), None);
        assert_eq!(r.resolve("q.md", "library/std/config"), Some(1));
        assert_eq!(r.resolve("q.md", "Config"), Some(1));
        assert_eq!(r.resolve("q.md", "Std/Config"), Some(1));
        assert_eq!(r.resolve("q.md", "td/Config"), None);
        assert_eq!(r.resolve("q.md", "x"), None, "two notes are called x");
        assert_eq!(r.resolve("a/sub/y.md", "x"), None);
        assert_eq!(r.resolve("a/sub/y.md", "../x"), Some(2));
        assert_eq!(r.resolve("a/y.md", "./sub/y"), Some(4));
        assert_eq!(r.resolve("a/z.md", "x"), Some(2), "same folder first");
        assert_eq!(r.resolve("q.md", "../x"), None);
        assert_eq!(r.resolve("q.md", "plain"), Some(5));
        assert_eq!(r.resolve("q.md", "plain.txt"), Some(5));
        assert_eq!(r.resolve("q.md", ""), None);
    }

    proptest! {
        #[test]
        fn never_panics_and_ranges_slice_to_links(text in "(\\[|\\]|!|\\||#|`|\\(|\\)|\n|a|é|\\\\| |\\.md|~~~|http:)*") {
            for l in links(&text, LinkStyle::TargetFirst).into_iter().chain(links(&text, LinkStyle::LabelFirst)) {
                let span = &text[l.range.clone()];
                match l.syntax {
                    LinkSyntax::Wiki => {
                        prop_assert!(span.starts_with("[[") && span.ends_with("]]"), "{span:?}");
                        prop_assert_eq!(l.embed, text[..l.range.start].ends_with('!'));
                    }
                    LinkSyntax::Markdown => prop_assert!(span.starts_with('[') && span.ends_with(')')),
                }
                prop_assert!(!l.target.contains('\n'));
            }
            let _ = normalize_target(&text);
        }

        #[test]
        fn arbitrary_unicode_never_panics(text in "\\PC*") {
            let found = links(&text, LinkStyle::LabelFirst);
            for l in found {
                prop_assert!(text.get(l.range.clone()).is_some());
            }
        }
    }
}
