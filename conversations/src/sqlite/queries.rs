//! The blocking SQL behind each store operation, run on a pooled connection.
//! Each function is one transaction; `SqliteStore` moves it off the runtime.
//! Rows are turned back into records here, so a corrupt row is reported by name.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::StoreError;
use crate::id::ConversationId;
use crate::store::{Conversation, ConversationSummary};

/// Inserts an empty conversation; `false` if `id` is already taken.
pub(crate) fn insert_conversation(
    conn: &mut Connection,
    id: &ConversationId,
    project_id: &str,
    rojo: &str,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let activity = next_activity(&tx, project_id)?;
    // Cached statements: parsing the SQL again on every call was a tenth of a chat's CPU
    // time under load (rojos-bench profile).
    let inserted = tx
        .prepare_cached(
            "INSERT INTO conversations (id, project_id, rojo, created_at, updated_at, activity)
             VALUES (?1, ?2, ?3, ?4, ?4, ?5)
             ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![id.as_str(), project_id, rojo, now_ms, activity])?;
    tx.commit()?;
    Ok(inserted == 1)
}

/// Stores one step's messages after the conversation's last one, in one
/// transaction; `false` (and nothing stored) if the conversation does not exist.
pub(crate) fn insert_step(
    conn: &mut Connection,
    id: &ConversationId,
    messages: &[String],
    title: Option<&str>,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = tx
        .prepare_cached(
            "SELECT project_id, message_count, step_count FROM conversations WHERE id = ?1",
        )?
        .query_row([id.as_str()], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })
        .optional()?;
    let Some((project_id, first_seq, step)) = found else {
        return Ok(false);
    };
    if messages.is_empty() {
        return Ok(true);
    }
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO messages (conversation_id, seq, step, json) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for (seq, json) in (first_seq..).zip(messages) {
            insert.execute(params![id.as_str(), seq, step, json])?;
        }
    }
    let activity = next_activity(&tx, &project_id)?;
    tx.prepare_cached(
        "UPDATE conversations
         SET message_count = message_count + ?2, step_count = step_count + 1,
             updated_at = ?3, activity = ?4, title = coalesce(title, ?5)
         WHERE id = ?1",
    )?
    .execute(params![
        id.as_str(),
        messages.len(),
        now_ms,
        activity,
        title
    ])?;
    tx.commit()?;
    Ok(true)
}

/// The conversation and its messages, read in one snapshot.
pub(crate) fn select_conversation(
    conn: &mut Connection,
    id: &ConversationId,
) -> Result<Option<Conversation>, StoreError> {
    let action = || format!("read conversation '{id}'");
    let tx = conn
        .transaction()
        .map_err(|e| StoreError::backend(action(), e))?;
    let head = tx
        .query_row(
            "SELECT project_id, rojo, created_at, updated_at FROM conversations WHERE id = ?1",
            [id.as_str()],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                    row.get::<_, i64>(3)?,
                ))
            },
        )
        .optional()
        .map_err(|e| StoreError::backend(action(), e))?;
    let Some((project_id, rojo, created_ms, updated_ms)) = head else {
        return Ok(None);
    };
    let rows = select_message_rows(&tx, id).map_err(|e| StoreError::backend(action(), e))?;
    let messages = rows
        .into_iter()
        .map(|(seq, json)| {
            serde_json::from_str(&json).map_err(|e| {
                StoreError::corrupt(
                    format!("conversation '{id}' message {seq} is not valid JSON"),
                    e,
                )
            })
        })
        .collect::<Result<Vec<Value>, _>>()?;
    Ok(Some(Conversation {
        id: id.clone(),
        project_id,
        rojo,
        messages,
        created_at: from_millis(created_ms, id, "created_at")?,
        updated_at: from_millis(updated_ms, id, "updated_at")?,
    }))
}

fn select_message_rows(
    conn: &Connection,
    id: &ConversationId,
) -> rusqlite::Result<Vec<(i64, String)>> {
    let mut select = conn
        .prepare_cached("SELECT seq, json FROM messages WHERE conversation_id = ?1 ORDER BY seq")?;
    let rows = select.query_map([id.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// A raw row of [`select_summaries`], before its fields are checked.
type SummaryRow = (String, String, Option<String>, i64, u64);

/// Up to `limit` conversations of `project_id`, most recent activity first.
pub(crate) fn select_summaries(
    conn: &mut Connection,
    project_id: &str,
    limit: usize,
) -> Result<Vec<ConversationSummary>, StoreError> {
    let action = || format!("list the conversations of project '{project_id}'");
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = (|| -> rusqlite::Result<Vec<SummaryRow>> {
        let mut select = conn.prepare_cached(
            "SELECT id, rojo, title, updated_at, message_count FROM conversations
             WHERE project_id = ?1 ORDER BY activity DESC LIMIT ?2",
        )?;
        let rows = select.query_map(params![project_id, limit], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        })?;
        rows.collect()
    })()
    .map_err(|e| StoreError::backend(action(), e))?;
    rows.into_iter()
        .map(|(id, rojo, title, updated_ms, message_count)| {
            let id = ConversationId::parse(&id).map_err(|e| {
                StoreError::corrupt(
                    format!("a conversation of project '{project_id}' has an invalid id"),
                    e,
                )
            })?;
            let updated_at = from_millis(updated_ms, &id, "updated_at")?;
            Ok(ConversationSummary {
                id,
                rojo,
                title,
                updated_at,
                message_count,
            })
        })
        .collect()
}

/// One more than the highest `activity` in the project, so the conversation
/// being changed sorts first.
fn next_activity(conn: &Connection, project_id: &str) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "SELECT coalesce(max(activity), 0) + 1 FROM conversations WHERE project_id = ?1",
    )?
    .query_row([project_id], |row| row.get(0))
}

/// Now, in Unix milliseconds.
pub(crate) fn now_millis() -> i64 {
    let nanos = OffsetDateTime::now_utc().unix_timestamp_nanos();
    i64::try_from(nanos / 1_000_000).unwrap_or(i64::MAX)
}

fn from_millis(ms: i64, id: &ConversationId, field: &str) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).map_err(|e| {
        StoreError::corrupt(
            format!("conversation '{id}' has an impossible {field} {ms}"),
            e,
        )
    })
}
