//! The Prometheus counters and histograms `GET /metrics` renders: the crate `rojos-metrics`
//! (its map is at its root).

pub use rojos_metrics::*;
