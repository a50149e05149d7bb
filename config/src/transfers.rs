//! `[limits]` keys of file transfers through `/projects/{id}/files/content`
//! (docs/configuration.md, "Transfers"): how long a request body may take, and how many
//! uploads and downloads may run at once, in all and per token. Each transfer holds at most
//! one buffer of [`TRANSFER_BUFFER_BYTES`], so these bound the memory of all of them together.

use std::time::Duration;

use super::{
    keys::{at_least, seconds_key, ConfigError},
    raw::RawLimits,
};

/// The bytes one upload or download holds at a time beyond the HTTP layer's own buffers:
/// an upload writes to its temporary file whenever this much has come in, a download reads
/// its file in pieces of this size.
pub const TRANSFER_BUFFER_BYTES: usize = 64 * 1024;

/// `[limits] body_timeout_secs` unless set.
const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(120);

/// The transfer limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferLimits {
    /// How long an upload's whole body may take to arrive (`408` after).
    pub body_timeout: Duration,
    /// Uploads and downloads at once, all tokens together (`503` beyond).
    pub max_transfers: usize,
    /// Uploads and downloads at once per token (`503` beyond).
    pub max_transfers_per_token: usize,
}

impl Default for TransferLimits {
    fn default() -> Self {
        TransferLimits {
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_transfers: 32,
            max_transfers_per_token: 8,
        }
    }
}

impl TransferLimits {
    /// The most bytes all transfers together hold in their buffers.
    pub fn buffered_bytes(&self) -> usize {
        self.max_transfers.saturating_mul(TRANSFER_BUFFER_BYTES)
    }
}

/// The transfer keys of `[limits]`.
pub(super) fn parse_transfers(raw: &RawLimits) -> Result<TransferLimits, ConfigError> {
    let defaults = TransferLimits::default();
    Ok(TransferLimits {
        body_timeout: seconds_key(
            "limits.body_timeout_secs",
            raw.body_timeout_secs,
            defaults.body_timeout,
            3600.0,
        )?,
        max_transfers: at_least(
            "limits.max_transfers",
            raw.max_transfers,
            defaults.max_transfers,
            1,
        )?,
        max_transfers_per_token: at_least(
            "limits.max_transfers_per_token",
            raw.max_transfers_per_token,
            defaults.max_transfers_per_token,
            1,
        )?,
    })
}
