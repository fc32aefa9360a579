//! Markdown block structure: headings, paragraphs and fenced code blocks, each with its
//! trimmed byte range, so the fragmenter and the title lookup read the same structure.

/// What a block is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BlockKind {
    /// An ATX heading line; `title` is its text without the `#` marks.
    Heading {
        level: u8,
        title: String,
    },
    Paragraph,
    /// A fenced code block, fences included; blank lines inside do not split it.
    Code,
}

/// One block: `text[start..end]`, with no leading or trailing whitespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Block {
    pub start: usize,
    pub end: usize,
    pub kind: BlockKind,
}

/// An open code fence: its marker character, how many of them, and where the block began.
struct Fence {
    marker: char,
    len: usize,
    start: usize,
}

/// Splits `text` into blocks, in order. Every non-whitespace character of `text` lies in
/// exactly one block.
pub(super) fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut paragraph: Option<(usize, usize)> = None;
    let mut fence: Option<Fence> = None;
    let mut last_end = 0;
    for (start, end) in lines(text) {
        last_end = end;
        let line = &text[start..end];
        if let Some(open) = &fence {
            if closes(line, open) {
                push(&mut out, text, open.start, end, BlockKind::Code);
                fence = None;
            }
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut out, text, &mut paragraph);
        } else if let Some((level, title)) = heading(line) {
            // A heading interrupts a paragraph even without a blank line before it.
            flush(&mut out, text, &mut paragraph);
            push(
                &mut out,
                text,
                start,
                end,
                BlockKind::Heading { level, title },
            );
        } else if let Some((marker, len)) = fence_open(line) {
            flush(&mut out, text, &mut paragraph);
            fence = Some(Fence { marker, len, start });
        } else {
            paragraph = Some((paragraph.map_or(start, |(s, _)| s), end));
        }
    }
    flush(&mut out, text, &mut paragraph);
    if let Some(open) = fence {
        // An unclosed fence runs to the end of the text, as Markdown renderers show it.
        push(&mut out, text, open.start, last_end, BlockKind::Code);
    }
    out
}

/// The heading level and text of an ATX heading line (`#`..`######` then a space or tab,
/// indented at most three spaces), or None.
pub(super) fn heading(line: &str) -> Option<(u8, String)> {
    let rest = line.trim_start_matches(' ');
    if line.len() - rest.len() > 3 {
        return None;
    }
    let level = rest.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after = &rest[level..];
    if !after.starts_with([' ', '\t']) {
        return None;
    }
    let mut title = after.trim();
    // A closing run of `#` is decoration, unless it is glued to a word (`C#`).
    let unclosed = title.trim_end_matches('#');
    if unclosed.is_empty() || unclosed.ends_with(char::is_whitespace) {
        title = unclosed.trim_end();
    }
    Some((level as u8, title.to_string()))
}

/// Byte ranges of the lines of `text`, without their `\n`; a final empty line is dropped.
pub(super) fn lines(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |line| {
        let start = offset;
        offset += line.len();
        (
            start,
            start + line.strip_suffix('\n').map_or(line.len(), str::len),
        )
    })
}

/// The marker and length of a fence-opening line (three or more backticks or tildes).
pub(super) fn fence_open(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    let marker = t.chars().next().filter(|&c| c == '`' || c == '~')?;
    let len = t.chars().take_while(|&c| c == marker).count();
    // A backtick in the info string means inline code such as ```x```, not a fence.
    if len < 3 || (marker == '`' && t[len..].contains('`')) {
        return None;
    }
    Some((marker, len))
}

fn closes(line: &str, fence: &Fence) -> bool {
    let t = line.trim();
    t.chars().count() >= fence.len && t.chars().all(|c| c == fence.marker)
}

fn flush(out: &mut Vec<Block>, text: &str, paragraph: &mut Option<(usize, usize)>) {
    if let Some((start, end)) = paragraph.take() {
        push(out, text, start, end, BlockKind::Paragraph);
    }
}

/// Adds `text[start..end]` trimmed, unless nothing but whitespace is left.
fn push(out: &mut Vec<Block>, text: &str, start: usize, end: usize, kind: BlockKind) {
    if let Some((start, end)) = trim_range(text, start, end) {
        out.push(Block { start, end, kind });
    }
}

/// `start..end` narrowed to exclude leading and trailing whitespace; None when empty.
pub(super) fn trim_range(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let slice = &text[start..end];
    let lead = slice.len() - slice.trim_start().len();
    let trimmed = slice.trim();
    if trimmed.is_empty() {
        return None;
    }
    Some((start + lead, start + lead + trimmed.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(String, &'static str)> {
        blocks(text)
            .into_iter()
            .map(|b| {
                let kind = match b.kind {
                    BlockKind::Heading { .. } => "h",
                    BlockKind::Paragraph => "p",
                    BlockKind::Code => "code",
                };
                (text[b.start..b.end].to_string(), kind)
            })
            .collect()
    }

    #[test]
    fn headings_paragraphs_and_fences() {
        let text =
            "intro line\nsecond line\n\n# Title\nbody\n```sh\n# not a heading\n\nls\n```\nafter\n";
        assert_eq!(
            kinds(text),
            vec![
                ("intro line\nsecond line".to_string(), "p"),
                ("# Title".to_string(), "h"),
                ("body".to_string(), "p"),
                ("```sh\n# not a heading\n\nls\n```".to_string(), "code"),
                ("after".to_string(), "p"),
            ]
        );
    }

    #[test]
    fn heading_needs_a_space_and_at_most_six_marks() {
        assert_eq!(heading("## Install"), Some((2, "Install".to_string())));
        assert_eq!(heading("### Linux ###"), Some((3, "Linux".to_string())));
        assert_eq!(heading("# C#"), Some((1, "C#".to_string())));
        assert_eq!(heading("#tag"), None);
        assert_eq!(heading("####### seven"), None);
        assert_eq!(heading("    # indented code"), None);
        assert_eq!(heading("# \r"), Some((1, String::new())));
    }

    #[test]
    fn unclosed_fence_runs_to_the_end_and_tilde_fences_need_tildes() {
        let text = "~~~\ncode\n```\n\nmore\n";
        assert_eq!(
            kinds(text),
            vec![("~~~\ncode\n```\n\nmore".to_string(), "code")]
        );
        assert_eq!(fence_open("```x```"), None);
        assert_eq!(fence_open("  ````rust"), Some(('`', 4)));
    }

    #[test]
    fn crlf_lines_are_blank_when_only_a_carriage_return() {
        let text = "one\r\n\r\ntwo\r\n";
        assert_eq!(
            kinds(text),
            vec![("one".to_string(), "p"), ("two".to_string(), "p")]
        );
    }
}
