//! Compactions: when a conversation outgrows its model's context window, the host has the
//! model summarise its older messages, and every later model turn sends that summary in
//! their place (`docs/api.md`, "Long conversations"). The messages themselves stay stored
//! whole: a [`Compaction`] is kept beside them, in both stores' `compactions` table (SQLite
//! schema version 7, PostgreSQL version 8):
//!
//! ```sql
//! CREATE TABLE compactions (
//!     conversation_id TEXT NOT NULL,
//!     covers          INTEGER NOT NULL,  -- the summary stands for messages 0..covers
//!     summary         TEXT NOT NULL,
//!     created_at      INTEGER NOT NULL,  -- Unix milliseconds
//!     PRIMARY KEY (conversation_id, covers)
//! );
//! ```
//!
//! A later summary covers the earlier one and the messages after it. A summary saved twice
//! for the same messages (two hosts compacting at once) keeps the first; replacing messages
//! (`replace_from`) deletes every summary that covered one of them.

use serde::Serialize;

/// A summary of a conversation's first [`covers`](Compaction::covers) messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    /// How many messages, from the first, the summary stands for.
    pub covers: u64,
    /// The summary, as the model wrote it.
    pub summary: String,
}
