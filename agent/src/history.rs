//! The conversation as the provider sees it: the request for one model turn (system prompt,
//! the history without its notes, shared with the turn's stream, tools, `tool_choice`), each
//! message written as JSON once for the store and every later request alike, the rule that
//! keeps a stored history acceptable to every provider, and the note a closing message
//! carries for the panel (`rojos`), which no provider is ever sent.

use std::sync::Arc;

use rojos_conversations::{Step, StoreError};
use rojos_llm::{MessageText, SharedChatRequest, ToolChoice, ToolDefinition};
use serde_json::Value;

use crate::rojo::RojoConfig;

/// The request for one model turn, sharing `history` ([`as_sent`], [`written`]): the turn's
/// stream writes its body from it. The last allowed turn is made with `tool_choice: "none"`
/// so the model answers instead of being cut off.
pub(super) fn request(
    rojo: &RojoConfig,
    history: &Arc<Vec<MessageText>>,
    tools: Vec<ToolDefinition>,
    last: bool,
) -> SharedChatRequest {
    SharedChatRequest {
        system: rojo.system_prompt.clone(),
        messages: Arc::clone(history),
        tools,
        tool_choice: Some(if last {
            ToolChoice::None
        } else {
            ToolChoice::Auto
        }),
    }
}

/// The key of a stored assistant message's note: what the client was shown when the run
/// ended (`ERROR`, or "Stopped."), so a reopened conversation shows it too. Stored only,
/// never sent upstream (`docs/api.md`, "What a reopened conversation shows").
pub(super) const NOTE_KEY: &str = "rojos";

/// How a run ended, as its closing message's note records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ending {
    /// The client was sent this `ERROR`.
    Error(String),
    /// The client stopped the run (it went away).
    Stopped,
}

/// `message` with its note: `{"error": …}` or `{"stopped": true}`, and `"noAnswer": true`
/// when its text is only the `(no answer: …)` placeholder.
pub(super) fn with_note(mut message: Value, ending: &Ending, placeholder: bool) -> Value {
    let mut note = serde_json::Map::new();
    match ending {
        Ending::Error(text) => note.insert("error".to_owned(), Value::from(text.as_str())),
        Ending::Stopped => note.insert("stopped".to_owned(), Value::Bool(true)),
    };
    if placeholder {
        note.insert("noAnswer".to_owned(), Value::Bool(true));
    }
    if let Some(object) = message.as_object_mut() {
        object.insert(NOTE_KEY.to_owned(), Value::Object(note));
    }
    message
}

/// Stored messages as the provider gets them: without their notes, each written as JSON
/// text once, which every model turn of the run then copies.
pub(super) fn as_sent(history: Vec<Value>) -> Vec<MessageText> {
    history
        .into_iter()
        .map(|mut message| {
            if let Some(object) = message.as_object_mut() {
                object.remove(NOTE_KEY);
            }
            MessageText::new(&message)
        })
        .collect()
}

/// One step's messages, each written as JSON once: the step the store writes (notes
/// included) and the texts the history sends (the same text, except for a message with a
/// note: that one is written again without it).
///
/// # Errors
/// [`StoreError::InvalidMessage`] for a message that is not an OpenAI message.
pub(super) fn written(messages: &[Value]) -> Result<(Step, Vec<MessageText>), StoreError> {
    let mut rows = Vec::with_capacity(messages.len());
    let mut sent = Vec::with_capacity(messages.len());
    for message in messages {
        let text = MessageText::new(message);
        rows.push(text.as_str().to_owned());
        if message.get(NOTE_KEY).is_none() {
            sent.push(text);
        } else {
            sent.extend(as_sent(vec![message.clone()]));
        }
    }
    Ok((Step::written(messages, rows)?, sent))
}

/// Whether the history ends on a message a provider would not accept as the end of a stored
/// conversation followed by a new user message (`user` or `tool`).
pub(super) fn needs_closing(history: &[MessageText]) -> bool {
    history.last().is_some_and(|m| m.role() != "assistant")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(messages: &[Value]) -> Vec<MessageText> {
        messages.iter().map(MessageText::new).collect()
    }

    #[test]
    fn histories_ending_on_user_or_tool_need_closing() {
        assert!(needs_closing(&texts(&[
            json!({"role": "user", "content": "hi"})
        ])));
        assert!(needs_closing(&texts(&[
            json!({"role": "tool", "tool_call_id": "a", "content": "x"})
        ])));
        assert!(!needs_closing(&texts(&[
            json!({"role": "assistant", "content": "hi"})
        ])));
        assert!(!needs_closing(&[]));
    }

    #[test]
    fn a_step_is_written_once_for_the_store_and_the_history() {
        let closing = with_note(
            json!({"role": "assistant", "content": "part"}),
            &Ending::Stopped,
            false,
        );
        let messages = [json!({"role": "user", "content": "hi \"you\""}), closing];
        let (step, sent) = written(&messages).unwrap();
        // The store gets each message whole, its note included…
        assert_eq!(step, Step::new(&messages).unwrap());
        // …the history the same text, but never a note.
        assert_eq!(
            sent,
            texts(&[
                json!({"role": "user", "content": "hi \"you\""}),
                json!({"role": "assistant", "content": "part"}),
            ])
        );
        assert_eq!(sent[0].as_str(), messages[0].to_string());
        assert!(written(&[json!("not a message")]).is_err());
    }

    #[test]
    fn a_note_is_stored_but_never_sent_upstream() {
        let rojo = RojoConfig {
            providers: vec!["p".into()],
            system_prompt: None,
            tools: crate::rojo::ToolSelection::All,
            max_steps: std::num::NonZeroU32::new(3).expect("3 is not zero"),
            approve: crate::rojo::ApprovalRule::Nothing,
            context_tokens: None,
            compact_at_percent: 80,
        };
        let closing = with_note(
            json!({"role": "assistant", "content": "(no answer: x)"}),
            &Ending::Error("x".into()),
            true,
        );
        assert_eq!(closing["rojos"], json!({"error": "x", "noAnswer": true}));
        let stopped = with_note(
            json!({"role": "assistant", "content": "part"}),
            &Ending::Stopped,
            false,
        );
        assert_eq!(stopped["rojos"], json!({"stopped": true}));
        let history = Arc::new(as_sent(vec![closing, stopped]));
        assert_eq!(
            *request(&rojo, &history, vec![], false).messages,
            texts(&[
                json!({"role": "assistant", "content": "(no answer: x)"}),
                json!({"role": "assistant", "content": "part"}),
            ])
        );
    }

    #[test]
    fn the_last_turn_is_made_without_tools() {
        let rojo = RojoConfig {
            providers: vec!["p".into()],
            system_prompt: Some("be brief".into()),
            tools: crate::rojo::ToolSelection::All,
            max_steps: std::num::NonZeroU32::new(3).expect("3 is not zero"),
            approve: crate::rojo::ApprovalRule::Nothing,
            context_tokens: None,
            compact_at_percent: 80,
        };
        let history = Arc::new(texts(&[json!({"role": "user", "content": "hi"})]));
        let r = request(&rojo, &history, vec![], true);
        assert_eq!(r.tool_choice, Some(ToolChoice::None));
        assert_eq!(r.system.as_deref(), Some("be brief"));
        assert!(
            Arc::ptr_eq(&r.messages, &history),
            "the history is shared, not copied"
        );
        assert_eq!(
            request(&rojo, &history, vec![], false).tool_choice,
            Some(ToolChoice::Auto)
        );
    }
}
