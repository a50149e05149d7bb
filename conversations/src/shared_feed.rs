//! Shared run feeds: a run's numbered event lines published to a database several hosts
//! share, so that a host that does not run a conversation's run can still follow it from any
//! event on, and ask it to stop (`docs/deploy.md`, "Several hosts"). [`SharedFeeds`] is the
//! interface; [`PostgresSharedFeeds`](crate::PostgresSharedFeeds) keeps them in PostgreSQL.
//! The embedded SQLite store has none: its one host serves every run from memory.
//!
//! One feed per conversation (its current or last run, named by a random run id): the host
//! running it publishes its lines in batches and refreshes a liveness time (`alive_until`)
//! with each batch or at least every second; a follower reads lines after its last one and
//! notes that it follows (so the running host does not stop the run as unattended); a stop
//! asked anywhere is a flag the running host reads with its next publish.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::id::ConversationId;

/// What the running host learns when it publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    /// Whether a client asked, through any host, to stop the run.
    pub stop_asked: bool,
    /// How long ago a client on any host last read the feed (`None`: never).
    pub followed_ago: Option<Duration>,
}

/// One read of a feed by a follower.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedRead {
    /// The run the feed is of.
    pub run: String,
    /// The number of the run's last published line.
    pub last_seq: u64,
    /// Whether the run ended (its `DONE` line is line `last_seq`).
    pub done: bool,
    /// Whether the running host published or refreshed the feed within its liveness time.
    pub alive: bool,
    /// The lines after the one asked for, in order, each with its number.
    pub lines: Vec<(u64, String)>,
}

/// Run feeds in a shared database. Implementations are safe to share between many tasks.
#[async_trait]
pub trait SharedFeeds: Send + Sync + fmt::Debug {
    /// Starts the feed of `run` in `conversation`, replacing (and deleting) the feed of the
    /// conversation's previous run; alive for `alive_for`.
    async fn open(
        &self,
        conversation: &ConversationId,
        run: &str,
        alive_for: Duration,
    ) -> Result<(), StoreError>;

    /// Adds `lines`, numbered from `after + 1`, to `run`'s feed, marks it ended when `done`,
    /// and keeps it alive for `alive_for` more. `Ok(None)` when the feed is no longer `run`'s
    /// (a newer run replaced it): the caller stops publishing.
    async fn publish(
        &self,
        conversation: &ConversationId,
        run: &str,
        after: u64,
        lines: &[&str],
        done: bool,
        alive_for: Duration,
    ) -> Result<Option<Published>, StoreError>;

    /// Up to `max` lines after line `after` of the conversation's feed, noting that a client
    /// follows it; `Ok(None)` when the conversation has no feed.
    async fn read(
        &self,
        conversation: &ConversationId,
        after: u64,
        max: usize,
    ) -> Result<Option<FeedRead>, StoreError>;

    /// Asks the conversation's run to stop; `Ok(false)` when no live run is being written.
    async fn ask_stop(&self, conversation: &ConversationId) -> Result<bool, StoreError>;

    /// Deletes `run`'s feed (a finished run's, once its kept time passed); nothing happens
    /// when a newer run replaced it.
    async fn close(&self, conversation: &ConversationId, run: &str) -> Result<(), StoreError>;
}
