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

/// `---`, `***`, `___` rules and `|---|:--|` table separators. A line of prose is told by its
/// first mark, without reading the rest.
fn is_rule(t: &str) -> bool {
    let mut marks = t.chars().filter(|c| !c.is_whitespace());
    let Some(first) = marks.next() else {
        return false;
    };
    if !matches!(first, '-' | '*' | '_' | '|' | ':') {
        return false;
    }
    // Whether every mark so far is `first`, how many, whether all are table marks, any `-`.
    let (mut same, mut count, mut table, mut dash) =
        (true, 1, first != '*' && first != '_', first == '-');
    for c in marks {
        same &= c == first;
        count += 1;
        table &= matches!(c, '|' | '-' | ':');
        dash |= c == '-';
        if !same && !table {
            return false;
        }
    }
    let thematic = same && count >= 3 && matches!(first, '-' | '*' | '_');
    thematic || (table && dash)
}

/// Inline markup removed: `![[embed]]` and `![alt](image)` dropped, `[[label|target]]` → label (label-first, as
/// Dendron writes them), `[[target]]` → target, `[text](url)` → text,
/// code ticks, `*`, `~~` and word-edge `_` dropped. Whitespace is collapsed.
pub(super) fn strip_inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut next = Next::new(text);
    let mut at = 0;
    let mut prev: Option<char> = None;
    while at < text.len() {
        // Text that starts no markup is copied a run at a time (summaries were a fifth of
        // indexing's reading thread when each character was looked at alone). Markup
        // characters are ASCII, so a run ends on a character boundary.
        let run = text.as_bytes()[at..]
            .iter()
            .position(|&b| MARKUP.contains(&b))
            .unwrap_or(text.len() - at);
        if run > 0 {
            let piece = &text[at..at + run];
            out.push_str(piece);
            prev = piece.chars().next_back();
            at += run;
            continue;
        }
        at = strip_step(text, at, &mut next, &mut prev, &mut out);
    }
    if is_collapsed_ascii(&out) {
        return out;
    }
    let mut collapsed = String::with_capacity(out.len());
    for word in out.split_whitespace() {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    collapsed
}

/// Whether `text` is ASCII whose only whitespace is single spaces between words: what
/// [`strip_inline`]'s collapse would leave as it is (most texts; looking at bytes alone is
/// much cheaper than splitting at Unicode whitespace).
fn is_collapsed_ascii(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.first() != Some(&b' ')
        && bytes.last() != Some(&b' ')
        && bytes.iter().all(|b| (b' '..=0x7f).contains(b))
        && !bytes.windows(2).any(|pair| pair == b"  ")
}

/// One step of [`strip_inline`] at byte `at` of `text` (not its end): the markup starting
/// there, or one character, into `out`. Returns the byte after what it read; `prev` is the
/// last character read one at a time.
fn strip_step(
    text: &str,
    mut at: usize,
    next: &mut Next<'_>,
    prev: &mut Option<char>,
    out: &mut String,
) -> usize {
    let rest = &text[at..];
    if rest.starts_with("![[") {
        if let Some(close) = next.find(at + 3, CLOSE_WIKI) {
            return close + 2;
        }
    }
    if rest.starts_with("[[") {
        if let Some(close) = next.find(at + 2, CLOSE_WIKI) {
            let inner = &text[at + 2..close];
            out.push_str(inner.split('|').next().unwrap_or(inner));
            return close + 2;
        }
    }
    if let Some((label, end)) = markdown_link(text, at, next) {
        if !rest.starts_with('!') {
            out.push_str(label);
        }
        return end;
    }
    let c = rest
        .chars()
        .next()
        .expect("a step starts before the end of the text");
    at += c.len_utf8();
    let following = text[at..].chars().next();
    let dropped = match c {
        '`' | '*' => true,
        '~' => following == Some('~') || *prev == Some('~'),
        // `snake_case` keeps its underscore; `_emphasis_` loses it.
        '_' => {
            !(prev.is_some_and(char::is_alphanumeric)
                && following.is_some_and(char::is_alphanumeric))
        }
        _ => false,
    };
    if !dropped {
        out.push(c);
    }
    *prev = Some(c);
    at
}

/// The characters [`strip_inline`] looks at one by one: those that may start markup (`[`,
/// `!`) or be dropped.
const MARKUP: &[u8] = b"[!`*~_";

/// `[label](url)` or `![alt](url)` starting at byte `at`: the label and the byte after the
/// syntax.
fn markdown_link<'t>(text: &'t str, at: usize, next: &mut Next<'_>) -> Option<(&'t str, usize)> {
    let rest = &text[at..];
    let open = if rest.starts_with("![") {
        at + 2
    } else if rest.starts_with('[') {
        at + 1
    } else {
        return None;
    };
    let close = next.find(open, CLOSE_LABEL)?;
    if text.as_bytes().get(close + 1) != Some(&b'(') {
        return None;
    }
    let end = next.find(close + 2, CLOSE_URL)?;
    Some((&text[open..close], end + 1))
}

const CLOSE_WIKI: usize = 0;
const CLOSE_LABEL: usize = 1;
const CLOSE_URL: usize = 2;

/// The first `]]`, `]` or `)` at or after a byte, remembered. Lookups only move forward, so a
/// line of a million unclosed brackets costs one scan rather than one scan per bracket.
struct Next<'t> {
    text: &'t str,
    /// Per needle: where the last search started and what it found.
    last: [Option<(usize, Option<usize>)>; 3],
}

impl<'t> Next<'t> {
    const NEEDLES: [&'static str; 3] = ["]]", "]", ")"];

    fn new(text: &'t str) -> Self {
        Next {
            text,
            last: [None; 3],
        }
    }

    fn find(&mut self, from: usize, needle: usize) -> Option<usize> {
        // A search from at or before `from` that found nothing, or found something at or
        // after `from`, answers for `from` too: nothing lies between.
        if let Some((searched, found)) = self.last[needle] {
            if searched <= from && found.is_none_or(|f| f >= from) {
                return found;
            }
        }
        let found = self
            .text
            .get(from..)
            .and_then(|rest| rest.find(Self::NEEDLES[needle]))
            .map(|i| from + i);
        self.last[needle] = Some((from, found));
        found
    }
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
    use proptest::prelude::*;

    /// [`strip_inline`] without its runs, every character a step of its own: the oracle for
    /// the runs (whitespace collapsed as it was before, too).
    fn strip_inline_by_char(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut next = Next::new(text);
        let mut at = 0;
        let mut prev: Option<char> = None;
        while at < text.len() {
            at = strip_step(text, at, &mut next, &mut prev, &mut out);
        }
        out.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// [`is_rule`] as it was, every mark collected: the oracle for the early exit.
    fn is_rule_collected(t: &str) -> bool {
        let marks: Vec<char> = t.chars().filter(|c| !c.is_whitespace()).collect();
        let thematic = marks.len() >= 3
            && ['-', '*', '_']
                .iter()
                .any(|&m| marks.iter().all(|&c| c == m));
        let table = marks.contains(&'-') && marks.iter().all(|c| matches!(c, '|' | '-' | ':'));
        thematic || table
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn rules_are_told_as_before(t in "[-*_|: a\t]{0,8}") {
            prop_assert_eq!(is_rule(&t), is_rule_collected(&t), "{:?}", t);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn runs_strip_as_characters_do(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("[[".to_string()), Just("]]".to_string()), Just("![[".to_string()),
                    Just("[".to_string()), Just("]".to_string()), Just("(".to_string()),
                    Just(")".to_string()), Just("![".to_string()), Just("!".to_string()),
                    Just("|".to_string()), Just("`".to_string()), Just("*".to_string()),
                    Just("~".to_string()), Just("~~".to_string()), Just("_".to_string()),
                    Just(" ".to_string()), Just("\t".to_string()), Just("\u{a0}".to_string()),
                    "[a-zé9]{1,6}",
                    "\\PC{1,4}",
                ],
                0..40,
            ),
        ) {
            let text = parts.concat();
            prop_assert_eq!(strip_inline(&text), strip_inline_by_char(&text));
        }
    }

    #[test]
    fn a_line_of_unclosed_brackets_is_read_in_one_pass() {
        // Each bracket used to search the rest of the line: quadratic, hours for lines this
        // long, so a return of that reading would not let this test finish (no clock is read:
        // speed is the benchmarks' to measure).
        for line in [
            "[".repeat(400_000),
            "[[".repeat(200_000) + "]",
            "[a]".repeat(100_000) + "(",
            "![".repeat(200_000),
        ] {
            let out = strip_inline(&line);
            assert!(!out.is_empty());
            assert_eq!(out, strip_inline_by_char(&line));
        }
        // The same reading as before: a label runs to the first `]`.
        assert_eq!(strip_inline("[a [b](c) [[d|e]] ![x](y) ![[z]]"), "a [b d");
    }

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
