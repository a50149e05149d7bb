//! The accept loop: the crate `rojos-http-server` (its map is at its root), and the server's
//! metrics as the loop counts its connections ([`ConnectionCounts`]).

pub use rojos_http_server::*;

use std::sync::Arc;

use rojos_metrics::{Metrics, Open};

/// The server's metrics, as the accept loop counts its connections into them.
#[derive(Debug)]
pub struct ConnectionCounts(pub Arc<Metrics>);

impl ConnectionMetrics for ConnectionCounts {
    type Open = Open;

    fn open_connection(&self) -> Open {
        self.0.open_connection()
    }

    fn connection_closed(&self, reason: CloseReason) {
        self.0.connection_closed(reason.label());
    }
}
