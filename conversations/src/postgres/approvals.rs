//! [`PostgresApprovals`]: the approvals of every host sharing one PostgreSQL database
//! (schema version 5, `crate::approvals` describes the tables). A decision sent to any host
//! is seen by the host whose run waits for it. Each operation is one statement, or one
//! transaction for "approve always".

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio_postgres::types::Type;

use super::failure::{client, query_failed, within};
use super::statements::{Run, Sql, StatementMode};
use crate::approvals::{
    gave_up_row, read_state, row_of, ApprovalState, Approvals, Decided, Decision, GaveUp,
};
use crate::error::StoreError;
use crate::id::ConversationId;

const ASK: Sql = Sql {
    text: "INSERT INTO approvals (conversation_id, call_id, tool, state, reason)
     VALUES ($1, $2, $3, 'pending', NULL)
     ON CONFLICT (conversation_id, call_id) DO UPDATE
         SET tool = excluded.tool, state = 'pending', reason = NULL",
    types: &[Type::TEXT, Type::TEXT, Type::TEXT],
};

const DECIDE: Sql = Sql {
    text: "UPDATE approvals SET state = $3, reason = $4
     WHERE conversation_id = $1 AND call_id = $2 AND state = 'pending'
     RETURNING tool",
    types: &[Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT],
};

const ALWAYS: Sql = Sql {
    text: "INSERT INTO approved_tools (conversation_id, tool) VALUES ($1, $2)
     ON CONFLICT DO NOTHING",
    types: &[Type::TEXT, Type::TEXT],
};

const STATE: Sql = Sql {
    text: "SELECT state, reason FROM approvals WHERE conversation_id = $1 AND call_id = $2",
    types: &[Type::TEXT, Type::TEXT],
};

const GIVE_UP: Sql = Sql {
    text: "UPDATE approvals SET state = $3
     WHERE conversation_id = $1 AND call_id = $2 AND state = 'pending'",
    types: &[Type::TEXT, Type::TEXT, Type::TEXT],
};

const ALWAYS_ALLOWED: Sql = Sql {
    text: "SELECT EXISTS (SELECT 1 FROM approved_tools
     WHERE conversation_id = $1 AND tool = $2)",
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

/// The stored state of a call through `client`, `None` when it was never asked.
async fn read(
    client: &impl Run,
    mode: StatementMode,
    conversation: &ConversationId,
    call_id: &str,
    action: &(dyn Fn() -> String + Sync),
) -> Result<Option<ApprovalState>, StoreError> {
    let row = client
        .opt(mode, &STATE, &[&conversation.as_str(), &call_id])
        .await
        .map_err(|e| query_failed(action(), e))?;
    row.map(|row| read_state(conversation, call_id, row.get(0), row.get(1)))
        .transpose()
}

#[async_trait]
impl Approvals for PostgresApprovals {
    async fn ask(
        &self,
        conversation: &ConversationId,
        call_id: &str,
        tool: &str,
    ) -> Result<(), StoreError> {
        let action =
            || format!("ask approval of call '{call_id}' in conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .count(self.mode, &ASK, &[&conversation.as_str(), &call_id, &tool])
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await?;
        Ok(())
    }

    async fn decide(
        &self,
        conversation: &ConversationId,
        call_id: &str,
        decision: &Decision,
    ) -> Result<Decided, StoreError> {
        let action = || format!("decide call '{call_id}' in conversation '{conversation}'");
        let (state, reason) = row_of(decision);
        within(self.query_timeout, action, async {
            let mut client = client(&self.pool, action()).await?;
            let tx = client
                .transaction()
                .await
                .map_err(|e| query_failed(action(), e))?;
            let row = tx
                .opt(
                    self.mode,
                    &DECIDE,
                    &[&conversation.as_str(), &call_id, &state, &reason],
                )
                .await
                .map_err(|e| query_failed(action(), e))?;
            let Some(row) = row else {
                let now = read(&tx, self.mode, conversation, call_id, &action).await?;
                return Ok(Decided::NotPending(now));
            };
            if *decision == Decision::ApproveAlways {
                let tool: String = row.get(0);
                tx.count(self.mode, &ALWAYS, &[&conversation.as_str(), &tool])
                    .await
                    .map_err(|e| query_failed(action(), e))?;
            }
            tx.commit().await.map_err(|e| query_failed(action(), e))?;
            Ok(Decided::Recorded)
        })
        .await
    }

    async fn state(
        &self,
        conversation: &ConversationId,
        call_id: &str,
    ) -> Result<Option<ApprovalState>, StoreError> {
        let action =
            || format!("read the approval of call '{call_id}' in conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            read(&*client, self.mode, conversation, call_id, &action).await
        })
        .await
    }

    async fn give_up(
        &self,
        conversation: &ConversationId,
        call_id: &str,
        why: GaveUp,
    ) -> Result<ApprovalState, StoreError> {
        let action =
            || format!("stop waiting for call '{call_id}' in conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .count(
                    self.mode,
                    &GIVE_UP,
                    &[&conversation.as_str(), &call_id, &gave_up_row(why)],
                )
                .await
                .map_err(|e| query_failed(action(), e))?;
            Ok(read(&*client, self.mode, conversation, call_id, &action)
                .await?
                .unwrap_or(ApprovalState::Cancelled))
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
}
