//! Tags: `#tag` and `#nested/tag` in note text, and tag values from front matter, both
//! normalised to the same names.

use std::ops::Range;

use super::code::{code_ranges, contains};
use super::links::{links, LinkStyle};

/// One `#tag` found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    /// The normalised name: lowercase, without `#`, nested parts joined by `/`.
    pub name: String,
    /// Byte range from the `#` to the tag's last character.
    pub range: Range<usize>,
}

/// The `#tags` of `text` (a note's body, front matter excluded), in text order.
///
/// A tag is `#` then letters, digits, `_`, `-` and `/`, with at least one letter. The `#`
/// must open a word: at the start of the text or after whitespace, `(`, a quote, `,`, `;`,
/// `*` or `{`, so `C#`, `&#123;`, URL fragments (`/page#part`), Markdown anchors (`](#x)`)
/// and headings (`# Title`, `## Title`) are not tags. Nothing inside code or a link counts,
/// and neither do pure numbers (`#123`) or hex colours (`#ff0000`).
pub fn tags(text: &str) -> Vec<Tag> {
    if memchr::memchr(b'#', text.as_bytes()).is_none() {
        return Vec::new();
    }
    let mut skip = code_ranges(text);
    skip.extend(
        links(text, LinkStyle::TargetFirst)
            .into_iter()
            .map(|l| l.range),
    );
    skip.sort_by_key(|r| r.start);
    let skip = disjoint(skip);
    let mut out = Vec::new();
    for (at, _) in text.match_indices('#') {
        if contains(&skip, at) || !opens_word(text, at) {
            continue;
        }
        let body = &text[at + 1..];
        let len: usize = body
            .chars()
            .take_while(|&c| c.is_alphanumeric() || matches!(c, '_' | '-' | '/'))
            .map(char::len_utf8)
            .sum();
        let raw = body[..len].trim_end_matches('/');
        if !raw.starts_with(|c: char| c.is_alphanumeric() || c == '_')
            || !raw.chars().any(char::is_alphabetic)
            || is_hex_colour(raw)
        {
            continue;
        }
        if let Some(name) = normalize_tag(raw) {
            out.push(Tag {
                name,
                range: at..at + 1 + raw.len(),
            });
        }
    }
    out
}

/// One tag value normalised: trimmed, leading `#`s removed, lowercased, empty `/` parts
/// dropped (`#Work//Ops/` → `work/ops`). None when nothing is left.
pub fn normalize_tag(raw: &str) -> Option<String> {
    let t = raw.trim().trim_start_matches('#').trim().to_lowercase();
    let name = t
        .split('/')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("/");
    (!name.is_empty()).then_some(name)
}

/// Front-matter tag values to tag names. Each value may hold several tags separated by
/// commas or whitespace (`tags: "a, b"` is one value; `tags: [a, b]` is two); each tag is
/// normalised by [`normalize_tag`]; repeats are kept once, in first-seen order.
pub fn normalize_tags<I, S>(values: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out: Vec<String> = Vec::new();
    for value in values {
        for piece in value
            .as_ref()
            .split(|c: char| c == ',' || c.is_whitespace())
        {
            if let Some(name) = normalize_tag(piece) {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// Is the `#` at byte `at` the start of a word?
fn opens_word(text: &str, at: usize) -> bool {
    let mut before = text[..at].chars().rev();
    match before.next() {
        None => true,
        Some('(') => before.next() != Some(']'),
        Some(c) => c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';' | '*' | '{'),
    }
}

/// Colours such as `#fff0a0` or `#1e90ff`: three, four, six or eight hex digits, one of
/// them a digit (so the words `#bad` and `#cafe` stay tags).
fn is_hex_colour(raw: &str) -> bool {
    matches!(raw.len(), 3 | 4 | 6 | 8)
        && raw.chars().all(|c| c.is_ascii_hexdigit())
        && raw.chars().any(|c| c.is_ascii_digit())
}

/// Sorted ranges merged where they overlap, so lookups can binary-search them.
fn disjoint(sorted: Vec<Range<usize>>) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(text: &str) -> Vec<String> {
        tags(text).into_iter().map(|t| t.name).collect()
    }

    #[test]
    fn tags_in_text() {
        assert_eq!(
            names("#Ops notes (#db) about \"#Backup\", *#x-y* #a/b/C #area/ and#not #_private"),
            vec!["ops", "db", "backup", "x-y", "a/b/c", "area", "_private"]
        );
        let text = "see #tag.";
        let t = &tags(text)[0];
        assert_eq!(&text[t.range.clone()], "#tag");
    }

    #[test]
    fn what_is_not_a_tag() {
        let text = "# Title\n## Sub\nC# and F#, &#123; #123 #1-2 #ff0000 #1e90ff \
            https://x.org/a#frag http://x.org/#top [go](#anchor) [[Note#Heading]] \
            `#code` issue#5 #\n```\n#include\n```\n";
        assert_eq!(names(text), Vec::<String>::new());
        assert_eq!(names("#cafe #bad #2024q1"), vec!["cafe", "bad", "2024q1"]);
    }

    #[test]
    fn unicode_tags() {
        assert_eq!(
            names("#Café #日本 #naïve/Sub"),
            vec!["café", "日本", "naïve/sub"]
        );
    }

    #[test]
    fn front_matter_values() {
        assert_eq!(normalize_tags(["a, B", "#c", "a"]), vec!["a", "b", "c"]);
        assert_eq!(
            normalize_tags(["Work/Ops  #Home ,, "]),
            vec!["work/ops", "home"]
        );
        assert_eq!(normalize_tags(Vec::<String>::new()), Vec::<String>::new());
        assert_eq!(
            normalize_tag(" ##Work//Ops/ "),
            Some("work/ops".to_string())
        );
        assert_eq!(normalize_tag("#"), None);
        assert_eq!(normalize_tag("/"), None);
    }

    proptest! {
        #[test]
        fn ranges_slice_to_hash_and_name(text in "(#|a|É|1|/|-|_| |\n|`|\\[|\\]|\\(|\\)|C#|&)*") {
            for t in tags(&text) {
                let span = &text[t.range.clone()];
                prop_assert!(span.starts_with('#'));
                prop_assert_eq!(normalize_tag(span), Some(t.name.clone()));
                prop_assert!(!t.name.is_empty() && t.name == t.name.to_lowercase());
            }
        }

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC*") {
            let _ = tags(&text);
            let _ = normalize_tags([text.as_str()]);
        }
    }
}
