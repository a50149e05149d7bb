//! The agent loop's public face: [`Agent`] holds what every run needs, [`Agent::start`]
//! spawns one run and returns the stream of [`Event`]s its client reads.
//!
//! `run` is the step loop (model turn, tool calls, next turn); `dispatch` decides what
//! happens to one tool call, with `budget` (what a turn and a run may give the model) and
//! `canonical` (the form the repeated-call check compares); `progress` throttles the
//! live status of tool calls the model is still writing; `history` builds provider
//! requests and keeps the stored history one every provider accepts; `lease` holds a
//! conversation for one run at a time; `single` runs one tool call outside a run, through
//! the same `dispatch` (the MCP server's `tools/call`); `approval` asks the user before a
//! call the rojo's `approve` names runs, and takes their decision (`replaces` tells whether
//! a call would replace what exists, for `approve = "destructive"`); `first_turn` sends a new
//! conversation's first model request while the conversation is created; `feed` numbers and
//! keeps a run's events for every client that follows it; `relay` publishes them to a store
//! several hosts share and `remote` follows a run of another host. The agent knows
//! the registry, the provider clients and the store, but not HTTP.

mod approval;
mod budget;
mod canonical;
pub mod context;
mod dispatch;
pub mod events;
pub mod feed;
mod first_turn;
mod history;
mod lease;
mod progress;
mod relay;
pub mod remote;
mod replaces;
mod run;
mod single;

pub(crate) use crate::error_chain::error_chain;
use std::{sync::Arc, time::Duration};

use rojos_conversations::{ConversationId, ConversationStore, RunLeases, SharedFeeds, StoreError};
use rojos_plugin_api::Limits;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

pub use approval::{ApprovalDesk, DecideError, DecidedCall};
pub use events::{Event, StopReason};
pub use feed::{Feeds, Follower, StopCause, Unattended};
pub use first_turn::FirstTurn;
pub use lease::RunLease;
pub use remote::RemoteFollower;
pub(crate) use run::INTERRUPTED;
pub use single::{SingleCallError, SingleCallResult};

use crate::{
    config::{RojoConfig, RunBudgets},
    metrics::Metrics,
    providers::ProviderRef,
    registry::RegistryHandle,
    storage::{ProjectId, Storage},
};

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
    pub checkpoints: Arc<crate::checkpoints::Checkpoints>,
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

impl Agent {
    /// Takes the run lease on `conversation`, or `Ok(None)` when a run is in progress there.
    /// The lease's stop token is cancelled at shutdown or if the lease is lost.
    ///
    /// # Errors
    ///
    /// The lease backend's failure.
    pub async fn lease(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<RunLease>, StoreError> {
        RunLease::acquire(
            &self.leases,
            conversation,
            self.run_lease,
            self.shutdown.child_token(),
        )
        .await
    }

    /// Spawns a run and returns its first follower: the events of the run, numbered, its
    /// `RUN_STARTED` first and its `DONE` last. The run belongs to its conversation, not to
    /// this follower: dropping it does not stop the run unless nobody else follows it for
    /// `[limits] unattended_run_secs` ([`feed`]); a stop is asked through the feed
    /// ([`Feeds::get`]). `held` (the chat's admission) is kept until the run ends.
    /// With [`Placement::Created`], `first_turn` is the first model turn, sent while the
    /// conversation was created ([`Agent::first_turn`]): the run continues it.
    pub fn start(
        self: &Arc<Self>,
        request: RunRequest,
        first_turn: Option<FirstTurn>,
        held: impl Send + 'static,
    ) -> Follower {
        let (feed, follower) = self
            .feeds
            .open(&request.conversation, request.lease.stop().child_token());
        let started = Event::RunStarted {
            conversation_id: request.conversation.to_string(),
            rojo: request.rojo_name.clone(),
        };
        let agent = Arc::clone(self);
        self.tasks.spawn(async move {
            let conversation = request.conversation.clone();
            if let Some(shared) = &agent.shared_feeds {
                // The feed is in the shared store before any client learns of the run, so
                // a client that got `RUN_STARTED` can follow it on any host.
                let opened =
                    relay::open(shared.as_ref(), &conversation, &feed, agent.run_lease).await;
                feed.push(&started);
                // Tracked with the runs: a graceful shutdown waits (within its grace) until
                // the run's last events, its `DONE` among them, are published.
                agent.tasks.spawn(relay::publish(
                    Arc::clone(shared),
                    conversation.clone(),
                    Arc::clone(&feed),
                    agent.run_lease,
                    opened,
                ));
            } else {
                feed.push(&started);
            }
            run::run(Arc::clone(&agent), request, first_turn, Arc::clone(&feed)).await;
            drop(held);
            // Kept a while for a client that lost its connection near the end.
            let shutdown = agent.shutdown.clone();
            tokio::spawn(async move {
                let shutting_down = tokio::select! {
                    () = tokio::time::sleep(feed::KEPT_AFTER_DONE) => false,
                    () = shutdown.cancelled() => true,
                };
                agent.feeds.forget(&conversation, &feed);
                // At shutdown the shared feed stays, ended, for followers on other hosts to
                // read to its `DONE`; the conversation's next run replaces it.
                if shutting_down {
                    return;
                }
                if let Some(shared) = &agent.shared_feeds {
                    if let Err(e) = shared.close(&conversation, feed.run()).await {
                        tracing::warn!(error = %e, "cannot delete a finished run's shared feed");
                    }
                }
            });
        });
        follower
    }
}
