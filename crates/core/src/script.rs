//! Which writing system a character or a text is in: what the word analysis splits and stems
//! by (finder-index) and what tells an English-only model's query apart (the vector channel).

/// Whether `c` is written in a script that does not put spaces between words: Han (Chinese
/// characters, Japanese kanji), Hiragana, Katakana, Hangul.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF // Hangul Jamo
        | 0x3040..=0x30FF // Hiragana, Katakana
        | 0x3130..=0x318F // Hangul compatibility Jamo
        | 0x31F0..=0x31FF // Katakana phonetic extensions
        | 0x3400..=0x4DBF // Han extension A
        | 0x4E00..=0x9FFF // Han
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // Han compatibility
        | 0xFF66..=0xFF9F // halfwidth Katakana
        | 0x20000..=0x2FFFF) // Han extensions B and on
}

/// Whether `c` is a Cyrillic letter.
pub fn is_cyrillic(c: char) -> bool {
    matches!(c as u32, 0x0400..=0x052F | 0x1C80..=0x1C8F | 0x2DE0..=0x2DFF | 0xA640..=0xA69F)
}

/// The script most of `text`'s letters are in, when it is not Latin: `Some("Cyrillic")`,
/// `Some("CJK")`, `Some("another non-Latin script")`; `None` for Latin text or no letters.
pub fn non_latin_script(text: &str) -> Option<&'static str> {
    let (mut latin, mut cyrillic, mut cjk, mut other) = (0usize, 0usize, 0usize, 0usize);
    for c in text.chars().filter(|c| c.is_alphabetic()) {
        if matches!(c as u32, 0..=0x024F | 0x1E00..=0x1EFF) {
            latin += 1;
        } else if is_cyrillic(c) {
            cyrillic += 1;
        } else if is_cjk(c) {
            cjk += 1;
        } else {
            other += 1;
        }
    }
    if cyrillic + cjk + other <= latin {
        return None;
    }
    Some(if cyrillic >= cjk.max(other) {
        "Cyrillic"
    } else if cjk >= other {
        "CJK"
    } else {
        "another non-Latin script"
    })
}
