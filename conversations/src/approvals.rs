//! Approvals: a tool call that waits for the user's decision (`docs/api.md`, "Approvals").
//! The run records the pending call ([`Approvals::ask`]), the user's decision arrives
//! through whichever host the request reaches ([`Approvals::decide`]), and the waiting run
//! reads it back ([`Approvals::state`]) or gives up ([`Approvals::give_up`]: timed out,
//! cancelled). Kept in the conversation database, so hosts sharing a PostgreSQL database
//! see each other's decisions; "approve always" is remembered per conversation and tool
//! ([`Approvals::always_allowed`]).
//!
//! Both stores keep two small tables (SQLite schema version 4, PostgreSQL version 5):
//!
//! ```sql
//! CREATE TABLE approvals (
//!     conversation_id TEXT NOT NULL,
//!     call_id         TEXT NOT NULL,   -- the model's call id
//!     tool            TEXT NOT NULL,
//!     state           TEXT NOT NULL,   -- pending, approve, approve_always, deny, timeout, cancelled
//!     reason          TEXT,            -- a denial's reason
//!     PRIMARY KEY (conversation_id, call_id)
//! );
//! CREATE TABLE approved_tools (conversation_id TEXT NOT NULL, tool TEXT NOT NULL,
//!                              PRIMARY KEY (conversation_id, tool));
//! ```
//!
//! A decision is taken only from `pending`, in one statement, so two decisions sent at
//! once (or a decision racing the time-out) settle exactly one way.

use std::fmt;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::id::ConversationId;

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
    /// The decision was recorded; the waiting run will act on it.
    Recorded,
    /// The call was not pending: its current state, or `None` when it was never asked.
    NotPending(Option<ApprovalState>),
}

/// The approvals of every conversation in one database. Safe to share between tasks.
#[async_trait]
pub trait Approvals: Send + Sync + fmt::Debug {
    /// Records that call `call_id` of `conversation` (tool `tool`) waits for a decision.
    /// A call id asked before (providers may reuse ids across runs) is asked again.
    async fn ask(
        &self,
        conversation: &ConversationId,
        call_id: &str,
        tool: &str,
    ) -> Result<(), StoreError>;

    /// Records `decision` if the call is pending (and, for [`Decision::ApproveAlways`], that
    /// its tool needs no approval in this conversation any more), atomically.
    async fn decide(
        &self,
        conversation: &ConversationId,
        call_id: &str,
        decision: &Decision,
    ) -> Result<Decided, StoreError>;

    /// Where the call stands, `None` when it was never asked.
    async fn state(
        &self,
        conversation: &ConversationId,
        call_id: &str,
    ) -> Result<Option<ApprovalState>, StoreError>;

    /// Stops a pending call waiting (`why`). Returns the call's final state: a decision
    /// that arrived first wins over giving up.
    async fn give_up(
        &self,
        conversation: &ConversationId,
        call_id: &str,
        why: GaveUp,
    ) -> Result<ApprovalState, StoreError>;

    /// Whether the user chose "approve always" for `tool` in `conversation`.
    async fn always_allowed(
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
    call_id: &str,
    state: &str,
    reason: Option<String>,
) -> Result<ApprovalState, StoreError> {
    ApprovalState::from_row(state, reason).ok_or_else(|| {
        StoreError::corrupt(
            format!("approval state of call '{call_id}' in conversation '{conversation}'"),
            format!("unknown state {state:?}"),
        )
    })
}
