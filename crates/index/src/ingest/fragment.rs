//! The fragmenter: packs a text's blocks into passages of at most `max_chars` characters,
//! each a trimmed slice of the text with its extent in whole-file coordinates.

use finder_core::Extent;

use super::boundary::{boundary, Boundary};
use super::clip_title;
use super::markdown::{blocks, BlockKind};
use super::summary::strip_inline;
use crate::document::FragmentDoc;

/// Splits `body` into fragments. A heading starts a new fragment; paragraphs of one section
/// are packed together while they fit; a block too long on its own is cut at sentence ends,
/// else between words, else between characters. `base_byte` and `base_line` are where `body`
/// starts in its file, so extents index the whole file.
pub fn fragment(body: &str, base_byte: u64, base_line: u32, max_chars: usize) -> Vec<FragmentDoc> {
    let mut packer = Packer {
        body,
        max: max_chars.max(1),
        heading: None,
        current: None,
        done: Vec::new(),
    };
    let mut path: Vec<(u8, String)> = Vec::new();
    for block in blocks(body) {
        let is_heading = if let BlockKind::Heading { level, title } = &block.kind {
            packer.flush();
            path.retain(|(l, _)| l < level);
            path.push((*level, clip_title(strip_inline(title))));
            packer.heading = heading_path(&path);
            true
        } else {
            false
        };
        packer.add(block.start, block.end, is_heading);
    }
    packer.flush();

    let newlines: Vec<usize> = body
        .bytes()
        .enumerate()
        .filter(|&(_, b)| b == b'\n')
        .map(|(i, _)| i)
        .collect();
    let line_of = |byte: usize| -> u32 {
        let before = newlines.partition_point(|&p| p < byte);
        base_line.saturating_add(u32::try_from(before).unwrap_or(u32::MAX))
    };
    packer
        .done
        .into_iter()
        .enumerate()
        .map(|(ordinal, (start, end, heading))| FragmentDoc {
            ordinal: u32::try_from(ordinal).unwrap_or(u32::MAX),
            text: body[start..end].to_string(),
            heading,
            extent: Extent {
                byte_start: base_byte + start as u64,
                byte_end: base_byte + end as u64,
                line_start: line_of(start),
                // `end - 1` is the last byte of the text, never a newline (the text is trimmed).
                line_end: line_of(end - 1),
                page: None,
            },
        })
        .collect()
}

/// "Install > Linux" from the open headings, outermost first; empty titles are left out.
fn heading_path(path: &[(u8, String)]) -> Option<String> {
    let names: Vec<&str> = path
        .iter()
        .map(|(_, t)| t.as_str())
        .filter(|t| !t.is_empty())
        .collect();
    (!names.is_empty()).then(|| names.join(" > "))
}

/// The fragment being filled: `body[start..end]`, `chars` characters long.
#[derive(Clone, Copy)]
struct Open {
    start: usize,
    end: usize,
    chars: usize,
    /// Holds only a heading line, which should not stand alone if its section can follow.
    heading_only: bool,
}

struct Packer<'a> {
    body: &'a str,
    max: usize,
    /// Heading path of the section being packed.
    heading: Option<String>,
    current: Option<Open>,
    /// Finished fragments: byte range in `body` and heading path.
    done: Vec<(usize, usize, Option<String>)>,
}

impl Packer<'_> {
    /// Adds the trimmed block `body[start..end]` of the current section.
    fn add(&mut self, mut start: usize, end: usize, is_heading: bool) {
        if let Some(mut open) = self.current {
            let gap = self.chars(open.end, start);
            let chars = self.chars(start, end);
            if open.chars + gap + chars <= self.max {
                open.end = end;
                open.chars += gap + chars;
                open.heading_only = false;
                self.current = Some(open);
                return;
            }
            // Keep a heading with the start of its section when a word or sentence break
            // lets some of the block fit beside it.
            let room = self.max.saturating_sub(open.chars + gap);
            if open.heading_only && room > 0 {
                if let Boundary::Sentence(cut) | Boundary::Word(cut) =
                    boundary(&self.body[start..end], room)
                {
                    open.end = start + cut;
                    self.current = Some(open);
                    start = self.skip_whitespace(start + cut, end);
                }
            }
            self.flush();
        }
        self.place(start, end, is_heading);
    }

    /// Starts a new fragment with `body[start..end]`, cutting it when it is too long; the last
    /// piece stays open so that following blocks can join it.
    fn place(&mut self, mut start: usize, end: usize, is_heading: bool) {
        while start < end {
            let piece = boundary(&self.body[start..end], self.max);
            if piece == Boundary::Whole {
                let chars = self.chars(start, end);
                self.current = Some(Open {
                    start,
                    end,
                    chars,
                    heading_only: is_heading,
                });
                return;
            }
            let cut = start + piece.end(end - start);
            self.done.push((start, cut, self.heading.clone()));
            start = self.skip_whitespace(cut, end);
        }
    }

    fn flush(&mut self) {
        if let Some(open) = self.current.take() {
            self.done.push((open.start, open.end, self.heading.clone()));
        }
    }

    fn chars(&self, start: usize, end: usize) -> usize {
        self.body[start..end].chars().count()
    }

    fn skip_whitespace(&self, from: usize, end: usize) -> usize {
        let rest = &self.body[from..end];
        from + (rest.len() - rest.trim_start().len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn texts(fragments: &[FragmentDoc]) -> Vec<&str> {
        fragments.iter().map(|f| f.text.as_str()).collect()
    }

    /// Checks every invariant a fragment list must hold for `input` fragmented whole.
    fn check_invariants(input: &str, max: usize) {
        let fragments = fragment(input, 0, 1, max);
        let mut covered_to = 0;
        let mut covered = vec![false; input.len()];
        for (i, f) in fragments.iter().enumerate() {
            let (s, e) = (f.extent.byte_start as usize, f.extent.byte_end as usize);
            assert_eq!(f.ordinal as usize, i);
            assert_eq!(&input[s..e], f.text, "extent slice equals text");
            assert!(!f.text.is_empty());
            assert_eq!(f.text.trim(), f.text, "text is trimmed");
            assert!(
                f.text.chars().count() <= max,
                "{} chars > {max}",
                f.text.chars().count()
            );
            assert_eq!(
                f.extent.line_start as usize,
                1 + input[..s].matches('\n').count()
            );
            assert_eq!(
                f.extent.line_end as usize,
                1 + input.as_bytes()[..e - 1]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
            );
            assert!(s >= covered_to, "fragments in order and apart");
            covered_to = e;
            covered[s..e].iter_mut().for_each(|c| *c = true);
        }
        for (i, c) in input.char_indices() {
            assert!(
                c.is_whitespace() || covered[i],
                "char {c:?} at {i} not in any fragment"
            );
        }
    }

    fn markdownish() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "# Title\n",
            "## Sub section\n",
            "### Deep ###\n",
            "#tag ",
            "\n",
            "\n\n",
            "\r\n",
            "\r\n\r\n",
            "```\n",
            "~~~rust\n",
            "```x```",
            "word ",
            "another ",
            "Sentence ends. ",
            "Really? ",
            "Yes! ",
            "é",
            "日本語のテキスト",
            "🙂 ",
            "  ",
            "\t",
            "a.b.c",
            "xxxxxxxxxxxxxxxxxxxxxxxxx",
            "- item\n",
            "[[label|target]] ",
            "`code` ",
            "\u{a0}",
            "\u{3000}",
            ".",
            "!",
            "?",
            "#",
            "---\n",
        ]);
        prop::collection::vec(pieces, 0..120).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn extents_and_coverage_hold_for_markdownish_text(input in markdownish(), max in 1usize..120) {
            check_invariants(&input, max);
        }

        #[test]
        fn extents_and_coverage_hold_for_any_text(input in "(?s).{0,400}", max in 1usize..60) {
            check_invariants(&input, max);
        }
    }

    #[test]
    fn paragraphs_pack_until_full_and_headings_start_fragments() {
        let body =
            "Intro para.\n\nSecond para.\n\n# Install\n\nStep one.\n\n## Linux\n\nUse apt.\n";
        let f = fragment(body, 0, 1, 200);
        assert_eq!(
            texts(&f),
            vec![
                "Intro para.\n\nSecond para.",
                "# Install\n\nStep one.",
                "## Linux\n\nUse apt."
            ]
        );
        assert_eq!(f[0].heading, None);
        assert_eq!(f[1].heading.as_deref(), Some("Install"));
        assert_eq!(f[2].heading.as_deref(), Some("Install > Linux"));
        assert_eq!((f[2].extent.line_start, f[2].extent.line_end), (9, 11));
    }

    #[test]
    fn heading_path_pops_to_the_right_level() {
        let body = "# A\n## B\n### C\n## D\ntext\n# E\n";
        let headings: Vec<_> = fragment(body, 0, 1, 500)
            .into_iter()
            .map(|f| f.heading.unwrap())
            .collect();
        assert_eq!(headings, vec!["A", "A > B", "A > B > C", "A > D", "E"]);
    }

    #[test]
    fn heading_markup_is_stripped_in_the_path() {
        let f = fragment("# The `finder` **CLI**\nbody", 0, 1, 100);
        assert_eq!(f[0].heading.as_deref(), Some("The finder CLI"));
    }

    #[test]
    fn paragraphs_split_when_the_next_would_overflow() {
        let body = "aaaa bbbb.\n\ncccc dddd.\n\neeee";
        assert_eq!(
            texts(&fragment(body, 0, 1, 22)),
            vec!["aaaa bbbb.\n\ncccc dddd.", "eeee"]
        );
        assert_eq!(
            texts(&fragment(body, 0, 1, 21)),
            vec!["aaaa bbbb.", "cccc dddd.\n\neeee"]
        );
    }

    #[test]
    fn code_fence_with_blank_lines_stays_whole() {
        let body = "# Run\n\n```sh\nmake\n\n\nmake test\n```\n\nDone.";
        let f = fragment(body, 0, 1, 35);
        assert_eq!(
            texts(&f),
            vec!["# Run\n\n```sh\nmake\n\n\nmake test\n```", "Done."]
        );
    }

    #[test]
    fn long_paragraph_is_cut_at_sentences_then_words_then_chars() {
        let body = "First sentence here. Second one is here. Third.";
        assert_eq!(
            texts(&fragment(body, 0, 1, 25)),
            vec!["First sentence here.", "Second one is here.", "Third."]
        );
        assert_eq!(
            texts(&fragment("alpha beta gamma delta", 0, 1, 11)),
            vec!["alpha beta", "gamma delta"]
        );
        assert_eq!(
            texts(&fragment("ααααααα", 0, 1, 3)),
            vec!["ααα", "ααα", "α"]
        );
    }

    #[test]
    fn a_heading_keeps_the_start_of_a_long_section() {
        let body = "## Notes\nOne two three four five six seven eight nine ten.";
        let f = fragment(body, 0, 1, 30);
        assert_eq!(f[0].text, "## Notes\nOne two three four");
        assert!(f.iter().all(|x| x.heading.as_deref() == Some("Notes")));
    }

    #[test]
    fn whitespace_only_body_has_no_fragments() {
        assert!(fragment("", 0, 1, 100).is_empty());
        assert!(fragment(" \n\r\n\t\n", 0, 1, 100).is_empty());
    }

    #[test]
    fn base_offsets_shift_extents_into_file_coordinates() {
        let file = "---\ntitle: x\n---\n\nHello\r\nworld\r\n\r\nNext";
        let base = file.find("\nHello").unwrap();
        let f = fragment(&file[base..], base as u64, 4, 100);
        assert_eq!(f.len(), 1);
        let e = f[0].extent;
        assert_eq!(
            &file[e.byte_start as usize..e.byte_end as usize],
            "Hello\r\nworld\r\n\r\nNext"
        );
        assert_eq!((e.line_start, e.line_end), (5, 8));
    }

    #[test]
    fn crlf_blank_lines_separate_paragraphs() {
        let f = fragment("one.\r\n\r\ntwo.\r\n", 0, 1, 5);
        assert_eq!(texts(&f), vec!["one.", "two."]);
        assert_eq!((f[1].extent.line_start, f[1].extent.line_end), (3, 3));
    }

    #[test]
    fn wiki_links_in_text_are_left_as_written() {
        let f = fragment("See [[the runbook|ops.runbook]] now.", 0, 1, 100);
        assert_eq!(f[0].text, "See [[the runbook|ops.runbook]] now.");
    }
}
