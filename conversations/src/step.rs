//! One step's messages as a store writes them: checked, each message's compact JSON text,
//! and the title its user message gives. Built once by whoever holds the messages, so the
//! caller knows the stored size without writing the text twice, and a store only writes it.
//! Also each message's searchable text (`crate::search`), which the stores index.

use serde_json::Value;

use crate::error::StoreError;
use crate::search::search_text;
use crate::title::{check_messages, title_of};

/// The messages of one step (a user message, or an assistant message and its tool
/// results), ready to store with [`ConversationStore::append_step`] or
/// [`ConversationStore::replace_from`].
///
/// [`ConversationStore::append_step`]: crate::ConversationStore::append_step
/// [`ConversationStore::replace_from`]: crate::ConversationStore::replace_from
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    rows: Vec<String>,
    title: Option<String>,
    search: Vec<Option<String>>,
}

impl Step {
    /// The step of `messages`, in order.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidMessage`] for a message that is not a JSON object with a string
    /// `role`.
    pub fn new(messages: &[Value]) -> Result<Self, StoreError> {
        check_messages(messages)?;
        let rows = messages
            .iter()
            .map(|message| serde_json::to_string(message).expect("a JSON value always serialises"))
            .collect();
        Ok(Self::checked(messages, rows))
    }

    /// The step of `messages` whose text the caller wrote already: `rows[i]` is
    /// `messages[i]`'s compact JSON text, as `serde_json::to_string` writes it (a caller that
    /// also sends the messages upstream writes each once, for both).
    ///
    /// # Errors
    ///
    /// As [`Step::new`].
    pub fn written(messages: &[Value], rows: Vec<String>) -> Result<Self, StoreError> {
        check_messages(messages)?;
        debug_assert!(
            messages.len() == rows.len()
                && messages
                    .iter()
                    .zip(&rows)
                    .all(
                        |(message, row)| serde_json::to_string(message).ok().as_ref() == Some(row)
                    ),
            "each row is its message's text"
        );
        Ok(Self::checked(messages, rows))
    }

    fn checked(messages: &[Value], rows: Vec<String>) -> Self {
        Self {
            rows,
            title: title_of(messages),
            search: messages.iter().map(search_text).collect(),
        }
    }

    /// The stored size: the bytes of the messages' compact JSON text.
    pub fn bytes(&self) -> usize {
        self.rows.iter().map(String::len).sum()
    }

    /// Whether the step has no message.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Each message's compact JSON text, in order.
    pub(crate) fn rows(&self) -> &[String] {
        &self.rows
    }

    /// Each message's searchable text (`crate::search::search_text`), in order: `None` for a
    /// message search does not read.
    pub(crate) fn search_texts(&self) -> &[Option<String>] {
        &self.search
    }

    /// The title the step's first user message with text gives.
    pub(crate) fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_size_is_the_compact_json_length_of_each_message() {
        let messages = [
            json!({"role": "user", "content": "héllo  world"}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "ok", "rojos": {"x": [1, 2]}}),
        ];
        let step = Step::new(&messages).unwrap();
        let expected: usize = messages.iter().map(|m| m.to_string().len()).sum();
        assert_eq!(step.bytes(), expected);
        assert_eq!(
            step.rows(),
            [messages[0].to_string(), messages[1].to_string()]
        );
        assert_eq!(step.title(), Some("héllo world"));
        assert_eq!(Step::new(&[]).unwrap().bytes(), 0);
        assert!(Step::new(&[]).unwrap().is_empty());
    }

    #[test]
    fn a_message_that_is_not_an_openai_message_is_refused_with_its_index() {
        let messages = [json!({"role": "user", "content": "a"}), json!("text")];
        let refused = Step::new(&messages);
        assert!(
            matches!(refused, Err(StoreError::InvalidMessage { index: 1, .. })),
            "{refused:?}"
        );
        let rows = messages.iter().map(Value::to_string).collect();
        let refused = Step::written(&messages, rows);
        assert!(
            matches!(refused, Err(StoreError::InvalidMessage { index: 1, .. })),
            "{refused:?}"
        );
    }

    #[test]
    fn a_step_written_by_its_caller_is_the_step_made_here() {
        let messages = [
            json!({"role": "user", "content": "a \"title\""}),
            json!({"role": "assistant", "content": null, "rojos": {"stopped": true}}),
        ];
        let rows = messages.iter().map(Value::to_string).collect();
        assert_eq!(
            Step::written(&messages, rows).unwrap(),
            Step::new(&messages).unwrap()
        );
    }
}
