//! The conversation as the provider sees it: the request for one model turn (system prompt,
//! the history without its notes, shared with the turn's stream, tools, `tool_choice`), the
//! rule that keeps a stored history acceptable to every provider, and the note a closing
//! message carries for the panel (`rojos`), which no provider is ever sent.

use std::sync::Arc;

use rojos_llm::{SharedChatRequest, ToolChoice, ToolDefinition};
use serde_json::Value;

use crate::config::RojoConfig;

/// The request for one model turn, sharing `history` (taken [`without_notes`]): the turn's
/// stream writes its body from it. The last allowed turn is made with `tool_choice: "none"`
/// so the model answers instead of being cut off.
pub(super) fn request(
    rojo: &RojoConfig,
    history: &Arc<Vec<Value>>,
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

/// Stored messages as the provider gets them: without their notes. The run keeps its history
/// this way (removed in place as messages join it), so a model turn sends it as it is
/// instead of copying it.
pub(super) fn without_notes(mut history: Vec<Value>) -> Vec<Value> {
    for message in &mut history {
        if let Some(object) = message.as_object_mut() {
            object.remove(NOTE_KEY);
        }
    }
    history
}

/// Whether the history ends on a message a provider would not accept as the end of a stored
/// conversation followed by a new user message (`user` or `tool`).
pub(super) fn needs_closing(history: &[Value]) -> bool {
    history.last().is_some_and(|m| m["role"] != "assistant")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn histories_ending_on_user_or_tool_need_closing() {
        assert!(needs_closing(&[json!({"role": "user", "content": "hi"})]));
        assert!(needs_closing(&[
            json!({"role": "tool", "tool_call_id": "a", "content": "x"})
        ]));
        assert!(!needs_closing(&[
            json!({"role": "assistant", "content": "hi"})
        ]));
        assert!(!needs_closing(&[]));
    }

    #[test]
    fn a_note_is_stored_but_never_sent_upstream() {
        let rojo = RojoConfig {
            providers: vec!["p".into()],
            system_prompt: None,
            tools: crate::config::ToolSelection::All,
            max_steps: std::num::NonZeroU32::new(3).expect("3 is not zero"),
            approve: crate::config::ApprovalRule::Nothing,
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
        let history = Arc::new(without_notes(vec![closing, stopped]));
        assert_eq!(
            *request(&rojo, &history, vec![], false).messages,
            [
                json!({"role": "assistant", "content": "(no answer: x)"}),
                json!({"role": "assistant", "content": "part"}),
            ]
        );
    }

    #[test]
    fn the_last_turn_is_made_without_tools() {
        let rojo = RojoConfig {
            providers: vec!["p".into()],
            system_prompt: Some("be brief".into()),
            tools: crate::config::ToolSelection::All,
            max_steps: std::num::NonZeroU32::new(3).expect("3 is not zero"),
            approve: crate::config::ApprovalRule::Nothing,
        };
        let history = Arc::new(vec![json!({"role": "user", "content": "hi"})]);
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
