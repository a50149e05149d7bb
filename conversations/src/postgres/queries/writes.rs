//! The writes: a new conversation with its first step, a step appended (numbered under the
//! conversation's row lock) or replaced (the one transaction of five statements), a title,
//! a deletion. Each message's searchable text is stored beside it.

use deadpool_postgres::{ClientWrapper, Transaction};
use tokio_postgres::types::Type;

use super::unsigned;
use crate::id::ConversationId;
use crate::postgres::statements::{Run, Sql, StatementMode};
use crate::step::Step;

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
                 title = CASE WHEN $2::bigint = 0 THEN NULL ELSE title END,
                 rojo_kept_from = least(rojo_kept_from, $2::bigint)
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
