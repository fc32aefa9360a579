//! Derived summaries: the lead text of a body with Markdown markup stripped, whitespace
//! collapsed and cut at a sentence or word boundary.

use super::boundary::{boundary, Boundary};
use super::markdown::{fence_open, heading};

/// Lead-text summary of `body`, at most `max_chars` characters. Headings, code blocks,
/// rules, images and embeds are left out (a body of nothing but headings is summarised by
/// them); bullets, quote marks, emphasis, code ticks and link syntax are stripped (link
/// labels stay).
pub fn derive_summary(body: &str, max_chars: usize) -> String {
    if max_chars == 0 {
        return String::new();
    }
    let mut lead = String::new();
    let mut headings = String::new();
    let mut chars = 0;
    let mut fence: Option<(char, usize)> = None;
    for line in body.lines() {
        if let Some((marker, len)) = fence {
            let t = line.trim();
            if t.chars().count() >= len && t.chars().all(|c| c == marker) {
                fence = None;
            }
            continue;
        }
        if let Some(open) = fence_open(line) {
            fence = Some(open);
            continue;
        }
        if let Some((_, title)) = heading(line) {
            // Headings repeat the title or name sections; the prose under them says more.
            push_words(&mut headings, &strip_inline(&title));
            continue;
        }
        let text = strip_inline(line_content(line));
        if text.is_empty() {
            continue;
        }
        if !lead.is_empty() {
            lead.push(' ');
            chars += 1;
        }
        chars += text.chars().count();
        lead.push_str(&text);
        // Past the budget the cut point is known; the rest of the body cannot change it.
        if chars > max_chars {
            break;
        }
    }
    if lead.is_empty() {
        return clip(&headings, max_chars);
    }
    clip(&lead, max_chars)
}

fn push_words(out: &mut String, text: &str) {
    if !text.is_empty() && out.chars().count() <= 2_000 {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(text);
    }
}

/// A line without its block markup: quote marks, list bullets, task boxes. Rules and table
/// separators have no content.
fn line_content(line: &str) -> &str {
    let mut t = line.trim();
    if is_rule(t) {
        return "";
    }
    loop {
        let before = t;
        t = t.strip_prefix('>').unwrap_or(t).trim_start();
        for bullet in ["- ", "* ", "+ ", "[ ] ", "[x] ", "[X] "] {
            t = t.strip_prefix(bullet).unwrap_or(t).trim_start();
        }
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && (t[digits..].starts_with(". ") || t[digits..].starts_with(") ")) {
            t = t[digits + 2..].trim_start();
        }
        if t == before {
            return t;
        }
    }
}

/// `---`, `***`, `___` rules and `|---|:--|` table separators.
fn is_rule(t: &str) -> bool {
    let marks: Vec<char> = t.chars().filter(|c| !c.is_whitespace()).collect();
    let thematic = marks.len() >= 3
        && ['-', '*', '_']
            .iter()
            .any(|&m| marks.iter().all(|&c| c == m));
    let table = marks.contains(&'-') && marks.iter().all(|c| matches!(c, '|' | '-' | ':'));
    thematic || table
}

/// Inline markup removed: `![[embed]]` and `![alt](image)` dropped, `[[label|target]]` → label (label-first, as
/// Dendron writes them), `[[target]]` → target, `[text](url)` → text,
/// code ticks, `*`, `~~` and word-edge `_` dropped. Whitespace is collapsed.
pub(super) fn strip_inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut prev: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("![[") {
            if let Some(close) = after.find("]]") {
                rest = &after[close + 2..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix("[[") {
            if let Some(close) = after.find("]]") {
                let inner = &after[..close];
                out.push_str(inner.split('|').next().unwrap_or(inner));
                rest = &after[close + 2..];
                continue;
            }
        }
        if let Some((label, len)) = markdown_link(rest) {
            if !rest.starts_with('!') {
                out.push_str(label);
            }
            rest = &rest[len..];
            continue;
        }
        rest = &rest[c.len_utf8()..];
        let next = rest.chars().next();
        let dropped = match c {
            '`' | '*' => true,
            '~' => next == Some('~') || prev == Some('~'),
            // `snake_case` keeps its underscore; `_emphasis_` loses it.
            '_' => {
                !(prev.is_some_and(char::is_alphanumeric)
                    && next.is_some_and(char::is_alphanumeric))
            }
            _ => false,
        };
        if !dropped {
            out.push(c);
        }
        prev = Some(c);
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `[label](url)` or `![alt](url)` at the start of `text`: the label and the syntax length.
fn markdown_link(text: &str) -> Option<(&str, usize)> {
    let open = if text.starts_with("![") {
        2
    } else if text.starts_with('[') {
        1
    } else {
        return None;
    };
    let close = text[open..].find(']')? + open;
    let target = text[close + 1..].strip_prefix('(')?;
    let end = target.find(')')?;
    Some((&text[open..close], close + 2 + end + 1))
}

/// `text` cut to at most `max_chars` characters: at a sentence end when one keeps at least
/// half, else at a word break with an ellipsis.
fn clip(text: &str, max_chars: usize) -> String {
    match boundary(text, max_chars) {
        Boundary::Whole => return text.to_string(),
        Boundary::Sentence(end) => return text[..end].to_string(),
        Boundary::Word(_) | Boundary::Char(_) => {}
    }
    // Leave room for the ellipsis.
    let budget = max_chars - 1;
    if budget == 0 {
        return "…".to_string();
    }
    let end = boundary(text, budget).end(text.len());
    format!("{}…", text[..end].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_stripped_and_whitespace_collapsed() {
        let body = "# Deploy\n\n- Run **the** `make ship` target.\n- See [[the runbook|ops.runbook]] and [docs](https://x.y/z).\n";
        assert_eq!(
            derive_summary(body, 280),
            "Run the make ship target. See the runbook and docs."
        );
    }

    #[test]
    fn code_blocks_embeds_and_rules_are_skipped() {
        let body = "![[asset.images]]\n\n---\n\n```sh\nrm -rf /\n```\n> Quoted _words_ keep snake_case.\n1. first\n| a | b |\n|---|:-:|\n";
        assert_eq!(
            derive_summary(body, 280),
            "Quoted words keep snake_case. first | a | b |"
        );
    }

    #[test]
    fn cut_at_a_sentence_end_when_it_keeps_half() {
        let body = "The backup runs nightly. It keeps thirty days of snapshots in cold storage.";
        assert_eq!(derive_summary(body, 40), "The backup runs nightly.");
    }

    #[test]
    fn cut_at_a_word_with_an_ellipsis_otherwise() {
        let body = "Tokens expire after an hour and clients must reauthenticate";
        let s = derive_summary(body, 30);
        assert_eq!(s, "Tokens expire after an hour…");
        assert!(s.chars().count() <= 30);
    }

    #[test]
    fn never_longer_than_the_budget() {
        for max in 1..50 {
            let s = derive_summary(
                "ααααααααααααααααααααααααααααααααααααααααααααααααααααα β",
                max,
            );
            assert!(s.chars().count() <= max, "{max}: {s}");
        }
        assert_eq!(derive_summary("anything", 0), "");
        assert_eq!(derive_summary("", 100), "");
    }

    #[test]
    fn headings_only_bodies_are_summarised_by_their_headings() {
        assert_eq!(
            derive_summary("# Index\n\n## Part one\n### Part *two*\n", 280),
            "Index Part one Part two"
        );
        assert_eq!(
            derive_summary("## Heading\n\n- lead item\n", 280),
            "lead item"
        );
    }

    #[test]
    fn images_are_dropped_and_links_keep_labels() {
        assert_eq!(
            strip_inline("![Welcome screen](a.png) shown [here](b.md)"),
            "shown here"
        );
        assert_eq!(strip_inline("~~old~~ new [[target]]"), "old new target");
        assert_eq!(
            strip_inline("unclosed [[link and [bracket"),
            "unclosed [[link and [bracket"
        );
    }
}
