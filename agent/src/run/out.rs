//! The client side of a run ([`Out`]): its events go to the run's feed, and it says whether
//! the run must stop.

use std::sync::Arc;

use futures_util::StreamExt;
use rojos_llm::{TurnEvent, TurnStream};

use crate::{feed::Feed, Event};

/// The client side of a run: events out to its feed, and whether the run must stop.
pub(super) struct Out {
    pub(super) feed: Arc<Feed>,
    pub(super) shutdown: tokio_util::sync::CancellationToken,
}

impl Out {
    /// Adds an event to the run's feed, for every client that follows it.
    pub(super) async fn send(&self, event: Event) {
        self.feed.push(&event);
    }

    /// Resolves when the run must stop: asked to, nobody follows it, the server shuts down,
    /// or the lease was lost.
    pub(super) async fn cancelled(&self) {
        self.shutdown.cancelled().await;
    }

    pub(super) fn is_cancelled(&self) -> bool {
        self.shutdown.is_cancelled()
    }
}

/// The stream's next item, or `None` once `cancelled` (the run's [`Out::cancelled`]) resolved:
/// the client is gone or the server shuts down.
pub(super) async fn next_or_cancelled(
    stream: &mut TurnStream,
    cancelled: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> Option<Option<Result<TurnEvent, rojos_llm::LlmError>>> {
    tokio::select! {
        biased;
        () = cancelled => None,
        item = stream.next() => Some(item),
    }
}
