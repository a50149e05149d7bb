//! The conversation store: where Rojos keeps each chat's OpenAI-format messages.
//! Callers talk to the async [`ConversationStore`] trait; [`SqliteStore`] is the
//! embedded implementation, one SQLite file per host, and [`PostgresStore`] keeps them in
//! a PostgreSQL database that several hosts share. Knows nothing about HTTP,
//! projects' files or models: the host checks who may read what.
//!
//! # Layout
//!
//! - `store`: the [`ConversationStore`] trait and the records it returns.
//! - `id`: [`ConversationId`], the validated id newtype, and how new ids are made.
//! - `error`: [`StoreError`], the one error type.
//! - `step`: [`Step`], one step's messages checked and written as JSON text once, so a
//!   caller knows its stored size and a store only writes it.
//! - `title`: a conversation's title, taken from its first user message unless the user
//!   gave one (`rename`); the checks of appended messages and given titles; the escaped
//!   pattern of a search.
//! - `search`: what a search reads (each message's searchable text), how case is folded, and
//!   the pattern and trigrams of a searched text.
//! - `snippet`: [`Snippet`], the piece of a matching message a search hit shows, around its
//!   match.
//! - `approvals`: [`Approvals`], tool calls waiting for the user's decision, kept in
//!   each store's database ([`SqliteApprovals`], [`PostgresApprovals`]).
//! - `compaction`: [`Compaction`], a model-made summary sent in place of a conversation's
//!   older messages once it outgrew its model's context window.
//! - `lease`: [`RunLeases`], one run at a time per conversation, and its in-process
//!   [`LocalRunLeases`].
//! - `shared_feed`: [`SharedFeeds`], a run's events published for the other hosts sharing a
//!   database.
//! - `sqlite`: [`SqliteStore`]: connections (`pool`), schema and migrations
//!   (`schema`) and the blocking queries (`queries`).
//! - `postgres`: [`PostgresStore`]: options and pool (`connect`), TLS (`tls`), schema and
//!   migrations under an advisory lock (`schema`), the SQL (`queries`), which failures
//!   mean an unreachable database (`failure`), and [`PostgresRunLeases`] (`lease`).
//! - `test_cluster` (feature `test-cluster`): a throwaway PostgreSQL server for tests.
//!
//! # Example
//!
//! ```no_run
//! use rojos_conversations::{ConversationStore, SqliteStore};
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), rojos_conversations::StoreError> {
//! let store = SqliteStore::open("storage/rojos.db")?;
//! let id = store.create("demo", "default").await?;
//! store.append(&id, vec![json!({"role": "user", "content": "hello"})]).await?;
//! let conversation = store.get(&id).await?.expect("just created");
//! assert_eq!(conversation.messages.len(), 1);
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod approvals;
mod compaction;
mod error;
mod id;
mod lease;
mod parse_id;
mod postgres;
mod search;
mod shared_feed;
mod snippet;
mod sqlite;
mod step;
mod store;
#[cfg(feature = "test-cluster")]
pub mod test_cluster;
mod title;

pub use approvals::{
    new_approval_id, ApprovalState, Approvals, Decided, Decision, GaveUp, DENY_REASON_MAX_CHARS,
};
pub use compaction::Compaction;
pub use error::StoreError;
pub use id::ConversationId;
pub use lease::{LeaseHolder, LocalRunLeases, RunLeases};
pub use postgres::{
    Migration, PostgresApprovals, PostgresOptions, PostgresRunLeases, PostgresSharedFeeds,
    PostgresStore, PostgresTls, StatementMode, UrlError, POSTGRES_SCHEMA_VERSION,
};
pub use search::MIN_INDEXED_CHARS;
pub use shared_feed::{FeedRead, Published, SharedFeeds};
pub use snippet::{Snippet, SNIPPET_AFTER_CHARS, SNIPPET_BEFORE_CHARS};
pub use sqlite::{SqliteApprovals, SqliteOptions, SqliteStore, SCHEMA_VERSION};
pub use step::Step;
pub use store::{
    Conversation, ConversationHead, ConversationPage, ConversationStore, ConversationSummary,
    Resumed, SearchHit,
};
pub use title::TITLE_MAX_CHARS;
