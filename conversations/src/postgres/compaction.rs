//! The PostgreSQL queries of compactions (`crate::compaction`, schema version 8).

use deadpool_postgres::ClientWrapper;
use tokio_postgres::types::Type;

use super::statements::{Run, Sql, StatementMode};
use crate::compaction::Compaction;
use crate::id::ConversationId;

/// The conversation's compactions, the one covering the fewest messages first.
pub(super) async fn select(
    client: &ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
) -> Result<Vec<Compaction>, tokio_postgres::Error> {
    const SELECT: Sql = Sql {
        text: "SELECT covers, summary FROM compactions WHERE conversation_id = $1
             ORDER BY covers",
        types: &[Type::TEXT],
    };
    let rows = client.rows(mode, &SELECT, &[&id.as_str()]).await?;
    Ok(rows
        .iter()
        .map(|row| Compaction {
            covers: u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
            summary: row.get(1),
        })
        .collect())
}

/// Keeps `compaction` unless one for the same messages is kept already, and only while the
/// conversation holds at least the messages it covers.
pub(super) async fn insert(
    client: &ClientWrapper,
    mode: StatementMode,
    id: &ConversationId,
    compaction: &Compaction,
) -> Result<(), tokio_postgres::Error> {
    const INSERT: Sql = Sql {
        text: "INSERT INTO compactions (conversation_id, covers, summary, created_at)
             SELECT id, $2, $3, rojos_now_ms() FROM conversations
             WHERE id = $1 AND message_count >= $2
             ON CONFLICT (conversation_id, covers) DO NOTHING",
        types: &[Type::TEXT, Type::INT8, Type::TEXT],
    };
    let covers = i64::try_from(compaction.covers).unwrap_or(i64::MAX);
    client
        .count(
            mode,
            &INSERT,
            &[&id.as_str(), &covers, &compaction.summary.as_str()],
        )
        .await?;
    Ok(())
}
