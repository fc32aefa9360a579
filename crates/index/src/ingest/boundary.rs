//! Where to cut a text that is too long: at a sentence end, else between words, else between
//! characters. Shared by the fragmenter and the summary so both break text the same way.

/// The end (a byte offset into the text) of the longest good piece that fits the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Boundary {
    /// The whole text fits.
    Whole,
    /// After a `.`, `?` or `!` that is followed by whitespace.
    Sentence(usize),
    /// Before whitespace, trailing whitespace excluded.
    Word(usize),
    /// Between two characters, for text with no whitespace to break at.
    Char(usize),
}

impl Boundary {
    /// The byte end of the piece, given the whole text's length.
    pub fn end(self, len: usize) -> usize {
        match self {
            Boundary::Whole => len,
            Boundary::Sentence(e) | Boundary::Word(e) | Boundary::Char(e) => e,
        }
    }
}

/// Chooses where a piece of at most `budget` (≥ 1) characters taken from the start of `text`
/// should end. `text` must not start with whitespace, so every piece is non-empty.
///
/// A sentence end wins when it keeps at least half the budget; otherwise the last word break
/// does, because a short first sentence would leave a needlessly small piece.
pub(super) fn boundary(text: &str, budget: usize) -> Boundary {
    let budget = budget.max(1);
    // A text has no more characters than bytes.
    if text.len() <= budget {
        return Boundary::Whole;
    }
    // In ASCII a byte is a character: the window's bytes are looked at alone, not decoded
    // (sentence boundaries were 3% of a 1M build's read-and-write samples).
    if text.as_bytes()[..=budget].is_ascii() {
        return boundary_ascii(text, budget);
    }
    boundary_by_char(text, budget)
}

/// [`boundary`] with every character decoded (`budget` ≥ 1): the path for text that is not
/// ASCII, and the oracle its shortcuts are tested against.
fn boundary_by_char(text: &str, budget: usize) -> Boundary {
    let mut sentence: Option<(usize, usize)> = None;
    let mut word: Option<usize> = None;
    let mut prev = None;
    for (count, (i, c)) in text.char_indices().enumerate() {
        if c.is_whitespace() && i > 0 {
            // Whitespace right after the window still lets the window end a word or sentence.
            if matches!(prev, Some('.' | '?' | '!')) {
                sentence = Some((i, count));
            }
            word = Some(i);
        }
        if count == budget {
            return choose(text, budget, sentence, word, i);
        }
        prev = Some(c);
    }
    Boundary::Whole
}

/// [`boundary`] of a text whose first `budget + 1` bytes are ASCII (and that has more).
fn boundary_ascii(text: &str, budget: usize) -> Boundary {
    let bytes = text.as_bytes();
    let mut sentence: Option<(usize, usize)> = None;
    let mut word: Option<usize> = None;
    for i in 1..=budget {
        // `char::is_whitespace` on ASCII.
        if matches!(bytes[i], b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ') {
            if matches!(bytes[i - 1], b'.' | b'?' | b'!') {
                sentence = Some((i, i));
            }
            word = Some(i);
        }
    }
    choose(text, budget, sentence, word, budget)
}

fn choose(
    text: &str,
    budget: usize,
    sentence: Option<(usize, usize)>,
    word: Option<usize>,
    window_end: usize,
) -> Boundary {
    match (sentence, word) {
        (Some((end, chars)), _) if chars * 2 >= budget => Boundary::Sentence(end),
        (_, Some(end)) => Boundary::Word(text[..end].trim_end().len()),
        (Some((end, _)), None) => Boundary::Sentence(end),
        (None, None) => Boundary::Char(window_end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_whole() {
        assert_eq!(boundary("short text", 10), Boundary::Whole);
        assert_eq!(boundary("", 3), Boundary::Whole);
    }

    #[test]
    fn prefers_a_late_sentence_end() {
        let text = "One two three. Four five six";
        assert_eq!(boundary(text, 20), Boundary::Sentence(14));
        // The whitespace just past the window still marks the sentence end.
        assert_eq!(boundary(text, 14), Boundary::Sentence(14));
    }

    #[test]
    fn an_early_sentence_end_loses_to_a_word_break() {
        let text = "Hi. then a long run of words";
        assert_eq!(boundary(text, 20), Boundary::Word(19));
        assert_eq!(&text[..19], "Hi. then a long run");
    }

    #[test]
    fn falls_back_to_characters() {
        let text = "ééééé";
        assert_eq!(boundary(text, 2), Boundary::Char(4));
        assert_eq!(boundary(text, 5), Boundary::Whole);
    }

    #[test]
    fn a_run_of_spaces_is_trimmed_off_the_piece() {
        assert_eq!(boundary("ab   cd ef", 6), Boundary::Word(2));
    }

    proptest::proptest! {
        #[test]
        fn shortcuts_choose_as_every_character_did(
            text in "([a-c]{0,4}[ .!?\t\n\x0b\x0c\r\u{a0}\u{3000}é]{0,2}){0,12}",
            budget in 0usize..40,
        ) {
            proptest::prop_assert_eq!(
                boundary(&text, budget),
                boundary_by_char(&text, budget.max(1))
            );
        }
    }
}
