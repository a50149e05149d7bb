//! [`ConnectionMetrics`]: what the accept loop counts, as the host's metrics take it
//! (`rojos_connections_open`, `rojos_connections_closed_total` in docs/api.md's
//! metrics list). The crate keeps no registry of its own.

use crate::connections::CloseReason;

/// Where the accept loop reports its connections.
pub trait ConnectionMetrics: Send + Sync + 'static {
    /// Held while a connection is served: counts it as open until dropped.
    type Open: Send;

    /// An accepted connection is being served; it counts as open until the guard is dropped.
    fn open_connection(&self) -> Self::Open;

    /// The server closed a connection (or refused one) for `reason`.
    fn connection_closed(&self, reason: CloseReason);
}
