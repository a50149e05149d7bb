//! [`PostgresApprovals`]: the approvals of every host sharing one PostgreSQL database
//! (schema version 6, `crate::approvals` describes the tables). A decision sent to any host
//! is seen by the host whose run waits for it. Each operation is one statement, or one
//! transaction for "approve always".

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio_postgres::types::Type;

use super::failure::{client, query_failed, within};
use super::statements::{Run, Sql, StatementMode};
use crate::approvals::{
    gave_up_row, read_state, row_of, target, ApprovalState, Approvals, Decided, Decision, GaveUp,
};
use crate::error::StoreError;
use crate::id::ConversationId;

const ASK: Sql = Sql {
    text: "INSERT INTO approvals (conversation_id, approval_id, call_id, tool, state, reason)
     VALUES ($1, $2, $3, $4, 'pending', NULL)",
    types: &[Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT],
};

const BY_APPROVAL_ID: Sql = Sql {
    text: "SELECT approval_id FROM approvals WHERE conversation_id = $1 AND approval_id = $2",
    types: &[Type::TEXT, Type::TEXT],
};

/// No index on call ids (one may be longer than an index entry can hold): the
/// conversation's few approvals are read through the primary key's prefix.
const BY_CALL_ID: Sql = Sql {
    text: "SELECT approval_id FROM approvals WHERE conversation_id = $1 AND call_id = $2 LIMIT 2",
    types: &[Type::TEXT, Type::TEXT],
};

const DECIDE: Sql = Sql {
    text: "UPDATE approvals SET state = $3, reason = $4
     WHERE conversation_id = $1 AND approval_id = $2 AND state = 'pending'
     RETURNING tool, call_id",
    types: &[Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT],
};

const ALWAYS: Sql = Sql {
    text: "INSERT INTO approved_tools (conversation_id, tool) VALUES ($1, $2)
     ON CONFLICT DO NOTHING",
    types: &[Type::TEXT, Type::TEXT],
};

const STATE: Sql = Sql {
    text: "SELECT state, reason FROM approvals WHERE conversation_id = $1 AND approval_id = $2",
    types: &[Type::TEXT, Type::TEXT],
};

const GIVE_UP: Sql = Sql {
    text: "UPDATE approvals SET state = $3
     WHERE conversation_id = $1 AND approval_id = $2 AND state = 'pending'",
    types: &[Type::TEXT, Type::TEXT, Type::TEXT],
};

const ALWAYS_ALLOWED: Sql = Sql {
    text: "SELECT EXISTS (SELECT 1 FROM approved_tools
     WHERE conversation_id = $1 AND tool = $2)",
    types: &[Type::TEXT, Type::TEXT],
};

const ALWAYS_ALLOWED_TOOLS: Sql = Sql {
    text: "SELECT tool FROM approved_tools WHERE conversation_id = $1 ORDER BY tool",
    types: &[Type::TEXT],
};

const REVOKE_ALWAYS: Sql = Sql {
    text: "DELETE FROM approved_tools WHERE conversation_id = $1 AND tool = $2",
    types: &[Type::TEXT, Type::TEXT],
};

/// The approvals in the database of a [`PostgresStore`](crate::PostgresStore), through its
/// connection pool (see [`PostgresStore::approvals`](crate::PostgresStore::approvals)).
#[derive(Clone)]
pub struct PostgresApprovals {
    pool: Pool,
    query_timeout: Duration,
    mode: StatementMode,
}

impl std::fmt::Debug for PostgresApprovals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresApprovals").finish_non_exhaustive()
    }
}

impl PostgresApprovals {
    pub(super) fn new(pool: Pool, query_timeout: Duration, mode: StatementMode) -> Self {
        Self {
            pool,
            query_timeout,
            mode,
        }
    }
}

/// The stored state of the call asked under `approval_id` through `client`, `None` when
/// there is none.
async fn read(
    client: &impl Run,
    mode: StatementMode,
    conversation: &ConversationId,
    approval_id: &str,
    action: &(dyn Fn() -> String + Sync),
) -> Result<Option<ApprovalState>, StoreError> {
    let row = client
        .opt(mode, &STATE, &[&conversation.as_str(), &approval_id])
        .await
        .map_err(|e| query_failed(action(), e))?;
    row.map(|row| read_state(conversation, approval_id, row.get(0), row.get(1)))
        .transpose()
}

/// The approval id a decision naming `key` is for ([`target`]), through `client`.
async fn find(
    client: &impl Run,
    mode: StatementMode,
    conversation: &ConversationId,
    key: &str,
    action: &(dyn Fn() -> String + Sync),
) -> Result<Result<String, Decided>, StoreError> {
    let failed = |e| query_failed(action(), e);
    let by_approval_id = client
        .opt(mode, &BY_APPROVAL_ID, &[&conversation.as_str(), &key])
        .await
        .map_err(failed)?
        .map(|row| row.get(0));
    if by_approval_id.is_some() {
        return Ok(target(by_approval_id, Vec::new()));
    }
    let by_call_id = client
        .rows(mode, &BY_CALL_ID, &[&conversation.as_str(), &key])
        .await
        .map_err(failed)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    Ok(target(None, by_call_id))
}

#[async_trait]
impl Approvals for PostgresApprovals {
    async fn ask(
        &self,
        conversation: &ConversationId,
        approval_id: &str,
        call_id: &str,
        tool: &str,
    ) -> Result<(), StoreError> {
        let action = || format!("ask approval '{approval_id}' in conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .count(
                    self.mode,
                    &ASK,
                    &[&conversation.as_str(), &approval_id, &call_id, &tool],
                )
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await?;
        Ok(())
    }

    async fn decide(
        &self,
        conversation: &ConversationId,
        key: &str,
        decision: &Decision,
    ) -> Result<Decided, StoreError> {
        let action = || format!("decide approval '{key}' in conversation '{conversation}'");
        let (state, reason) = row_of(decision);
        within(self.query_timeout, action, async {
            let mut client = client(&self.pool, action()).await?;
            let tx = client
                .transaction()
                .await
                .map_err(|e| query_failed(action(), e))?;
            let approval_id = match find(&tx, self.mode, conversation, key, &action).await? {
                Ok(approval_id) => approval_id,
                Err(not_taken) => return Ok(not_taken),
            };
            // Taken only from `pending`: a decision sent at the same time waits for this
            // row's lock, then finds it decided.
            let row = tx
                .opt(
                    self.mode,
                    &DECIDE,
                    &[&conversation.as_str(), &approval_id, &state, &reason],
                )
                .await
                .map_err(|e| query_failed(action(), e))?;
            let Some(row) = row else {
                let now = read(&tx, self.mode, conversation, &approval_id, &action).await?;
                return Ok(Decided::NotPending(now));
            };
            if *decision == Decision::ApproveAlways {
                let tool: String = row.get(0);
                tx.count(self.mode, &ALWAYS, &[&conversation.as_str(), &tool])
                    .await
                    .map_err(|e| query_failed(action(), e))?;
            }
            let call_id: String = row.get(1);
            tx.commit().await.map_err(|e| query_failed(action(), e))?;
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
        let action =
            || format!("read the approval '{approval_id}' in conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            read(&*client, self.mode, conversation, approval_id, &action).await
        })
        .await
    }

    async fn give_up(
        &self,
        conversation: &ConversationId,
        approval_id: &str,
        why: GaveUp,
    ) -> Result<ApprovalState, StoreError> {
        let action = || {
            format!("stop waiting for approval '{approval_id}' in conversation '{conversation}'")
        };
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .count(
                    self.mode,
                    &GIVE_UP,
                    &[&conversation.as_str(), &approval_id, &gave_up_row(why)],
                )
                .await
                .map_err(|e| query_failed(action(), e))?;
            Ok(
                read(&*client, self.mode, conversation, approval_id, &action)
                    .await?
                    .unwrap_or(ApprovalState::Cancelled),
            )
        })
        .await
    }

    async fn always_allowed(
        &self,
        conversation: &ConversationId,
        tool: &str,
    ) -> Result<bool, StoreError> {
        let action = || format!("read the always-approved tools of conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            let row = client
                .one(self.mode, &ALWAYS_ALLOWED, &[&conversation.as_str(), &tool])
                .await
                .map_err(|e| query_failed(action(), e))?;
            Ok(row.get(0))
        })
        .await
    }

    async fn always_allowed_tools(
        &self,
        conversation: &ConversationId,
    ) -> Result<Vec<String>, StoreError> {
        let action = || format!("list the always-approved tools of conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            let rows = client
                .rows(self.mode, &ALWAYS_ALLOWED_TOOLS, &[&conversation.as_str()])
                .await
                .map_err(|e| query_failed(action(), e))?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
        .await
    }

    async fn revoke_always(
        &self,
        conversation: &ConversationId,
        tool: &str,
    ) -> Result<bool, StoreError> {
        let action =
            || format!("take back always-approved '{tool}' in conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            let changed = client
                .count(self.mode, &REVOKE_ALWAYS, &[&conversation.as_str(), &tool])
                .await
                .map_err(|e| query_failed(action(), e))?;
            Ok(changed > 0)
        })
        .await
    }
}
