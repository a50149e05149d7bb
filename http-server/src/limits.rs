//! [`HttpLimits`]: the `[server]` protections against slow and idle clients
//! (docs/configuration.md). The host reads them from its config file and passes them in.

use std::time::Duration;

/// `[server]` keys that protect the HTTP side from slow or idle clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A connection that has not sent a complete request head within this is closed.
    pub header_read_timeout: Duration,
    /// A keep-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// Connections open at once; past it the oldest connection not in a request is closed.
    pub max_connections: usize,
    /// A client that reads none of its response for this long is disconnected (a chat's run
    /// is then cancelled as on a disconnect).
    pub stream_write_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 2048,
            stream_write_timeout: Duration::from_secs(30),
        }
    }
}
