//! Approvals (`docs/api.md`, "Approvals"): a call of a tool the rojo's `approve` names (or,
//! for `approve = "destructive"`, a call that would replace or remove what exists,
//! `replaces.rs`; one let run because its paths are missing may only create there) waits for the user's decision before it runs. The run records the pending
//! call in the conversation store under an approval id of its own (the model's call ids are
//! unique only within a turn), streams `APPROVAL_REQUIRED` with it and waits without
//! holding a thread: woken at once by a decision taken on this host
//! ([`ApprovalDesk::decide`] notifies it), and reading the store every [`POLL_EVERY`] for
//! one taken on another host sharing the database. It stops waiting when the decision comes, when `[limits]
//! approval_timeout_secs` passes (denied), or when the run is cancelled (the client went
//! away, shutdown, the lease was lost: its stop token). The run lease keeps being renewed
//! by its own task meanwhile (`lease.rs`). The tool message of a call that was asked gets a
//! `rojos` note saying what was decided, stripped before anything goes upstream
//! (`history::request`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use rojos_conversations::{
    new_approval_id, ApprovalState, Approvals, ConversationId, Decided, Decision, GaveUp,
    StoreError,
};
use rojos_llm::ToolCall;
use rojos_plugin_host::{CallRequest, FailureKind, ToolFailure};
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{
    dispatch::{Cleared, Gate},
    feed::Feed,
    history::NOTE_KEY,
    replaces::{effect, Effect},
    Event,
};
use crate::{registry::RegisteredTool, rojo::ApprovalRule};

/// How often a waiting run reads the store for a decision taken on another host.
pub(super) const POLL_EVERY: Duration = Duration::from_millis(300);

/// One waiting call: its conversation and approval id.
type WaitKey = (ConversationId, String);

/// The approvals of this host's runs: the store, the time-out, and how to wake a run
/// waiting here.
#[derive(Clone)]
pub struct ApprovalDesk {
    store: Arc<dyn Approvals>,
    timeout: Duration,
    waiting: Arc<Mutex<HashMap<WaitKey, Arc<Notify>>>>,
}

impl std::fmt::Debug for ApprovalDesk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalDesk")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Why a decision was not taken.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// The call is not waiting for a decision; `None`: it was never asked.
    #[error("{}", not_pending(.0.as_ref()))]
    NotPending(Option<ApprovalState>),
    /// The decision named a call id the model gave to more than one call asked in the
    /// conversation: only the approval id says which one the user saw.
    #[error(
        "the model gave this call id to more than one call in this conversation, so it does \
         not say which one was shown; nothing changed: decide with the approvalId of the \
         APPROVAL_REQUIRED event"
    )]
    Ambiguous,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a `409` says about a call that is not waiting.
fn not_pending(state: Option<&ApprovalState>) -> String {
    match state {
        None => "no approval was asked for this call in this conversation".to_owned(),
        Some(ApprovalState::Pending) => "the call is still waiting".to_owned(),
        Some(ApprovalState::Decided(decision)) => format!(
            "the call was already decided ({}); nothing changed",
            decision.as_str()
        ),
        Some(ApprovalState::TimedOut) => {
            "nobody answered in time: the call was denied (limits.approval_timeout_secs)".to_owned()
        }
        Some(ApprovalState::Cancelled) => {
            "the run stopped while the call waited: it was not run".to_owned()
        }
    }
}

impl ApprovalDesk {
    /// The desk over `store`; an unanswered call is denied after `timeout`.
    pub fn new(store: Arc<dyn Approvals>, timeout: Duration) -> ApprovalDesk {
        ApprovalDesk {
            store,
            timeout,
            waiting: Arc::default(),
        }
    }

    /// Records the user's decision for the pending call `key` names (its approval id, or a
    /// call id the model gave to only one call of the conversation) and wakes its run when
    /// it waits on this host (on another host, its next read of the store finds it).
    /// Returns the call's approval id and call id.
    ///
    /// # Errors
    ///
    /// [`DecideError::NotPending`] when the call is not waiting (a repeated decision
    /// included: it changes nothing), [`DecideError::Ambiguous`] for a call id that names
    /// more than one call; the store's failure.
    pub async fn decide(
        &self,
        conversation: &ConversationId,
        key: &str,
        decision: &Decision,
    ) -> Result<DecidedCall, DecideError> {
        match self.store.decide(conversation, key, decision).await? {
            Decided::Recorded {
                approval_id,
                call_id,
            } => {
                let key = (conversation.clone(), approval_id);
                if let Some(waiter) = self.lock().get(&key) {
                    // A stored permit: a run between two reads still wakes at once.
                    waiter.notify_one();
                }
                Ok(DecidedCall {
                    approval_id: key.1,
                    call_id,
                })
            }
            Decided::NotPending(state) => Err(DecideError::NotPending(state)),
            Decided::Ambiguous => Err(DecideError::Ambiguous),
        }
    }

    /// The tools the user chose "approve always" for in `conversation`, by name.
    ///
    /// # Errors
    ///
    /// The store's failure.
    pub async fn always_allowed_tools(
        &self,
        conversation: &ConversationId,
    ) -> Result<Vec<String>, StoreError> {
        self.store.always_allowed_tools(conversation).await
    }

    /// Takes back "approve always" for `tool` in `conversation`; whether it was given.
    ///
    /// # Errors
    ///
    /// The store's failure.
    pub async fn revoke_always(
        &self,
        conversation: &ConversationId,
        tool: &str,
    ) -> Result<bool, StoreError> {
        self.store.revoke_always(conversation, tool).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WaitKey, Arc<Notify>>> {
        // Entries are inserted and removed whole: a panic cannot leave one half-made.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a waiter for one call, removed when the guard is dropped.
    fn register(&self, key: WaitKey) -> Waiting<'_> {
        let notify = Arc::new(Notify::new());
        self.lock().insert(key.clone(), Arc::clone(&notify));
        Waiting {
            desk: self,
            key,
            notify,
        }
    }
}

/// The call a decision was recorded for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecidedCall {
    /// The approval id its `APPROVAL_REQUIRED` event gave.
    pub approval_id: String,
    /// The model's call id.
    pub call_id: String,
}

/// A registered waiter; unregisters itself when dropped.
struct Waiting<'d> {
    desk: &'d ApprovalDesk,
    key: WaitKey,
    notify: Arc<Notify>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.desk.lock().remove(&self.key);
    }
}

/// How a call that needed approval was settled, as its tool message's note records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Settled {
    /// The user decided.
    Decided(Decision),
    /// Nobody answered in time.
    TimedOut,
    /// The run stopped while it waited.
    Cancelled,
}

/// The gate a chat's calls pass through: asks when the rule says so.
pub(super) struct RunGate<'a> {
    pub(super) desk: &'a ApprovalDesk,
    pub(super) conversation: &'a ConversationId,
    pub(super) rule: &'a ApprovalRule,
    pub(super) feed: &'a Feed,
    pub(super) stop: &'a CancellationToken,
    /// How the last call was settled, when it was asked (taken by [`RunGate::take_note`]).
    pub(super) settled: Option<Settled>,
}

impl RunGate<'_> {
    /// `message` (the call's tool message) with the note of how its approval went, if it
    /// was asked.
    pub(super) fn annotate(&mut self, mut message: Value) -> Value {
        let Some(settled) = self.settled.take() else {
            return message;
        };
        let approval = match &settled {
            Settled::Decided(Decision::Deny {
                reason: Some(reason),
            }) => json!({"decision": "deny", "reason": reason}),
            Settled::Decided(decision) => json!({"decision": decision.as_str()}),
            Settled::TimedOut => json!({"decision": "timeout"}),
            Settled::Cancelled => json!({"decision": "cancelled"}),
        };
        if let Some(object) = message.as_object_mut() {
            object.insert(NOTE_KEY.to_owned(), json!({"approval": approval}));
        }
        message
    }

    /// Resolves when the run must stop.
    async fn cancelled(&self) {
        self.stop.cancelled().await;
    }

    /// Asks for and waits for the decision on `call`, under a new approval id.
    async fn ask(&self, call: &ToolCall) -> Result<Settled, ToolFailure> {
        let desk = self.desk;
        let conversation = self.conversation;
        let approval_id = new_approval_id();
        let waiting = desk.register((conversation.clone(), approval_id.clone()));
        if let Err(e) = desk
            .store
            .ask(conversation, &approval_id, &call.id, &call.name)
            .await
        {
            tracing::error!(error = %e, "the approval could not be recorded");
            return Err(ToolFailure::new(
                FailureKind::Refused,
                "not run: it needs the user's approval, which could not be asked (the conversation store failed)",
            ));
        }
        let args = match &call.arguments {
            Ok(map) => Value::Object(map.clone()),
            Err(_) => Value::String(call.raw_arguments.clone()),
        };
        let asked = Event::ApprovalRequired {
            id: call.id.clone(),
            approval_id: approval_id.clone(),
            name: call.name.clone(),
            args,
            conversation_id: conversation.to_string(),
        };
        self.feed.push(&asked);
        tracing::info!(tool = %call.name, call_id = %call.id, approval_id = %approval_id, "waiting for the user's approval");
        let deadline = tokio::time::Instant::now() + desk.timeout;
        loop {
            tokio::select! {
                biased;
                () = self.cancelled() => {
                    return Ok(self.give_up(&approval_id, GaveUp::Cancelled).await);
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Ok(self.give_up(&approval_id, GaveUp::TimedOut).await);
                }
                () = waiting.notify.notified() => {}
                () = tokio::time::sleep(POLL_EVERY) => {}
            }
            match desk.store.state(conversation, &approval_id).await {
                Ok(Some(ApprovalState::Decided(decision))) => {
                    return Ok(Settled::Decided(decision))
                }
                Ok(Some(ApprovalState::Pending)) => {}
                // Given up by nobody else: the run is the only one that writes these.
                Ok(Some(ApprovalState::TimedOut)) => return Ok(Settled::TimedOut),
                Ok(Some(ApprovalState::Cancelled) | None) => return Ok(Settled::Cancelled),
                // A store that cannot be read now: tried again until the time-out.
                Err(e) => tracing::warn!(error = %e, "reading the approval failed; retrying"),
            }
        }
    }

    /// Stops waiting for the call asked under `approval_id`; a decision that arrived first
    /// wins.
    async fn give_up(&self, approval_id: &str, why: GaveUp) -> Settled {
        let gave_up = match why {
            GaveUp::TimedOut => Settled::TimedOut,
            GaveUp::Cancelled => Settled::Cancelled,
        };
        match self
            .desk
            .store
            .give_up(self.conversation, approval_id, why)
            .await
        {
            Ok(ApprovalState::Decided(decision)) if why == GaveUp::TimedOut => {
                Settled::Decided(decision)
            }
            Ok(_) => gave_up,
            Err(e) => {
                tracing::warn!(error = %e, "the approval's end could not be recorded");
                gave_up
            }
        }
    }

    /// What the model is told for a call that may not run, or `Ok` to run it.
    fn verdict(&self, settled: &Settled) -> Result<(), ToolFailure> {
        let refused = |text: String| Err(ToolFailure::new(FailureKind::Refused, text));
        match settled {
            Settled::Decided(Decision::Approve | Decision::ApproveAlways) => Ok(()),
            Settled::Decided(Decision::Deny {
                reason: Some(reason),
            }) => refused(format!("denied by the user: {reason}")),
            Settled::Decided(Decision::Deny { reason: None }) => {
                refused("denied by the user".to_owned())
            }
            Settled::TimedOut => refused(format!(
                "denied: the user did not answer within {} s, so the tool was not run",
                self.desk.timeout.as_secs_f64()
            )),
            Settled::Cancelled => refused("not run: the run was cancelled".to_owned()),
        }
    }
}

/// Whether `rule` asks before `call` of `tool` on the project of `request`: a tool the
/// rule names, or under `"destructive"` a destructive tool, or a call that would replace or
/// remove something that exists now ([`effect`]). `Ok`: it runs unasked, and may only
/// create at these paths (under `"destructive"`, those it names and found missing).
async fn needs_approval(
    rule: &ApprovalRule,
    tool: &RegisteredTool,
    call: &ToolCall,
    request: &CallRequest,
) -> Result<Cleared, Asks> {
    if rule.requires(tool.name(), tool.destructive()) {
        return Err(Asks);
    }
    if *rule != ApprovalRule::Destructive {
        return Ok(Cleared::default());
    }
    match effect(tool, call, &request.root).await {
        Effect::Replaces => Err(Asks),
        Effect::CreatesOnly(create_only) => Ok(Cleared { create_only }),
    }
}

/// The rule asks the user before the call runs.
struct Asks;

impl Gate for RunGate<'_> {
    async fn clear(
        &mut self,
        tool: &RegisteredTool,
        call: &ToolCall,
        request: &CallRequest,
    ) -> Result<Cleared, ToolFailure> {
        if let Ok(cleared) = needs_approval(self.rule, tool, call, request).await {
            return Ok(cleared);
        }
        match self
            .desk
            .store
            .always_allowed(self.conversation, tool.name())
            .await
        {
            Ok(true) => return Ok(Cleared::default()),
            Ok(false) => {}
            // Asked rather than run unasked.
            Err(e) => tracing::warn!(error = %e, "the always-approved tools could not be read"),
        }
        let settled = self.ask(call).await?;
        let verdict = self.verdict(&settled);
        tracing::info!(tool = %call.name, call_id = %call.id, settled = ?settled, "approval settled");
        self.settled = Some(settled);
        verdict.map(|()| Cleared::default())
    }
}

/// The gate of a call made outside a chat (the MCP server): nobody can be asked, so a tool
/// that needs approval is refused (`docs/mcp.md`, "Approvals").
pub(super) struct NobodyToAsk<'a> {
    pub(super) rule: &'a ApprovalRule,
}

impl Gate for NobodyToAsk<'_> {
    async fn clear(
        &mut self,
        tool: &RegisteredTool,
        call: &ToolCall,
        request: &CallRequest,
    ) -> Result<Cleared, ToolFailure> {
        if let Ok(cleared) = needs_approval(self.rule, tool, call, request).await {
            return Ok(cleared);
        }
        Err(ToolFailure::new(
            FailureKind::Refused,
            format!(
                "not run: this rojo requires the user's approval for {}, which an MCP caller cannot give; use the chat API or the panel",
                tool.name()
            ),
        ))
    }
}
