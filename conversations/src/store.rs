//! The `ConversationStore` interface and the records it hands back.
//! Any backend (the embedded SQLite one today, a server database for multi-host
//! deployments later) implements this trait; the host holds an
//! `Arc<dyn ConversationStore>` and never sees the backend.

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;

use crate::compaction::Compaction;
use crate::error::StoreError;
use crate::id::ConversationId;
use crate::snippet::Snippet;
use crate::step::Step;

/// A stored conversation with its whole history.
///
/// Serializes with camelCase keys and RFC 3339 timestamps.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    /// The conversation's id.
    pub id: ConversationId,
    /// The project it belongs to. The HTTP layer refuses the conversation to a
    /// caller asking on behalf of another project.
    pub project_id: String,
    /// The rojo (assistant) it was started with.
    pub rojo: String,
    /// The OpenAI-format messages in the order they were appended: user,
    /// assistant (with `tool_calls`), `tool` (with `tool_call_id`), ...
    pub messages: Vec<Value>,
    /// When it was created (UTC, millisecond precision).
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When a step was last appended, or the creation time (UTC, millisecond precision).
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// The stored size: the bytes of its messages' JSON text, as stored.
    pub stored_bytes: u64,
}

/// One conversation a search found: its summary, and where a message of it matched.
///
/// Serializes as the summary's fields and `snippet`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchHit {
    /// The conversation.
    #[serde(flatten)]
    pub conversation: ConversationSummary,
    /// Its first message holding the searched text, around the match; `None` when only
    /// the title matched (or the searched text is too short for messages to be searched).
    pub snippet: Option<Snippet>,
}

/// A conversation without its messages: enough to authorise a caller and to check its
/// size before reading any message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationHead {
    /// The conversation's id.
    pub id: ConversationId,
    /// The project it belongs to.
    pub project_id: String,
    /// The rojo it was started with.
    pub rojo: String,
    /// How many messages it holds.
    pub message_count: u64,
    /// The stored size: the bytes of its messages' JSON text.
    pub stored_bytes: u64,
    /// The index of the first message from which every turn is known to have run under
    /// [`rojo`](Self::rojo): 0, except for a conversation stored before the store recorded
    /// this (before follow-ups were bound to the conversation's rojo, a follow-up ran under
    /// the rojo its request named), whose messages then stored are of unknown rojo.
    /// Replacing messages from an earlier index lowers it to that index.
    pub rojo_kept_from: u64,
}

/// A conversation as a run continues it, read with [`ConversationStore::resume`]: its newest
/// compaction, whose summary the model is sent in place of the messages it covers, and only
/// the messages after those.
#[derive(Debug, Clone, PartialEq)]
pub struct Resumed {
    /// The conversation's head (its whole size and message count).
    pub head: ConversationHead,
    /// The newest compaction kept (the one covering the most messages), if any.
    pub compaction: Option<Compaction>,
    /// The messages from index `compaction.covers` (0 without a compaction) on, in order.
    pub messages: Vec<Value>,
}

impl Resumed {
    /// The index of the first message of [`Resumed::messages`].
    pub fn from(&self) -> u64 {
        self.compaction.as_ref().map_or(0, |c| c.covers)
    }
}

/// Part of a conversation's messages, read with [`ConversationStore::page`].
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationPage {
    /// The conversation the page belongs to.
    pub head: ConversationHead,
    /// The messages from index `from` on, in order: as many as fit the page's byte
    /// budget, and at least one while any is left.
    pub messages: Vec<Value>,
    /// The index of the first message after this page, or `None` when the page holds
    /// the last message (or none is left).
    pub next: Option<u64>,
}

/// One line of a project's conversation list (the chat panel's history).
///
/// Serializes with camelCase keys and an RFC 3339 timestamp.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationSummary {
    /// The conversation's id.
    pub id: ConversationId,
    /// The rojo it was started with.
    pub rojo: String,
    /// The title the user gave it ([`ConversationStore::rename`]), or else the text of its
    /// first user message, whitespace collapsed, cut to
    /// [`TITLE_MAX_CHARS`](crate::TITLE_MAX_CHARS) characters (ending in `…` when
    /// cut); `None` until either exists.
    pub title: Option<String>,
    /// When a step was last appended, or the creation time.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// How many messages it holds.
    pub message_count: u64,
    /// The stored size: the bytes of its messages' JSON text.
    pub stored_bytes: u64,
}

/// Where conversations are kept. Implementations are safe to share between many
/// concurrent tasks.
///
/// Project ids and rojo names are stored as given: validating them is the
/// caller's job. Conversation ids are validated by [`ConversationId`].
#[async_trait]
pub trait ConversationStore: Send + Sync {
    /// Starts an empty conversation in `project_id` with `rojo`, returning its new
    /// random id.
    async fn create(&self, project_id: &str, rojo: &str) -> Result<ConversationId, StoreError> {
        self.create_with(project_id, rojo, Step::default()).await
    }

    /// Starts a conversation in `project_id` with `rojo` holding `first` as its first step,
    /// in one transaction (one write where a chat's first message would take two), returning
    /// its new random id. An empty `first` starts an empty conversation. If the calling task
    /// is cancelled, the conversation is created with its step, or not at all.
    async fn create_with(
        &self,
        project_id: &str,
        rojo: &str,
        first: Step,
    ) -> Result<ConversationId, StoreError>;

    /// The conversation with all its messages, or `Ok(None)` when no conversation
    /// has this id.
    async fn get(&self, id: &ConversationId) -> Result<Option<Conversation>, StoreError>;

    /// The conversation without its messages, or `Ok(None)` when no conversation has
    /// this id. Reads no message.
    async fn head(&self, id: &ConversationId) -> Result<Option<ConversationHead>, StoreError>;

    /// The messages from index `from` (0 is the first) on, as many as fit in
    /// `max_bytes` counted as their JSON array (`[`, each message's stored JSON text and
    /// the `,` or `]` after it), but always one while any is left, so a message larger
    /// than `max_bytes` is still readable. `Ok(None)` when no conversation has this id;
    /// a `from` past the last message gives an empty page. Reads only that page's
    /// messages.
    async fn page(
        &self,
        id: &ConversationId,
        from: u64,
        max_bytes: usize,
    ) -> Result<Option<ConversationPage>, StoreError>;

    /// Stores the messages of one step (a user message, or an assistant message
    /// and its tool results) after those already stored: all of them in order, or
    /// none, adding their JSON text's bytes to the conversation's stored size. Appending
    /// no messages only checks that the conversation exists.
    ///
    /// Each message must be a JSON object with a string `role`. If the calling
    /// task is cancelled, the step is still stored or refused as a whole.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] for an unknown id, [`StoreError::InvalidMessage`]
    /// for a message that is not an OpenAI-format message.
    async fn append(&self, id: &ConversationId, messages: Vec<Value>) -> Result<(), StoreError> {
        self.append_step(id, Step::new(&messages)?).await
    }

    /// [`ConversationStore::append`] of a [`Step`] already built: for a caller that also
    /// needs the step's stored size, so the messages are written as text once.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] for an unknown id.
    async fn append_step(&self, id: &ConversationId, step: Step) -> Result<(), StoreError>;

    /// Up to `limit` conversations of `project_id`, the most recently updated
    /// first.
    async fn list(
        &self,
        project_id: &str,
        limit: usize,
    ) -> Result<Vec<ConversationSummary>, StoreError>;

    /// Stores the messages of one step in place of the conversation's messages from index
    /// `from` (0 is the first) on: those are deleted and the step appended after the ones
    /// kept, in one transaction, so either both happen or neither does. The stored size and
    /// message count shrink by what was deleted. When `from` is 0 the derived title is
    /// taken from the new step (a title given by `rename` is kept). This is how a chat
    /// regenerates or edits its last message (`docs/api.md`).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] for an unknown id, [`StoreError::ReplacePastEnd`] when `from`
    /// is past the last message (nothing is changed).
    async fn replace_from(
        &self,
        id: &ConversationId,
        from: u64,
        step: Step,
    ) -> Result<(), StoreError>;

    /// Gives the conversation the title `title` (trimmed), shown instead of the one its
    /// first user message gives; `None` goes back to that one. Does not change its place in
    /// the list.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidTitle`] for an empty title, one over
    /// [`TITLE_MAX_CHARS`](crate::TITLE_MAX_CHARS) characters or one with a control
    /// character; [`StoreError::NotFound`] for an unknown id.
    async fn rename(&self, id: &ConversationId, title: Option<&str>) -> Result<(), StoreError>;

    /// Deletes the conversation and all its messages. `Ok(false)` when no conversation has
    /// this id. Refusing to delete a conversation a run is writing to is the caller's job
    /// (hold its run lease while deleting).
    async fn delete(&self, id: &ConversationId) -> Result<bool, StoreError>;

    /// Up to `limit` conversations of `project_id` whose title or whose user or assistant
    /// message text contains `text`, ignoring case, the most recently updated first. The
    /// text is matched literally (`%` and `_` are no wildcards). Messages are found through a
    /// trigram index, so a text shorter than [`MIN_INDEXED_CHARS`](crate::MIN_INDEXED_CHARS)
    /// searches titles only. A search runs apart from the other reads (its own connections,
    /// or a share of the pool), is stopped when the returned future is dropped, and has a
    /// time limit. Each hit comes with a [`Snippet`] of its first matching message.
    ///
    /// # Errors
    ///
    /// [`StoreError::SearchTimedOut`] when its time limit is over.
    async fn search(
        &self,
        project_id: &str,
        text: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, StoreError>;

    /// The conversation's compactions (`crate::compaction`), the one covering the fewest
    /// messages first; empty for an unknown id.
    async fn compactions(&self, id: &ConversationId) -> Result<Vec<Compaction>, StoreError>;

    /// The conversation from its newest compaction on ([`Resumed`]), in one snapshot:
    /// reads only the messages after what that compaction covers, so a run of a long
    /// conversation reads what its model is sent, not the whole history. `Ok(None)` when no
    /// conversation has this id.
    async fn resume(&self, id: &ConversationId) -> Result<Option<Resumed>, StoreError>;

    /// Keeps `compaction` for the conversation. A summary already kept for the same
    /// messages is left as it was (the first one saved wins); saving for an unknown id, or
    /// covering more messages than are stored, keeps nothing.
    async fn save_compaction(
        &self,
        id: &ConversationId,
        compaction: &Compaction,
    ) -> Result<(), StoreError>;

    /// Checks that the store can serve calls now, for a readiness probe: a server-backed
    /// store runs a trivial query. The embedded store is always ready.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the database cannot be reached.
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
