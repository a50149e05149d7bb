//! [`Summary`]: a checkpoint as the API lists it, read from its head.

use serde::Serialize;

use super::head::Head;

/// A checkpoint as `GET /conversations/{id}/checkpoints` lists it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The run's id.
    pub run: String,
    /// The index of the run's user message in the conversation.
    pub message: u64,
    /// When its first change was recorded, in Unix milliseconds.
    pub created_at: u64,
    /// The paths its calls changed, as the model named them.
    pub paths: Vec<String>,
    /// Whether its changes were undone.
    pub undone: bool,
    /// Whether it can still be undone (false once the budget dropped it, or when its
    /// checkpoint cannot be read).
    pub available: bool,
    /// Why its checkpoint cannot be read (absent when it can): an undo then stops at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

/// The summary of the checkpoint whose head is `head`.
pub(super) fn summary(head: &Head) -> Summary {
    Summary {
        run: head.run.clone(),
        message: head.message,
        created_at: head.created_at,
        paths: head.paths.clone(),
        undone: head.undone,
        available: !head.evicted && head.unreadable.is_none(),
        unreadable: head.unreadable.clone(),
    }
}
