//! The reads: a conversation's head, whole, resumed (from its newest compaction) or a page
//! of it, and a project's summaries. Each is one transaction; rows are turned back into
//! records here, so a corrupt row is reported by name.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::StoreError;
use crate::id::ConversationId;
use crate::store::{
    Conversation, ConversationHead, ConversationPage, ConversationSummary, Resumed,
};

/// A conversation's row without its messages, as stored.
struct HeadRow {
    project_id: String,
    rojo: String,
    created_ms: i64,
    updated_ms: i64,
    message_count: u64,
    stored_bytes: u64,
    rojo_kept_from: u64,
}

impl HeadRow {
    fn into_head(self, id: &ConversationId) -> ConversationHead {
        ConversationHead {
            id: id.clone(),
            project_id: self.project_id,
            rojo: self.rojo,
            message_count: self.message_count,
            stored_bytes: self.stored_bytes,
            rojo_kept_from: self.rojo_kept_from,
        }
    }
}

fn select_head_row(conn: &Connection, id: &ConversationId) -> rusqlite::Result<Option<HeadRow>> {
    conn.prepare_cached(
        "SELECT project_id, rojo, created_at, updated_at, message_count, stored_bytes,
                rojo_kept_from
         FROM conversations WHERE id = ?1",
    )?
    .query_row([id.as_str()], |row| {
        Ok(HeadRow {
            project_id: row.get(0)?,
            rojo: row.get(1)?,
            created_ms: row.get(2)?,
            updated_ms: row.get(3)?,
            message_count: row.get(4)?,
            stored_bytes: row.get(5)?,
            rojo_kept_from: row.get(6)?,
        })
    })
    .optional()
}

/// The conversation without its messages.
pub(crate) fn select_head(
    conn: &mut Connection,
    id: &ConversationId,
) -> Result<Option<ConversationHead>, StoreError> {
    let head = select_head_row(conn, id)
        .map_err(|e| StoreError::backend(format!("read conversation '{id}'"), e))?;
    Ok(head.map(|row| row.into_head(id)))
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
    let Some(head) = select_head_row(&tx, id).map_err(|e| StoreError::backend(action(), e))? else {
        return Ok(None);
    };
    let rows =
        select_message_rows(&tx, id, 0, None).map_err(|e| StoreError::backend(action(), e))?;
    Ok(Some(Conversation {
        id: id.clone(),
        messages: parse_messages(rows, id)?,
        created_at: from_millis(head.created_ms, id, "created_at")?,
        updated_at: from_millis(head.updated_ms, id, "updated_at")?,
        stored_bytes: head.stored_bytes,
        project_id: head.project_id,
        rojo: head.rojo,
    }))
}

/// The conversation from its newest compaction on, read in one snapshot: the head, the
/// compaction, and only the messages after what it covers.
pub(crate) fn select_resumed(
    conn: &mut Connection,
    id: &ConversationId,
) -> Result<Option<Resumed>, StoreError> {
    let action = || format!("read conversation '{id}'");
    let tx = conn
        .transaction()
        .map_err(|e| StoreError::backend(action(), e))?;
    let Some(head) = select_head_row(&tx, id).map_err(|e| StoreError::backend(action(), e))? else {
        return Ok(None);
    };
    let compaction =
        crate::sqlite::compaction::newest(&tx, id).map_err(|e| StoreError::backend(action(), e))?;
    let from = compaction.as_ref().map_or(0, |c| c.covers);
    let rows = select_message_rows(&tx, id, i64::try_from(from).unwrap_or(i64::MAX), None)
        .map_err(|e| StoreError::backend(action(), e))?;
    Ok(Some(Resumed {
        head: head.into_head(id),
        compaction,
        messages: parse_messages(rows, id)?,
    }))
}

/// The messages from index `from` that fit in `max_bytes` (at least one), read in one
/// snapshot: their sizes first, which SQLite reads without the JSON text, then only the
/// rows of the page.
pub(crate) fn select_page(
    conn: &mut Connection,
    id: &ConversationId,
    from: u64,
    max_bytes: usize,
) -> Result<Option<ConversationPage>, StoreError> {
    let action = || format!("read a page of conversation '{id}'");
    let tx = conn
        .transaction()
        .map_err(|e| StoreError::backend(action(), e))?;
    let Some(head) = select_head_row(&tx, id).map_err(|e| StoreError::backend(action(), e))? else {
        return Ok(None);
    };
    let from_seq = i64::try_from(from).unwrap_or(i64::MAX);
    let count = (|| {
        let mut sizes = tx.prepare_cached(
            "SELECT octet_length(json) FROM messages
             WHERE conversation_id = ?1 AND seq >= ?2 ORDER BY seq",
        )?;
        let sizes = sizes.query_map(params![id.as_str(), from_seq], |row| row.get::<_, u64>(0))?;
        page_length(sizes, max_bytes)
    })()
    .map_err(|e| StoreError::backend(action(), e))?;
    let rows = select_message_rows(&tx, id, from_seq, Some(count))
        .map_err(|e| StoreError::backend(action(), e))?;
    let messages = parse_messages(rows, id)?;
    let end = from.saturating_add(messages.len() as u64);
    let head = head.into_head(id);
    Ok(Some(ConversationPage {
        next: (end < head.message_count).then_some(end),
        head,
        messages,
    }))
}

/// How many of the messages whose sizes `sizes` gives, in order, fit in a JSON array of
/// `max_bytes`: one byte for `[`, then each message and the `,` or `]` after it. The
/// first message always counts. Stops reading `sizes` at the first that does not fit.
fn page_length(
    sizes: impl Iterator<Item = rusqlite::Result<u64>>,
    max_bytes: usize,
) -> rusqlite::Result<usize> {
    let budget = u64::try_from(max_bytes).unwrap_or(u64::MAX);
    let mut used: u64 = 1;
    let mut count = 0;
    for size in sizes {
        let with_separator = size?.saturating_add(1);
        if count > 0 && used.saturating_add(with_separator) > budget {
            break;
        }
        used = used.saturating_add(with_separator);
        count += 1;
    }
    Ok(count)
}

/// Messages from `seq` `from` on, `limit` of them at most (`None`: all).
fn select_message_rows(
    conn: &Connection,
    id: &ConversationId,
    from: i64,
    limit: Option<usize>,
) -> rusqlite::Result<Vec<(i64, String)>> {
    // SQLite reads a negative LIMIT as no limit.
    let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let mut select = conn.prepare_cached(
        "SELECT seq, json FROM messages WHERE conversation_id = ?1 AND seq >= ?2
         ORDER BY seq LIMIT ?3",
    )?;
    let rows = select.query_map(params![id.as_str(), from, limit], |row| {
        Ok((row.get(0)?, row.get(1)?))
    })?;
    rows.collect()
}

/// Stored rows back to messages; a row that is not JSON is reported by its `seq`.
fn parse_messages(rows: Vec<(i64, String)>, id: &ConversationId) -> Result<Vec<Value>, StoreError> {
    rows.into_iter()
        .map(|(seq, json)| {
            serde_json::from_str(&json).map_err(|e| {
                StoreError::corrupt(
                    format!("conversation '{id}' message {seq} is not valid JSON"),
                    e,
                )
            })
        })
        .collect()
}

/// A raw row of [`select_summaries`], before its fields are checked.
pub(in crate::sqlite) type SummaryRow = (String, String, Option<String>, i64, u64, u64);

/// The columns of a [`SummaryRow`].
pub(in crate::sqlite) const SUMMARY_COLUMNS: &str =
    "id, rojo, coalesce(custom_title, title), updated_at, message_count, stored_bytes";

/// Up to `limit` conversations of `project_id`, most recent activity first.
pub(crate) fn select_summaries(
    conn: &mut Connection,
    project_id: &str,
    limit: usize,
) -> Result<Vec<ConversationSummary>, StoreError> {
    let sql = format!(
        "SELECT {SUMMARY_COLUMNS} FROM conversations
         WHERE project_id = ?1 ORDER BY activity DESC LIMIT ?2"
    );
    summaries(
        conn,
        &sql,
        project_id,
        params![project_id, sql_limit(limit)],
    )
}

/// A limit as SQLite takes it.
pub(in crate::sqlite) fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// The summaries `sql` selects with `params`.
fn summaries(
    conn: &mut Connection,
    sql: &str,
    project_id: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<ConversationSummary>, StoreError> {
    let action = || format!("list the conversations of project '{project_id}'");
    let rows = (|| -> rusqlite::Result<Vec<SummaryRow>> {
        let mut select = conn.prepare_cached(sql)?;
        let rows = select.query_map(params, |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
            ))
        })?;
        rows.collect()
    })()
    .map_err(|e| StoreError::backend(action(), e))?;
    rows.into_iter()
        .map(|row| summary_of(row, project_id))
        .collect()
}

/// The summary of a raw row of a conversation of `project_id`.
pub(in crate::sqlite) fn summary_of(
    (id, rojo, title, updated_ms, message_count, stored_bytes): SummaryRow,
    project_id: &str,
) -> Result<ConversationSummary, StoreError> {
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
        stored_bytes,
    })
}

fn from_millis(ms: i64, id: &ConversationId, field: &str) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).map_err(|e| {
        StoreError::corrupt(
            format!("conversation '{id}' has an impossible {field} {ms}"),
            e,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fit(sizes: &[u64], max_bytes: usize) -> usize {
        page_length(sizes.iter().map(|n| Ok(*n)), max_bytes).unwrap()
    }

    #[test]
    fn a_page_counts_the_array_brackets_and_commas() {
        // `[` + 3 + `,` + 3 + `]` = 9 bytes.
        assert_eq!(fit(&[3, 3, 3], 9), 2);
        assert_eq!(fit(&[3, 3, 3], 8), 1);
        assert_eq!(fit(&[3, 3, 3], 13), 3);
    }

    #[test]
    fn a_page_holds_one_message_even_when_it_alone_is_over_the_budget() {
        assert_eq!(fit(&[5000, 1], 1024), 1);
        assert_eq!(fit(&[], 1024), 0);
    }

    #[test]
    fn a_page_stops_reading_sizes_at_the_first_that_does_not_fit() {
        let mut read = 0;
        let sizes = [10, 10, 2000, 10, 10].into_iter().map(|n| {
            read += 1;
            Ok(n)
        });
        assert_eq!(page_length(sizes, 100).unwrap(), 2);
        assert_eq!(read, 3);
    }
}
