//! What every run shares and what one run is asked for: [`Agent`] (the registry, the store,
//! the leases, the limits, the feeds), [`RunRequest`] (one user message to answer) and
//! [`Placement`] (where that message goes in the stored history). The files of the loop
//! (`run`, `first_turn`, `dispatch`) read these; `mod.rs` starts a run with them.

use std::{sync::Arc, time::Duration};

use rojos_conversations::{ConversationId, ConversationStore, RunLeases, SharedFeeds};
use rojos_metrics::Metrics;
use rojos_plugin_api::Limits;
use rojos_project_storage::{ProjectId, Storage};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{approval::ApprovalDesk, context, feed::Feeds, lease::RunLease};
use crate::{providers::ProviderRef, registry::RegistryHandle, rojo::RojoConfig, RunBudgets};

/// Everything runs share.
pub struct Agent {
    /// The current tools.
    pub registry: Arc<RegistryHandle>,
    /// Conversation history.
    pub store: Arc<dyn ConversationStore>,
    /// Which conversations have a run in progress (one at a time each).
    pub leases: Arc<dyn RunLeases>,
    /// Tool calls waiting for the user's decision, and the runs waiting on them.
    pub approvals: ApprovalDesk,
    /// How long a run's lease lasts unless renewed (it is renewed three times as often).
    pub run_lease: Duration,
    /// Project folders.
    pub storage: Arc<Storage>,
    /// Limits for file tools.
    pub limits: Limits,
    /// How long one tool call may take.
    pub call_timeout: Duration,
    /// Longest tool result given to the model; longer ones are cut with a marker.
    pub max_result_bytes: usize,
    /// What one run may cost: tool calls per turn, result bytes, the conversation's size.
    pub budgets: RunBudgets,
    /// Cancelled when the server shuts down: open runs end with `ERROR` + `DONE`.
    pub shutdown: CancellationToken,
    /// Every spawned run, so shutdown can wait for their history to be stored.
    pub tasks: TaskTracker,
    /// Counts chats, model turns and tool calls for `GET /metrics`.
    pub metrics: Arc<Metrics>,
    /// The runs' undo checkpoints.
    pub checkpoints: Arc<rojos_checkpoints::Checkpoints>,
    /// The events of this host's runs, for the clients that follow them.
    pub feeds: Arc<Feeds>,
    /// What the providers told of their models' context windows.
    pub windows: Arc<crate::providers::window::Windows>,
    /// With a store several hosts share: the runs' events published there, so any host
    /// follows and stops any run (`relay`, `remote`).
    pub shared_feeds: Option<Arc<dyn SharedFeeds>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("limits", &self.limits)
            .field("call_timeout", &self.call_timeout)
            .field("budgets", &self.budgets)
            .finish_non_exhaustive()
    }
}

/// Where a run's user message goes in the stored history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// After `history`: the run stores it while its first model request is on its way.
    Append,
    /// Already stored: the conversation was created holding it, in one write
    /// (`ConversationStore::create_with`). `history` is empty; `history_bytes` is the
    /// message's stored size.
    Created,
    /// In place of the stored messages from index `n` on (regenerate or edit; `history` holds
    /// only those before it), in the same transaction as it is stored.
    ReplaceFrom(u64),
}

/// One user message to answer.
#[derive(Debug)]
pub struct RunRequest {
    /// The project the tools work on.
    pub project: ProjectId,
    /// The rojo's name (for logs).
    pub rojo_name: String,
    /// The rojo as configured when the message arrived.
    pub rojo: RojoConfig,
    /// The provider chosen for this message (for messages to the user).
    pub provider: ProviderRef,
    /// Its client, as configured when the message arrived.
    pub client: rojos_llm::Client,
    /// Its model's context window.
    pub window: context::Window,
    /// The conversation to continue (already created or checked).
    pub conversation: ConversationId,
    /// Its stored messages: with `compaction`, only those after what it covers.
    pub history: Vec<serde_json::Value>,
    /// The newest summary kept, standing for the stored messages before `history`
    /// (`ConversationStore::resume`): the run never reads those.
    pub compaction: Option<rojos_conversations::Compaction>,
    /// The conversation's stored size, as the store counts it (the bytes of each message's
    /// JSON): `history`'s, and with [`Placement::Created`] the message's.
    pub history_bytes: usize,
    /// The user's message.
    pub message: String,
    /// Where the message goes in the stored history.
    pub placement: Placement,
    /// The run's lease on `conversation` (see [`Agent::lease`]), released after the run
    /// stored its last message, before `DONE`.
    pub lease: RunLease,
}
