//! Admission for `POST /chat`: a cap on the chat streams open at once (all callers together),
//! a cap on those of each token (so one token cannot take every place), and an optional rate
//! of chats each token may start. Over any, the request is refused at once with `429` and
//! `Retry-After`, instead of queueing and slowing every chat down. The concurrency permits
//! travel with the NDJSON body and are released when the body ends or is dropped.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use rojos_metrics::Metrics;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;

/// What a caller refused for concurrency is asked to wait, in seconds: chats end all the time.
const BUSY_RETRY_AFTER_SECS: u64 = 1;

/// The limits every chat passes before it starts.
#[derive(Debug)]
pub struct ChatLimits {
    streams: Arc<Semaphore>,
    max_streams: usize,
    per_token: Option<PerToken>,
    rate: Option<RateLimit>,
}

/// One admitted chat: holds its place among the open streams, and among its token's, until
/// dropped.
#[derive(Debug)]
pub struct ChatPermit {
    _permit: OwnedSemaphorePermit,
    _token_permit: Option<OwnedSemaphorePermit>,
}

/// The open streams of each token, capped at `max` each.
#[derive(Debug)]
struct PerToken {
    max: usize,
    /// Per token index, made on its first chat: at most one per configured token.
    open: Mutex<HashMap<usize, Arc<Semaphore>>>,
}

impl PerToken {
    /// A place among `token`'s open streams, or `None` when it has `max` open.
    fn try_take(&self, token: usize) -> Option<OwnedSemaphorePermit> {
        let streams = {
            let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(
                open.entry(token)
                    .or_insert_with(|| Arc::new(Semaphore::new(self.max))),
            )
        };
        streams.try_acquire_owned().ok()
    }
}

impl ChatLimits {
    /// At most `max_concurrent_chats` open streams; at most `rate_limit_per_minute` chats
    /// started per minute by each token (bursts of that many allowed), or no rate limit.
    pub fn new(max_concurrent_chats: usize, rate_limit_per_minute: Option<u32>) -> ChatLimits {
        let max_streams = max_concurrent_chats.clamp(1, Semaphore::MAX_PERMITS);
        ChatLimits {
            streams: Arc::new(Semaphore::new(max_streams)),
            max_streams,
            per_token: None,
            rate: rate_limit_per_minute
                .filter(|n| *n > 0)
                .map(|per_minute| RateLimit {
                    per_minute,
                    next: Mutex::new(HashMap::new()),
                }),
        }
    }

    /// Also caps the streams each token has open at once at `max_chats_per_token`.
    pub fn with_per_token(mut self, max_chats_per_token: usize) -> ChatLimits {
        self.per_token = Some(PerToken {
            max: max_chats_per_token.clamp(1, Semaphore::MAX_PERMITS),
            open: Mutex::new(HashMap::new()),
        });
        self
    }

    /// Admits a chat of the caller presenting `token`, or refuses it.
    ///
    /// # Errors
    ///
    /// [`ApiError::TooManyRequests`] when the server has `max_concurrent_chats` streams open,
    /// the token has `max_chats_per_token` open, or the token has used its rate; counted in
    /// `rojos_requests_limited_total`.
    pub fn admit(&self, token: usize, metrics: &Metrics) -> Result<ChatPermit, ApiError> {
        self.admit_at(token, Instant::now(), metrics)
    }

    fn admit_at(
        &self,
        token: usize,
        now: Instant,
        metrics: &Metrics,
    ) -> Result<ChatPermit, ApiError> {
        let Ok(permit) = Arc::clone(&self.streams).try_acquire_owned() else {
            metrics.limited("concurrency");
            return Err(ApiError::TooManyRequests {
                message: format!(
                    "the server is at its limit of {} open chats; try again shortly",
                    self.max_streams
                ),
                retry_after: BUSY_RETRY_AFTER_SECS,
            });
        };
        let token_permit = match &self.per_token {
            None => None,
            Some(per_token) => {
                let Some(permit) = per_token.try_take(token) else {
                    metrics.limited("token");
                    return Err(ApiError::TooManyRequests {
                        message: format!(
                            "this token is at its limit of {} open chats \
                             ([server] max_chats_per_token); try again when one ends",
                            per_token.max
                        ),
                        retry_after: BUSY_RETRY_AFTER_SECS,
                    });
                };
                Some(permit)
            }
        };
        if let Some(rate) = &self.rate {
            if let Err(wait) = rate.take(token, now) {
                metrics.limited("rate");
                let retry_after = whole_seconds(wait);
                return Err(ApiError::TooManyRequests {
                    message: format!(
                        "this token may start {} chats per minute; try again in {retry_after} s",
                        rate.per_minute
                    ),
                    retry_after,
                });
            }
        }
        Ok(ChatPermit {
            _permit: permit,
            _token_permit: token_permit,
        })
    }
}

/// A per-token rate as a generic cell rate algorithm: each token has a theoretical arrival
/// time that every admitted chat pushes one interval (`60 s / per_minute`) further; a chat is
/// admitted while that time is at most a minute's burst ahead of now.
#[derive(Debug)]
struct RateLimit {
    per_minute: u32,
    /// Per token index: when its next chat would be due at the steady rate.
    next: Mutex<HashMap<usize, Instant>>,
}

impl RateLimit {
    /// Takes one chat for `token` at `now`, or says how long until one is allowed.
    fn take(&self, token: usize, now: Instant) -> Result<(), Duration> {
        let interval = Duration::from_secs(60) / self.per_minute;
        let tolerance = interval * (self.per_minute - 1);
        // A token table entry per configured token at most: the map cannot grow unbounded.
        let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
        let due = next
            .get(&token)
            .copied()
            .filter(|t| *t > now)
            .unwrap_or(now);
        let ahead = due.saturating_duration_since(now);
        if ahead > tolerance {
            return Err(ahead - tolerance);
        }
        next.insert(token, due + interval);
        Ok(())
    }
}

/// A wait rounded up to whole seconds, at least one (`Retry-After` takes whole seconds).
fn whole_seconds(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_minute: u32) -> RateLimit {
        RateLimit {
            per_minute,
            next: Mutex::new(HashMap::new()),
        }
    }

    #[test]
    fn a_token_gets_its_burst_then_waits_one_interval() {
        let limit = rate(2);
        let t0 = Instant::now();
        assert!(limit.take(0, t0).is_ok());
        assert!(limit.take(0, t0).is_ok());
        assert_eq!(limit.take(0, t0), Err(Duration::from_secs(30)));
        assert_eq!(
            limit.take(0, t0 + Duration::from_secs(10)),
            Err(Duration::from_secs(20))
        );
        assert!(limit.take(0, t0 + Duration::from_secs(30)).is_ok());
        assert!(limit.take(0, t0 + Duration::from_secs(30)).is_err());
    }

    #[test]
    fn tokens_are_limited_separately() {
        let limit = rate(1);
        let t0 = Instant::now();
        assert!(limit.take(0, t0).is_ok());
        assert!(limit.take(0, t0).is_err());
        assert!(limit.take(1, t0).is_ok());
    }

    #[test]
    fn open_streams_are_capped_and_released_on_drop() {
        let limits = ChatLimits::new(1, None);
        let metrics = Metrics::new();
        let first = limits.admit(0, &metrics).unwrap();
        let refused = limits.admit(1, &metrics).unwrap_err();
        assert!(
            matches!(refused, ApiError::TooManyRequests { retry_after: 1, .. }),
            "{refused:?}"
        );
        assert_eq!(
            refused.to_string(),
            "the server is at its limit of 1 open chats; try again shortly"
        );
        drop(first);
        assert!(limits.admit(1, &metrics).is_ok());
    }

    #[test]
    fn a_token_at_its_limit_is_refused_while_other_tokens_are_admitted() {
        let limits = ChatLimits::new(10, None).with_per_token(2);
        let metrics = Metrics::new();
        let first = limits.admit(0, &metrics).unwrap();
        let _second = limits.admit(0, &metrics).unwrap();
        let refused = limits.admit(0, &metrics).unwrap_err();
        assert!(
            matches!(refused, ApiError::TooManyRequests { retry_after: 1, .. }),
            "{refused:?}"
        );
        assert_eq!(
            refused.to_string(),
            "this token is at its limit of 2 open chats ([server] max_chats_per_token); \
             try again when one ends"
        );
        let _other = limits.admit(1, &metrics).unwrap();
        drop(first);
        assert!(
            limits.admit(0, &metrics).is_ok(),
            "a place is free once a stream ends"
        );
    }

    #[test]
    fn a_chat_refused_for_its_token_takes_no_place_among_all_streams() {
        let limits = ChatLimits::new(2, None).with_per_token(1);
        let metrics = Metrics::new();
        let _held = limits.admit(0, &metrics).unwrap();
        for _ in 0..5 {
            limits.admit(0, &metrics).unwrap_err();
        }
        assert!(limits.admit(1, &metrics).is_ok());
    }

    #[test]
    fn a_rate_refusal_names_the_rate_and_the_wait() {
        let limits = ChatLimits::new(10, Some(60));
        let metrics = Metrics::new();
        let t0 = Instant::now();
        for _ in 0..60 {
            drop(limits.admit_at(0, t0, &metrics).unwrap());
        }
        let refused = limits.admit_at(0, t0, &metrics).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "this token may start 60 chats per minute; try again in 1 s"
        );
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(29_001)), 30);
    }
}
