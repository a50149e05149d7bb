//! The blocking SQL behind each store operation, run on a pooled connection.
//! A read is one transaction; `SqliteStore` moves it off the runtime. A write runs on the
//! writer thread inside the savepoint the writer opens for it (`pool`), which makes it
//! atomic: one that fails, or returns an error, is rolled back alone. So the writes here
//! open no transaction of their own (a nested savepoint was two more statements per write).
//! Rows are turned back into records here, so a corrupt row is reported by name. The search
//! index (schema version 6) is kept with the messages: each write that stores or deletes
//! messages adds or removes their index rows in the same savepoint.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::StoreError;
use crate::id::ConversationId;
use crate::search::fold;
use crate::step::Step;
use crate::store::{
    Conversation, ConversationHead, ConversationPage, ConversationSummary, Resumed,
};

/// Inserts a conversation holding the step `first` (none when it is empty); `false` (and
/// nothing stored) if `id` is already taken.
pub(crate) fn insert_conversation(
    conn: &Connection,
    id: &ConversationId,
    project_id: &str,
    rojo: &str,
    first: &Step,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    let activity = next_activity(conn, project_id)?;
    // Cached statements: parsing the SQL again on every call was a tenth of a chat's CPU
    // time under load (rojos-bench profile).
    // The row is written with its first step's counts, title and size (no second statement
    // reads and updates it); the step's messages are numbered as `insert_step` would: from 0,
    // step 0.
    let inserted = conn
        .prepare_cached(
            "INSERT INTO conversations (id, project_id, rojo, created_at, updated_at, activity,
                                        title, message_count, step_count, stored_bytes)
             VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![
            id.as_str(),
            project_id,
            rojo,
            now_ms,
            activity,
            first.title(),
            first.rows().len(),
            i64::from(!first.is_empty()),
            i64::try_from(first.bytes()).unwrap_or(i64::MAX),
        ])?;
    if inserted == 1 {
        insert_messages(conn, id, project_id, 0, 0, first)?;
    }
    Ok(inserted == 1)
}

/// Inserts the messages of `step` as step `step_number` of conversation `id` (of
/// `project_id`), the first numbered `first_seq`, and indexes their searchable text.
fn insert_messages(
    tx: &Connection,
    id: &ConversationId,
    project_id: &str,
    first_seq: i64,
    step_number: i64,
    step: &Step,
) -> rusqlite::Result<()> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO messages (conversation_id, seq, step, json) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (seq, json) in (first_seq..).zip(step.rows()) {
        insert.execute(params![id.as_str(), seq, step_number, json])?;
    }
    let mut next_doc = None;
    for (seq, text) in (first_seq..).zip(step.search_texts()) {
        let Some(text) = text else { continue };
        let doc = match next_doc {
            Some(doc) => doc,
            None => first_free_doc(tx, project_id)?,
        };
        tx.prepare_cached(
            "INSERT INTO search_docs (doc, conversation_id, seq) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![doc, id.as_str(), seq])?;
        tx.prepare_cached("INSERT INTO search_trigrams (rowid, body) VALUES (?1, ?2)")?
            .execute(params![doc, fold(text)])?;
        next_doc = Some(doc + 1);
    }
    Ok(())
}

/// Documents of one project in the search index: `number * DOCS_PER_PROJECT` and on.
const DOCS_PER_PROJECT: i64 = 1 << 32;

/// The range of `search_docs.doc` that `project_id`'s messages use, `None` if it has no
/// number yet (so nothing indexed).
pub(super) fn project_docs(
    conn: &Connection,
    project_id: &str,
) -> rusqlite::Result<Option<(i64, i64)>> {
    let number: Option<i64> = conn
        .prepare_cached("SELECT number FROM search_projects WHERE project_id = ?1")?
        .query_row([project_id], |row| row.get(0))
        .optional()?;
    Ok(number.and_then(docs_of_number))
}

/// The documents of the project numbered `number`, `None` past the last number that fits.
fn docs_of_number(number: i64) -> Option<(i64, i64)> {
    let first = number.checked_mul(DOCS_PER_PROJECT)?;
    Some((first, first.checked_add(DOCS_PER_PROJECT - 1)?))
}

/// The next unused document of `project_id` in the search index, numbering the project
/// first if it has no number yet.
fn first_free_doc(conn: &Connection, project_id: &str) -> rusqlite::Result<i64> {
    let docs = match project_docs(conn, project_id)? {
        Some(docs) => Some(docs),
        None => {
            let number: i64 = conn
                .prepare_cached(
                    "INSERT INTO search_projects (project_id, number)
                     SELECT ?1, coalesce(max(number), 0) + 1 FROM search_projects
                     RETURNING number",
                )?
                .query_row([project_id], |row| row.get(0))?;
            docs_of_number(number)
        }
    };
    let full = |value| rusqlite::Error::IntegralValueOutOfRange(0, value);
    let (first, last) = docs.ok_or_else(|| full(i64::MAX))?;
    let doc: i64 = conn
        .prepare_cached(
            "SELECT coalesce(max(doc) + 1, ?1) FROM search_docs WHERE doc BETWEEN ?1 AND ?2",
        )?
        .query_row(params![first, last], |row| row.get(0))?;
    if doc > last {
        return Err(full(doc));
    }
    Ok(doc)
}

/// Removes the messages of conversation `id` from `seq` `from` on from the search index.
fn unindex_messages(conn: &Connection, id: &ConversationId, from: i64) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "DELETE FROM search_trigrams WHERE rowid IN (
             SELECT doc FROM search_docs WHERE conversation_id = ?1 AND seq >= ?2
         )",
    )?
    .execute(params![id.as_str(), from])?;
    conn.prepare_cached("DELETE FROM search_docs WHERE conversation_id = ?1 AND seq >= ?2")?
        .execute(params![id.as_str(), from])?;
    Ok(())
}

/// Stores one step's messages after the conversation's last one; `false` (and nothing
/// stored) if the conversation does not exist.
pub(crate) fn insert_step(
    conn: &Connection,
    id: &ConversationId,
    step: &Step,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    let (messages, title) = (step.rows(), step.title());
    let found = conn
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
    let Some((project_id, first_seq, step_number)) = found else {
        return Ok(false);
    };
    if messages.is_empty() {
        return Ok(true);
    }
    insert_messages(conn, id, &project_id, first_seq, step_number, step)?;
    let activity = next_activity(conn, &project_id)?;
    let step_bytes: usize = messages.iter().map(String::len).sum();
    conn.prepare_cached(
        "UPDATE conversations
         SET message_count = message_count + ?2, step_count = step_count + 1,
             updated_at = ?3, activity = ?4, title = coalesce(title, ?5),
             stored_bytes = stored_bytes + ?6
         WHERE id = ?1",
    )?
    .execute(params![
        id.as_str(),
        messages.len(),
        now_ms,
        activity,
        title,
        i64::try_from(step_bytes).unwrap_or(i64::MAX),
    ])?;
    Ok(true)
}

/// What [`replace_step`] did.
pub(crate) enum Replaced {
    /// The messages from `from` on were replaced by the step.
    Done,
    /// No conversation has this id.
    NotFound,
    /// The conversation has only `count` messages; nothing changed.
    PastEnd { count: u64 },
}

/// Deletes the messages from `seq` `from` on and appends the step after the others. From 0,
/// the derived title is cleared first, so the step's title replaces it.
pub(crate) fn replace_step(
    conn: &Connection,
    id: &ConversationId,
    from: u64,
    step: &Step,
    now_ms: i64,
) -> rusqlite::Result<Replaced> {
    let count = conn
        .prepare_cached("SELECT message_count FROM conversations WHERE id = ?1")?
        .query_row([id.as_str()], |row| row.get::<_, u64>(0))
        .optional()?;
    let Some(count) = count else {
        return Ok(Replaced::NotFound);
    };
    if from > count {
        return Ok(Replaced::PastEnd { count });
    }
    let from = i64::try_from(from).unwrap_or(i64::MAX);
    let removed: i64 = conn
        .prepare_cached(
            "SELECT coalesce(sum(octet_length(json)), 0) FROM messages
             WHERE conversation_id = ?1 AND seq >= ?2",
        )?
        .query_row(params![id.as_str(), from], |row| row.get(0))?;
    conn.prepare_cached("DELETE FROM messages WHERE conversation_id = ?1 AND seq >= ?2")?
        .execute(params![id.as_str(), from])?;
    unindex_messages(conn, id, from)?;
    // A summary that covered a replaced message no longer stands for what is stored.
    conn.prepare_cached("DELETE FROM compactions WHERE conversation_id = ?1 AND covers > ?2")?
        .execute(params![id.as_str(), from])?;
    conn.prepare_cached(
        "UPDATE conversations
         SET message_count = ?2, stored_bytes = stored_bytes - ?3,
             title = CASE WHEN ?2 = 0 THEN NULL ELSE title END
         WHERE id = ?1",
    )?
    .execute(params![id.as_str(), from, removed])?;
    insert_step(conn, id, step, now_ms)?;
    Ok(Replaced::Done)
}

/// Sets (or clears, with `None`) the title the user gave; `false` if the conversation does
/// not exist.
pub(crate) fn update_custom_title(
    conn: &Connection,
    id: &ConversationId,
    title: Option<&str>,
) -> rusqlite::Result<bool> {
    let changed = conn
        .prepare_cached("UPDATE conversations SET custom_title = ?2 WHERE id = ?1")?
        .execute(params![id.as_str(), title])?;
    Ok(changed == 1)
}

/// Deletes the conversation and its messages; `false` if it does not exist.
pub(crate) fn delete_conversation(
    conn: &Connection,
    id: &ConversationId,
) -> rusqlite::Result<bool> {
    conn.prepare_cached("DELETE FROM messages WHERE conversation_id = ?1")?
        .execute([id.as_str()])?;
    unindex_messages(conn, id, 0)?;
    let deleted = conn
        .prepare_cached("DELETE FROM conversations WHERE id = ?1")?
        .execute([id.as_str()])?;
    Ok(deleted == 1)
}

/// A conversation's row without its messages, as stored.
struct HeadRow {
    project_id: String,
    rojo: String,
    created_ms: i64,
    updated_ms: i64,
    message_count: u64,
    stored_bytes: u64,
}

impl HeadRow {
    fn into_head(self, id: &ConversationId) -> ConversationHead {
        ConversationHead {
            id: id.clone(),
            project_id: self.project_id,
            rojo: self.rojo,
            message_count: self.message_count,
            stored_bytes: self.stored_bytes,
        }
    }
}

fn select_head_row(conn: &Connection, id: &ConversationId) -> rusqlite::Result<Option<HeadRow>> {
    conn.prepare_cached(
        "SELECT project_id, rojo, created_at, updated_at, message_count, stored_bytes
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
        super::compaction::newest(&tx, id).map_err(|e| StoreError::backend(action(), e))?;
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
pub(super) type SummaryRow = (String, String, Option<String>, i64, u64, u64);

/// The columns of a [`SummaryRow`].
pub(super) const SUMMARY_COLUMNS: &str =
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
pub(super) fn sql_limit(limit: usize) -> i64 {
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
pub(super) fn summary_of(
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
