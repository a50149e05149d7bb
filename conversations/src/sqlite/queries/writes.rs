//! The writes: a new conversation, a step appended or replaced, a title, a deletion. Each runs
//! on the writer thread inside the savepoint the writer opens for it (`pool`), so it opens no
//! transaction of its own, and stores or removes its messages' search index rows (`fold`)
//! with them.

use rusqlite::{params, Connection, OptionalExtension};
use time::OffsetDateTime;

use crate::id::ConversationId;
use crate::search::fold;
use crate::step::Step;

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
pub(in crate::sqlite) fn project_docs(
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
             title = CASE WHEN ?2 = 0 THEN NULL ELSE title END,
             rojo_kept_from = min(rojo_kept_from, ?2)
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
