//! The reads: a conversation's head, whole, resumed (from its newest compaction) or a page
//! of it, a project's summaries and the search's; each one statement. Rows are turned back
//! into records here, so a corrupt row is reported by name.

use deadpool_postgres::{ClientWrapper, Transaction};
use serde_json::Value;
use time::OffsetDateTime;
use tokio_postgres::types::Type;
use tokio_postgres::Row;

use super::unsigned;
use crate::compaction::Compaction;
use crate::error::StoreError;
use crate::id::ConversationId;
use crate::postgres::statements::{Run, Sql, StatementMode};
use crate::store::{
    Conversation, ConversationHead, ConversationPage, ConversationSummary, Resumed,
};

/// Up to `limit` conversations of `project_id` whose title, or the searchable text of one
/// of whose messages (`search_text`), matches the `LIKE` pattern `pattern` ignoring case
/// (`ILIKE`: ASCII letters always, others as the database's locale folds them), most recent
/// activity first; with `messages` false, titles only (a text too short for a trigram).
/// The messages are found through the trigram index (`pg_trgm`, schema version 7). Each row
/// is a [`summary`]'s columns, then the index and searchable text of the conversation's
/// first matching message (`NULL` when only its title matched). Run on `client` inside the
/// search's transaction (`crate::postgres::search`).
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
        text: "SELECT project_id, rojo, message_count, stored_bytes, rojo_kept_from
             FROM conversations WHERE id = $1",
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
        text: "SELECT project_id, rojo, message_count, stored_bytes, rojo_kept_from,
                    created_at, updated_at,
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
        text: "SELECT c.project_id, c.rojo, c.message_count, c.stored_bytes, c.rojo_kept_from,
                    k.covers, k.summary,
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
        text: "SELECT project_id, rojo, message_count, stored_bytes, rojo_kept_from,
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

/// The head from the first five columns of a conversation row.
fn head(row: &Row, id: &ConversationId) -> ConversationHead {
    ConversationHead {
        id: id.clone(),
        project_id: row.get(0),
        rojo: row.get(1),
        message_count: unsigned(row.get(2)),
        stored_bytes: unsigned(row.get(3)),
        rojo_kept_from: unsigned(row.get(4)),
    }
}

/// A [`select_conversation`] row as a record.
pub(crate) fn conversation(row: &Row, id: &ConversationId) -> Result<Conversation, StoreError> {
    let head = head(row, id);
    Ok(Conversation {
        created_at: from_millis(row.get(5), id, "created_at")?,
        updated_at: from_millis(row.get(6), id, "updated_at")?,
        messages: parse_messages(row.get(7), id, 0)?,
        id: head.id,
        project_id: head.project_id,
        rojo: head.rojo,
        stored_bytes: head.stored_bytes,
    })
}

/// A [`select_resumed`] row as a record.
pub(crate) fn resumed(row: &Row, id: &ConversationId) -> Result<Resumed, StoreError> {
    let compaction = row
        .get::<_, Option<i64>>(5)
        .zip(row.get::<_, Option<String>>(6))
        .map(|(covers, summary)| Compaction {
            covers: unsigned(covers),
            summary,
        });
    let from = compaction.as_ref().map_or(0, |c| c.covers);
    Ok(Resumed {
        head: head(row, id),
        messages: parse_messages(row.get(7), id, from)?,
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
    let messages = parse_messages(row.get(5), id, from)?;
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

fn from_millis(ms: i64, id: &ConversationId, field: &str) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).map_err(|e| {
        StoreError::corrupt(
            format!("conversation '{id}' has an impossible {field} {ms}"),
            e,
        )
    })
}
