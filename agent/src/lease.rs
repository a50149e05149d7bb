//! [`RunLease`]: a run's hold on its conversation, so no second run starts in it (`409`
//! at `POST /chat`). Taken before the run starts, held by the run task itself (not by the
//! response body) and released only after the run stored its closing message, just
//! before `DONE`: a client that disconnects and retries at once gets either `409` or a
//! complete history. The lease rules themselves live behind
//! [`rojos_conversations::RunLeases`] (in this process, or in the database that several
//! hosts share).
//!
//! The lease lasts `[store] run_lease_secs` unless renewed, and is renewed three times per
//! time-to-live. A run stops (its stop token is cancelled) as soon as it cannot be sure it
//! still holds the lease: a renewal finds it gone, or renewals keep failing (a database
//! that cannot be reached) until the next try would come after the lease may have expired.
//! Time is counted from before each request is sent, so this host never believes it holds
//! a lease longer than the database does.

use std::{sync::Arc, time::Duration};

use rojos_conversations::{ConversationId, LeaseHolder, RunLeases, StoreError};
use tokio::{task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

/// How many times per time-to-live a held lease is renewed, so one slow or failed renewal
/// does not lose it.
const RENEWALS_PER_TTL: u32 = 3;

/// A run's lease on its conversation, renewed in the background while held.
pub struct RunLease {
    leases: Arc<dyn RunLeases>,
    conversation: ConversationId,
    holder: LeaseHolder,
    ttl: Duration,
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
    /// Takes the lease on `conversation` for `ttl`, or `Ok(None)` when a run holds it.
    /// `stop` is cancelled if the lease is ever lost or may have expired, so the run stops
    /// writing to a conversation another run may have taken.
    ///
    /// # Errors
    ///
    /// The lease backend's failure.
    pub async fn acquire(
        leases: &Arc<dyn RunLeases>,
        conversation: &ConversationId,
        ttl: Duration,
        stop: CancellationToken,
    ) -> Result<Option<RunLease>, StoreError> {
        let sent = Instant::now();
        let Some(holder) = leases.acquire(conversation, ttl).await? else {
            return Ok(None);
        };
        let renewer = tokio::spawn(
            Renewer {
                leases: Arc::clone(leases),
                conversation: conversation.clone(),
                holder,
                ttl,
                stop: stop.clone(),
            }
            .run(sent + ttl),
        );
        Ok(Some(RunLease {
            leases: Arc::clone(leases),
            conversation: conversation.clone(),
            holder,
            ttl,
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
    /// When the backend cannot be reached (the outage that may have ended the run), the
    /// release is retried in the background, so the conversation is free soon after the
    /// database is back rather than only when the lease expires.
    pub async fn release(mut self) {
        self.renewer.abort();
        self.released = true;
        let Err(e) = self.leases.release(&self.conversation, self.holder).await else {
            return;
        };
        tracing::warn!(conversation_id = %self.conversation, error = %e, "run lease not released; retrying until it expires");
        tokio::spawn(retry_release(
            Arc::clone(&self.leases),
            self.conversation.clone(),
            self.holder,
            self.ttl,
        ));
    }
}

/// How many times per time-to-live a release that failed is tried again.
const RELEASE_RETRIES_PER_TTL: u32 = 10;

/// Tries to release the lease every tenth of `ttl` until it works, or until a whole `ttl`
/// has passed (by then it has expired: it was last renewed before this began).
async fn retry_release(
    leases: Arc<dyn RunLeases>,
    conversation: ConversationId,
    holder: LeaseHolder,
    ttl: Duration,
) {
    let expired = Instant::now() + ttl;
    let every = ttl / RELEASE_RETRIES_PER_TTL;
    while Instant::now() + every < expired {
        tokio::time::sleep(every).await;
        if leases.release(&conversation, holder).await.is_ok() {
            tracing::info!(conversation_id = %conversation, "run lease released after a retry");
            return;
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

/// What renews one held lease in the background.
struct Renewer {
    leases: Arc<dyn RunLeases>,
    conversation: ConversationId,
    holder: LeaseHolder,
    ttl: Duration,
    stop: CancellationToken,
}

impl Renewer {
    /// Renews the lease every third of its time-to-live until aborted; `held_until` is the
    /// earliest the lease can expire. Cancels `stop` and ends when the backend says the
    /// lease is gone, or when it was not renewed and the next try would be too late.
    async fn run(self, mut held_until: Instant) {
        let every = self.ttl / RENEWALS_PER_TTL;
        let conversation = &self.conversation;
        loop {
            tokio::time::sleep(every).await;
            let sent = Instant::now();
            // A renewal still unanswered when the lease may expire is as good as failed.
            let renewed = tokio::time::timeout_at(
                held_until,
                self.leases.renew(conversation, self.holder, self.ttl),
            )
            .await;
            let error = match renewed {
                Ok(Ok(true)) => {
                    held_until = sent + self.ttl;
                    continue;
                }
                Ok(Ok(false)) => {
                    tracing::error!(conversation_id = %conversation, "run lease lost; stopping the run");
                    break;
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer before the lease could expire".to_owned(),
            };
            if Instant::now() + every < held_until {
                tracing::warn!(conversation_id = %conversation, error = %error, "run lease renewal failed; retrying");
                continue;
            }
            tracing::error!(conversation_id = %conversation, error = %error, "run lease not renewed in time; stopping the run");
            break;
        }
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use rojos_conversations::LocalRunLeases;

    use super::*;

    const LEASE_TTL: Duration = Duration::from_secs(30);

    /// Leases in a map whose next `failing` renewals and `failing_releases` releases fail
    /// as with a database that cannot be reached.
    #[derive(Debug, Default)]
    struct Unreachable {
        inner: LocalRunLeases,
        failing: AtomicUsize,
        failing_releases: AtomicUsize,
    }

    /// Counts one failure down; `Err` while any was left.
    fn fail_once(left: &AtomicUsize) -> Result<(), StoreError> {
        match left.load(Ordering::SeqCst) {
            0 => Ok(()),
            n => {
                left.store(n - 1, Ordering::SeqCst);
                Err(StoreError::Unavailable {
                    action: "renew or release".to_owned(),
                    source: "connection refused".into(),
                })
            }
        }
    }

    #[async_trait]
    impl RunLeases for Unreachable {
        async fn acquire(
            &self,
            conversation: &ConversationId,
            ttl: Duration,
        ) -> Result<Option<LeaseHolder>, StoreError> {
            self.inner.acquire(conversation, ttl).await
        }

        async fn renew(
            &self,
            conversation: &ConversationId,
            holder: LeaseHolder,
            ttl: Duration,
        ) -> Result<bool, StoreError> {
            fail_once(&self.failing)?;
            self.inner.renew(conversation, holder, ttl).await
        }

        async fn release(
            &self,
            conversation: &ConversationId,
            holder: LeaseHolder,
        ) -> Result<(), StoreError> {
            fail_once(&self.failing_releases)?;
            self.inner.release(conversation, holder).await
        }
    }

    fn unreachable(failing: usize) -> (Arc<dyn RunLeases>, ConversationId) {
        let leases = Unreachable {
            failing: AtomicUsize::new(failing),
            ..Unreachable::default()
        };
        (Arc::new(leases), ConversationId::generate())
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_that_keep_failing_stop_the_run_before_its_lease_can_expire() {
        let (leases, id) = unreachable(usize::MAX);
        let taken = Instant::now();
        let lease = RunLease::acquire(&leases, &id, LEASE_TTL, CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        tokio::time::timeout(LEASE_TTL * 2, lease.stop().cancelled())
            .await
            .expect("the run is stopped");
        let stopped_after = taken.elapsed();
        assert!(
            stopped_after > LEASE_TTL / RENEWALS_PER_TTL,
            "one failed renewal is retried ({stopped_after:?})"
        );
        assert!(
            stopped_after < LEASE_TTL,
            "stopped before the lease could expire ({stopped_after:?})"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_that_fails_is_retried_until_it_works() {
        let leases: Arc<dyn RunLeases> = Arc::new(Unreachable {
            failing_releases: AtomicUsize::new(2),
            ..Unreachable::default()
        });
        let id = ConversationId::generate();
        let lease = RunLease::acquire(&leases, &id, LEASE_TTL, CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        lease.release().await;
        assert!(
            leases.acquire(&id, LEASE_TTL).await.unwrap().is_none(),
            "not released yet"
        );
        tokio::time::sleep(LEASE_TTL / 2).await;
        assert!(
            leases.acquire(&id, LEASE_TTL).await.unwrap().is_some(),
            "released by a retry, before the lease expired"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_that_never_works_is_retried_only_while_the_lease_may_be_held() {
        const TRIES: usize = 1000;
        let unreachable = Arc::new(Unreachable {
            failing_releases: AtomicUsize::new(TRIES),
            ..Unreachable::default()
        });
        let leases: Arc<dyn RunLeases> = unreachable.clone();
        let id = ConversationId::generate();
        let holder = leases.acquire(&id, LEASE_TTL).await.unwrap().unwrap();
        let started = Instant::now();

        retry_release(leases, id, holder, LEASE_TTL).await;

        // Every tenth of the time-to-live, the last one before it ends: 9 tries in 27 s.
        let tried = TRIES - unreachable.failing_releases.load(Ordering::SeqCst);
        assert_eq!(tried, RELEASE_RETRIES_PER_TTL as usize - 1);
        assert_eq!(started.elapsed(), LEASE_TTL / RELEASE_RETRIES_PER_TTL * 9);
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_fails_once_is_retried_and_the_lease_kept() {
        let (leases, id) = unreachable(1);
        let lease = RunLease::acquire(&leases, &id, LEASE_TTL, CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        tokio::time::sleep(LEASE_TTL * 4).await;
        assert!(!lease.stop().is_cancelled());
        assert!(leases.acquire(&id, LEASE_TTL).await.unwrap().is_none());
    }

    fn setup() -> (Arc<LocalRunLeases>, Arc<dyn RunLeases>, ConversationId) {
        let local = Arc::new(LocalRunLeases::new());
        let leases: Arc<dyn RunLeases> = local.clone();
        (local, leases, ConversationId::generate())
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_lease_is_renewed_past_its_time_to_live_and_free_once_released() {
        let (_, leases, id) = setup();
        let lease = RunLease::acquire(&leases, &id, LEASE_TTL, CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        tokio::time::sleep(LEASE_TTL * 4).await;
        assert!(
            RunLease::acquire(&leases, &id, LEASE_TTL, CancellationToken::new())
                .await
                .unwrap()
                .is_none(),
            "still held after four times its time-to-live"
        );
        assert!(!lease.stop().is_cancelled());
        lease.release().await;
        assert!(
            RunLease::acquire(&leases, &id, LEASE_TTL, CancellationToken::new())
                .await
                .unwrap()
                .is_some()
        );
    }

    #[tokio::test]
    async fn a_lease_dropped_unreleased_is_released_in_the_background() {
        let (local, leases, id) = setup();
        let lease = RunLease::acquire(&leases, &id, LEASE_TTL, CancellationToken::new())
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
        let lease = RunLease::acquire(&leases, &id, LEASE_TTL, stop.clone())
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
