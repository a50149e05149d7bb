//! The record an undo leaves in the conversation, so the model is not left misinformed: a
//! `user` message saying which run's file changes were taken back and which paths are as
//! they were before it, with its note (`{"rojos": {"undo": …}}`) for the panel, and a short
//! `assistant` message after it (`noAnswer`: not drawn) so the history keeps alternating and
//! stays one every provider accepts. A history left open by a run whose host died (a `tool`
//! or `user` message last) is closed first, as the next run would close it, so the record's
//! `user` message never follows a `tool` message. The model reads both on its next turn
//! (`docs/api.md`, "Undo of file changes").

use rojos_agent::INTERRUPTED;
use rojos_checkpoints::Summary;
use rojos_conversations::{ConversationId, Step, StoreError};
use rojos_llm::assistant_text_message;
use serde_json::{json, Value};

use crate::state::AppState;

/// Most characters of the undone run's message quoted in the record.
const QUOTED_CHARS: usize = 120;

/// The assistant's side of the record: what the model is given as its own answer to it.
pub(super) const ACKNOWLEDGED: &str = "(noted: those file changes were undone)";

/// Appends the record of `undone` to conversation `id` (its run lease held by the caller).
pub(super) async fn append(
    state: &AppState,
    id: &ConversationId,
    undone: &Summary,
) -> Result<(), StoreError> {
    let store = &state.agent.store;
    // The run's own message, quoted so the model knows which of its replies this was.
    let asked = store
        .page(id, undone.message, 64 * 1024)
        .await?
        .and_then(|page| page.messages.into_iter().next())
        .and_then(|message| message["content"].as_str().map(quote));
    let mut step = Vec::with_capacity(3);
    if left_open(state, id).await? {
        step.push(assistant_text_message(INTERRUPTED));
    }
    step.extend(messages(undone, asked.as_deref()));
    store.append_step(id, Step::new(&step)?).await
}

/// Whether conversation `id` ends on a message other than the model's (a run whose host
/// died left it so): a `user` message after it would not be accepted by every provider.
async fn left_open(state: &AppState, id: &ConversationId) -> Result<bool, StoreError> {
    let store = &state.agent.store;
    let Some(head) = store.head(id).await? else {
        return Ok(false);
    };
    let Some(last) = head.message_count.checked_sub(1) else {
        return Ok(false);
    };
    // One message, however large: a page always holds at least one.
    let page = store.page(id, last, 1).await?;
    Ok(page
        .and_then(|page| page.messages.into_iter().next())
        .is_some_and(|message| message["role"] != "assistant"))
}

/// The two messages of the record.
fn messages(undone: &Summary, asked: Option<&str>) -> [Value; 2] {
    let reply = match asked {
        Some(asked) => format!("your reply to my message \"{asked}\""),
        None => "one of your replies".to_owned(),
    };
    let paths = undone
        .paths
        .iter()
        .map(|path| format!("`{path}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let text = format!(
        "(rojos: I undid the file changes of {reply}. These paths are back as they were before \
         it: {paths}. The tool calls of that reply that changed them no longer apply: check \
         the files again before relying on them.)"
    );
    let note =
        json!({"undo": {"run": undone.run, "message": undone.message, "paths": undone.paths}});
    [
        json!({"role": "user", "content": text, "rojos": note}),
        json!({"role": "assistant", "content": ACKNOWLEDGED, "rojos": {"noAnswer": true}}),
    ]
}

/// `text` shortened to [`QUOTED_CHARS`], on one line.
fn quote(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(QUOTED_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_names_the_reply_and_every_path_and_keeps_the_history_alternating() {
        let undone = Summary {
            run: "r1".into(),
            message: 2,
            created_at: 0,
            paths: vec!["notes/old-draft.md".into(), "docs".into()],
            undone: true,
            available: true,
            unreadable: None,
        };
        let [user, assistant] = messages(&undone, Some(&quote("delete the\nold draft")));
        let text = user["content"].as_str().unwrap();
        assert!(text.contains("\"delete the old draft\""), "{text}");
        assert!(text.contains("`notes/old-draft.md`, `docs`"), "{text}");
        assert_eq!(user["rojos"]["undo"]["paths"][0], "notes/old-draft.md");
        assert_eq!(assistant["role"], "assistant");
        assert_eq!(quote(&"x".repeat(200)).chars().count(), QUOTED_CHARS + 1);
    }
}
