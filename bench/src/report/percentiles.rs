//! The percentiles the report prints of a scenario's latencies, first events, pauses and
//! probes.

use std::time::Duration;

use crate::stats::percentile;

/// The p50, p95, p99 and largest of some durations.
pub(super) struct Percentiles {
    pub(super) p50: Duration,
    pub(super) p95: Duration,
    pub(super) p99: Duration,
    pub(super) max: Duration,
}

/// The percentiles of `values`.
pub(super) fn percentiles(mut values: Vec<Duration>) -> Percentiles {
    values.sort();
    Percentiles {
        p50: percentile(&values, 50.0),
        p95: percentile(&values, 95.0),
        p99: percentile(&values, 99.0),
        max: values.last().copied().unwrap_or_default(),
    }
}
