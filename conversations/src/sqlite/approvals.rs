//! [`SqliteApprovals`]: the approvals of one SQLite conversation file (schema version 5,
//! `crate::approvals` describes the tables). Each operation is one transaction on the
//! store's connections, off the async runtime.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use super::pool::Pool;
use crate::approvals::{
    gave_up_row, read_state, row_of, target, ApprovalState, Approvals, Decided, Decision, GaveUp,
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

/// The stored state and reason of the call asked under `approval_id`, if there is one.
fn read(
    conn: &Connection,
    conversation: &ConversationId,
    approval_id: &str,
) -> Result<Option<ApprovalState>, StoreError> {
    let row: Option<(String, Option<String>)> = conn
        .prepare_cached(
            "SELECT state, reason FROM approvals WHERE conversation_id = ?1 AND approval_id = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![conversation.as_str(), approval_id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
        })
        .map_err(|e| StoreError::backend("read an approval", e))?;
    row.map(|(state, reason)| read_state(conversation, approval_id, &state, reason))
        .transpose()
}

/// The approval id a decision naming `key` is for ([`target`]).
fn find(
    conn: &Connection,
    conversation: &ConversationId,
    key: &str,
) -> Result<Result<String, Decided>, rusqlite::Error> {
    let by_approval_id: Option<String> = conn
        .prepare_cached(
            "SELECT approval_id FROM approvals WHERE conversation_id = ?1 AND approval_id = ?2",
        )?
        .query_row(params![conversation.as_str(), key], |r| r.get(0))
        .optional()?;
    if by_approval_id.is_some() {
        return Ok(target(by_approval_id, Vec::new()));
    }
    // No index on call ids (one may be longer than an index entry can hold): the
    // conversation's few approvals are read through the primary key's prefix.
    let by_call_id = conn
        .prepare_cached(
            "SELECT approval_id FROM approvals WHERE conversation_id = ?1 AND call_id = ?2 LIMIT 2",
        )?
        .query_map(params![conversation.as_str(), key], |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(target(None, by_call_id))
}

#[async_trait]
impl Approvals for SqliteApprovals {
    async fn ask(
        &self,
        conversation: &ConversationId,
        approval_id: &str,
        call_id: &str,
        tool: &str,
    ) -> Result<(), StoreError> {
        let (conversation, approval_id, call_id, tool) = (
            conversation.clone(),
            approval_id.to_owned(),
            call_id.to_owned(),
            tool.to_owned(),
        );
        let action = format!("ask approval '{approval_id}' in conversation '{conversation}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                conn.prepare_cached(
                    "INSERT INTO approvals (conversation_id, approval_id, call_id, tool, state, reason)
                     VALUES (?1, ?2, ?3, ?4, 'pending', NULL)",
                )
                .and_then(|mut s| {
                    s.execute(params![conversation.as_str(), approval_id, call_id, tool])
                })
                .map(|_| ())
                .map_err(|e| StoreError::backend(failed, e))
            })
            .await
    }

    async fn decide(
        &self,
        conversation: &ConversationId,
        key: &str,
        decision: &Decision,
    ) -> Result<Decided, StoreError> {
        let (conversation, key, decision) =
            (conversation.clone(), key.to_owned(), decision.clone());
        let action = format!("decide approval '{key}' in conversation '{conversation}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                let backend = |e| StoreError::backend(failed.clone(), e);
                let approval_id = match find(conn, &conversation, &key).map_err(backend)? {
                    Ok(approval_id) => approval_id,
                    Err(not_taken) => return Ok(not_taken),
                };
                let (state, reason) = row_of(&decision);
                let decided: Option<(String, String)> = conn
                    .prepare_cached(
                        "UPDATE approvals SET state = ?3, reason = ?4
                         WHERE conversation_id = ?1 AND approval_id = ?2 AND state = 'pending'
                         RETURNING tool, call_id",
                    )
                    .and_then(|mut s| {
                        s.query_row(
                            params![conversation.as_str(), approval_id, state, reason],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .optional()
                    })
                    .map_err(backend)?;
                let Some((tool, call_id)) = decided else {
                    let now = read(conn, &conversation, &approval_id)?;
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
                Ok(Decided::Recorded {
                    approval_id,
                    call_id,
                })
            })
            .await
    }

    async fn state(
        &self,
        conversation: &ConversationId,
        approval_id: &str,
    ) -> Result<Option<ApprovalState>, StoreError> {
        let (conversation, approval_id) = (conversation.clone(), approval_id.to_owned());
        self.pool
            .read("read an approval", move |conn| {
                read(conn, &conversation, &approval_id)
            })
            .await
    }

    async fn give_up(
        &self,
        conversation: &ConversationId,
        approval_id: &str,
        why: GaveUp,
    ) -> Result<ApprovalState, StoreError> {
        let (conversation, approval_id) = (conversation.clone(), approval_id.to_owned());
        let action =
            format!("stop waiting for approval '{approval_id}' in conversation '{conversation}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                conn.prepare_cached(
                    "UPDATE approvals SET state = ?3
                     WHERE conversation_id = ?1 AND approval_id = ?2 AND state = 'pending'",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        conversation.as_str(),
                        approval_id,
                        gave_up_row(why)
                    ])
                })
                .map_err(|e| StoreError::backend(failed, e))?;
                Ok(read(conn, &conversation, &approval_id)?.unwrap_or(ApprovalState::Cancelled))
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

    async fn always_allowed_tools(
        &self,
        conversation: &ConversationId,
    ) -> Result<Vec<String>, StoreError> {
        let conversation = conversation.clone();
        let failed = "list the always-approved tools";
        self.pool
            .read(failed, move |conn| {
                conn.prepare_cached(
                    "SELECT tool FROM approved_tools WHERE conversation_id = ?1 ORDER BY tool",
                )
                .and_then(|mut s| {
                    s.query_map(params![conversation.as_str()], |r| r.get(0))?
                        .collect::<Result<Vec<String>, _>>()
                })
                .map_err(|e| StoreError::backend(failed, e))
            })
            .await
    }

    async fn revoke_always(
        &self,
        conversation: &ConversationId,
        tool: &str,
    ) -> Result<bool, StoreError> {
        let (conversation, tool) = (conversation.clone(), tool.to_owned());
        let failed = "take back an always-approved tool";
        self.pool
            .write(failed, move |conn| {
                conn.prepare_cached(
                    "DELETE FROM approved_tools WHERE conversation_id = ?1 AND tool = ?2",
                )
                .and_then(|mut s| s.execute(params![conversation.as_str(), tool]))
                .map(|n| n > 0)
                .map_err(|e| StoreError::backend(failed, e))
            })
            .await
    }
}
