//! [`PostgresRunLeases`]: the run leases of every host sharing one PostgreSQL database, as
//! rows of `run_leases` (schema versions 2 and 3). Each operation is one statement, so taking a
//! lease, checking it and giving it up are atomic across hosts; expiry uses the database's
//! clock only (`now()`), so the hosts' clocks need not agree. The statements are the ones
//! `crate::lease` describes.

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio_postgres::types::Type;

use super::failure::{client, query_failed, within};
use super::statements::{Run, Sql, StatementMode};
use crate::error::StoreError;
use crate::id::ConversationId;
use crate::lease::{LeaseHolder, RunLeases};

/// Takes the lease when the conversation exists and its lease is free or expired: `found`
/// says whether the conversation exists, `holder` comes back only when the lease was taken.
const ACQUIRE: Sql = Sql {
    text: "WITH conversation AS (SELECT id FROM conversations WHERE id = $1),
     taken AS (
         INSERT INTO run_leases (conversation_id, holder, expires_at)
         SELECT id, $2::text::uuid, now() + $3::bigint * interval '1 millisecond'
         FROM conversation
         ON CONFLICT (conversation_id) DO UPDATE
             SET holder = excluded.holder, expires_at = excluded.expires_at
             WHERE run_leases.expires_at <= now()
         RETURNING holder
     )
     SELECT EXISTS (SELECT 1 FROM conversation) AS found,
            EXISTS (SELECT 1 FROM taken) AS taken",
    types: &[Type::TEXT, Type::TEXT, Type::INT8],
};

/// Extends the lease while its holder still has it (not expired, not taken over).
const RENEW: Sql = Sql {
    text: "UPDATE run_leases
     SET expires_at = now() + $3::bigint * interval '1 millisecond'
     WHERE conversation_id = $1 AND holder = $2::text::uuid AND expires_at > now()",
    types: &[Type::TEXT, Type::TEXT, Type::INT8],
};

/// Gives the lease up if the holder still has it.
const RELEASE: Sql = Sql {
    text: "DELETE FROM run_leases WHERE conversation_id = $1 AND holder = $2::text::uuid",
    types: &[Type::TEXT, Type::TEXT],
};

/// Run leases in the PostgreSQL database of a [`PostgresStore`](crate::PostgresStore),
/// through its connection pool (see [`PostgresStore::run_leases`](crate::PostgresStore::run_leases)).
///
/// While the database cannot be reached, calls fail with [`StoreError::Unavailable`].
#[derive(Clone)]
pub struct PostgresRunLeases {
    pool: Pool,
    query_timeout: Duration,
    mode: StatementMode,
}

impl std::fmt::Debug for PostgresRunLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresRunLeases").finish_non_exhaustive()
    }
}

impl PostgresRunLeases {
    pub(super) fn new(pool: Pool, query_timeout: Duration, mode: StatementMode) -> Self {
        Self {
            pool,
            query_timeout,
            mode,
        }
    }
}

#[async_trait]
impl RunLeases for PostgresRunLeases {
    /// # Errors
    ///
    /// [`StoreError::NotFound`] when the conversation does not exist.
    async fn acquire(
        &self,
        conversation: &ConversationId,
        ttl: Duration,
    ) -> Result<Option<LeaseHolder>, StoreError> {
        let action = || format!("take the run lease of conversation '{conversation}'");
        let holder = LeaseHolder::generate();
        let row = within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .one(
                    self.mode,
                    &ACQUIRE,
                    &[&conversation.as_str(), &uuid_text(holder), &millis(ttl)],
                )
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await?;
        match (row.get::<_, bool>("found"), row.get::<_, bool>("taken")) {
            (false, _) => Err(StoreError::NotFound {
                id: conversation.clone(),
            }),
            (true, taken) => Ok(taken.then_some(holder)),
        }
    }

    async fn renew(
        &self,
        conversation: &ConversationId,
        holder: LeaseHolder,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let action = || format!("renew the run lease of conversation '{conversation}'");
        let renewed = within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .count(
                    self.mode,
                    &RENEW,
                    &[&conversation.as_str(), &uuid_text(holder), &millis(ttl)],
                )
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await?;
        Ok(renewed == 1)
    }

    async fn release(
        &self,
        conversation: &ConversationId,
        holder: LeaseHolder,
    ) -> Result<(), StoreError> {
        let action = || format!("release the run lease of conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .count(
                    self.mode,
                    &RELEASE,
                    &[&conversation.as_str(), &uuid_text(holder)],
                )
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await?;
        Ok(())
    }
}

/// The holder as PostgreSQL reads a UUID: 32 hex digits (sent as text and cast, so the
/// client needs no UUID type).
fn uuid_text(holder: LeaseHolder) -> String {
    format!("{:032x}", holder.as_u128())
}

/// A time-to-live in whole milliseconds, as the statements take it.
fn millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}
