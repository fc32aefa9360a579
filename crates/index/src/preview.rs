//! Hint previews: a window of a fragment's text around the first query word it contains.

/// At most `max_chars` characters of `body`, starting a little before the first occurrence of
/// a query word (ASCII case-insensitive, words of three or more characters), cut at word
/// boundaries, with `…` where text was cut. Whitespace runs collapse to one space.
pub fn preview(body: &str, query: &str, max_chars: usize) -> String {
    let text: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max_chars {
        return text;
    }
    // A match of one valid UTF-8 string in another starts on a character boundary, so a
    // byte search over the ASCII-lowercased text finds what a search over its characters
    // would, and the earliest byte offset is the earliest character.
    let lower = text.to_ascii_lowercase();
    let first_match = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .filter_map(|w| lower.find(&w.to_ascii_lowercase()))
        .min()
        .map_or(0, |byte| text[..byte].chars().count());
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

#[cfg(test)]
mod tests {
    use super::*;

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
