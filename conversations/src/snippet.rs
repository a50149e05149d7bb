//! A search hit's snippet: a short piece of the first matching message's searchable text
//! (`crate::search`) around the first place the searched text occurs in it, ignoring case
//! as the search does. It comes split into the text before the match, the match and the
//! text after it, so a client marks the match without parsing anything (`docs/api.md`,
//! "Managing conversations"). Both stores make it here, from the message they found, so its
//! shape is the same from both.

use serde::Serialize;

/// Characters of context kept before the match, at most (fewer than after it, so the match
/// comes early in a snippet a client shows on a few narrow lines).
pub const SNIPPET_BEFORE_CHARS: usize = 40;

/// Characters of context kept after the match, at most.
pub const SNIPPET_AFTER_CHARS: usize = 60;

/// Characters of the match itself kept, at most (a longer one is cut, ending in `…`).
const MATCH_CHARS: usize = 120;

/// How far into a cut side a word boundary is looked for, so no word is shown in part.
const WORD_SLACK: usize = 16;

/// Where and how a conversation matched a search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snippet {
    /// The index of the message that matched (its first match), as in
    /// `GET /conversations/{id}?from=`.
    pub message: u64,
    /// The text before the match (starting with `…` when cut), whitespace runs as one
    /// space.
    pub before: String,
    /// The matched text as the message has it (its case), whitespace runs as one space.
    #[serde(rename = "match")]
    pub matched: String,
    /// The text after the match (ending with `…` when cut), whitespace runs as one space.
    pub after: String,
}

impl Snippet {
    /// The snippet of the message at index `message` whose searchable text is `text`,
    /// around the first occurrence of `folded` (a searched text folded by
    /// `crate::search::fold`); `None` when it does not occur.
    pub(crate) fn of(message: u64, text: &str, folded: &str) -> Option<Self> {
        let (start, end) = find(text, folded)?;
        let before: Vec<char> = text[..start].chars().collect();
        let after: Vec<char> = text[end..].chars().collect();
        Some(Self {
            message,
            before: tail(&before),
            matched: clip_match(&text[start..end]),
            after: head(&after),
        })
    }
}

/// The byte range of `text` where `folded` first occurs, ignoring case. Each character is
/// folded on its own and the final sigma read as sigma (the one rule of `to_lowercase` that
/// looks at the neighbours), so every position maps back to a character of `text`.
fn find(text: &str, folded: &str) -> Option<(usize, usize)> {
    let needle: String = folded.chars().flat_map(fold_char).collect();
    if needle.is_empty() {
        return None;
    }
    let mut haystack = String::with_capacity(text.len());
    // For each byte of `haystack`, the byte of `text` where its character starts.
    let mut origin = Vec::with_capacity(text.len());
    for (at, c) in text.char_indices() {
        for lower in fold_char(c) {
            haystack.push(lower);
            origin.extend(std::iter::repeat_n(at, lower.len_utf8()));
        }
    }
    let found = haystack.find(&needle)?;
    let start = origin[found];
    let last = origin[found + needle.len() - 1];
    let end = last + text[last..].chars().next().map_or(0, char::len_utf8);
    Some((start, end))
}

/// One character in lower case, the final sigma as sigma.
fn fold_char(c: char) -> impl Iterator<Item = char> {
    c.to_lowercase().map(|l| if l == 'ς' { 'σ' } else { l })
}

/// `text` with each run of whitespace (line breaks included) as one space.
fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            out.push(' ');
        }
        space = false;
        out.push(c);
    }
    if space && !out.is_empty() {
        out.push(' ');
    }
    out
}

/// The end of the text before the match: at most [`SNIPPET_BEFORE_CHARS`] characters,
/// starting at a word when cut.
fn tail(chars: &[char]) -> String {
    let text: String = chars.iter().collect();
    let text = collapse_keeping_edges(&text);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= SNIPPET_BEFORE_CHARS {
        return text;
    }
    let mut from = chars.len() - SNIPPET_BEFORE_CHARS;
    if let Some(space) = chars[from..]
        .iter()
        .take(WORD_SLACK)
        .position(|c| *c == ' ')
    {
        from += space + 1;
    }
    let kept: String = chars[from..].iter().collect();
    format!("…{kept}")
}

/// The start of the text after the match: at most [`SNIPPET_AFTER_CHARS`] characters,
/// ending at a word when cut.
fn head(chars: &[char]) -> String {
    let text: String = chars.iter().collect();
    let text = collapse_keeping_edges(&text);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= SNIPPET_AFTER_CHARS {
        return text;
    }
    let mut to = SNIPPET_AFTER_CHARS;
    if let Some(space) = chars[..to]
        .iter()
        .rev()
        .take(WORD_SLACK)
        .position(|c| *c == ' ')
    {
        to -= space + 1;
    }
    let kept: String = chars[..to].iter().collect();
    format!("{kept}…")
}

/// `text` with whitespace runs as one space, a space kept at either edge where the text
/// had whitespace there (it separates the side from the match).
fn collapse_keeping_edges(text: &str) -> String {
    let inner = collapse(text);
    let lead = text.starts_with(char::is_whitespace) && !inner.starts_with(' ');
    if lead {
        format!(" {inner}")
    } else {
        inner
    }
}

/// The match, whitespace collapsed, cut to [`MATCH_CHARS`].
fn clip_match(text: &str) -> String {
    let text = collapse_keeping_edges(text);
    if text.chars().count() <= MATCH_CHARS {
        return text;
    }
    let kept: String = text.chars().take(MATCH_CHARS - 1).collect();
    format!("{kept}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::fold;

    fn snippet(text: &str, searched: &str) -> Option<(String, String, String)> {
        Snippet::of(3, text, &fold(searched)).map(|s| (s.before, s.matched, s.after))
    }

    #[test]
    fn the_first_match_comes_with_its_case_and_short_sides() {
        let (before, matched, after) = snippet("Please read the README first.", "readme").unwrap();
        assert_eq!(
            (before.as_str(), matched.as_str(), after.as_str()),
            ("Please read the ", "README", " first.")
        );
        assert_eq!(snippet("nothing here", "readme"), None);
    }

    #[test]
    fn long_sides_are_cut_at_words_with_an_ellipsis() {
        let words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu";
        let text = format!("{words} NEEDLE {words}");
        let (before, matched, after) = snippet(&text, "needle").unwrap();
        assert_eq!(matched, "NEEDLE");
        assert!(
            before.starts_with('…') && before.ends_with(' '),
            "{before:?}"
        );
        assert!(after.ends_with('…') && after.starts_with(' '), "{after:?}");
        assert!(before.chars().count() <= SNIPPET_BEFORE_CHARS + 1);
        assert!(after.chars().count() <= SNIPPET_AFTER_CHARS + 1);
        // Whole words only.
        for side in [&before, &after] {
            for word in side.trim_matches(['…', ' ']).split(' ') {
                assert!(words.split(' ').any(|w| w == word), "{word:?} in {side:?}");
            }
        }
    }

    #[test]
    fn line_breaks_become_spaces() {
        let (before, matched, after) = snippet("one\n\ntwo three\n  four", "two three").unwrap();
        assert_eq!(before, "one ");
        assert_eq!(matched, "two three");
        assert_eq!(after, " four");
    }

    #[test]
    fn folding_that_changes_lengths_maps_back_to_the_text() {
        // 'İ' folds to two characters; the match is still the text's own characters.
        let (before, matched, after) = snippet("xİstanbul ÉTÉ ΟΔΟΣ y", "été οδος").unwrap();
        assert_eq!(before, "xİstanbul ");
        assert_eq!(matched, "ÉTÉ ΟΔΟΣ");
        assert_eq!(after, " y");
        let (before, matched, _) = snippet("ab İSTANBUL", "stan").unwrap();
        assert_eq!((before.as_str(), matched.as_str()), ("ab İ", "STAN"));
    }

    #[test]
    fn markup_stays_text() {
        let (before, matched, after) =
            snippet("<b>bold</b> <script>x</script>", "<script>").unwrap();
        assert_eq!(before, "<b>bold</b> ");
        assert_eq!(matched, "<script>");
        assert_eq!(after, "x</script>");
    }
}
