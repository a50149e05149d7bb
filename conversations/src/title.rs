//! A conversation's title: the text of its first user message, made fit for a
//! one-line list, unless the user gave one (checked by [`check_custom_title`]). Also checks
//! that appended values look like OpenAI messages, and makes the pattern of a text search.
//! Pure functions over `serde_json::Value`; storage is the backend's job.

use serde_json::Value;

use crate::error::StoreError;

/// The longest title, in characters, including the closing `…` of a cut title.
pub const TITLE_MAX_CHARS: usize = 80;

/// Checks each message of a step: a JSON object with a string `role`.
pub(crate) fn check_messages(messages: &[Value]) -> Result<(), StoreError> {
    for (index, message) in messages.iter().enumerate() {
        let Some(object) = message.as_object() else {
            return Err(StoreError::InvalidMessage {
                index,
                reason: "is not a JSON object",
            });
        };
        if !object.get("role").is_some_and(Value::is_string) {
            return Err(StoreError::InvalidMessage {
                index,
                reason: "has no string \"role\"",
            });
        }
    }
    Ok(())
}

/// A title the user gave (`rename`), trimmed: 1 to [`TITLE_MAX_CHARS`] characters, none of
/// them a control character (a line break or a tab would break the one-line list).
pub(crate) fn check_custom_title(title: &str) -> Result<String, StoreError> {
    let invalid = |reason: String| Err(StoreError::InvalidTitle { reason });
    let title = title.trim();
    if title.is_empty() {
        return invalid(
            "it is empty; give some text, or null to go back to the first message's text"
                .to_owned(),
        );
    }
    let chars = title.chars().count();
    if chars > TITLE_MAX_CHARS {
        return invalid(format!(
            "it is longer than {TITLE_MAX_CHARS} characters ({chars}); shorten it"
        ));
    }
    if let Some(c) = title.chars().find(|c| c.is_control()) {
        return invalid(format!(
            "it holds the control character {:?}; use one line of plain text",
            c
        ));
    }
    Ok(title.to_owned())
}

/// The `LIKE` pattern matching text that contains `text`, with `%`, `_` and the escape
/// character `\` escaped (the statements say `ESCAPE '\'`), so they match themselves.
pub(crate) fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// The title the first user message with text among `messages` gives, if any.
pub(crate) fn title_of(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .find_map(|m| m.get("content").and_then(one_line))
}

/// The text of a message `content` (a string, or an array of parts whose `text`
/// parts count), whitespace collapsed to single spaces and cut to
/// [`TITLE_MAX_CHARS`]; `None` when there is no text.
fn one_line(content: &Value) -> Option<String> {
    let words: Vec<&str> = match content {
        Value::String(text) => text.split_whitespace().collect(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .flat_map(str::split_whitespace)
            .collect(),
        _ => return None,
    };
    if words.is_empty() {
        return None;
    }
    let line = words.join(" ");
    if line.chars().count() <= TITLE_MAX_CHARS {
        return Some(line);
    }
    let mut cut: String = line.chars().take(TITLE_MAX_CHARS - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    Some(cut)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn title_is_the_first_user_message_with_whitespace_collapsed() {
        let step = [
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": "  make a\n\n docs folder  "}),
            json!({"role": "user", "content": "second"}),
        ];
        assert_eq!(title_of(&step).as_deref(), Some("make a docs folder"));
    }

    #[test]
    fn long_title_is_cut_to_80_characters_ending_in_an_ellipsis() {
        let text = "é".repeat(200);
        let title = title_of(&[json!({"role": "user", "content": text})]).unwrap();
        assert_eq!(title.chars().count(), 80);
        assert!(title.ends_with("é…"));
    }

    #[test]
    fn title_of_exactly_80_characters_is_kept_whole() {
        let text = "a".repeat(80);
        assert_eq!(
            title_of(&[json!({"role": "user", "content": text.clone()})]),
            Some(text)
        );
    }

    #[test]
    fn title_joins_the_text_parts_of_an_array_content() {
        let step = [json!({"role": "user", "content": [
            {"type": "text", "text": "look at"},
            {"type": "image_url", "image_url": {"url": "data:..."}},
            {"type": "text", "text": "this"}
        ]})];
        assert_eq!(title_of(&step).as_deref(), Some("look at this"));
    }

    #[test]
    fn blank_user_messages_and_other_roles_give_no_title() {
        let step = [
            json!({"role": "assistant", "content": "hi"}),
            json!({"role": "user", "content": "   "}),
            json!({"role": "user", "content": null}),
        ];
        assert_eq!(title_of(&step), None);
    }

    #[test]
    fn a_custom_title_is_trimmed_and_must_be_one_short_line() {
        assert_eq!(check_custom_title("  Plan  ").unwrap(), "Plan");
        assert_eq!(
            check_custom_title(&"é".repeat(80)).unwrap().chars().count(),
            80
        );
        let err = |t: &str| check_custom_title(t).unwrap_err().to_string();
        assert_eq!(
            err(&"é".repeat(81)),
            "invalid title: it is longer than 80 characters (81); shorten it"
        );
        assert_eq!(
            err("two\nlines"),
            "invalid title: it holds the control character '\\n'; use one line of plain text"
        );
        assert!(err(" \t ").starts_with("invalid title: it is empty"));
        assert!(err("bell\u{7}").contains("'\\u{7}'"));
    }

    #[test]
    fn a_search_pattern_escapes_the_like_wildcards() {
        assert_eq!(contains_pattern("50%_off\\"), "%50\\%\\_off\\\\%");
        assert_eq!(contains_pattern("plain"), "%plain%");
    }

    #[test]
    fn messages_must_be_objects_with_a_string_role() {
        assert!(check_messages(&[json!({"role": "user", "content": "x"})]).is_ok());
        let err = check_messages(&[json!({"role": "user"}), json!("text")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message 1 of the appended step is not a JSON object"
        );
        let err = check_messages(&[json!({"role": 3})]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message 0 of the appended step has no string \"role\""
        );
    }
}
