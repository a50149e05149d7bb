//! A conversation opened for a run (by `POST /chat`, new or continued, or replacing its last
//! message), and the size check its new message passes first.

use rojos_agent::{FirstTurn, Placement, RunLease};
use rojos_conversations::ConversationId;
use serde_json::Value;

use super::error::ApiError;
use crate::state::AppState;

/// A conversation ready for a run: the stored messages the run continues, the conversation's
/// stored size as the store counts it, the run's lease on it, the user message, and where
/// that message goes in the stored history.
pub(super) struct Opened {
    pub(super) id: ConversationId,
    pub(super) history: Vec<Value>,
    /// The newest summary, standing for the stored messages before `history`.
    pub(super) compaction: Option<rojos_conversations::Compaction>,
    pub(super) history_bytes: usize,
    pub(super) lease: RunLease,
    pub(super) message: String,
    pub(super) placement: Placement,
    /// A new conversation's first model turn, sent while it was created.
    pub(super) first_turn: Option<FirstTurn>,
}

/// Whether the new message fits in a conversation under `[limits] max_conversation_bytes`,
/// counted as the run will store it (`{"role":"user","content":…}`). Refusing it here, before
/// anything is stored, means a run never starts on a conversation already over its limit.
pub(super) struct SizeCheck {
    message_bytes: u64,
    limit: u64,
}

impl SizeCheck {
    pub(super) fn new(state: &AppState, message: &str) -> SizeCheck {
        let content = serde_json::to_string(message).map_or(0, |text| text.len());
        let envelope = r#"{"role":"user","content":}"#.len();
        SizeCheck {
            message_bytes: u64::try_from(content + envelope).unwrap_or(u64::MAX),
            limit: u64::try_from(state.config.budgets.max_conversation_bytes).unwrap_or(u64::MAX),
        }
    }

    /// `422` when a conversation of `stored_bytes` is full or cannot take the message.
    pub(super) fn check(&self, stored_bytes: u64) -> Result<(), ApiError> {
        let (message, limit) = (self.message_bytes, self.limit);
        if stored_bytes >= limit {
            return Err(ApiError::Unprocessable(format!(
                "this conversation has reached its size limit ({stored_bytes} bytes stored, limit \
                 {limit}); start a new conversation to continue"
            )));
        }
        if stored_bytes.saturating_add(message) > limit {
            return Err(ApiError::Unprocessable(format!(
                "this message ({message} bytes) does not fit in this conversation \
                 ({stored_bytes} of its {limit} bytes used); send a shorter message or start a \
                 new conversation"
            )));
        }
        Ok(())
    }
}
