//! [`RunLease`]: a run's hold on its conversation, so no second run starts in it (`409`
//! at `POST /chat`). Taken before the run starts, held by the run task itself (not by the
//! response body) and released only after the run stored its closing message, just
//! before `DONE`: a client that disconnects and retries at once gets either `409` or a
//! complete history. The lease rules themselves live behind
//! [`rojos_conversations::RunLeases`].

use std::{sync::Arc, time::Duration};

use rojos_conversations::{ConversationId, LeaseHolder, RunLeases, StoreError};
use tokio::{task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

/// How long a lease lasts unless renewed: how long a conversation stays locked after a
/// holder vanished without releasing it (a crashed host, once hosts share a database).
const LEASE_TTL: Duration = Duration::from_secs(30);

/// How often a held lease is renewed: three times per time-to-live, so one slow renewal
/// does not lose it.
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// A run's lease on its conversation, renewed in the background while held.
pub struct RunLease {
    leases: Arc<dyn RunLeases>,
    conversation: ConversationId,
    holder: LeaseHolder,
    stop: CancellationToken,
    renewer: JoinHandle<()>,
    released: bool,
}

impl std::fmt::Debug for RunLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLease")
            .field("conversation", &self.conversation)
            .field("released", &self.released)
            .finish_non_exhaustive()
    }
}

impl RunLease {
    /// Takes the lease on `conversation`, or `Ok(None)` when a run holds it. `stop` is
    /// cancelled if the lease is ever lost (renewals failing for a whole time-to-live), so
    /// the run stops writing to a conversation another run may have taken.
    ///
    /// # Errors
    ///
    /// The lease backend's failure.
    pub async fn acquire(
        leases: &Arc<dyn RunLeases>,
        conversation: &ConversationId,
        stop: CancellationToken,
    ) -> Result<Option<RunLease>, StoreError> {
        let Some(holder) = leases.acquire(conversation, LEASE_TTL).await? else {
            return Ok(None);
        };
        let renewer = tokio::spawn(renew(
            Arc::clone(leases),
            conversation.clone(),
            holder,
            stop.clone(),
        ));
        Ok(Some(RunLease {
            leases: Arc::clone(leases),
            conversation: conversation.clone(),
            holder,
            stop,
            renewer,
            released: false,
        }))
    }

    /// Cancelled when the run must stop: the token given to [`RunLease::acquire`] (the
    /// server's shutdown, for runs), or the lease was lost.
    pub fn stop(&self) -> &CancellationToken {
        &self.stop
    }

    /// Stops renewing and gives the lease up; the next message may start a run at once.
    pub async fn release(mut self) {
        self.renewer.abort();
        self.released = true;
        if let Err(e) = self.leases.release(&self.conversation, self.holder).await {
            tracing::warn!(error = %e, "run lease not released; it expires on its own");
        }
    }
}

impl Drop for RunLease {
    /// A lease dropped unreleased (a run that panicked) is released in the background;
    /// failing that, it expires.
    fn drop(&mut self) {
        self.renewer.abort();
        if self.released {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (leases, conversation, holder) = (
            Arc::clone(&self.leases),
            self.conversation.clone(),
            self.holder,
        );
        runtime.spawn(async move {
            let _ = leases.release(&conversation, holder).await;
        });
    }
}

/// Renews the lease every [`RENEW_EVERY`] until aborted. When the backend says the lease is
/// gone, or no renewal succeeded for a whole [`LEASE_TTL`], cancels `stop` and ends.
async fn renew(
    leases: Arc<dyn RunLeases>,
    conversation: ConversationId,
    holder: LeaseHolder,
    stop: CancellationToken,
) {
    let mut renewed_at = Instant::now();
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        match leases.renew(&conversation, holder, LEASE_TTL).await {
            Ok(true) => renewed_at = Instant::now(),
            Ok(false) => {
                tracing::error!(conversation_id = %conversation, "run lease lost; stopping the run");
                stop.cancel();
                return;
            }
            Err(e) if renewed_at.elapsed() >= LEASE_TTL => {
                tracing::error!(conversation_id = %conversation, error = %e, "run lease not renewed in time; stopping the run");
                stop.cancel();
                return;
            }
            Err(e) => {
                tracing::warn!(conversation_id = %conversation, error = %e, "run lease renewal failed; retrying")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rojos_conversations::LocalRunLeases;

    use super::*;

    fn setup() -> (Arc<LocalRunLeases>, Arc<dyn RunLeases>, ConversationId) {
        let local = Arc::new(LocalRunLeases::new());
        let leases: Arc<dyn RunLeases> = local.clone();
        (local, leases, ConversationId::generate())
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_lease_is_renewed_past_its_time_to_live_and_free_once_released() {
        let (_, leases, id) = setup();
        let lease = RunLease::acquire(&leases, &id, CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        tokio::time::sleep(LEASE_TTL * 4).await;
        assert!(
            RunLease::acquire(&leases, &id, CancellationToken::new())
                .await
                .unwrap()
                .is_none(),
            "still held after four times its time-to-live"
        );
        assert!(!lease.stop().is_cancelled());
        lease.release().await;
        assert!(RunLease::acquire(&leases, &id, CancellationToken::new())
            .await
            .unwrap()
            .is_some());
    }

    #[tokio::test]
    async fn a_lease_dropped_unreleased_is_released_in_the_background() {
        let (local, leases, id) = setup();
        let lease = RunLease::acquire(&leases, &id, CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        drop(lease);
        for _ in 0..100 {
            if local.is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(local.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_lease_stops_the_run() {
        let (_, leases, id) = setup();
        let stop = CancellationToken::new();
        let lease = RunLease::acquire(&leases, &id, stop.clone())
            .await
            .unwrap()
            .unwrap();
        // As when the lease expired while this host stalled and another run took it.
        leases.release(&id, lease.holder).await.unwrap();
        let _other = leases.acquire(&id, LEASE_TTL).await.unwrap().unwrap();
        tokio::time::timeout(LEASE_TTL, stop.cancelled())
            .await
            .expect("the first failed renewal cancels the run");
        assert!(lease.stop().is_cancelled());
    }
}
