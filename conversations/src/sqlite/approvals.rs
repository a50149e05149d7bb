//! [`SqliteApprovals`]: the approvals of one SQLite conversation file (schema version 4,
//! `crate::approvals` describes the tables). Each operation is one transaction on the
//! store's connections, off the async runtime.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use super::pool::Pool;
use crate::approvals::{
    gave_up_row, read_state, row_of, ApprovalState, Approvals, Decided, Decision, GaveUp,
};
use crate::error::StoreError;
use crate::id::ConversationId;

/// The approvals kept in a [`SqliteStore`](crate::SqliteStore)'s file (see
/// [`SqliteStore::approvals`](crate::SqliteStore::approvals)).
#[derive(Clone)]
pub struct SqliteApprovals {
    pool: Arc<Pool>,
}

impl std::fmt::Debug for SqliteApprovals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteApprovals").finish_non_exhaustive()
    }
}

impl SqliteApprovals {
    pub(super) fn new(pool: Arc<Pool>) -> Self {
        Self { pool }
    }
}

/// The stored state and reason of a call, if it was asked.
fn read(
    conn: &Connection,
    conversation: &ConversationId,
    call_id: &str,
) -> Result<Option<ApprovalState>, StoreError> {
    let row: Option<(String, Option<String>)> = conn
        .prepare_cached(
            "SELECT state, reason FROM approvals WHERE conversation_id = ?1 AND call_id = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![conversation.as_str(), call_id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
        })
        .map_err(|e| StoreError::backend("read an approval", e))?;
    row.map(|(state, reason)| read_state(conversation, call_id, &state, reason))
        .transpose()
}

#[async_trait]
impl Approvals for SqliteApprovals {
    async fn ask(
        &self,
        conversation: &ConversationId,
        call_id: &str,
        tool: &str,
    ) -> Result<(), StoreError> {
        let (conversation, call_id, tool) =
            (conversation.clone(), call_id.to_owned(), tool.to_owned());
        let action = format!("ask approval of call '{call_id}' in conversation '{conversation}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                conn.prepare_cached(
                    "INSERT INTO approvals (conversation_id, call_id, tool, state, reason)
                     VALUES (?1, ?2, ?3, 'pending', NULL)
                     ON CONFLICT (conversation_id, call_id) DO UPDATE
                         SET tool = excluded.tool, state = 'pending', reason = NULL",
                )
                .and_then(|mut s| s.execute(params![conversation.as_str(), call_id, tool]))
                .map(|_| ())
                .map_err(|e| StoreError::backend(failed, e))
            })
            .await
    }

    async fn decide(
        &self,
        conversation: &ConversationId,
        call_id: &str,
        decision: &Decision,
    ) -> Result<Decided, StoreError> {
        let (conversation, call_id, decision) =
            (conversation.clone(), call_id.to_owned(), decision.clone());
        let action = format!("decide call '{call_id}' in conversation '{conversation}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                let backend = |e| StoreError::backend(failed.clone(), e);
                let (state, reason) = row_of(&decision);
                let tool: Option<String> = conn
                    .prepare_cached(
                        "UPDATE approvals SET state = ?3, reason = ?4
                         WHERE conversation_id = ?1 AND call_id = ?2 AND state = 'pending'
                         RETURNING tool",
                    )
                    .and_then(|mut s| {
                        s.query_row(
                            params![conversation.as_str(), call_id, state, reason],
                            |r| r.get(0),
                        )
                        .optional()
                    })
                    .map_err(backend)?;
                let Some(tool) = tool else {
                    let now = read(conn, &conversation, &call_id)?;
                    return Ok(Decided::NotPending(now));
                };
                if decision == Decision::ApproveAlways {
                    conn.prepare_cached(
                        "INSERT INTO approved_tools (conversation_id, tool) VALUES (?1, ?2)
                         ON CONFLICT DO NOTHING",
                    )
                    .and_then(|mut s| s.execute(params![conversation.as_str(), tool]))
                    .map_err(backend)?;
                }
                Ok(Decided::Recorded)
            })
            .await
    }

    async fn state(
        &self,
        conversation: &ConversationId,
        call_id: &str,
    ) -> Result<Option<ApprovalState>, StoreError> {
        let (conversation, call_id) = (conversation.clone(), call_id.to_owned());
        self.pool
            .read("read an approval", move |conn| {
                read(conn, &conversation, &call_id)
            })
            .await
    }

    async fn give_up(
        &self,
        conversation: &ConversationId,
        call_id: &str,
        why: GaveUp,
    ) -> Result<ApprovalState, StoreError> {
        let (conversation, call_id) = (conversation.clone(), call_id.to_owned());
        let action = format!("stop waiting for call '{call_id}' in conversation '{conversation}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                conn.prepare_cached(
                    "UPDATE approvals SET state = ?3
                     WHERE conversation_id = ?1 AND call_id = ?2 AND state = 'pending'",
                )
                .and_then(|mut s| {
                    s.execute(params![conversation.as_str(), call_id, gave_up_row(why)])
                })
                .map_err(|e| StoreError::backend(failed, e))?;
                Ok(read(conn, &conversation, &call_id)?.unwrap_or(ApprovalState::Cancelled))
            })
            .await
    }

    async fn always_allowed(
        &self,
        conversation: &ConversationId,
        tool: &str,
    ) -> Result<bool, StoreError> {
        let (conversation, tool) = (conversation.clone(), tool.to_owned());
        self.pool
            .read("read the always-approved tools", move |conn| {
                conn.prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM approved_tools
                                    WHERE conversation_id = ?1 AND tool = ?2)",
                )
                .and_then(|mut s| s.query_row(params![conversation.as_str(), tool], |r| r.get(0)))
                .map_err(|e| StoreError::backend("read the always-approved tools", e))
            })
            .await
    }
}
