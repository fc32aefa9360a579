//! Where the code is in Markdown text: fenced code blocks and inline code spans. Code holds
//! examples (`[[a|b]]` in a tutorial, `#include`), so links, tags and mentions skip it.

use std::collections::HashMap;
use std::ops::Range;

/// Byte ranges of the fenced code blocks (fences included) and inline code spans (backticks
/// included) of `text`, sorted and disjoint.
///
/// Fences follow the ingestion's reading: a line of three or more backticks or tildes (any
/// indentation, so fences inside list items count) opens a block that a line of at least as
/// many of the same marker closes; an unclosed fence runs to the end. Inline code is a run
/// of backticks closed by the next run of the same length in the same paragraph; an
/// unmatched run is literal text. Indented code blocks are not recognised: in notes,
/// four-space indentation is far more often a nested list item than code.
pub fn code_ranges(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    // Code needs a backtick or a tilde; most texts have neither.
    if memchr::memchr2(b'`', b'~', text.as_bytes()).is_none() {
        return out;
    }
    let mut fence: Option<(u8, usize, usize)> = None;
    let mut paragraph: Option<usize> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let bare = line.trim_end_matches(['\n', '\r']);
        if let Some((marker, len, open)) = fence {
            if closes(bare, marker, len) {
                out.push(open..start + bare.len());
                fence = None;
            }
            continue;
        }
        if let Some((marker, len)) = fence_open(bare) {
            if let Some(p) = paragraph.take() {
                inline_code(text, p, start, &mut out);
            }
            fence = Some((marker, len, start));
        } else if bare.trim().is_empty() {
            if let Some(p) = paragraph.take() {
                inline_code(text, p, start, &mut out);
            }
        } else if paragraph.is_none() {
            paragraph = Some(start);
        }
    }
    if let Some(p) = paragraph {
        inline_code(text, p, text.len(), &mut out);
    }
    if let Some((_, _, open)) = fence {
        out.push(open..text.len());
    }
    out
}

/// Does one of `ranges` (sorted, disjoint) contain byte `pos`?
pub(crate) fn contains(ranges: &[Range<usize>], pos: usize) -> bool {
    covering(ranges, pos).is_some()
}

/// The range of `ranges` (sorted, disjoint) that contains byte `pos`.
pub(crate) fn covering(ranges: &[Range<usize>], pos: usize) -> Option<&Range<usize>> {
    let i = ranges.partition_point(|r| r.end <= pos);
    ranges.get(i).filter(|r| r.start <= pos)
}

/// Does `span` overlap one of `ranges` (sorted, disjoint)?
pub(crate) fn overlaps(ranges: &[Range<usize>], span: &Range<usize>) -> bool {
    let i = ranges.partition_point(|r| r.end <= span.start);
    ranges.get(i).is_some_and(|r| r.start < span.end)
}

/// The marker and length of a fence-opening line; a backtick fence's info string may not
/// hold a backtick (```` ```x``` ```` is inline code).
fn fence_open(line: &str) -> Option<(u8, usize)> {
    let t = line.trim_start().as_bytes();
    let marker = *t.first().filter(|&&b| b == b'`' || b == b'~')?;
    let len = t.iter().take_while(|&&b| b == marker).count();
    if len < 3 || (marker == b'`' && t[len..].contains(&b'`')) {
        return None;
    }
    Some((marker, len))
}

fn closes(line: &str, marker: u8, len: usize) -> bool {
    let t = line.trim().as_bytes();
    t.len() >= len && t.iter().all(|&b| b == marker)
}

/// Adds the inline code spans of `text[start..end]` (one paragraph) to `out`. Each run of
/// backticks pairs with the next run of the same length; per-length cursors only move
/// forward, so a paragraph of many unmatched runs stays linear.
fn inline_code(text: &str, start: usize, end: usize, out: &mut Vec<Range<usize>>) {
    let bytes = &text.as_bytes()[start..end];
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while let Some(found) = memchr::memchr(b'`', &bytes[i..]) {
        i += found;
        let len = bytes[i..].iter().take_while(|&&b| b == b'`').count();
        runs.push((start + i, len));
        i += len;
    }
    if runs.len() < 2 {
        return;
    }
    let mut by_len: HashMap<usize, (Vec<usize>, usize)> = HashMap::new();
    for (index, &(_, len)) in runs.iter().enumerate() {
        by_len.entry(len).or_default().0.push(index);
    }
    let mut r = 0;
    while r < runs.len() {
        let (open, len) = runs[r];
        let close = by_len.get_mut(&len).and_then(|(indices, cursor)| {
            while indices.get(*cursor).is_some_and(|&j| j <= r) {
                *cursor += 1;
            }
            indices.get(*cursor).copied()
        });
        match close {
            Some(j) => {
                out.push(open..runs[j].0 + len);
                r = j + 1;
            }
            None => r += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> Vec<&str> {
        code_ranges(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn fences_and_inline_spans() {
        let text = "a `x` b ``y ` z`` c\n\n```md\n[[in]]\n```\nafter `k`\n";
        assert_eq!(
            code(text),
            vec!["`x`", "``y ` z``", "```md\n[[in]]\n```", "`k`"]
        );
    }

    #[test]
    fn unmatched_backticks_are_text_and_spans_stop_at_blank_lines() {
        assert_eq!(code("a ` b\n\nc ` d"), Vec::<&str>::new());
        assert_eq!(code("a `` b ` c `` d"), vec!["`` b ` c ``"]);
        assert_eq!(code("one `two\nthree` four"), vec!["`two\nthree`"]);
    }

    #[test]
    fn unclosed_fence_runs_to_the_end_and_needs_its_own_marker() {
        assert_eq!(code("x\n~~~\na\n```\nb"), vec!["~~~\na\n```\nb"]);
        assert_eq!(code("  ````\n```\n````\nz"), vec!["  ````\n```\n````"]);
        assert_eq!(code("```x```"), vec!["```x```"]);
    }

    #[test]
    fn crlf_fences() {
        assert_eq!(code("a\r\n```\r\nb\r\n```\r\nc"), vec!["```\r\nb\r\n```"]);
    }

    #[test]
    fn lookups() {
        let ranges = vec![2..4, 8..10];
        assert!(!contains(&ranges, 1));
        assert!(contains(&ranges, 2));
        assert!(!contains(&ranges, 4));
        assert!(contains(&ranges, 9));
        assert!(overlaps(&ranges, &(3..5)));
        assert!(!overlaps(&ranges, &(4..8)));
        assert!(overlaps(&ranges, &(0..20)));
    }
}
