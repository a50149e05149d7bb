//! Approvals: a tool call that waits for the user's decision (`docs/api.md`, "Approvals").
//! The run records the pending call under an approval id of its own, made by the server
//! ([`new_approval_id`], [`Approvals::ask`]), the user's decision arrives through whichever
//! host the request reaches ([`Approvals::decide`]), and the waiting run reads it back
//! ([`Approvals::state`]) or gives up ([`Approvals::give_up`]: timed out, cancelled). Kept in
//! the conversation database, so hosts sharing a PostgreSQL database see each other's
//! decisions; "approve always" is remembered per conversation and tool
//! ([`Approvals::always_allowed`]), listed ([`Approvals::always_allowed_tools`]) and can be
//! taken back ([`Approvals::revoke_always`]).
//!
//! Both stores keep two small tables (the approval id since SQLite schema version 5,
//! PostgreSQL version 6):
//!
//! ```sql
//! CREATE TABLE approvals (
//!     conversation_id TEXT NOT NULL,
//!     approval_id     TEXT NOT NULL,   -- made by the server, one per call asked
//!     call_id         TEXT NOT NULL,   -- the model's call id, of any length, not unique
//!     tool            TEXT NOT NULL,
//!     state           TEXT NOT NULL,   -- pending, approve, approve_always, deny, timeout, cancelled
//!     reason          TEXT,            -- a denial's reason
//!     PRIMARY KEY (conversation_id, approval_id)
//! );
//! CREATE TABLE approved_tools (conversation_id TEXT NOT NULL, tool TEXT NOT NULL,
//!                              PRIMARY KEY (conversation_id, tool));
//! ```
//!
//! The model chooses call ids, and only makes them unique within one turn: a decision is
//! therefore bound to the approval id of the one call the user was shown. A decision naming
//! a call id instead (clients written before approval ids) is taken only when exactly one
//! call of the conversation was asked under that id ([`Decided::Ambiguous`] otherwise). A
//! call asked again is a new row; nothing ever turns a settled row back to `pending`. A
//! decision is taken only from `pending`, in one statement, so two decisions sent at once
//! (or a decision racing the time-out) settle exactly one way, and a repeated decision
//! changes nothing.

use std::fmt;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::id::ConversationId;

/// What every approval id starts with, so one is told from a model's call id in logs.
const APPROVAL_ID_PREFIX: &str = "approval_";

/// A new approval id: `approval_` and a fresh [`ConversationId`] (the time, then 14 random
/// base62 characters: about 83 bits, so an id cannot be guessed), safe in a URL path.
pub fn new_approval_id() -> String {
    format!("{APPROVAL_ID_PREFIX}{}", ConversationId::generate())
}

/// Longest reason a denial keeps, in characters; longer ones are refused by the host.
pub const DENY_REASON_MAX_CHARS: usize = 500;

/// What the user decided for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Approve,
    /// Run it, and every later call of the same tool in this conversation without asking.
    ApproveAlways,
    /// Do not run it; the model is told why, when a reason was given.
    Deny {
        /// The user's reason, if any.
        reason: Option<String>,
    },
}

impl Decision {
    /// The stored (and wire) name: `approve`, `approve_always`, `deny`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::ApproveAlways => "approve_always",
            Decision::Deny { .. } => "deny",
        }
    }

    fn reason(&self) -> Option<&str> {
        match self {
            Decision::Deny { reason } => reason.as_deref(),
            _ => None,
        }
    }
}

/// Where one asked call stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalState {
    /// Asked, not yet answered.
    Pending,
    /// The user decided.
    Decided(Decision),
    /// Nobody answered in time; the call was not run.
    TimedOut,
    /// The run ended while it waited (the client went away, shutdown, lease lost).
    Cancelled,
}

impl ApprovalState {
    /// The stored name of the state.
    fn as_str(&self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Decided(decision) => decision.as_str(),
            ApprovalState::TimedOut => "timeout",
            ApprovalState::Cancelled => "cancelled",
        }
    }

    /// The state a stored row names, `None` for an unknown name.
    pub(crate) fn from_row(state: &str, reason: Option<String>) -> Option<ApprovalState> {
        Some(match state {
            "pending" => ApprovalState::Pending,
            "approve" => ApprovalState::Decided(Decision::Approve),
            "approve_always" => ApprovalState::Decided(Decision::ApproveAlways),
            "deny" => ApprovalState::Decided(Decision::Deny { reason }),
            "timeout" => ApprovalState::TimedOut,
            "cancelled" => ApprovalState::Cancelled,
            _ => return None,
        })
    }
}

/// Why a waiting run stopped waiting without a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaveUp {
    /// `[limits] approval_timeout_secs` passed.
    TimedOut,
    /// The run ended (client gone, shutdown, lease lost).
    Cancelled,
}

impl GaveUp {
    fn state(self) -> ApprovalState {
        match self {
            GaveUp::TimedOut => ApprovalState::TimedOut,
            GaveUp::Cancelled => ApprovalState::Cancelled,
        }
    }
}

/// What [`Approvals::decide`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// The decision was recorded for the call asked under `approval_id` (the model's
    /// `call_id`); the waiting run will act on it.
    Recorded {
        /// The approval id of the call decided.
        approval_id: String,
        /// The model's call id of the call decided.
        call_id: String,
    },
    /// The call was not pending: its current state, or `None` when it was never asked.
    NotPending(Option<ApprovalState>),
    /// The decision named a call id under which more than one call of the conversation
    /// was asked (the model reused it): nothing was decided; only an approval id says which.
    Ambiguous,
}

/// The row a decision naming `key` is for: the call asked under approval id `key`, else the
/// only call asked under call id `key`. `by_approval_id` is the approval id found for `key`
/// as an approval id; `by_call_id` the approval ids of the calls asked under call id `key`
/// (the backends read at most two).
pub(crate) fn target(
    by_approval_id: Option<String>,
    mut by_call_id: Vec<String>,
) -> Result<String, Decided> {
    if let Some(id) = by_approval_id {
        return Ok(id);
    }
    match by_call_id.len() {
        0 => Err(Decided::NotPending(None)),
        1 => Ok(by_call_id.remove(0)),
        _ => Err(Decided::Ambiguous),
    }
}

/// The approvals of every conversation in one database. Safe to share between tasks.
#[async_trait]
pub trait Approvals: Send + Sync + fmt::Debug {
    /// Records that call `call_id` of `conversation` (tool `tool`) waits for a decision,
    /// under the new `approval_id` ([`new_approval_id`]). A call id asked before
    /// (providers may reuse ids across turns and runs) is a call of its own: the earlier
    /// one keeps its state.
    async fn ask(
        &self,
        conversation: &ConversationId,
        approval_id: &str,
        call_id: &str,
        tool: &str,
    ) -> Result<(), StoreError>;

    /// Records `decision` for the call `key` names (its approval id, or a call id only one
    /// call of the conversation was asked under) if that call is pending (and, for
    /// [`Decision::ApproveAlways`], that its tool needs no approval in this conversation any
    /// more), atomically.
    async fn decide(
        &self,
        conversation: &ConversationId,
        key: &str,
        decision: &Decision,
    ) -> Result<Decided, StoreError>;

    /// Where the call asked under `approval_id` stands, `None` when there is none.
    async fn state(
        &self,
        conversation: &ConversationId,
        approval_id: &str,
    ) -> Result<Option<ApprovalState>, StoreError>;

    /// Stops the pending call asked under `approval_id` waiting (`why`). Returns the call's
    /// final state: a decision that arrived first wins over giving up.
    async fn give_up(
        &self,
        conversation: &ConversationId,
        approval_id: &str,
        why: GaveUp,
    ) -> Result<ApprovalState, StoreError>;

    /// Whether the user chose "approve always" for `tool` in `conversation`.
    async fn always_allowed(
        &self,
        conversation: &ConversationId,
        tool: &str,
    ) -> Result<bool, StoreError>;

    /// The tools the user chose "approve always" for in `conversation`, by name.
    async fn always_allowed_tools(
        &self,
        conversation: &ConversationId,
    ) -> Result<Vec<String>, StoreError>;

    /// Takes back "approve always" for `tool` in `conversation`: its next call is asked
    /// about again. Returns whether the tool was always allowed.
    async fn revoke_always(
        &self,
        conversation: &ConversationId,
        tool: &str,
    ) -> Result<bool, StoreError>;
}

/// The stored state and reason of a decision, for the backends' statements.
pub(crate) fn row_of(decision: &Decision) -> (&'static str, Option<&str>) {
    (decision.as_str(), decision.reason())
}

/// The state a giving-up run writes.
pub(crate) fn gave_up_row(why: GaveUp) -> &'static str {
    why.state().as_str()
}

/// A stored state as a store error when it is not one this build knows.
pub(crate) fn read_state(
    conversation: &ConversationId,
    approval_id: &str,
    state: &str,
    reason: Option<String>,
) -> Result<ApprovalState, StoreError> {
    ApprovalState::from_row(state, reason).ok_or_else(|| {
        StoreError::corrupt(
            format!("state of approval '{approval_id}' in conversation '{conversation}'"),
            format!("unknown state {state:?}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_id_wins_and_a_call_id_counts_only_when_one_call_has_it() {
        let ids = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            target(Some("a1".into()), ids(&["a2", "a3"])),
            Ok("a1".into())
        );
        assert_eq!(target(None, ids(&["a2"])), Ok("a2".into()));
        assert_eq!(target(None, ids(&[])), Err(Decided::NotPending(None)));
        assert_eq!(target(None, ids(&["a2", "a3"])), Err(Decided::Ambiguous));
    }

    #[test]
    fn approval_ids_are_new_each_time_and_url_safe() {
        let (a, b) = (new_approval_id(), new_approval_id());
        assert_ne!(a, b);
        assert!(a.starts_with(APPROVAL_ID_PREFIX));
        assert!(
            a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'),
            "{a}"
        );
    }
}
