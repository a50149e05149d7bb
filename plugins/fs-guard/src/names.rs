//! Invisible characters in names: which characters can make a name look like another or
//! like nothing ([`is_invisible`]), and the one way every output shows them, escaped
//! ([`escaped`] for text, [`json_escaped`] for JSON). New names holding one are refused
//! ([`crate::check_path`]); names made outside Rojos are shown escaped in error messages
//! ([`crate::Shown`]), tool results, the files pane and download names (docs/security.md,
//! "Invisible characters in names").

use std::borrow::Cow;
use std::fmt::Write;

use unicode_general_category::{get_general_category, GeneralCategory};

/// Whether `c` shows as nothing or changes how the text around it is shown: control
/// characters (C0, C1, DEL), every format character (general category `Cf`: zero-width
/// spaces and joiners, bidirectional marks, embeddings, overrides and isolates, the byte
/// order mark, tags…), line and paragraph separators, and the other default-ignorable
/// characters that display as blank (combining grapheme joiner, Hangul fillers, Khmer
/// inherent vowels, Mongolian variation selectors). Variation selectors `U+FE00`–`U+FE0F`
/// and `U+E0100`–`U+E01EF` are not: they only choose the look of the visible character
/// before them (an emoji's), which needs no escaping.
pub fn is_invisible(c: char) -> bool {
    if c.is_control() {
        return true;
    }
    if matches!(
        c,
        '\u{034f}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}' | '\u{180b}'
            ..='\u{180f}' | '\u{3164}' | '\u{ffa0}'
    ) {
        return true;
    }
    matches!(
        get_general_category(c),
        GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// The first invisible character of `name`, if any.
pub fn first_invisible(name: &str) -> Option<char> {
    name.chars().find(|&c| is_invisible(c))
}

/// `name` for display: each invisible character written as `\u{XXXX}` (lower-case hex, at
/// least four digits), the rest as it is. Borrowed when there is nothing to escape.
pub fn escaped(name: &str) -> Cow<'_, str> {
    if first_invisible(name).is_none() {
        return Cow::Borrowed(name);
    }
    let mut shown = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if is_invisible(c) {
            let _ = write!(shown, "\\u{{{:04x}}}", c as u32);
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

/// A JSON text with each invisible character inside its strings written as a JSON escape
/// (`\u200b`, a surrogate pair beyond the Basic Multilingual Plane): the same JSON value,
/// every name exact for a program that parses it, and nothing invisible for a reader (the
/// model reading a tool result, a person reading an API answer). Outside strings JSON
/// holds only ASCII, so each character can be replaced wherever it stands.
pub fn json_escaped(json: &str) -> Cow<'_, str> {
    if first_invisible(json).is_none() {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        // Control characters are escaped by every JSON writer already; the others are not.
        if is_invisible(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_bidi_control_and_blank_characters_are_invisible() {
        for c in [
            '\u{0}',
            '\u{1b}',
            '\u{7f}',
            '\u{85}',
            '\u{ad}',
            '\u{61c}',
            '\u{180e}',
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{200e}',
            '\u{200f}',
            '\u{2028}',
            '\u{2029}',
            '\u{202a}',
            '\u{202e}',
            '\u{2060}',
            '\u{2066}',
            '\u{2069}',
            '\u{feff}',
            '\u{fff9}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{34f}',
            '\u{115f}',
            '\u{3164}',
            '\u{ffa0}',
        ] {
            assert!(is_invisible(c), "U+{:04X}", c as u32);
        }
        for c in [
            'a',
            ' ',
            'é',
            'ß',
            '中',
            '\u{fe0f}',
            '\u{1f600}',
            '\u{301}',
            '\u{a0}',
        ] {
            assert!(!is_invisible(c), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn names_are_shown_with_each_invisible_character_escaped() {
        assert_eq!(escaped("plain.txt"), "plain.txt");
        assert!(matches!(escaped("plain.txt"), Cow::Borrowed(_)));
        assert_eq!(escaped("invoice\u{202e}txt.exe"), "invoice\\u{202e}txt.exe");
        assert_eq!(escaped("a\u{200b}b\u{e0001}"), "a\\u{200b}b\\u{e0001}");
    }

    #[test]
    fn json_keeps_its_value_and_shows_nothing_invisible() {
        let value = serde_json::json!({"name": "a\u{200b}b\u{202e}c\u{e0001}", "é": "ok"});
        let text = value.to_string();
        let shown = json_escaped(&text);
        assert_eq!(shown, r#"{"name":"a\u200bb\u202ec\udb40\udc01","é":"ok"}"#);
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
        assert!(matches!(json_escaped(r#"{"a":"b"}"#), Cow::Borrowed(_)));
    }
}
