//! Admission for file transfers (uploads and downloads of `/projects/{id}/files/content`): a
//! cap on those running at once, all callers together, and a cap per token, so one token
//! cannot take every place. Each transfer holds at most one buffer of
//! [`TRANSFER_BUFFER_BYTES`], so the caps bound the memory of all transfers together
//! (docs/configuration.md, "Transfers"). Over either cap the request is refused at once with
//! `503` and `Retry-After`; a permit travels with the upload's handler or the download's
//! body and is released when it ends or is dropped.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use rojos_config::{TransferLimits, TRANSFER_BUFFER_BYTES};
use rojos_metrics::Metrics;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;

/// What a caller refused for the transfer caps is asked to wait, in seconds.
const BUSY_RETRY_AFTER_SECS: u64 = 2;

/// The places of the transfers running at once.
#[derive(Debug)]
pub struct TransferSlots {
    all: Arc<Semaphore>,
    max: usize,
    per_token_max: usize,
    /// Per token index, made on its first transfer: at most one per configured token.
    per_token: Mutex<HashMap<usize, Arc<Semaphore>>>,
}

/// One admitted transfer's places (among all, and among its token's), held until dropped.
#[derive(Debug)]
pub struct TransferPermit {
    _all: OwnedSemaphorePermit,
    _token: OwnedSemaphorePermit,
}

impl TransferSlots {
    /// At most `max_transfers` at once, `max_transfers_per_token` for each token.
    pub fn new(limits: &TransferLimits) -> TransferSlots {
        let max = limits.max_transfers.clamp(1, Semaphore::MAX_PERMITS);
        TransferSlots {
            all: Arc::new(Semaphore::new(max)),
            max,
            per_token_max: limits
                .max_transfers_per_token
                .clamp(1, Semaphore::MAX_PERMITS),
            per_token: Mutex::new(HashMap::new()),
        }
    }

    /// Admits a transfer of the caller presenting `token`, or refuses it.
    ///
    /// # Errors
    ///
    /// [`ApiError::Busy`] when `max_transfers` run already, or the token's
    /// `max_transfers_per_token`; counted in `rojos_requests_limited_total{limit="transfers"}`.
    pub fn admit(&self, token: usize, metrics: &Metrics) -> Result<TransferPermit, ApiError> {
        let busy = |message: String| {
            metrics.limited("transfers");
            ApiError::Busy {
                message,
                retry_after: BUSY_RETRY_AFTER_SECS,
            }
        };
        let Ok(all) = Arc::clone(&self.all).try_acquire_owned() else {
            return Err(busy(format!(
                "the server is at its limit of {} file transfers at once ([limits] \
                 max_transfers); try again shortly",
                self.max
            )));
        };
        let token_places = {
            let mut per_token = self
                .per_token
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            Arc::clone(
                per_token
                    .entry(token)
                    .or_insert_with(|| Arc::new(Semaphore::new(self.per_token_max))),
            )
        };
        let Ok(token) = token_places.try_acquire_owned() else {
            return Err(busy(format!(
                "this token is at its limit of {} file transfers at once ([limits] \
                 max_transfers_per_token); try again when one ends",
                self.per_token_max
            )));
        };
        Ok(TransferPermit {
            _all: all,
            _token: token,
        })
    }

    /// The most bytes all admitted transfers hold in their buffers at once.
    pub fn buffered_bytes_bound(&self) -> usize {
        self.max.saturating_mul(TRANSFER_BUFFER_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(max: usize, per_token: usize) -> TransferSlots {
        TransferSlots::new(&TransferLimits {
            max_transfers: max,
            max_transfers_per_token: per_token,
            ..TransferLimits::default()
        })
    }

    #[test]
    fn a_token_at_its_cap_is_refused_while_another_still_gets_a_place() {
        let metrics = Metrics::new();
        let slots = slots(3, 2);
        let _a = slots.admit(0, &metrics).unwrap();
        let _b = slots.admit(0, &metrics).unwrap();
        let refused = slots.admit(0, &metrics).unwrap_err();
        assert!(
            refused.to_string().contains("max_transfers_per_token"),
            "{refused}"
        );
        let _c = slots.admit(1, &metrics).unwrap();
        let full = slots.admit(2, &metrics).unwrap_err();
        assert!(
            full.to_string().contains("([limits] max_transfers)"),
            "{full}"
        );
        assert_eq!(slots.buffered_bytes_bound(), 3 * TRANSFER_BUFFER_BYTES);
    }

    #[test]
    fn a_dropped_permit_frees_its_places() {
        let metrics = Metrics::new();
        let slots = slots(1, 1);
        let first = slots.admit(0, &metrics).unwrap();
        assert!(slots.admit(0, &metrics).is_err());
        drop(first);
        assert!(slots.admit(0, &metrics).is_ok());
    }
}
