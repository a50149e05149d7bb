//! Regenerate and edit at `POST /chat`: `"regenerate": true` sends the conversation's last
//! user message again, `"editLast": true` sends `message` in its place. Either way the run's
//! first step replaces that message and everything after it (`replace_from` in the store: the
//! deletion and the new user message are one transaction, made under the run's lease), and
//! the model sees the history before it. `docs/api.md`, "Regenerate and edit".

use rojos_agent::Placement;
use rojos_conversations::ConversationHead;
use serde_json::Value;

use super::{
    error::ApiError,
    opened::{Opened, SizeCheck},
    stored::{internal, lease_for_run},
};
use crate::state::AppState;

/// What a chat does with its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Appends it (a new conversation, or the next message of one).
    Append,
    /// Sends the last user message again in place of itself.
    Regenerate,
    /// Sends `message` in place of the last user message.
    EditLast,
}

impl Mode {
    /// The mode the body's flags ask for; `400` for both.
    pub(super) fn of(regenerate: bool, edit_last: bool) -> Result<Mode, ApiError> {
        match (regenerate, edit_last) {
            (false, false) => Ok(Mode::Append),
            (true, false) => Ok(Mode::Regenerate),
            (false, true) => Ok(Mode::EditLast),
            (true, true) => Err(ApiError::BadRequest(
                "regenerate and editLast cannot be combined: regenerate sends the last message \
                 again, editLast sends a new one in its place"
                    .to_owned(),
            )),
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Mode::Regenerate => "regenerate",
            Mode::Append | Mode::EditLast => "edit",
        }
    }
}

/// The message the body gives, checked against the mode: `400` when it is missing or blank
/// (or given to `regenerate`, which takes none), or when a replace names no conversation.
pub(super) fn check_body(
    mode: Mode,
    message: Option<String>,
    has_conversation: bool,
) -> Result<Option<String>, ApiError> {
    let bad = |text: &str| Err(ApiError::BadRequest(text.to_owned()));
    if mode != Mode::Append && !has_conversation {
        return bad(
            "regenerate and editLast need the conversationId of the conversation to change",
        );
    }
    match (mode, message) {
        (Mode::Regenerate, None) => Ok(None),
        (Mode::Regenerate, Some(_)) => bad(
            "regenerate sends the last user message again and takes no message; use editLast \
             to send a different one",
        ),
        (_, Some(message)) if !message.trim().is_empty() => Ok(Some(message)),
        (_, Some(_)) => bad("message must not be empty"),
        (_, None) => bad("invalid body: missing field `message` (the text to send)"),
    }
}

/// The conversation of `head` (read by `chat::head_in_project`, so `404`/`403` as for any
/// chat) opened for a run that replaces its last user message: `409` while a run writes there, `422` when it has no user message (or,
/// to regenerate, one without plain text) or the message does not fit.
pub(super) async fn open(
    state: &AppState,
    head: ConversationHead,
    mode: Mode,
    message: Option<String>,
) -> Result<Opened, ApiError> {
    let store = &state.agent.store;
    let id = head.id;
    let not_found = || ApiError::NotFound(format!("no conversation {id}"));
    let lease = lease_for_run(state, &id, None).await?;
    // No run writes here while the lease is held: the last user message stays the last.
    let mut history = store
        .get(&id)
        .await
        .map_err(internal)?
        .ok_or_else(not_found)?
        .messages;
    let Some(from) = history.iter().rposition(|m| m["role"] == "user") else {
        return Err(ApiError::Unprocessable(format!(
            "this conversation has no user message to {}; send a message instead",
            mode.verb()
        )));
    };
    let message = match message {
        Some(message) => message,
        None => plain_text(&history[from]).ok_or_else(|| {
            ApiError::Unprocessable(
                "the last user message has no plain text to send again; edit it instead".to_owned(),
            )
        })?,
    };
    history.truncate(from);
    let history_bytes: usize = history.iter().map(|m| m.to_string().len()).sum();
    SizeCheck::new(state, &message).check(u64::try_from(history_bytes).unwrap_or(u64::MAX))?;
    Ok(Opened {
        id,
        history,
        // Read whole: the summaries of replaced messages are gone, the run reads the rest.
        compaction: None,
        history_bytes,
        lease,
        message,
        placement: Placement::ReplaceFrom(u64::try_from(from).unwrap_or(u64::MAX)),
        first_turn: None,
    })
}

/// A user message's text when its `content` is a non-blank string (as Rojos stores them).
fn plain_text(message: &Value) -> Option<String> {
    message["content"]
        .as_str()
        .filter(|text| !text.trim().is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_and_the_message_must_agree() {
        assert_eq!(Mode::of(false, false).unwrap(), Mode::Append);
        assert!(Mode::of(true, true).is_err());
        let text = || Some("hi".to_owned());
        assert!(check_body(Mode::Regenerate, None, true).unwrap().is_none());
        assert!(check_body(Mode::Regenerate, text(), true).is_err());
        assert!(check_body(Mode::Regenerate, None, false).is_err());
        assert!(check_body(Mode::EditLast, None, true).is_err());
        assert!(check_body(Mode::EditLast, Some(" ".to_owned()), true).is_err());
        assert_eq!(check_body(Mode::EditLast, text(), true).unwrap(), text());
        assert!(check_body(Mode::Append, None, false).is_err());
    }
}
