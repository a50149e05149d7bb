//! Run leases: the rule that at most one run at a time writes to a conversation, so two
//! messages sent at once cannot interleave their steps. [`RunLeases`] is the interface,
//! [`LocalRunLeases`] the in-process implementation (one host, one map). Holding and
//! renewing a lease during a run is the host's job.
//!
//! A lease expires unless renewed, so a holder that dies (a crashed host) frees the
//! conversation after at most one time-to-live. [`PostgresRunLeases`](crate::PostgresRunLeases)
//! implements the same trait for hosts sharing a database, with an expiring row per
//! conversation:
//!
//! ```sql
//! CREATE TABLE run_leases (
//!     conversation_id TEXT PRIMARY KEY,  -- of the conversation (no foreign key, see schema v3)
//!     holder          UUID NOT NULL,
//!     expires_at      TIMESTAMPTZ NOT NULL
//! );
//! -- acquire (of a conversation that exists, checked in the same statement): taken when a
//! -- row comes back (none, or only an expired one, was there)
//! INSERT INTO run_leases VALUES ($1, $2, now() + $3)
//! ON CONFLICT (conversation_id) DO UPDATE
//!     SET holder = excluded.holder, expires_at = excluded.expires_at
//!     WHERE run_leases.expires_at <= now()
//! RETURNING holder;
//! -- renew: still held when one row is updated
//! UPDATE run_leases SET expires_at = now() + $3
//! WHERE conversation_id = $1 AND holder = $2 AND expires_at > now();
//! -- release
//! DELETE FROM run_leases WHERE conversation_id = $1 AND holder = $2;
//! ```
//!
//! Times come from the database's clock only, so the hosts' clocks need not agree.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::error::StoreError;
use crate::id::ConversationId;

/// Who holds a lease: a random value [`RunLeases::acquire`] makes, needed to renew or
/// release it, so a holder whose lease expired and was taken cannot release the new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseHolder(u128);

impl LeaseHolder {
    /// A new random holder (128 bits from the thread-local CSPRNG).
    pub fn generate() -> Self {
        Self(rand::random())
    }

    /// The value, e.g. to store as a UUID.
    pub fn as_u128(&self) -> u128 {
        self.0
    }
}

/// Who may run in which conversation: one lease per conversation, taken before a run
/// starts and released after the run stored its last message.
///
/// Implementations are safe to share between many concurrent tasks.
#[async_trait]
pub trait RunLeases: Send + Sync + fmt::Debug {
    /// Takes the lease on `conversation` for `ttl`, unless another holder has one that has
    /// not expired: the check and the taking are one atomic step. `Ok(None)` when it is
    /// held.
    async fn acquire(
        &self,
        conversation: &ConversationId,
        ttl: Duration,
    ) -> Result<Option<LeaseHolder>, StoreError>;

    /// Extends `holder`'s lease to `ttl` from now. `Ok(false)` when the holder no longer
    /// has it (it expired, and may have been taken by another).
    async fn renew(
        &self,
        conversation: &ConversationId,
        holder: LeaseHolder,
        ttl: Duration,
    ) -> Result<bool, StoreError>;

    /// Gives up `holder`'s lease; nothing happens when the holder no longer has it.
    async fn release(
        &self,
        conversation: &ConversationId,
        holder: LeaseHolder,
    ) -> Result<(), StoreError>;
}

/// The leases of one host, in a map: enough while one process serves each conversation
/// database. Expiry uses tokio's clock, so tests can pause it.
#[derive(Debug, Default)]
pub struct LocalRunLeases {
    held: Mutex<HashMap<ConversationId, Held>>,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    holder: LeaseHolder,
    expires_at: Instant,
}

impl LocalRunLeases {
    /// No lease held.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many leases are recorded (held or expired but not yet taken over).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no lease is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConversationId, Held>> {
        // The map is only read and written in whole entries: a panicking holder cannot leave
        // it half-changed.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl RunLeases for LocalRunLeases {
    async fn acquire(
        &self,
        conversation: &ConversationId,
        ttl: Duration,
    ) -> Result<Option<LeaseHolder>, StoreError> {
        let now = Instant::now();
        let mut held = self.lock();
        if held.get(conversation).is_some_and(|h| h.expires_at > now) {
            return Ok(None);
        }
        let holder = LeaseHolder::generate();
        held.insert(
            conversation.clone(),
            Held {
                holder,
                expires_at: now + ttl,
            },
        );
        Ok(Some(holder))
    }

    async fn renew(
        &self,
        conversation: &ConversationId,
        holder: LeaseHolder,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut held = self.lock();
        match held.get_mut(conversation) {
            Some(lease) if lease.holder == holder && lease.expires_at > now => {
                lease.expires_at = now + ttl;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release(
        &self,
        conversation: &ConversationId,
        holder: LeaseHolder,
    ) -> Result<(), StoreError> {
        let mut held = self.lock();
        if held.get(conversation).is_some_and(|h| h.holder == holder) {
            held.remove(conversation);
        }
        Ok(())
    }
}

/// What every implementation must do is tested on each of them in `tests/store/leases.rs`;
/// here, what is particular to the map.
#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(30);

    fn id(text: &str) -> ConversationId {
        ConversationId::parse(text).unwrap()
    }

    #[tokio::test]
    async fn releasing_removes_the_entry() {
        let leases = LocalRunLeases::new();
        let holder = leases.acquire(&id("a"), TTL).await.unwrap().unwrap();
        assert_eq!(leases.len(), 1);
        leases.release(&id("a"), holder).await.unwrap();
        assert!(leases.is_empty());
    }
}
