//! Hint previews: a window of a fragment's text around the first query word it contains.

use std::borrow::Cow;

/// At most `max_chars` characters of `body`, starting a little before the first occurrence of
/// a query word (ASCII case-insensitive, words of three or more characters), cut at word
/// boundaries, with `…` where text was cut. Whitespace runs collapse to one space.
pub fn preview(body: &str, query: &str, max_chars: usize) -> String {
    QueryWords::new(query).preview(body, max_chars)
}

/// A query's words (three characters or more), each with its search built: a page asks for
/// a preview per hint, so a query builds these once instead of once per hint.
pub struct QueryWords {
    query: String,
    needles: Vec<memchr::memmem::Finder<'static>>,
}

impl QueryWords {
    pub fn new(query: &str) -> QueryWords {
        let needles = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .map(|w| memchr::memmem::Finder::new(w.to_ascii_lowercase().as_bytes()).into_owned())
            .collect();
        QueryWords {
            query: query.to_string(),
            needles,
        }
    }

    /// The query these words are of.
    pub fn query(&self) -> &str {
        &self.query
    }

    /// [`preview`] of `body` for this query.
    pub fn preview(&self, body: &str, max_chars: usize) -> String {
        window(body, &self.needles, max_chars)
    }
}

fn window(body: &str, needles: &[memchr::memmem::Finder<'_>], max_chars: usize) -> String {
    let text = collapse_whitespace(body);
    // No more bytes than the window: no more characters either.
    if text.len() <= max_chars {
        return text.into_owned();
    }
    // In ASCII text a character is a byte: positions need no counting (counting them was a
    // third of a preview's time).
    let ascii = text.is_ascii();
    let total = if ascii {
        text.len()
    } else {
        text.chars().count()
    };
    if total <= max_chars {
        return text.into_owned();
    }
    // The window is defined in characters; their positions are mapped to byte offsets only
    // around the window, instead of copying the whole fragment into a vector of characters.
    let first_match = first_match(&text, needles, ascii);
    // Start a fifth of the window before the match, at a word boundary.
    let mut start = first_match
        .saturating_sub(max_chars / 5)
        .min(total - max_chars);
    let mut from = byte_offset(&text, 0, start, ascii);
    while start > 0 && start < first_match && !text[..from].ends_with(' ') {
        from += text[from..].chars().next().map_or(1, char::len_utf8);
        start += 1;
    }
    let mut end = (start + max_chars).min(total);
    let mut to = byte_offset(&text, from, end - start, ascii);
    if end < total {
        if let Some(space) = text[from..to].rfind(' ') {
            let space_chars = if ascii {
                space
            } else {
                text[from..from + space].chars().count()
            };
            if space_chars > max_chars / 2 {
                end = start + space_chars;
                to = from + space;
            }
        }
    }
    let mut out = String::with_capacity(to - from + 6);
    if start > 0 {
        out.push('…');
    }
    out.push_str(&text[from..to]);
    if end < total {
        out.push('…');
    }
    out
}

/// `body` with every run of whitespace made one space and none at either end; borrowed when
/// it already is.
fn collapse_whitespace(body: &str) -> Cow<'_, str> {
    if body.is_empty() || is_collapsed(body) {
        return Cow::Borrowed(body);
    }
    let mut out = String::with_capacity(body.len());
    for word in body.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    Cow::Owned(out)
}

/// Whether `text` has single spaces between words and no other whitespace, at either end
/// included. Whole-slice SIMD searches (`memchr`, `is_ascii`): a loop over the bytes, even
/// one without decoding characters, was most of a preview's time. Unicode whitespace beyond
/// ASCII is multibyte, so only a text with non-ASCII bytes is also checked by character.
fn is_collapsed(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first != b' '
        && last != b' '
        && memchr::memchr3(b'\t', b'\n', b'\r', bytes).is_none()
        && memchr::memchr2(0x0B, 0x0C, bytes).is_none()
        && memchr::memmem::find(bytes, b"  ").is_none()
        && (text.is_ascii() || !text.chars().any(|c| !c.is_ascii() && c.is_whitespace()))
}

/// The byte offset of the character `chars` characters after byte offset `from` (`ascii`:
/// `text` is ASCII).
fn byte_offset(text: &str, from: usize, chars: usize, ascii: bool) -> usize {
    if ascii {
        return (from + chars).min(text.len());
    }
    text[from..]
        .char_indices()
        .nth(chars)
        .map_or(text.len(), |(at, _)| from + at)
}

/// The character position in `text` of the earliest occurrence of a query word (ASCII
/// case-insensitive, words of three or more characters); 0 when there is none (`ascii`:
/// `text` is ASCII).
fn first_match(text: &str, needles: &[memchr::memmem::Finder<'_>], ascii: bool) -> usize {
    // A match of one valid UTF-8 string in another starts on a character boundary, so a
    // byte search over the ASCII-lowercased text finds what a search over its characters
    // would, and the earliest byte offset is the earliest character. Each word's search
    // stops before the earliest match so far (memchr's SIMD `memmem`, several times faster
    // than `str::find` here: previews were a fifth of a lexical query).
    let lower = text.to_ascii_lowercase();
    let mut earliest = lower.len();
    for needle in needles {
        let within = &lower.as_bytes()[..(earliest + needle.needle().len() - 1).min(lower.len())];
        if let Some(at) = needle.find(within) {
            earliest = at;
        }
    }
    if earliest == lower.len() {
        0
    } else if ascii {
        earliest
    } else {
        text[..earliest].chars().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The earliest query word by the plain definition: every word's first match, the least.
    fn first_match_plain(text: &str, query: &str) -> usize {
        let lower = text.to_ascii_lowercase();
        query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .filter_map(|w| lower.find(&w.to_ascii_lowercase()))
            .min()
            .map_or(0, |byte| text[..byte].chars().count())
    }

    /// The window by its plain definition, over a vector of characters (the code before
    /// previews stopped copying a fragment into characters).
    fn preview_plain(body: &str, query: &str, max_chars: usize) -> String {
        let text: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
        let chars: Vec<char> = text.chars().collect();
        if chars.len() <= max_chars {
            return text;
        }
        let first_match = first_match_plain(&text, query);
        let mut start = first_match
            .saturating_sub(max_chars / 5)
            .min(chars.len() - max_chars);
        while start > 0 && start < first_match && chars[start - 1] != ' ' {
            start += 1;
        }
        let mut end = (start + max_chars).min(chars.len());
        if end < chars.len() {
            if let Some(space) = chars[start..end].iter().rposition(|&c| c == ' ') {
                if space > max_chars / 2 {
                    end = start + space;
                }
            }
        }
        let mut out = String::new();
        if start > 0 {
            out.push('…');
        }
        out.extend(&chars[start..end]);
        if end < chars.len() {
            out.push('…');
        }
        out
    }

    /// `words` joined by single spaces, with `gaps[i]` before every `every`-th word instead
    /// (before the first too when `lead`).
    fn join_words(words: &[String], gaps: &[String], every: usize, lead: bool) -> String {
        let mut body = String::new();
        for (i, (word, gap)) in words.iter().zip(gaps).enumerate() {
            if i > 0 || lead {
                body.push_str(if i % every == 0 { gap } else { " " });
            }
            body.push_str(word);
        }
        body
    }

    proptest! {
        /// The window over byte offsets is the window over characters.
        #[test]
        fn the_window_is_the_plain_window(
            words in prop::collection::vec("[a-cäA-C日]{0,6}", 0..80),
            gaps in prop::collection::vec("[ \t\n\r\u{b}\u{c}\u{85}\u{a0}\u{3000}]{1,3}", 80),
            query in prop::collection::vec("[a-cäA-C日]{1,5}", 0..4),
            max in 1usize..120,
            edges in (any::<bool>(), any::<bool>()),
        ) {
            // Mostly single spaces (the borrowed path), other whitespace and runs now and then.
            let mut body = join_words(&words, &gaps, 3, edges.0);
            if edges.1 {
                body.push('\n');
            }
            let query = query.join(" ");
            prop_assert_eq!(preview(&body, &query, max), preview_plain(&body, &query, max));
        }

        /// ASCII text (positions counted as bytes) gives the plain window too.
        #[test]
        fn the_ascii_window_is_the_plain_window(
            words in prop::collection::vec("[a-cA-C]{0,6}", 0..80),
            gaps in prop::collection::vec("[ \t\n]{1,2}", 80),
            query in prop::collection::vec("[a-cA-C]{1,5}", 0..4),
            max in 1usize..120,
        ) {
            let body = join_words(&words, &gaps, 4, false);
            let query = query.join(" ");
            prop_assert_eq!(preview(&body, &query, max), preview_plain(&body, &query, max));
        }

        /// A text is collapsed exactly when collapsing it changes nothing.
        #[test]
        fn collapsed_means_collapsing_changes_nothing(
            text in "[ab日 \t\n\r\u{b}\u{c}\u{85}\u{a0}\u{3000}]{0,12}",
        ) {
            let plain = !text.is_empty()
                && text.split_whitespace().collect::<Vec<_>>().join(" ") == text;
            prop_assert_eq!(is_collapsed(&text), plain);
        }

        /// The pruned search finds what the plain definition finds.
        #[test]
        fn the_earliest_word_is_found(
            words in prop::collection::vec("[a-cäA-C]{1,5}", 0..60),
            query in prop::collection::vec("[a-cäA-C]{1,5}", 0..5),
        ) {
            let text = words.join(" ");
            let query = query.join(" ");
            prop_assert_eq!(
                first_match(&text, &QueryWords::new(&query).needles, text.is_ascii()),
                first_match_plain(&text, &query)
            );
        }
    }

    #[test]
    fn one_querys_words_serve_every_preview_of_it() {
        let words = QueryWords::new("Token EXPIRED ab");
        let bodies = [
            format!("{} the token expired {}", "x ".repeat(40), "y ".repeat(40)),
            format!(
                "{} expired, then the token {}",
                "z ".repeat(70),
                "w ".repeat(10)
            ),
            "no query word here at all, only filler words".repeat(5),
            "short".to_string(),
        ];
        for body in &bodies {
            assert_eq!(
                words.preview(body, 40),
                preview_plain(body, "Token EXPIRED ab", 40)
            );
        }
        assert!(words.preview(&bodies[1], 40).contains("expired"));
    }

    #[test]
    fn short_text_is_whole() {
        assert_eq!(preview("a  short\ntext", "x", 100), "a short text");
    }

    #[test]
    fn window_moves_to_the_match() {
        let body = format!(
            "{} the refresh token expired here {}",
            "lorem ".repeat(50),
            "ipsum ".repeat(50)
        );
        let p = preview(&body, "expired TOKEN", 60);
        assert!(p.contains("token expired"), "{p}");
        assert!(p.starts_with('…') && p.ends_with('…'));
        assert!(p.chars().count() <= 62);
    }

    #[test]
    fn the_window_starts_at_the_earliest_query_word_in_characters() {
        // multibyte characters before the match: positions are counted in characters
        let body = format!(
            "{} Überblick über das Tor {}",
            "ä ".repeat(60),
            "ö ".repeat(60)
        );
        let p = preview(&body, "TOR Überblick", 40);
        assert!(p.contains("Überblick über das Tor"), "{p}");
        // words under three characters never move the window
        let p = preview(&body, "da", 40);
        assert!(p.starts_with("ä ä"), "{p}");
    }

    #[test]
    fn multibyte_text_never_panics() {
        let body = "ÄÖÜ ß 日本語 ".repeat(40);
        let p = preview(&body, "日本語", 30);
        assert!(p.chars().count() <= 32);
    }
}
