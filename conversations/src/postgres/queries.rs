//! The SQL behind each PostgreSQL store operation. Each is one statement, so it sees one
//! snapshot and commits (or fails) as a whole without a client-side transaction (a new
//! conversation with its first step included): `append` locks the conversation's row with
//! its `UPDATE`, so concurrent steps of one conversation are numbered one after the other.
//! `replace_step` is the exception: a transaction of five statements, the first locking the
//! conversation's row. Rows are turned back into records here. Statements are sent as
//! `statements` says (prepared, or unnamed behind a transaction pooler). Each message's
//! searchable text (`crate::search`) is stored beside it (`search_text`, schema version 7),
//! where a trigram index finds it.

use deadpool_postgres::{ClientWrapper, Transaction};
use serde_json::Value;
use time::OffsetDateTime;
use tokio_postgres::types::Type;
use tokio_postgres::Row;

use super::statements::{Run, Sql, StatementMode};

use crate::compaction::Compaction;
use crate::error::StoreError;
use crate::id::ConversationId;
use crate::step::Step;
use crate::store::{
    Conversation, ConversationHead, ConversationPage, ConversationSummary, Resumed,
};

/// Inserts a conversation holding the step `first` (none when it is empty), in one
/// statement; `false` (and nothing stored) if `id` is already taken.
pub(crate) async fn insert_conversation(
    client: &ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
    project_id: &str,
    rojo: &str,
    first: &Step,
) -> Result<bool, tokio_postgres::Error> {
    // The messages are inserted only when the conversation's row is (the `RETURNING`), as
    // `run_insert_step` numbers a step's: from 0, step 0. An empty step inserts none and
    // leaves the counts at 0.
    const INSERT: Sql = Sql {
        text: "WITH conversation AS (
                INSERT INTO conversations (id, project_id, rojo, created_at, updated_at,
                                           activity, title, message_count, step_count,
                                           stored_bytes)
                SELECT $1, $2, $3, now.ms, now.ms, nextval('conversation_activity'), $4, $5, $6,
                       $7
                FROM (SELECT rojos_now_ms() AS ms) now
                ON CONFLICT (id) DO NOTHING
                RETURNING id
             ), inserted AS (
                INSERT INTO messages (conversation_id, seq, step, json, search_text)
                SELECT conversation.id, step_message.ord - 1, 0, step_message.json,
                       step_message.search_text
                FROM conversation,
                     unnest($8::text[], $9::text[])
                         WITH ORDINALITY AS step_message (json, search_text, ord)
             )
             SELECT count(*) FROM conversation",
        types: &[
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::INT8,
            Type::INT8,
            Type::INT8,
            Type::TEXT_ARRAY,
            Type::TEXT_ARRAY,
        ],
    };
    let count = i64::try_from(first.rows().len()).unwrap_or(i64::MAX);
    let steps = i64::from(!first.is_empty());
    let bytes = i64::try_from(first.bytes()).unwrap_or(i64::MAX);
    let inserted: i64 = client
        .one(
            mode,
            &INSERT,
            &[
                &id.as_str(),
                &project_id,
                &rojo,
                &first.title(),
                &count,
                &steps,
                &bytes,
                &first.rows(),
                &first.search_texts(),
            ],
        )
        .await?
        .get(0);
    Ok(inserted == 1)
}

/// Stores one step's messages after the conversation's last one, in one statement;
/// `false` (and nothing stored) if the conversation does not exist.
pub(crate) async fn insert_step(
    client: &ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
    step: &Step,
) -> Result<bool, tokio_postgres::Error> {
    if step.is_empty() {
        const EXISTS: Sql = Sql {
            text: "SELECT 1 FROM conversations WHERE id = $1",
            types: &[Type::TEXT],
        };
        return Ok(client.opt(mode, &EXISTS, &[&id.as_str()]).await?.is_some());
    }
    run_insert_step(client, mode, id, step).await
}

/// The statement of [`insert_step`] for a non-empty step, on `client` (a pooled connection
/// or a transaction on one); `true` if the conversation exists.
async fn run_insert_step(
    client: &impl Run,
    mode: StatementMode,
    id: &ConversationId,
    step: &Step,
) -> Result<bool, tokio_postgres::Error> {
    // The UPDATE takes the row lock; a concurrent step waits for it, then sees the counts
    // this one left, so `seq` and `step` never clash.
    const INSERT: Sql = Sql {
        text: "WITH conversation AS (
                UPDATE conversations
                SET message_count = message_count + $2, step_count = step_count + 1,
                    updated_at = rojos_now_ms(), activity = nextval('conversation_activity'),
                    title = coalesce(title, $3), stored_bytes = stored_bytes + $4
                WHERE id = $1
                RETURNING message_count - $2 AS first_seq, step_count - 1 AS step
             ), inserted AS (
                INSERT INTO messages (conversation_id, seq, step, json, search_text)
                SELECT $1, conversation.first_seq + step_message.ord - 1, conversation.step,
                       step_message.json, step_message.search_text
                FROM conversation,
                     unnest($5::text[], $6::text[])
                         WITH ORDINALITY AS step_message (json, search_text, ord)
             )
             SELECT count(*) FROM conversation",
        types: &[
            Type::TEXT,
            Type::INT8,
            Type::TEXT,
            Type::INT8,
            Type::TEXT_ARRAY,
            Type::TEXT_ARRAY,
        ],
    };
    let messages = step.rows();
    let count = i64::try_from(messages.len()).unwrap_or(i64::MAX);
    let bytes = i64::try_from(step.bytes()).unwrap_or(i64::MAX);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
        &id.as_str(),
        &count,
        &step.title(),
        &bytes,
        &messages,
        &step.search_texts(),
    ];
    let found: i64 = client.one(mode, &INSERT, &params).await?.get(0);
    Ok(found == 1)
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

/// Deletes the messages from `seq` `from` on and appends the step after the others, in one
/// transaction that locks the conversation's row first (so no step is appended between).
/// From 0, the derived title is cleared first, so the step's title replaces it. Cancelled
/// midway, the transaction is rolled back: nothing is deleted.
pub(crate) async fn replace_step(
    client: &mut ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
    from: u64,
    step: &Step,
) -> Result<Replaced, tokio_postgres::Error> {
    const LOCK: Sql = Sql {
        text: "SELECT message_count FROM conversations WHERE id = $1 FOR UPDATE",
        types: &[Type::TEXT],
    };
    const DELETE: Sql = Sql {
        text: "WITH gone AS (
                DELETE FROM messages WHERE conversation_id = $1 AND seq >= $2
                RETURNING octet_length(json) AS bytes
             )
             SELECT coalesce(sum(bytes), 0)::bigint FROM gone",
        types: &[Type::TEXT, Type::INT8],
    };
    const SHRINK: Sql = Sql {
        text: "UPDATE conversations
             SET message_count = $2::bigint, stored_bytes = stored_bytes - $3,
                 title = CASE WHEN $2::bigint = 0 THEN NULL ELSE title END
             WHERE id = $1",
        types: &[Type::TEXT, Type::INT8, Type::INT8],
    };
    let tx: Transaction<'_> = client.transaction().await?;
    let Some(row) = tx.opt(mode, &LOCK, &[&id.as_str()]).await? else {
        return Ok(Replaced::NotFound);
    };
    let count = unsigned(row.get(0));
    if from > count {
        return Ok(Replaced::PastEnd { count });
    }
    let from = i64::try_from(from).unwrap_or(i64::MAX);
    // A summary that covered a replaced message no longer stands for what is stored.
    const UNCOVER: Sql = Sql {
        text: "DELETE FROM compactions WHERE conversation_id = $1 AND covers > $2",
        types: &[Type::TEXT, Type::INT8],
    };
    let removed: i64 = tx.one(mode, &DELETE, &[&id.as_str(), &from]).await?.get(0);
    tx.count(mode, &UNCOVER, &[&id.as_str(), &from]).await?;
    tx.count(mode, &SHRINK, &[&id.as_str(), &from, &removed])
        .await?;
    if !step.is_empty() {
        run_insert_step(&tx, mode, id, step).await?;
    }
    tx.commit().await?;
    Ok(Replaced::Done)
}

/// Sets (or clears, with `None`) the title the user gave; `false` if the conversation does
/// not exist.
pub(crate) async fn update_custom_title(
    client: &ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
    title: Option<&str>,
) -> Result<bool, tokio_postgres::Error> {
    const UPDATE: Sql = Sql {
        text: "UPDATE conversations SET custom_title = $2 WHERE id = $1",
        types: &[Type::TEXT, Type::TEXT],
    };
    Ok(client.count(mode, &UPDATE, &[&id.as_str(), &title]).await? == 1)
}

/// Deletes the conversation and its messages in one statement; `false` if it does not
/// exist.
pub(crate) async fn delete_conversation(
    client: &ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
) -> Result<bool, tokio_postgres::Error> {
    const DELETE: Sql = Sql {
        text: "WITH gone AS (DELETE FROM conversations WHERE id = $1 RETURNING id),
                  messages_gone AS (DELETE FROM messages WHERE conversation_id = $1),
                  approvals_gone AS (DELETE FROM approvals WHERE conversation_id = $1),
                  tools_gone AS (DELETE FROM approved_tools WHERE conversation_id = $1),
                  compactions_gone AS (DELETE FROM compactions WHERE conversation_id = $1),
                  feed_gone AS (DELETE FROM run_feeds WHERE conversation_id = $1 RETURNING run),
                  lines_gone AS (DELETE FROM run_events WHERE run IN (SELECT run FROM feed_gone))
             SELECT count(*) FROM gone",
        types: &[Type::TEXT],
    };
    let deleted: i64 = client.one(mode, &DELETE, &[&id.as_str()]).await?.get(0);
    Ok(deleted == 1)
}

/// Up to `limit` conversations of `project_id` whose title, or the searchable text of one
/// of whose messages (`search_text`), matches the `LIKE` pattern `pattern` ignoring case
/// (`ILIKE`: ASCII letters always, others as the database's locale folds them), most recent
/// activity first; with `messages` false, titles only (a text too short for a trigram).
/// The messages are found through the trigram index (`pg_trgm`, schema version 7). Each row
/// is a [`summary`]'s columns, then the index and searchable text of the conversation's
/// first matching message (`NULL` when only its title matched). Run on `client` inside the
/// search's transaction (`super::search`).
pub(crate) async fn search_summaries(
    client: &Transaction<'_>,
    mode: StatementMode,
    project_id: &str,
    pattern: &str,
    messages: bool,
    limit: usize,
) -> Result<Vec<Row>, tokio_postgres::Error> {
    // The hits are chosen and ordered first; then each kept one's first matching message
    // is found along its messages in order (the primary key), for its snippet.
    const SEARCH: Sql = Sql {
        text: "SELECT k.id, k.rojo, k.title, k.updated_at, k.message_count, k.stored_bytes,
                    h.seq, h.search_text
             FROM (
                 SELECT id, rojo, coalesce(custom_title, title) AS title, updated_at,
                        message_count, stored_bytes, activity
                 FROM conversations c
                 WHERE project_id = $1 AND (
                     coalesce(custom_title, title) ILIKE $2 ESCAPE '\\'
                     OR id IN (
                         SELECT m.conversation_id FROM messages m
                         WHERE m.search_text ILIKE $2 ESCAPE '\\'
                     )
                 )
                 ORDER BY activity DESC LIMIT $3
             ) k
             LEFT JOIN LATERAL (
                 SELECT m.seq, m.search_text FROM messages m
                 WHERE m.conversation_id = k.id AND m.search_text ILIKE $2 ESCAPE '\\'
                 ORDER BY m.seq LIMIT 1
             ) h ON true
             ORDER BY k.activity DESC",
        types: &[Type::TEXT, Type::TEXT, Type::INT8],
    };
    const TITLES: Sql = Sql {
        text: "SELECT id, rojo, coalesce(custom_title, title), updated_at, message_count,
                    stored_bytes, NULL::bigint, NULL::text
             FROM conversations
             WHERE project_id = $1 AND coalesce(custom_title, title) ILIKE $2 ESCAPE '\\'
             ORDER BY activity DESC LIMIT $3",
        types: &[Type::TEXT, Type::TEXT, Type::INT8],
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let sql = if messages { &SEARCH } else { &TITLES };
    client
        .rows(mode, sql, &[&project_id, &pattern, &limit])
        .await
}

/// The conversation without its messages.
pub(crate) async fn select_head(
    client: &ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
) -> Result<Option<ConversationHead>, tokio_postgres::Error> {
    const SELECT: Sql = Sql {
        text: "SELECT project_id, rojo, message_count, stored_bytes FROM conversations
             WHERE id = $1",
        types: &[Type::TEXT],
    };
    let row = client.opt(mode, &SELECT, &[&id.as_str()]).await?;
    Ok(row.map(|row| head(&row, id)))
}

/// The conversation and all its messages, in one snapshot.
pub(crate) async fn select_conversation(
    client: &ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
) -> Result<Option<Row>, tokio_postgres::Error> {
    const SELECT: Sql = Sql {
        text: "SELECT project_id, rojo, message_count, stored_bytes, created_at, updated_at,
                    ARRAY(SELECT json FROM messages WHERE conversation_id = c.id ORDER BY seq)
             FROM conversations c WHERE id = $1",
        types: &[Type::TEXT],
    };
    client.opt(mode, &SELECT, &[&id.as_str()]).await
}

/// The conversation from its newest compaction on, in one snapshot: the head, the
/// compaction's `covers` and summary (NULL without one), and only the messages after what
/// it covers.
pub(crate) async fn select_resumed(
    client: &ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
) -> Result<Option<Row>, tokio_postgres::Error> {
    const SELECT: Sql = Sql {
        text: "SELECT c.project_id, c.rojo, c.message_count, c.stored_bytes, k.covers, k.summary,
                    ARRAY(SELECT json FROM messages
                          WHERE conversation_id = c.id AND seq >= coalesce(k.covers, 0)
                          ORDER BY seq)
             FROM conversations c LEFT JOIN LATERAL (
                 SELECT covers, summary FROM compactions
                 WHERE conversation_id = c.id ORDER BY covers DESC LIMIT 1
             ) k ON true
             WHERE c.id = $1",
        types: &[Type::TEXT],
    };
    client.opt(mode, &SELECT, &[&id.as_str()]).await
}

/// The messages from index `from` that fit in `max_bytes` (at least one), in one
/// snapshot: a running total of their sizes (`[`, then each message and its `,` or `]`)
/// picks the page, and only the page's JSON text is sent back.
pub(crate) async fn select_page(
    client: &ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
    from: u64,
    max_bytes: usize,
) -> Result<Option<Row>, tokio_postgres::Error> {
    const SELECT: Sql = Sql {
        text: "SELECT project_id, rojo, message_count, stored_bytes,
                    ARRAY(SELECT json FROM (
                        SELECT seq, json, row_number() OVER running AS n,
                               sum(octet_length(json) + 1) OVER running AS used
                        FROM messages WHERE conversation_id = c.id AND seq >= $2
                        WINDOW running AS (ORDER BY seq)
                    ) page WHERE n = 1 OR 1 + used <= $3 ORDER BY seq)
             FROM conversations c WHERE id = $1",
        types: &[Type::TEXT, Type::INT8, Type::INT8],
    };
    let from = i64::try_from(from).unwrap_or(i64::MAX);
    let budget = i64::try_from(max_bytes).unwrap_or(i64::MAX);
    client
        .opt(mode, &SELECT, &[&id.as_str(), &from, &budget])
        .await
}

/// Up to `limit` conversations of `project_id`, most recent activity first.
pub(crate) async fn select_summaries(
    client: &ClientWrapper,
    mode: StatementMode,
    project_id: &str,
    limit: usize,
) -> Result<Vec<Row>, tokio_postgres::Error> {
    const SELECT: Sql = Sql {
        text: "SELECT id, rojo, coalesce(custom_title, title), updated_at, message_count,
                    stored_bytes
             FROM conversations WHERE project_id = $1 ORDER BY activity DESC LIMIT $2",
        types: &[Type::TEXT, Type::INT8],
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    client.rows(mode, &SELECT, &[&project_id, &limit]).await
}

/// The head from the first four columns of a conversation row.
fn head(row: &Row, id: &ConversationId) -> ConversationHead {
    ConversationHead {
        id: id.clone(),
        project_id: row.get(0),
        rojo: row.get(1),
        message_count: unsigned(row.get(2)),
        stored_bytes: unsigned(row.get(3)),
    }
}

/// A [`select_conversation`] row as a record.
pub(crate) fn conversation(row: &Row, id: &ConversationId) -> Result<Conversation, StoreError> {
    let head = head(row, id);
    Ok(Conversation {
        created_at: from_millis(row.get(4), id, "created_at")?,
        updated_at: from_millis(row.get(5), id, "updated_at")?,
        messages: parse_messages(row.get(6), id, 0)?,
        id: head.id,
        project_id: head.project_id,
        rojo: head.rojo,
        stored_bytes: head.stored_bytes,
    })
}

/// A [`select_resumed`] row as a record.
pub(crate) fn resumed(row: &Row, id: &ConversationId) -> Result<Resumed, StoreError> {
    let compaction = row
        .get::<_, Option<i64>>(4)
        .zip(row.get::<_, Option<String>>(5))
        .map(|(covers, summary)| Compaction {
            covers: unsigned(covers),
            summary,
        });
    let from = compaction.as_ref().map_or(0, |c| c.covers);
    Ok(Resumed {
        head: head(row, id),
        messages: parse_messages(row.get(6), id, from)?,
        compaction,
    })
}

/// A [`select_page`] row as a page starting at `from`.
pub(crate) fn page(
    row: &Row,
    id: &ConversationId,
    from: u64,
) -> Result<ConversationPage, StoreError> {
    let head = head(row, id);
    let messages = parse_messages(row.get(4), id, from)?;
    let end = from.saturating_add(messages.len() as u64);
    Ok(ConversationPage {
        next: (end < head.message_count).then_some(end),
        head,
        messages,
    })
}

/// A [`select_summaries`] row as a summary.
pub(crate) fn summary(row: &Row, project_id: &str) -> Result<ConversationSummary, StoreError> {
    let id = ConversationId::parse(row.get(0)).map_err(|e| {
        StoreError::corrupt(
            format!("a conversation of project '{project_id}' has an invalid id"),
            e,
        )
    })?;
    let updated_at = from_millis(row.get(3), &id, "updated_at")?;
    Ok(ConversationSummary {
        rojo: row.get(1),
        title: row.get(2),
        updated_at,
        message_count: unsigned(row.get(4)),
        stored_bytes: unsigned(row.get(5)),
        id,
    })
}

/// Stored texts back to messages; a text that is not JSON is reported by its index.
fn parse_messages(
    texts: Vec<String>,
    id: &ConversationId,
    first: u64,
) -> Result<Vec<Value>, StoreError> {
    (0u64..)
        .zip(texts)
        .map(|(index, json)| {
            let seq = first.saturating_add(index);
            serde_json::from_str(&json).map_err(|e| {
                StoreError::corrupt(
                    format!("conversation '{id}' message {seq} is not valid JSON"),
                    e,
                )
            })
        })
        .collect()
}

/// Counts are never negative; a negative one (a hand-edited row) reads as 0.
fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn from_millis(ms: i64, id: &ConversationId, field: &str) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).map_err(|e| {
        StoreError::corrupt(
            format!("conversation '{id}' has an impossible {field} {ms}"),
            e,
        )
    })
}
