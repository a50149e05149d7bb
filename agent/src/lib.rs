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
//! several hosts share and `remote` follows a run of another host. `shared` holds [`Agent`] and [`RunRequest`], which
//! all of these read. The agent knows the registry, the provider clients and the store, but
//! not HTTP or the config file.
//!
//! Beside the loop, what it runs with: `registry`, the loaded tools (plugins' and MCP
//! servers') as a swapped snapshot and the `tools` array a rojo offers; `rojo`, a rojo as the
//! loop reads it ([`rojo::RojoConfig`], [`rojo::ToolSelection`], [`rojo::ApprovalRule`]) and
//! [`RunBudgets`], which `rojos-config` fills in from `rojos.toml`; `providers`, a provider as
//! messages name it ([`providers::ProviderRef`]), the one-sentence advice for each failure
//! and what context window its model has; `context`, the window's budget and compaction;
//! [`error_chain`], an error and its causes on one line.

mod approval;
mod budget;
mod canonical;
pub mod context;
mod dispatch;
mod error_chain;
pub mod events;
pub mod feed;
mod first_turn;
mod history;
mod lease;
mod progress;
pub mod providers;
pub mod registry;
mod relay;
pub mod remote;
mod replaces;
pub mod rojo;
mod run;
mod shared;
mod single;

use std::sync::Arc;

use rojos_conversations::{ConversationId, StoreError};

pub use approval::{ApprovalDesk, DecideError, DecidedCall};
pub use budget::RunBudgets;
pub use error_chain::error_chain;
pub use events::{Event, StopReason};
pub use feed::{Feeds, Follower, StopCause, Unattended};
pub use first_turn::FirstTurn;
pub use lease::RunLease;
pub use remote::RemoteFollower;
pub use run::INTERRUPTED;
pub use shared::{Agent, Placement, RunRequest};
pub use single::{SingleCallError, SingleCallResult};

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
