//! The SQLite queries of compactions (`crate::compaction`, schema version 7).

use rusqlite::{params, Connection, OptionalExtension};

use crate::compaction::Compaction;
use crate::id::ConversationId;

/// The conversation's compactions, the one covering the fewest messages first.
pub(super) fn select(conn: &Connection, id: &ConversationId) -> rusqlite::Result<Vec<Compaction>> {
    conn.prepare_cached(
        "SELECT covers, summary FROM compactions WHERE conversation_id = ?1 ORDER BY covers",
    )?
    .query_map([id.as_str()], |row| {
        Ok(Compaction {
            covers: row.get(0)?,
            summary: row.get(1)?,
        })
    })?
    .collect()
}

/// The conversation's newest compaction: the one covering the most messages.
pub(super) fn newest(
    conn: &Connection,
    id: &ConversationId,
) -> rusqlite::Result<Option<Compaction>> {
    conn.prepare_cached(
        "SELECT covers, summary FROM compactions WHERE conversation_id = ?1
         ORDER BY covers DESC LIMIT 1",
    )?
    .query_row([id.as_str()], |row| {
        Ok(Compaction {
            covers: row.get(0)?,
            summary: row.get(1)?,
        })
    })
    .optional()
}

/// Keeps `compaction` unless one for the same messages is kept already, and only while the
/// conversation holds at least the messages it covers.
pub(super) fn insert(
    conn: &Connection,
    id: &ConversationId,
    compaction: &Compaction,
    now_ms: i64,
) -> rusqlite::Result<()> {
    let covers = i64::try_from(compaction.covers).unwrap_or(i64::MAX);
    conn.prepare_cached(
        "INSERT INTO compactions (conversation_id, covers, summary, created_at)
         SELECT id, ?2, ?3, ?4 FROM conversations WHERE id = ?1 AND message_count >= ?2
         ON CONFLICT (conversation_id, covers) DO NOTHING",
    )?
    .execute(params![id.as_str(), covers, compaction.summary, now_ms])?;
    Ok(())
}
