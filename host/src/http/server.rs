//! The accept loop: the crate `rojos-http-server` (its map is at its root), and the server's
//! metrics as the loop counts its connections ([`ConnectionMetrics`]).

pub use rojos_http_server::*;

use crate::metrics::{Metrics, Open};

impl ConnectionMetrics for Metrics {
    type Open = Open;

    fn open_connection(&self) -> Open {
        Metrics::open_connection(self)
    }

    fn connection_closed(&self, reason: CloseReason) {
        Metrics::connection_closed(self, reason.label());
    }
}
