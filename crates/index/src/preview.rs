//! Hint previews: a window of a fragment's text around the first query word it contains.

/// At most `max_chars` characters of `body`, starting a little before the first occurrence of
/// a query word (ASCII case-insensitive, words of three or more characters), cut at word
/// boundaries, with `…` where text was cut. Whitespace runs collapse to one space.
pub fn preview(body: &str, query: &str, max_chars: usize) -> String {
    let text: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    // No more bytes than the window: no more characters either.
    if text.len() <= max_chars {
        return text;
    }
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max_chars {
        return text;
    }
    let first_match = first_match(&text, query);
    // Start a fifth of the window before the match, at a word boundary.
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

/// The character position in `text` of the earliest occurrence of a query word (ASCII
/// case-insensitive, words of three or more characters); 0 when there is none.
fn first_match(text: &str, query: &str) -> usize {
    // A match of one valid UTF-8 string in another starts on a character boundary, so a
    // byte search over the ASCII-lowercased text finds what a search over its characters
    // would, and the earliest byte offset is the earliest character. Each word's search
    // stops before the earliest match so far (memchr's SIMD `memmem`, several times faster
    // than `str::find` here: previews were a fifth of a lexical query).
    let lower = text.to_ascii_lowercase();
    let mut earliest = lower.len();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
    {
        let needle = word.to_ascii_lowercase();
        let within = &lower.as_bytes()[..(earliest + needle.len() - 1).min(lower.len())];
        if let Some(at) = memchr::memmem::find(within, needle.as_bytes()) {
            earliest = at;
        }
    }
    if earliest == lower.len() {
        0
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

    proptest! {
        /// The pruned search finds what the plain definition finds.
        #[test]
        fn the_earliest_word_is_found(
            words in prop::collection::vec("[a-cäA-C]{1,5}", 0..60),
            query in prop::collection::vec("[a-cäA-C]{1,5}", 0..5),
        ) {
            let text = words.join(" ");
            let query = query.join(" ");
            prop_assert_eq!(first_match(&text, &query), first_match_plain(&text, &query));
        }
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
