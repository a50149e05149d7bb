//! What a search reads and how its text is matched, for both stores: a message's searchable
//! text (the `content` of a user or assistant message: the string, or the `text` parts of an
//! array joined by line breaks), case folding (Rust's `to_lowercase`, Unicode's rules), and
//! the [`SearchPattern`] made from a searched text: its folded form, the SQL `LIKE` pattern
//! for titles, and the trigrams an index looks up. Texts shorter than [`MIN_INDEXED_CHARS`]
//! have no trigram: the stores then search titles only (`docs/api.md`).

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use crate::title::contains_pattern;

/// The fewest characters a searched text needs for the messages to be searched (one
/// trigram); a shorter one searches titles only.
pub const MIN_INDEXED_CHARS: usize = 3;

/// The searchable text of `message`: `None` for a message of another role, or one with no
/// text. NUL characters are left out (PostgreSQL's `text` cannot hold them).
pub(crate) fn search_text(message: &Value) -> Option<String> {
    let role = message.get("role").and_then(Value::as_str)?;
    if role != "user" && role != "assistant" {
        return None;
    }
    text_of_content(message.get("content")?)
}

/// The text of a message `content`: a string, or the `text` parts of an array joined by
/// line breaks.
fn text_of_content(content: &Value) -> Option<String> {
    let text = match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect();
            texts.join("\n")
        }
        _ => return None,
    };
    if text.is_empty() {
        return None;
    }
    Some(if text.contains('\0') {
        text.replace('\0', "")
    } else {
        text
    })
}

/// The role and content of a stored message, read without building the rest.
#[derive(Deserialize)]
struct RoleAndContent {
    role: Option<String>,
    content: Option<Value>,
}

/// The searchable text of a message stored as JSON text (`None` if it is not JSON).
pub(crate) fn search_text_of_json(json: &str) -> Option<String> {
    let message: RoleAndContent = serde_json::from_str(json).ok()?;
    match message.role.as_deref() {
        Some("user" | "assistant") => text_of_content(&message.content?),
        _ => None,
    }
}

/// `text` folded for a search that ignores case.
pub(crate) fn fold(text: &str) -> String {
    text.to_lowercase()
}

/// Whether the message stored as `json` has searchable text holding `folded` (already
/// folded), ignoring case. Linear in the message's size.
pub(crate) fn message_matches(json: &str, folded: &str) -> bool {
    search_text_of_json(json).is_some_and(|text| fold(&text).contains(folded))
}

/// A searched text, ready for the stores.
#[derive(Debug, Clone)]
pub(crate) struct SearchPattern {
    /// The text folded ([`fold`]).
    folded: String,
}

impl SearchPattern {
    /// The pattern for `text` (not empty: the caller lists instead).
    pub(crate) fn new(text: &str) -> Self {
        Self { folded: fold(text) }
    }

    /// The folded text.
    pub(crate) fn folded(&self) -> &str {
        &self.folded
    }

    /// The `LIKE` pattern (`ESCAPE '\'`) of text containing the folded text.
    pub(crate) fn like_folded(&self) -> String {
        contains_pattern(&self.folded)
    }

    /// Whether the text is long enough for messages to be searched
    /// ([`MIN_INDEXED_CHARS`]).
    pub(crate) fn searches_messages(&self) -> bool {
        self.folded.chars().nth(MIN_INDEXED_CHARS - 1).is_some()
    }

    /// The SQLite FTS5 query asking for every distinct trigram of the folded text (each a
    /// quoted string, `"` doubled), or `None` when it has none.
    pub(crate) fn fts_query(&self) -> Option<String> {
        let chars: Vec<char> = self.folded.chars().collect();
        let trigrams: BTreeSet<String> = chars
            .windows(MIN_INDEXED_CHARS)
            .map(|w| w.iter().collect())
            .collect();
        if trigrams.is_empty() {
            return None;
        }
        let quoted: Vec<String> = trigrams
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
            .collect();
        Some(quoted.join(" AND "))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_user_and_assistant_text_is_searchable() {
        assert_eq!(
            search_text(&json!({"role": "user", "content": "Hello"})).as_deref(),
            Some("Hello")
        );
        assert_eq!(
            search_text(&json!({"role": "assistant", "content": [
                {"type": "text", "text": "one"},
                {"type": "image_url", "image_url": {"url": "data:x"}},
                {"type": "text", "text": "two"}
            ]}))
            .as_deref(),
            Some("one\ntwo")
        );
        assert_eq!(search_text(&json!({"role": "tool", "content": "x"})), None);
        assert_eq!(
            search_text(&json!({"role": "assistant", "content": null})),
            None
        );
        assert_eq!(
            search_text(&json!({"role": "user", "content": "a\u{0}b"})).as_deref(),
            Some("ab")
        );
    }

    #[test]
    fn stored_json_gives_the_same_text_as_the_message() {
        let message = json!({"role": "user", "content": [{"type": "text", "text": "Été"}], "x": 1});
        assert_eq!(
            search_text_of_json(&message.to_string()),
            search_text(&message)
        );
        assert!(message_matches(&message.to_string(), "été"));
        assert!(!message_matches("not json", "x"));
    }

    #[test]
    fn a_pattern_asks_for_each_distinct_trigram_quoted() {
        let pattern = SearchPattern::new("Say \"hi\" hi");
        assert_eq!(pattern.folded(), "say \"hi\" hi");
        let query = pattern.fts_query().unwrap();
        assert!(query.contains("\"\"\"hi\""), "{query}");
        assert!(query.contains("\"say\" AND"), "{query}");
        assert_eq!(query.matches(" hi").count(), 1, "{query}");
        assert!(SearchPattern::new("ab").fts_query().is_none());
        assert!(!SearchPattern::new("ab").searches_messages());
        assert!(SearchPattern::new("abc").searches_messages());
        assert!(SearchPattern::new("éèê").searches_messages());
    }
}
